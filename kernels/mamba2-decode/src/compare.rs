//! Checks a run's results against the reference with the shared comparison
//! ([`kda_host::compare_footprint`]) and tolerances (crate doc §5): bf16
//! output within [`kda_host::OUTPUT_LIMIT`] relative Frobenius error and fully
//! written, padding rows exactly zero, written state pages within
//! [`kda_host::STATE_LIMIT`], every other state page and the whole conv state
//! bit-exact.

use kda_host::{Actual, Expected, Footprint, Report, compare_valid};

use crate::args::Mamba2Args;
use crate::config::Mamba2Config;
use crate::reference::resolve;
use crate::validate::validate;

/// What the launch `args` (as passed, before the run) may change: its padding
/// rows and the state slots of its active requests.
pub fn footprint(config: &Mamba2Config, args: &Mamba2Args) -> Footprint {
    let mut padding_rows = Vec::new();
    let mut written_slots = Vec::new();
    for b in 0..args.requests() {
        match resolve(args, b) {
            None => padding_rows.push(b),
            Some(slot) => written_slots.push(slot),
        }
    }
    Footprint {
        output_len: args.output.numel(),
        state_len: args.state.numel(),
        conv_state_len: args.conv_state.numel(),
        row_len: config.d_inner(),
        padding_rows,
        heads: config.h(),
        state_page: config.h() * config.p() * config.n(),
        written_slots,
    }
}

/// Compares `actual` with `expected` for the launch `args` (as passed, before
/// the run). Invalid arguments give a single failed `arguments` check.
pub fn compare(
    config: &Mamba2Config,
    args: &Mamba2Args,
    actual: &Actual,
    expected: &Expected,
) -> Report {
    compare_valid(
        &validate(config, args),
        || footprint(config, args),
        actual,
        expected,
    )
}
