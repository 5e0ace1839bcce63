//! Host-side checks of the caller contract (crate doc §4). Violations are
//! undefined behaviour in the kernel, so they are caught here, all of them,
//! each naming the argument or slot entry at fault:
//!
//! * presence: `conv_bias` exactly with `has_bias`, `accepted` exactly when
//!   T > 1;
//! * dtypes (crate doc §1) and shapes against the config and
//!   B = `slots.shape[0]`, with `x.shape[0] == B * T`, conv width and slot
//!   columns;
//! * layouts: `state` key-contiguous with 16-byte rows; 32-bit in-slot offsets
//!   for `state` and `conv_state`; written tensors must not overlap themselves;
//! * scalars: `scale` finite, `eps` finite and `>= 0`;
//! * values (once the layouts are valid): KdaSplit's slot-table rules
//!   ([`kda_host::check_slot_table`], shared code: `accepted` in 1..=T for
//!   every request, slots inside their tensors, a positive conv slot for
//!   active multi-token requests, distinct write slots within a request,
//!   disjoint slots across active requests).

use kda_host::validate::{Checker, Dim, LayoutIssue, ShapePattern, TensorArg, with_slot_table};
use kda_host::{DType, SlotError};
use thiserror::Error;

use crate::args::{Arg, GdnArgs};
use crate::config::GdnConfig;

/// A violated precondition.
#[derive(Clone, Debug, Error, PartialEq)]
pub enum ArgError {
    #[error("{arg}: dtype {found} is not allowed; expected {}", kda_host::dtype_list(arg.dtypes()))]
    Dtype { arg: Arg, found: DType },
    #[error("{arg}: shape {found:?} does not match {expected}{why}")]
    Shape {
        arg: Arg,
        found: Vec<usize>,
        expected: ShapePattern,
        /// Extra context, e.g. where a row count comes from; may be empty.
        why: String,
    },
    #[error("{arg}: {reason}")]
    Layout { arg: Arg, reason: String },
    #[error("{arg}: required {why}")]
    Missing { arg: Arg, why: &'static str },
    #[error("{arg}: passed, but only allowed {why}")]
    Unexpected { arg: Arg, why: &'static str },
    #[error("{arg} = {value} must be {requirement}")]
    Scalar {
        arg: Arg,
        value: f32,
        requirement: &'static str,
    },
    #[error(transparent)]
    Slots(#[from] SlotError),
}

/// All contract violations of `args` for `config`; empty means valid.
pub fn validate(config: &GdnConfig, args: &GdnArgs) -> Vec<ArgError> {
    with_slot_table(
        validate_layout(config, args),
        config.tokens,
        &args.slots,
        args.accepted.as_ref(),
        &args.state,
        &args.conv_state,
    )
}

/// Presence, dtype, shape, stride and scalar checks: everything needed before
/// any slot value may be used as an index.
pub fn validate_layout(config: &GdnConfig, args: &GdnArgs) -> Vec<ArgError> {
    let mut c = Checker::<Arg, ArgError>::new();
    let (hv, t) = (config.hv(), config.tokens as usize);
    let (dk, dv) = (Dim::Eq(config.dk()), Dim::Eq(config.dv()));
    let conv_dim = Dim::Eq(config.conv_dim());
    let value_dim = Dim::Eq(config.value_dim());
    let b = args.requests();

    // `slots` fixes B; every row count follows from it.
    let slot_dims = if t == 1 {
        vec![Dim::Any]
    } else {
        vec![Dim::Any, Dim::AtLeast(t)]
    };
    c.check(Arg::Slots, &args.slots, slot_dims);
    let rows = Dim::Eq(b.saturating_mul(t));
    c.check_with(
        Arg::X,
        &args.x,
        vec![rows, conv_dim],
        format!(" (rows = requests * tokens = {b} * {t}, requests from slots)"),
    );
    c.check(
        Arg::ConvWeight,
        &args.conv_weight,
        vec![conv_dim, Dim::Eq(4)],
    );
    c.optional(
        Arg::ConvBias,
        args.conv_bias.as_ref(),
        config.has_bias,
        "when has_bias",
        vec![conv_dim],
    );
    c.check(
        Arg::ConvState,
        &args.conv_state,
        vec![Dim::Any, conv_dim, Dim::AtLeast(config.conv_width())],
    );
    c.check(Arg::A, &args.a, vec![rows, Dim::Eq(hv)]);
    c.check(Arg::Beta, &args.beta, vec![rows, Dim::Eq(hv)]);
    c.check(Arg::ALog, &args.a_log, vec![Dim::Eq(hv)]);
    c.check(Arg::DtBias, &args.dt_bias, vec![Dim::Eq(hv)]);
    c.check(Arg::State, &args.state, vec![Dim::Any, Dim::Eq(hv), dv, dk]);
    c.check(Arg::Output, &args.output, vec![rows, value_dim]);
    c.check(Arg::Z, &args.z, vec![rows, value_dim]);
    c.check(Arg::NormWeight, &args.norm_weight, vec![dv]);
    c.optional(
        Arg::Accepted,
        args.accepted.as_ref(),
        t > 1,
        "when tokens > 1",
        vec![Dim::Eq(b)],
    );
    if !args.scale.is_finite() {
        c.push(ArgError::Scalar {
            arg: Arg::Scale,
            value: args.scale,
            requirement: "finite",
        });
    }
    if !(args.eps.is_finite() && args.eps >= 0.0) {
        c.push(ArgError::Scalar {
            arg: Arg::Eps,
            value: args.eps,
            requirement: "finite and >= 0",
        });
    }

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
            LayoutIssue::Missing { arg, why } => Self::Missing { arg, why },
            LayoutIssue::Unexpected { arg, why } => Self::Unexpected { arg, why },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::generator::{GenOptions, generate};
    use kda_host::HostTensor;
    use kda_host::{SlotRef, SlotTensor};

    fn case(tokens: u32) -> (GdnConfig, GdnArgs) {
        let config = GdnConfig::new(1, 2, tokens, true).unwrap();
        let options = GenOptions::new(3).padding(0.0).holes(0.0).seed(5);
        (config, generate(&config, &options))
    }

    fn set_slots(args: &mut GdnArgs, values: Vec<i32>) {
        let shape = args.slots.shape().to_vec();
        args.slots = HostTensor::new(values, shape).unwrap();
    }

    fn set_accepted(args: &mut GdnArgs, values: Vec<i32>) {
        args.accepted = Some(HostTensor::new(values.clone(), vec![values.len()]).unwrap());
    }

    fn text(errors: &[ArgError]) -> Vec<String> {
        errors.iter().map(ToString::to_string).collect()
    }

    #[test]
    fn generated_cases_are_valid() {
        for tokens in 1..=4 {
            let (config, args) = case(tokens);
            assert_eq!(validate(&config, &args), vec![]);
        }
    }

    #[test]
    fn wrong_dtypes_and_shapes_are_all_reported() {
        let (config, mut args) = case(1);
        // conv_dim = 2 * 128 + 2 * 128 = 512.
        args.conv_weight = HostTensor::zeros(DType::I32, vec![512, 4]);
        args.a = HostTensor::zeros(DType::Bf16, vec![3, 1]);
        args.state = HostTensor::zeros(DType::Bf16, vec![8, 2, 128, 128]);
        args.norm_weight = HostTensor::zeros(DType::F32, vec![64]);
        assert_eq!(
            text(&validate(&config, &args)),
            [
                "conv_weight: dtype I32 is not allowed; expected BF16 or F32",
                "a: shape [3, 1] does not match [3, 2]",
                "state: dtype BF16 is not allowed; expected F32",
                "norm_weight: shape [64] does not match [128]",
            ]
        );
    }

    #[test]
    fn x_rows_must_be_requests_times_tokens() {
        let (config, mut args) = case(2);
        args.x = HostTensor::zeros(DType::Bf16, vec![5, 512]);
        assert!(
            text(&validate(&config, &args)).contains(
                &"x: shape [5, 512] does not match [6, 512] (rows = requests * tokens = 3 * 2, requests from slots)"
                    .to_string()
            )
        );
    }

    #[test]
    fn conv_width_and_slot_columns_follow_tokens() {
        let (config, mut args) = case(4);
        args.conv_state = HostTensor::zeros(DType::Bf16, vec![16, 512, 5]);
        args.slots = HostTensor::zeros(DType::I32, vec![3, 3]);
        let errors = text(&validate(&config, &args));
        assert!(errors.contains(&"slots: shape [3, 3] does not match [_, >=4]".to_string()));
        assert!(
            errors.contains(
                &"conv_state: shape [16, 512, 5] does not match [_, 512, >=6]".to_string()
            )
        );
    }

    #[test]
    fn optional_arguments_follow_the_config() {
        let (config, mut args) = case(2);
        args.conv_bias = None;
        args.accepted = None;
        assert_eq!(
            text(&validate(&config, &args)),
            [
                "conv_bias: required when has_bias",
                "accepted: required when tokens > 1"
            ]
        );
        let (config, mut args) = case(1);
        let config = GdnConfig {
            has_bias: false,
            ..config
        };
        set_accepted(&mut args, vec![1, 1, 1]);
        assert_eq!(
            text(&validate(&config, &args)),
            [
                "conv_bias: passed, but only allowed when has_bias",
                "accepted: passed, but only allowed when tokens > 1"
            ]
        );
    }

    #[test]
    fn scalars_must_be_usable() {
        let (config, mut args) = case(1);
        args.scale = f32::NAN;
        args.eps = -1e-6;
        assert_eq!(
            text(&validate(&config, &args)),
            [
                "scale = NaN must be finite",
                "eps = -0.000001 must be finite and >= 0"
            ]
        );
    }

    #[test]
    fn slot_rules_are_kda_splits() {
        let (config, mut args) = case(3);
        set_accepted(&mut args, vec![2, 3, 4]);
        // Request 0: read slots[0,1] = 4, conv slots[0,0] = 0: invalid conv
        // slot. Request 1: writes 5 twice. Request 2: accepted out of range.
        set_slots(&mut args, vec![0, 4, 6, 5, 7, 5, -1, 4, 4]);
        assert_eq!(
            validate(&config, &args),
            vec![
                ArgError::Slots(SlotError::ConvSlot {
                    entry: SlotRef {
                        request: 0,
                        column: Some(0)
                    },
                    slot: 0
                }),
                ArgError::Slots(SlotError::RepeatedWrite {
                    entry: SlotRef {
                        request: 1,
                        column: Some(2)
                    },
                    slot: 5,
                    first: SlotRef {
                        request: 1,
                        column: Some(0)
                    }
                }),
                ArgError::Slots(SlotError::Accepted {
                    request: 2,
                    value: 4,
                    tokens: 3
                }),
            ]
        );
        // Range and sharing across requests.
        let (config, mut args) = case(1);
        let num_slots = args.state.shape()[0] as i32;
        set_slots(&mut args, vec![2, num_slots, 2]);
        let errors = validate(&config, &args);
        assert_eq!(
            text(&errors),
            [
                format!("slots[1] = {num_slots} is outside the {num_slots} slots of state"),
                format!("slots[1] = {num_slots} is outside the {num_slots} slots of conv_state"),
                "slots[2] = 2 is also used by slots[0]; active requests must own distinct slots"
                    .to_string(),
            ]
        );
        assert!(matches!(
            errors[1],
            ArgError::Slots(SlotError::SlotRange {
                tensor: SlotTensor::ConvState,
                ..
            })
        ));
    }

    #[test]
    fn state_rows_must_be_key_contiguous_and_aligned() {
        let (config, mut args) = case(1);
        let slots = args.state.shape()[0];
        // [V, K] viewed from a [K, V] buffer: key stride 128.
        args.state = HostTensor::strided(
            vec![0f32; slots * 2 * 128 * 128],
            vec![slots, 2, 128, 128],
            vec![2 * 128 * 128, 128 * 128, 1, 128],
        )
        .unwrap();
        let errors = text(&validate(&config, &args));
        assert_eq!(errors.len(), 1);
        assert!(errors[0].starts_with("state: the last dimension must be contiguous"));
        // Rows padded to 130 floats: not 16-byte aligned.
        args.state = HostTensor::strided(
            vec![0f32; slots * 2 * 128 * 130],
            vec![slots, 2, 128, 128],
            vec![2 * 128 * 130, 128 * 130, 130, 1],
        )
        .unwrap();
        assert!(text(&validate(&config, &args))[0].starts_with("state: rows must start 16-byte"));
    }

    #[test]
    fn written_tensors_must_not_overlap_and_conv_views_are_free() {
        let (config, mut args) = case(1);
        args.output =
            HostTensor::strided(vec![half::bf16::ZERO; 256], vec![3, 256], vec![0, 1]).unwrap();
        let errors = text(&validate(&config, &args));
        assert_eq!(errors.len(), 1);
        assert!(errors[0].starts_with("output: strides [0, 1] make elements overlap"));
        // vLLM's SD conv layout as a [slot, channel, tap] view is fine.
        let (config, mut args) = case(1);
        let slots = args.conv_state.shape()[0];
        args.conv_state = HostTensor::strided(
            vec![half::bf16::ZERO; slots * 3 * 512],
            vec![slots, 512, 3],
            vec![3 * 512, 1, 512],
        )
        .unwrap();
        assert_eq!(validate(&config, &args), vec![]);
    }
}
