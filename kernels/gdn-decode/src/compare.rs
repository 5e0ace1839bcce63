//! Checks a run's results against the reference with the shared comparison
//! ([`kda_host::compare_footprint`]) and tolerances (crate doc §5): bf16
//! output within [`kda_host::OUTPUT_LIMIT`] relative Frobenius error and fully
//! written, padding rows exactly zero, written state pages within
//! [`kda_host::STATE_LIMIT`], every other state page and the whole conv state
//! bit-exact.

use kda_host::{Actual, Expected, Footprint, Report, compare_valid, slot_footprint};

use crate::args::GdnArgs;
use crate::config::GdnConfig;
use crate::reference::resolve;
use crate::validate::validate;

/// What the launch `args` (as passed, before the run) may change: its padding
/// rows and the state slots of its active tokens.
pub fn footprint(config: &GdnConfig, args: &GdnArgs) -> Footprint {
    let requests = (0..args.requests()).map(|b| resolve(config, args, b));
    let (padding_rows, written_slots) = slot_footprint(config.tokens, requests);
    Footprint {
        output_len: args.output.numel(),
        state_len: args.state.numel(),
        conv_state_len: args.conv_state.numel(),
        row_len: config.value_dim(),
        padding_rows,
        heads: config.hv(),
        state_page: config.hv() * config.dv() * config.dk(),
        written_slots,
    }
}

/// Compares `actual` with `expected` for the launch `args` (as passed, before
/// the run). Invalid arguments give a single failed `arguments` check.
pub fn compare(config: &GdnConfig, args: &GdnArgs, actual: &Actual, expected: &Expected) -> Report {
    compare_valid(
        &validate(config, args),
        || footprint(config, args),
        actual,
        expected,
    )
}
