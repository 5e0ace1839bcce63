//! Host-side checks of the caller contract (crate doc §4). Violations are
//! undefined behaviour in the kernel, so they are caught here, all of them,
//! each naming the argument or slot entry at fault:
//!
//! * presence: `conv_bias`, `d` and `z` exactly with `has_conv_bias`, `has_d`
//!   and `has_z`;
//! * dtypes (crate doc §1) and shapes against the config and
//!   B = `slots.shape[0]`;
//! * layouts: `state` contiguous along `d_state` with 16-byte rows; 32-bit
//!   in-slot offsets for `state` and `conv_state`; written tensors must not
//!   overlap themselves;
//! * values (once the layouts are valid): active slots inside `state` and
//!   `conv_state` and distinct across requests (KdaSplit's slot-table check,
//!   [`kda_host::check_slot_table`], with one token per request).

use kda_host::validate::{Checker, Dim, LayoutIssue, ShapePattern, TensorArg, with_slot_table};
use kda_host::{DType, SlotError};
use thiserror::Error;

use crate::args::{Arg, Mamba2Args};
use crate::config::Mamba2Config;

/// A violated precondition.
#[derive(Clone, Debug, Error, PartialEq, Eq)]
pub enum ArgError {
    #[error("{arg}: dtype {found} is not allowed; expected {}", kda_host::dtype_list(arg.dtypes()))]
    Dtype { arg: Arg, found: DType },
    #[error("{arg}: shape {found:?} does not match {expected}{why}")]
    Shape {
        arg: Arg,
        found: Vec<usize>,
        expected: ShapePattern,
        /// Extra context; may be empty.
        why: String,
    },
    #[error("{arg}: {reason}")]
    Layout { arg: Arg, reason: String },
    #[error("{arg}: required when {flag}")]
    Missing { arg: Arg, flag: &'static str },
    #[error("{arg}: passed, but only allowed when {flag}")]
    Unexpected { arg: Arg, flag: &'static str },
    #[error(transparent)]
    Slots(#[from] SlotError),
}

/// All contract violations of `args` for `config`; empty means valid.
pub fn validate(config: &Mamba2Config, args: &Mamba2Args) -> Vec<ArgError> {
    with_slot_table(
        validate_layout(config, args),
        1,
        &args.slots,
        None,
        &args.state,
        &args.conv_state,
    )
}

/// Presence, dtype, shape and stride checks: everything needed before any
/// slot value may be used as an index.
pub fn validate_layout(config: &Mamba2Config, args: &Mamba2Args) -> Vec<ArgError> {
    let mut c = Checker::<Arg, ArgError>::new();
    let b = args.requests();
    let rows = Dim::Eq(b);
    let heads = Dim::Eq(config.h());
    let conv_dim = Dim::Eq(config.conv_dim());
    let d_inner = Dim::Eq(config.d_inner());

    c.check(Arg::Slots, &args.slots, vec![Dim::Any]);
    c.check_with(
        Arg::Xbc,
        &args.xbc,
        vec![rows, conv_dim],
        format!(" (one row per request; {b} requests from slots)"),
    );
    c.check(
        Arg::ConvWeight,
        &args.conv_weight,
        vec![conv_dim, Dim::Eq(4)],
    );
    c.optional(
        Arg::ConvBias,
        args.conv_bias.as_ref(),
        config.has_conv_bias,
        "when has_conv_bias",
        vec![conv_dim],
    );
    c.check(
        Arg::ConvState,
        &args.conv_state,
        vec![Dim::Any, conv_dim, Dim::AtLeast(3)],
    );
    c.check(Arg::Dt, &args.dt, vec![rows, heads]);
    c.check(Arg::DtBias, &args.dt_bias, vec![heads]);
    c.check(Arg::A, &args.a, vec![heads]);
    c.optional(
        Arg::D,
        args.d.as_ref(),
        config.has_d,
        "when has_d",
        vec![heads],
    );
    c.optional(
        Arg::Z,
        args.z.as_ref(),
        config.has_z,
        "when has_z",
        vec![rows, d_inner],
    );
    c.check(
        Arg::State,
        &args.state,
        vec![Dim::Any, heads, Dim::Eq(config.p()), Dim::Eq(config.n())],
    );
    c.check(Arg::Output, &args.output, vec![rows, d_inner]);

    c.slot_caches(
        (Arg::Output, &args.output),
        (Arg::State, &args.state),
        (Arg::ConvState, &args.conv_state),
    );
    c.finish()
}

impl TensorArg for Arg {
    fn dtypes(self) -> &'static [DType] {
        Arg::dtypes(self)
    }
}

impl From<LayoutIssue<Arg>> for ArgError {
    fn from(issue: LayoutIssue<Arg>) -> Self {
        let flag = |arg: Arg| arg.flag().expect("optional arguments have a flag");
        match issue {
            LayoutIssue::Dtype { arg, found } => Self::Dtype { arg, found },
            LayoutIssue::Shape {
                arg,
                found,
                expected,
                why,
            } => Self::Shape {
                arg,
                found,
                expected,
                why,
            },
            LayoutIssue::Layout { arg, reason } => Self::Layout { arg, reason },
            LayoutIssue::Missing { arg, .. } => Self::Missing {
                arg,
                flag: flag(arg),
            },
            LayoutIssue::Unexpected { arg, .. } => Self::Unexpected {
                arg,
                flag: flag(arg),
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::generator::{GenOptions, generate};
    use kda_host::HostTensor;

    fn case() -> (Mamba2Config, Mamba2Args) {
        let config = Mamba2Config::new(2, 1).unwrap();
        let args = generate(&config, &GenOptions::new(3).padding(0.0).seed(5));
        (config, args)
    }

    fn text(errors: &[ArgError]) -> Vec<String> {
        errors.iter().map(ToString::to_string).collect()
    }

    #[test]
    fn generated_cases_are_valid() {
        let (config, args) = case();
        assert_eq!(validate(&config, &args), vec![]);
    }

    #[test]
    fn wrong_dtypes_and_shapes_are_all_reported() {
        let (config, mut args) = case();
        // conv_dim = 2 * 64 + 2 * 128 = 384, d_inner = 128.
        args.xbc = HostTensor::zeros(DType::F32, vec![3, 384]);
        args.dt = HostTensor::zeros(DType::Bf16, vec![3, 1]);
        args.state = HostTensor::zeros(DType::F32, vec![6, 2, 128, 64]);
        args.z = Some(HostTensor::zeros(DType::Bf16, vec![2, 128]));
        assert_eq!(
            text(&validate(&config, &args)),
            [
                "xbc: dtype F32 is not allowed; expected BF16",
                "dt: shape [3, 1] does not match [3, 2]",
                "z: shape [2, 128] does not match [3, 128]",
                "state: shape [6, 2, 128, 64] does not match [_, 2, 64, 128]",
            ]
        );
    }

    #[test]
    fn optional_arguments_follow_the_flags() {
        let (config, mut args) = case();
        args.d = None;
        args.conv_bias = None;
        assert_eq!(
            text(&validate(&config, &args)),
            [
                "conv_bias: required when has_conv_bias",
                "d: required when has_d"
            ]
        );
        let (config, args) = case();
        let config = Mamba2Config {
            has_z: false,
            ..config
        };
        assert_eq!(
            text(&validate(&config, &args)),
            ["z: passed, but only allowed when has_z"]
        );
    }

    #[test]
    fn slots_must_be_in_range_and_distinct() {
        let (config, mut args) = case();
        let num_slots = args.state.shape()[0] as i32;
        args.slots = HostTensor::new(vec![2, num_slots, 2], vec![3]).unwrap();
        assert_eq!(
            text(&validate(&config, &args)),
            [
                format!("slots[1] = {num_slots} is outside the {num_slots} slots of state"),
                format!("slots[1] = {num_slots} is outside the {num_slots} slots of conv_state"),
                "slots[2] = 2 is also used by slots[0]; active requests must own distinct slots"
                    .to_string(),
            ]
        );
        // Padding (0 or -1) may repeat.
        args.slots = HostTensor::new(vec![0, -1, 0], vec![3]).unwrap();
        assert_eq!(validate(&config, &args), vec![]);
    }

    #[test]
    fn state_rows_must_be_d_state_contiguous() {
        let (config, mut args) = case();
        let slots = args.state.shape()[0];
        args.state = HostTensor::strided(
            vec![0f32; slots * 2 * 64 * 128],
            vec![slots, 2, 64, 128],
            vec![2 * 64 * 128, 64 * 128, 1, 64],
        )
        .unwrap();
        let errors = text(&validate(&config, &args));
        assert_eq!(errors.len(), 1);
        assert!(errors[0].starts_with("state: the last dimension must be contiguous"));
    }

    #[test]
    fn written_tensors_must_not_overlap() {
        let (config, mut args) = case();
        args.output =
            HostTensor::strided(vec![half::bf16::ZERO; 128], vec![3, 128], vec![0, 1]).unwrap();
        let errors = text(&validate(&config, &args));
        assert_eq!(errors.len(), 1);
        assert!(errors[0].starts_with("output: strides [0, 1] make elements overlap"));
    }
}
