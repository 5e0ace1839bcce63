//! Checks a run's results against `expected.*` with the tolerances of spec §5
//! and §10, through the comparison every decode kernel shares
//! ([`kda_host::compare`], re-exported here):
//!
//! * `output`: relative Frobenius error of the bf16 output against the
//!   unrounded reference `expected.output_f32`, limit 1e-2. bf16 rounding alone
//!   gives about 3e-3; a wrong head, token or gate shows up as O(1).
//! * `output_f32` (only if the runner exposes the pre-rounding value, e.g. a
//!   simulator): limit [`STATE_LIMIT`], for the same reasons as the state.
//! * `state` over the written (slot, head) pages: limit [`STATE_LIMIT`].
//! * every other state page and the whole conv state: bit-exact.
//! * padding rows: exactly zero.

pub use kda_host::compare::{
    Actual, Check, Footprint, Measure, OUTPUT_LIMIT, Report, STATE_LIMIT, compare_footprint,
    compare_valid, rel_error, slot_footprint, ulp_distance,
};

use crate::args::KdaArgs;
use crate::config::{HEAD_DIM, KdaConfig};
use crate::reference::{Expected, resolve};
use crate::validate::validate;

/// Compares `actual` with `expected` for the launch `args` (as passed, before
/// the run: the slot table says which state pages may change).
pub fn compare(config: &KdaConfig, args: &KdaArgs, actual: &Actual, expected: &Expected) -> Report {
    compare_valid(
        &validate(config, args),
        || {
            let (padding_rows, written_slots) = slot_footprint(
                config.tokens,
                (0..args.requests()).map(|b| resolve(config.tokens, args, b)),
            );
            Footprint {
                output_len: args.output.numel(),
                state_len: args.state.numel(),
                conv_state_len: args.conv_state.numel(),
                row_len: config.dim(),
                padding_rows,
                heads: config.heads as usize,
                state_page: config.heads as usize * HEAD_DIM * HEAD_DIM,
                written_slots,
            }
        },
        actual,
        expected,
    )
}
