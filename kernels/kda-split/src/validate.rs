//! Host-side checks of the caller contract (spec §4, items 1–5) and of the layout
//! requirements of spec §1.1. Violations are undefined behaviour in the kernel,
//! so they must be caught here.
//!
//! Checks, each reported with the argument it concerns, all collected:
//!
//! * dtypes: bf16 where the kernel loads bf16 vectors or stores bf16, f32 for the
//!   f32 tensors, i32 for slot tables, bf16 or f32 where the kernel converts
//!   ("any float");
//! * shapes against `heads`, `tokens` and B = `slots.shape[0]`, with
//!   `x.shape[0] == B * T` (§4.1) and conv width / slot columns (§4.5);
//! * layouts: unit inner stride and 16-byte rows for `raw_gate`, `f_b_weight`
//!   and `state`; contiguous state rows for early >= 2; 32-bit in-page offsets
//!   for `state` and `conv_state`; written tensors must not overlap themselves;
//! * values (only once the tensors they index are well-formed): `accepted` in
//!   1..=T for every request (§4.2), slots inside their tensors, a positive conv
//!   slot for active multi-token requests (§4.4), distinct write slots within a
//!   request and disjoint slots across active requests (§4.3).
//!
//! The checker and the slot-table rules are the shared ones of
//! [`kda_host::validate`] (re-exported here).

pub use kda_host::validate::{
    Checker, Dim, LayoutIssue, ShapePattern, SlotError, SlotRef, SlotTensor, TensorArg,
    check_slot_table, with_slot_table,
};
use thiserror::Error;

use crate::args::{Arg, DType, KdaArgs, dtype_list};
use crate::config::{HEAD_DIM, KdaConfig};

/// A violated precondition, naming the argument (or slot entry) at fault.
#[derive(Clone, Debug, Error, PartialEq, Eq)]
pub enum ArgError {
    #[error("{arg}: dtype {found} is not allowed; expected {}", dtype_list(arg.dtypes()))]
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
    #[error("accepted: required when tokens > 1")]
    MissingAccepted,
    #[error("accepted: only passed when tokens > 1; this launch has tokens = 1")]
    UnexpectedAccepted,
    #[error(
        "accepted[{request}] = {value} is outside 1..={tokens} (required for every request, padding included)"
    )]
    Accepted {
        request: usize,
        value: i32,
        tokens: u32,
    },
    #[error("{entry} = {slot} is outside the {num_slots} slots of {tensor}")]
    SlotRange {
        entry: SlotRef,
        slot: i32,
        tensor: Arg,
        num_slots: usize,
    },
    #[error("{entry} = {slot}: an active multi-token request needs a positive conv slot")]
    ConvSlot { entry: SlotRef, slot: i32 },
    #[error("{entry} = {slot} repeats {first}; positive write slots of a request must be distinct")]
    RepeatedWrite {
        entry: SlotRef,
        slot: i32,
        first: SlotRef,
    },
    #[error("{entry} = {slot} is also used by {first}; active requests must own distinct slots")]
    SharedSlot {
        entry: SlotRef,
        slot: i32,
        first: SlotRef,
    },
}

/// All contract violations of `args` for `config`; empty means the launch is valid.
pub fn validate(config: &KdaConfig, args: &KdaArgs) -> Vec<ArgError> {
    with_slot_table(
        validate_layout(config, args),
        config.tokens,
        &args.slots,
        args.accepted.as_ref(),
        &args.state,
        &args.conv_state,
    )
}

/// Dtype, shape and stride checks only: what is needed before any element may
/// be indexed. Case files are read with this (their slot values are checked at
/// launch), so deliberately invalid slot tables can still be stored.
pub fn validate_layout(config: &KdaConfig, args: &KdaArgs) -> Vec<ArgError> {
    let mut c = Checker::<Arg, ArgError>::new();
    let h = config.heads as usize;
    let dim = config.dim();
    let t = config.tokens as usize;
    let b = args.requests();
    let r = args.rows();

    // `slots` fixes B; every row count follows from it.
    let slot_dims = if t == 1 {
        vec![Dim::Any]
    } else {
        vec![Dim::Any, Dim::AtLeast(t)]
    };
    c.check(Arg::Slots, &args.slots, slot_dims);
    c.check_with(
        Arg::X,
        &args.x,
        vec![Dim::Eq(b.saturating_mul(t)), Dim::Eq(3 * dim)],
        format!(" (rows = requests * tokens = {b} * {t}, requests from slots)"),
    );
    let rows = Dim::Eq(r);
    c.check(
        Arg::Weights,
        &args.weights,
        vec![Dim::Eq(3), Dim::Eq(4), Dim::Eq(dim)],
    );
    if config.has_bias {
        c.check(Arg::Bias, &args.bias, vec![Dim::Eq(3 * dim)]);
    }
    let width = if t == 1 { 3 } else { t + 2 };
    c.check(
        Arg::ConvState,
        &args.conv_state,
        vec![Dim::Any, Dim::Eq(3 * dim), Dim::AtLeast(width)],
    );
    c.check(Arg::RawGate, &args.raw_gate, vec![rows, Dim::Eq(HEAD_DIM)]);
    c.check(Arg::Beta, &args.beta, vec![rows, Dim::Eq(h)]);
    c.check(Arg::ALog, &args.a_log, vec![Dim::Eq(h)]);
    c.check(Arg::DtBias, &args.dt_bias, vec![Dim::Eq(dim)]);
    let d = Dim::Eq(HEAD_DIM);
    c.check(Arg::State, &args.state, vec![Dim::Any, Dim::Eq(h), d, d]);
    c.check(Arg::Output, &args.output, vec![rows, Dim::Eq(dim)]);
    c.check(Arg::Gate, &args.gate, vec![rows, Dim::Eq(dim)]);
    c.check(Arg::NormWeight, &args.norm_weight, vec![d]);
    c.check(Arg::FBWeight, &args.f_b_weight, vec![Dim::Eq(dim), d]);
    c.optional(
        Arg::Accepted,
        args.accepted.as_ref(),
        t > 1,
        "when tokens > 1",
        vec![Dim::Eq(b)],
    );

    // Vector loads: bf16x8 / f32x4 need a unit inner stride and 16-byte rows.
    c.vector_rows(Arg::RawGate, &args.raw_gate, 8);
    c.vector_rows(Arg::FBWeight, &args.f_b_weight, 8);
    c.vector_rows(Arg::State, &args.state, 4);
    if (config.staged() || config.bulk_store())
        && c.well_formed(Arg::State)
        && args.state.strides()[2] != HEAD_DIM
    {
        let what = if config.staged() {
            "early >= 2 bulk-copies a CTA's state rows as one block"
        } else {
            "bulk_store writes a CTA's state rows of a token as one block"
        };
        c.layout(
            Arg::State,
            format!(
                "{what}, so the value stride must be 128; got {}",
                args.state.strides()[2]
            ),
        );
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
            // `accepted` is the only optional argument.
            LayoutIssue::Missing { .. } => Self::MissingAccepted,
            LayoutIssue::Unexpected { .. } => Self::UnexpectedAccepted,
        }
    }
}

impl From<SlotError> for ArgError {
    fn from(e: SlotError) -> Self {
        match e {
            SlotError::Accepted {
                request,
                value,
                tokens,
            } => Self::Accepted {
                request,
                value,
                tokens,
            },
            SlotError::SlotRange {
                entry,
                slot,
                tensor,
                num_slots,
            } => Self::SlotRange {
                entry,
                slot,
                tensor: match tensor {
                    SlotTensor::State => Arg::State,
                    SlotTensor::ConvState => Arg::ConvState,
                },
                num_slots,
            },
            SlotError::ConvSlot { entry, slot } => Self::ConvSlot { entry, slot },
            SlotError::RepeatedWrite { entry, slot, first } => {
                Self::RepeatedWrite { entry, slot, first }
            }
            SlotError::SharedSlot { entry, slot, first } => Self::SharedSlot { entry, slot, first },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::args::{HostData, HostTensor};
    use crate::generator::{GenOptions, generate};

    fn case(tokens: u32) -> (KdaConfig, KdaArgs) {
        let options = GenOptions::new(1, 3, tokens)
            .padding(0.0)
            .holes(0.0)
            .seed(5);
        let config = KdaConfig::new(1, 3, 0, true, &[0, 0, 0], tokens).unwrap();
        (config, generate(&options))
    }

    fn set_slots(args: &mut KdaArgs, values: Vec<i32>) {
        let shape = args.slots.shape().to_vec();
        args.slots = HostTensor::new(values, shape).unwrap();
    }

    fn set_accepted(args: &mut KdaArgs, values: Vec<i32>) {
        args.accepted = Some(HostTensor::new(values.clone(), vec![values.len()]).unwrap());
    }

    #[test]
    fn generated_cases_are_valid() {
        for tokens in [1, 2, 8] {
            let (config, args) = case(tokens);
            assert_eq!(validate(&config, &args), vec![]);
        }
    }

    #[test]
    fn wrong_dtypes_and_shapes_are_all_reported() {
        let (config, mut args) = case(1);
        args.state = HostTensor::zeros(DType::Bf16, vec![4, 1, 128, 128]);
        args.a_log = HostTensor::zeros(DType::F32, vec![2]);
        args.weights = HostTensor::zeros(DType::I32, vec![3, 4, 128]);
        let errors = validate(&config, &args);
        assert_eq!(errors.len(), 3, "{errors:?}");
        assert_eq!(
            errors[0].to_string(),
            "weights: dtype I32 is not allowed; expected BF16 or F32"
        );
        assert_eq!(errors[1].to_string(), "a_log: shape [2] does not match [1]");
        assert_eq!(
            errors[2].to_string(),
            "state: dtype BF16 is not allowed; expected F32"
        );
    }

    #[test]
    fn x_rows_must_be_requests_times_tokens() {
        let (config, mut args) = case(2);
        args.x = HostTensor::zeros(DType::Bf16, vec![5, 384]);
        let errors = validate(&config, &args);
        assert!(
            errors.iter().any(|e| e.to_string()
                == "x: shape [5, 384] does not match [6, 384] (rows = requests * tokens = 3 * 2, requests from slots)"),
            "{errors:?}"
        );
    }

    #[test]
    fn conv_width_and_slot_columns() {
        let (config, mut args) = case(4);
        args.conv_state = HostTensor::zeros(DType::Bf16, vec![8, 384, 5]);
        args.slots = HostTensor::zeros(DType::I32, vec![3, 3]);
        let text: Vec<String> = validate(&config, &args)
            .iter()
            .map(ToString::to_string)
            .collect();
        assert!(
            text.contains(&"slots: shape [3, 3] does not match [_, >=4]".to_string()),
            "{text:?}"
        );
        assert!(
            text.contains(
                &"conv_state: shape [8, 384, 5] does not match [_, 384, >=6]".to_string()
            )
        );
    }

    #[test]
    fn bias_shape_is_ignored_without_bias() {
        let (_, mut args) = case(1);
        args.bias = HostTensor::zeros(DType::F32, vec![1]);
        let with = KdaConfig::new(1, 3, 0, true, &[0, 0, 0], 1).unwrap();
        let without = KdaConfig::new(1, 3, 0, false, &[0, 0, 0], 1).unwrap();
        assert_eq!(validate(&with, &args).len(), 1);
        assert_eq!(validate(&without, &args), vec![]);
    }

    #[test]
    fn accepted_presence_follows_tokens() {
        let (config, mut args) = case(2);
        args.accepted = None;
        assert_eq!(validate(&config, &args), vec![ArgError::MissingAccepted]);
        let (config, mut args) = case(1);
        set_accepted(&mut args, vec![1, 1, 1]);
        assert_eq!(validate(&config, &args), vec![ArgError::UnexpectedAccepted]);
    }

    #[test]
    fn accepted_must_be_in_1_to_tokens_for_every_request() {
        let (config, mut args) = case(2);
        set_accepted(&mut args, vec![0, 3, 1]);
        let errors = validate(&config, &args);
        assert_eq!(
            errors,
            vec![
                ArgError::Accepted {
                    request: 0,
                    value: 0,
                    tokens: 2
                },
                ArgError::Accepted {
                    request: 1,
                    value: 3,
                    tokens: 2
                },
            ]
        );
    }

    #[test]
    fn slots_must_be_inside_state_and_conv_state() {
        let (config, mut args) = case(1);
        let num_slots = args.state.shape()[0] as i32;
        set_slots(&mut args, vec![1, num_slots, 2]);
        let errors = validate(&config, &args);
        assert_eq!(errors.len(), 2, "{errors:?}");
        assert_eq!(
            errors[0].to_string(),
            format!("slots[1] = {num_slots} is outside the {num_slots} slots of state")
        );
        assert!(matches!(
            errors[1],
            ArgError::SlotRange {
                tensor: Arg::ConvState,
                ..
            }
        ));
    }

    #[test]
    fn active_slots_must_be_distinct() {
        let (config, mut args) = case(1);
        set_slots(&mut args, vec![3, -1, 3]);
        let errors = validate(&config, &args);
        assert_eq!(errors.len(), 1);
        assert_eq!(
            errors[0].to_string(),
            "slots[2] = 3 is also used by slots[0]; active requests must own distinct slots"
        );
        // Padding requests may repeat anything.
        set_slots(&mut args, vec![3, 0, -1]);
        assert_eq!(validate(&config, &args), vec![]);
    }

    #[test]
    fn multi_token_slot_rules() {
        let (config, mut args) = case(3);
        set_accepted(&mut args, vec![2, 3, 1]);
        // Request 0: read slots[0,1] = 4, conv slots[0,0] = 0 -> invalid conv slot.
        // Request 1: writes 5 twice. Request 2: read slots[2,0] = -1 -> padding,
        // its other entries are never looked at.
        set_slots(&mut args, vec![0, 4, 6, 5, 7, 5, -1, 4, 4]);
        let errors = validate(&config, &args);
        assert_eq!(
            errors.iter().map(ToString::to_string).collect::<Vec<_>>(),
            vec![
                "slots[0, 0] = 0: an active multi-token request needs a positive conv slot",
                "slots[1, 2] = 5 repeats slots[1, 0]; positive write slots of a request must be distinct",
            ]
        );
        // The read slot may be the write slot of token accepted - 1, holes are
        // fine, and the padding criterion is the read slot, not slots[b, 0].
        set_slots(&mut args, vec![1, 4, -1, 5, 7, 8, 9, 10, -1]);
        set_accepted(&mut args, vec![2, 3, 3]);
        assert_eq!(validate(&config, &args), vec![]);
        // Across requests, conv and write slots count too.
        set_slots(&mut args, vec![1, 4, -1, 5, 7, 4, 9, 10, -1]);
        assert!(matches!(
            validate(&config, &args)[..],
            [ArgError::SharedSlot { slot: 4, .. }]
        ));
    }

    #[test]
    fn vector_loaded_rows_need_unit_stride_and_alignment() {
        let (config, mut args) = case(1);
        // raw_gate rows padded to 132 elements: 264 bytes is not 16-byte aligned.
        let HostData::Bf16(values) = args.raw_gate.data().clone() else {
            unreachable!()
        };
        let mut padded = Vec::new();
        for row in values.chunks(128) {
            padded.extend_from_slice(row);
            padded.extend_from_slice(&row[..4]);
        }
        args.raw_gate = HostTensor::strided(padded, vec![3, 128], vec![132, 1]).unwrap();
        // f_b_weight transposed: last dimension not contiguous.
        args.f_b_weight = HostTensor::strided(
            vec![half::bf16::ZERO; 128 * 128],
            vec![128, 128],
            vec![1, 128],
        )
        .unwrap();
        let errors = validate(&config, &args);
        assert_eq!(errors.len(), 2, "{errors:?}");
        assert!(
            errors[0]
                .to_string()
                .starts_with("raw_gate: rows must start 16-byte aligned")
        );
        assert!(
            errors[1]
                .to_string()
                .starts_with("f_b_weight: the last dimension must be contiguous")
        );
    }

    #[test]
    fn staged_state_needs_value_stride_128() {
        let (_, mut args) = case(1);
        let staged = KdaConfig::new(1, 3, 0, true, &[2, 0, 0], 1).unwrap();
        let slots = args.state.shape()[0];
        // Rows padded to 132 floats: 16-byte aligned, but not one block.
        args.state = HostTensor::strided(
            vec![0f32; slots * 128 * 132],
            vec![slots, 1, 128, 128],
            vec![128 * 132, 128 * 132, 132, 1],
        )
        .unwrap();
        let config = KdaConfig::new(1, 3, 0, true, &[1, 0, 0], 1).unwrap();
        assert_eq!(validate(&config, &args), vec![]);
        let errors = validate(&staged, &args);
        assert_eq!(errors.len(), 1);
        assert!(errors[0].to_string().contains("value stride must be 128"));
    }

    #[test]
    fn bulk_stored_state_needs_value_stride_128() {
        let config = KdaConfig::new(1, 3, 0, true, &[0, 16, 0, 4, 0], 2).unwrap();
        let bulk = KdaConfig::new(1, 3, 0, true, &[0, 16, 0, 4, 0, 1], 2).unwrap();
        let mut args = generate(&GenOptions::new(1, 3, 2).seed(5));
        assert_eq!(validate(&bulk, &args), vec![]);
        let slots = args.state.shape()[0];
        args.state = HostTensor::strided(
            vec![0f32; slots * 128 * 132],
            vec![slots, 1, 128, 128],
            vec![128 * 132, 128 * 132, 132, 1],
        )
        .unwrap();
        assert_eq!(validate(&config, &args), vec![]);
        let errors = validate(&bulk, &args);
        assert_eq!(errors.len(), 1);
        assert!(errors[0].to_string().contains("bulk_store writes"));
    }

    #[test]
    fn written_tensors_must_not_overlap() {
        let (config, mut args) = case(1);
        args.output =
            HostTensor::strided(vec![half::bf16::ZERO; 128], vec![3, 128], vec![0, 1]).unwrap();
        let errors = validate(&config, &args);
        assert_eq!(errors.len(), 1);
        assert!(
            errors[0]
                .to_string()
                .starts_with("output: strides [0, 1] make elements overlap")
        );
    }

    #[test]
    fn conv_state_views_in_both_vllm_layouts_are_accepted() {
        let (config, mut args) = case(1);
        let (slots, channels) = (args.conv_state.shape()[0], 384);
        // SD: storage [slot, tap, channel] viewed as [slot, channel, tap].
        args.conv_state = HostTensor::strided(
            vec![half::bf16::ZERO; slots * 3 * channels],
            vec![slots, channels, 3],
            vec![3 * channels, 1, channels],
        )
        .unwrap();
        assert_eq!(validate(&config, &args), vec![]);
    }
}
