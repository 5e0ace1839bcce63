//! Checks a run's results against the reference with KdaSplit's comparison
//! ([`kda_split::compare_footprint`], shared code) and tolerances (crate doc
//! §5): bf16 output within [`kda_split::compare::OUTPUT_LIMIT`] relative
//! Frobenius error and fully written, padding rows exactly zero, written state
//! pages within [`kda_split::compare::STATE_LIMIT`], every other state page and
//! the whole conv state bit-exact.

use kda_split::compare::Check;
use kda_split::{Actual, Expected, Footprint, Measure, Report, Request, compare_footprint};

use crate::args::GdnArgs;
use crate::config::GdnConfig;
use crate::reference::resolve;
use crate::validate::validate;

/// What the launch `args` (as passed, before the run) may change: its padding
/// rows and the state slots of its active tokens.
pub fn footprint(config: &GdnConfig, args: &GdnArgs) -> Footprint {
    let t = config.tokens as usize;
    let mut padding_rows = Vec::new();
    let mut written_slots = Vec::new();
    for b in 0..args.requests() {
        match resolve(config, args, b) {
            Request::Padding => padding_rows.extend(b * t..(b + 1) * t),
            Request::Active { writes, .. } => written_slots.extend(writes.into_iter().flatten()),
        }
    }
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
    let errors = validate(config, args);
    if !errors.is_empty() {
        let note = errors
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
            .join("; ");
        return Report {
            checks: vec![Check {
                name: "arguments",
                measure: Measure::Unusable,
                passed: false,
                note,
            }],
        };
    }
    compare_footprint(&footprint(config, args), actual, expected)
}
