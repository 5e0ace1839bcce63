//! The argument checks every kernel's `validate` is built from: a
//! [`Checker`] of dtypes, shapes and strides over the kernel's own argument
//! enum (a [`TensorArg`]), and the slot-table contract of KdaSplit spec
//! §4.2–4.4 ([`check_slot_table`], [`with_slot_table`]). Each kernel keeps its
//! own rules and error type on top.

use std::collections::HashMap;
use std::fmt;

use thiserror::Error;

use crate::tensor::{DType, HostTensor};

/// A reference to one entry of the slot table, printed the way the kernel
/// indexes it: `slots[b]` (T = 1) or `slots[b, t]` (T > 1).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SlotRef {
    /// The request (row of the table).
    pub request: usize,
    /// The token column (T > 1 only).
    pub column: Option<usize>,
}

impl fmt::Display for SlotRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.column {
            None => write!(f, "slots[{}]", self.request),
            Some(t) => write!(f, "slots[{}, {t}]", self.request),
        }
    }
}

/// One expected extent in a shape check.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Dim {
    /// Any extent.
    Any,
    /// Exactly this extent.
    Eq(usize),
    /// At least this extent.
    AtLeast(usize),
}

impl fmt::Display for Dim {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Dim::Any => f.write_str("_"),
            Dim::Eq(n) => write!(f, "{n}"),
            Dim::AtLeast(n) => write!(f, ">={n}"),
        }
    }
}

/// The expected shape of an argument, printed like `[8, 3072]` or `[_, 3072, >=3]`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ShapePattern(
    /// One expected extent per dimension.
    pub Vec<Dim>,
);

impl ShapePattern {
    /// Same rank, and every extent meets its [`Dim`].
    ///
    /// ```
    /// use kda_host::validate::{Dim, ShapePattern};
    ///
    /// let p = ShapePattern(vec![Dim::Any, Dim::Eq(384), Dim::AtLeast(3)]);
    /// assert!(p.matches(&[7, 384, 4]));
    /// assert!(!p.matches(&[7, 384, 2]));
    /// assert_eq!(p.to_string(), "[_, 384, >=3]");
    /// ```
    pub fn matches(&self, shape: &[usize]) -> bool {
        shape.len() == self.0.len()
            && self.0.iter().zip(shape).all(|(d, &n)| match *d {
                Dim::Any => true,
                Dim::Eq(m) => n == m,
                Dim::AtLeast(m) => n >= m,
            })
    }
}

impl fmt::Display for ShapePattern {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("[")?;
        for (i, d) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str(", ")?;
            }
            write!(f, "{d}")?;
        }
        f.write_str("]")
    }
}

/// The per-slot tensor a slot entry indexes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum SlotTensor {
    /// The recurrent state cache.
    State,
    /// The conv-state cache.
    ConvState,
}

impl fmt::Display for SlotTensor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::State => "state",
            Self::ConvState => "conv_state",
        })
    }
}

/// A violation of the slot-table contract (§4.2–4.4), for any kernel with
/// KdaSplit's cache semantics (spec §2).
#[derive(Clone, Debug, Error, PartialEq, Eq)]
pub enum SlotError {
    /// `accepted[request]` is outside `1..=tokens`.
    #[error(
        "accepted[{request}] = {value} is outside 1..={tokens} (required for every request, padding included)"
    )]
    Accepted {
        /// The request.
        request: usize,
        /// Its `accepted` value.
        value: i32,
        /// Tokens per request T.
        tokens: u32,
    },
    /// A slot the launch reads or writes is not inside its tensor.
    #[error("{entry} = {slot} is outside the {num_slots} slots of {tensor}")]
    SlotRange {
        /// The table entry.
        entry: SlotRef,
        /// Its value.
        slot: i32,
        /// The tensor it indexes.
        tensor: SlotTensor,
        /// Slots of that tensor.
        num_slots: usize,
    },
    /// An active multi-token request has no positive conv slot.
    #[error("{entry} = {slot}: an active multi-token request needs a positive conv slot")]
    ConvSlot {
        /// The table entry (column 0).
        entry: SlotRef,
        /// Its value.
        slot: i32,
    },
    /// A request writes one slot twice.
    #[error("{entry} = {slot} repeats {first}; positive write slots of a request must be distinct")]
    RepeatedWrite {
        /// The repeating entry.
        entry: SlotRef,
        /// Its value.
        slot: i32,
        /// The entry it repeats.
        first: SlotRef,
    },
    /// Two active requests touch one slot.
    #[error("{entry} = {slot} is also used by {first}; active requests must own distinct slots")]
    SharedSlot {
        /// The later entry.
        entry: SlotRef,
        /// Its value.
        slot: i32,
        /// The other request's entry.
        first: SlotRef,
    },
}

/// Slot-table and `accepted` values of a launch with `tokens` tokens per
/// request (§4.2–4.4): `accepted` in 1..=T for every request, slots inside
/// `num_state` state slots and `num_conv` conv slots, a positive conv slot for
/// active multi-token requests, distinct write slots within a request and
/// disjoint slots across active requests. The layouts must already be valid:
/// `slots` I32 `[B]` (T = 1) or `[B, >= T]`, `accepted` I32 `[B]` when T > 1
/// (ignored when T = 1); anything else panics.
pub fn check_slot_table(
    tokens: u32,
    slots: &HostTensor,
    accepted: Option<&HostTensor>,
    num_state: usize,
    num_conv: usize,
) -> Vec<SlotError> {
    let mut errors = Vec::new();
    let t = tokens as usize;
    let requests = slots.shape().first().copied().unwrap_or(0);
    let slot = |request, column| {
        let index: &[usize] = if t == 1 {
            &[request]
        } else {
            &[request, column]
        };
        let value = slots
            .get_i32(index)
            .expect("slots is I32 after the layout checks");
        let entry = SlotRef {
            request,
            column: (t > 1).then_some(column),
        };
        (entry, value)
    };
    // First entry of every slot an active request touches, for §4.3.
    let mut owners: HashMap<i32, SlotRef> = HashMap::new();
    for b in 0..requests {
        let offset = match accepted {
            Some(accepted) if t > 1 => {
                let a = accepted
                    .get_i32(&[b])
                    .expect("accepted is I32 after the layout checks");
                if !(1..=t as i32).contains(&a) {
                    // The kernel indexes slots[b, a - 1] before the padding test,
                    // so this holds for padding requests too.
                    errors.push(SlotError::Accepted {
                        request: b,
                        value: a,
                        tokens,
                    });
                    continue;
                }
                a as usize - 1
            }
            _ => 0,
        };
        let read = slot(b, offset);
        if read.1 <= 0 {
            continue; // padding: reads nothing else, writes only zero outputs
        }
        in_range(&mut errors, read, SlotTensor::State, num_state);
        let mut touched = vec![read];
        let conv = slot(b, 0);
        if conv.1 <= 0 {
            errors.push(SlotError::ConvSlot {
                entry: conv.0,
                slot: conv.1,
            });
        } else {
            in_range(&mut errors, conv, SlotTensor::ConvState, num_conv);
            touched.push(conv);
        }
        let mut writes: HashMap<i32, SlotRef> = HashMap::new();
        for column in 0..t {
            let write = slot(b, column);
            if write.1 <= 0 {
                continue; // a hole: output computed, state not stored
            }
            if column != offset {
                in_range(&mut errors, write, SlotTensor::State, num_state);
            }
            match writes.get(&write.1) {
                Some(&first) => errors.push(SlotError::RepeatedWrite {
                    entry: write.0,
                    slot: write.1,
                    first,
                }),
                None => {
                    writes.insert(write.1, write.0);
                }
            }
            touched.push(write);
        }
        // Within a request a slot may recur (read = write of token a - 1, conv =
        // write of token 0); across active requests it may not.
        let mut mine = Vec::new();
        for (entry, slot) in touched {
            if mine.contains(&slot) {
                continue;
            }
            mine.push(slot);
            match owners.get(&slot) {
                Some(&first) => errors.push(SlotError::SharedSlot { entry, slot, first }),
                None => {
                    owners.insert(slot, entry);
                }
            }
        }
    }
    errors
}

fn in_range(
    errors: &mut Vec<SlotError>,
    (entry, slot): (SlotRef, i32),
    tensor: SlotTensor,
    num_slots: usize,
) {
    if !usize::try_from(slot).is_ok_and(|s| s < num_slots) {
        errors.push(SlotError::SlotRange {
            entry,
            slot,
            tensor,
            num_slots,
        });
    }
}

/// An argument enum whose tensors the shared [`Checker`] checks: every
/// kernel's `Arg` (KdaSplit, GDN, Mamba-2) names its tensors and their dtypes.
pub trait TensorArg: Copy + PartialEq {
    /// Dtypes the kernel accepts for the argument.
    fn dtypes(self) -> &'static [DType];
}

/// A dtype, shape, presence or layout problem found by [`Checker`]; each
/// kernel converts it into its own `ArgError`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LayoutIssue<A> {
    /// The dtype is not in `arg.dtypes()`.
    Dtype {
        /// The argument.
        arg: A,
        /// Its dtype.
        found: DType,
    },
    /// The shape does not match.
    Shape {
        /// The argument.
        arg: A,
        /// Its shape.
        found: Vec<usize>,
        /// The pattern it must match.
        expected: ShapePattern,
        /// Extra context, e.g. where a row count comes from; may be empty.
        why: String,
    },
    /// The strides break a layout rule.
    Layout {
        /// The argument.
        arg: A,
        /// The rule and the strides found.
        reason: String,
    },
    /// An optional argument its config requires is absent; `why` is the
    /// condition, e.g. `"when has_bias"`.
    Missing {
        /// The argument.
        arg: A,
        /// The condition that requires it.
        why: &'static str,
    },
    /// An optional argument is passed although its condition is off.
    Unexpected {
        /// The argument.
        arg: A,
        /// The condition that is off.
        why: &'static str,
    },
}

/// Collects layout errors (as the kernel's error type `E`) and remembers which
/// arguments are well-formed enough for later checks to index. Shared by every
/// kernel with KdaSplit's host tensors.
pub struct Checker<A, E> {
    errors: Vec<E>,
    bad: Vec<A>,
}

impl<A, E> Default for Checker<A, E> {
    fn default() -> Self {
        Self {
            errors: Vec::new(),
            bad: Vec::new(),
        }
    }
}

impl<A: TensorArg, E: From<LayoutIssue<A>>> Checker<A, E> {
    /// No errors yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// The errors collected so far, in check order.
    pub fn finish(self) -> Vec<E> {
        self.errors
    }

    /// Records an error of the kernel's own kind (e.g. a scalar check).
    pub fn push(&mut self, error: E) {
        self.errors.push(error);
    }

    fn issue(&mut self, issue: LayoutIssue<A>) {
        self.errors.push(issue.into());
    }

    /// Dtype against `arg.dtypes()` and shape against `dims`.
    pub fn check(&mut self, arg: A, t: &HostTensor, dims: Vec<Dim>) {
        self.check_with(arg, t, dims, String::new());
    }

    /// [`Checker::check`] with extra context for a shape mismatch.
    pub fn check_with(&mut self, arg: A, t: &HostTensor, dims: Vec<Dim>, why: String) {
        if !arg.dtypes().contains(&t.dtype()) {
            self.issue(LayoutIssue::Dtype {
                arg,
                found: t.dtype(),
            });
            self.bad.push(arg);
        }
        let expected = ShapePattern(dims);
        if !expected.matches(t.shape()) {
            self.issue(LayoutIssue::Shape {
                arg,
                found: t.shape().to_vec(),
                expected,
                why,
            });
            self.bad.push(arg);
        }
    }

    /// An argument passed exactly when `on`; `why` names the condition.
    pub fn optional(
        &mut self,
        arg: A,
        t: Option<&HostTensor>,
        on: bool,
        why: &'static str,
        dims: Vec<Dim>,
    ) {
        match (t, on) {
            (Some(t), true) => self.check(arg, t, dims),
            (None, true) => self.issue(LayoutIssue::Missing { arg, why }),
            (Some(_), false) => self.issue(LayoutIssue::Unexpected { arg, why }),
            (None, false) => {}
        }
    }

    /// No dtype, shape or layout error has been recorded for `arg`.
    pub fn well_formed(&self, arg: A) -> bool {
        !self.bad.contains(&arg)
    }

    /// Records a layout error and marks `arg` as not indexable.
    pub fn layout(&mut self, arg: A, reason: String) {
        self.issue(LayoutIssue::Layout { arg, reason });
        self.bad.push(arg);
    }

    /// Inner stride 1 and 16-byte aligned rows (`per_16_bytes` elements) for
    /// the kernel's vector loads. Strides of extent-1 dimensions are never used.
    pub fn vector_rows(&mut self, arg: A, t: &HostTensor, per_16_bytes: usize) {
        if !self.well_formed(arg) {
            return;
        }
        let (shape, strides) = (t.shape(), t.strides());
        let last = shape.len() - 1;
        if shape[last] > 1 && strides[last] != 1 {
            return self.layout(
                arg,
                format!(
                    "the last dimension must be contiguous (stride 1); got strides {strides:?}"
                ),
            );
        }
        if let Some(d) = (0..last).find(|&d| shape[d] > 1 && strides[d] % per_16_bytes != 0) {
            self.layout(
                arg,
                format!(
                    "rows must start 16-byte aligned: stride of dimension {d} must be a multiple of {per_16_bytes} elements; got strides {strides:?}"
                ),
            );
        }
    }

    /// Slot page bases are 64-bit, offsets inside a slot (dimensions 1..)
    /// 32-bit.
    pub fn page_offsets(&mut self, arg: A, t: &HostTensor) {
        if !self.well_formed(arg) {
            return;
        }
        let in_page: usize = t.shape()[1..]
            .iter()
            .zip(&t.strides()[1..])
            .fold(0usize, |sum, (&n, &s)| {
                sum.saturating_add(n.saturating_sub(1).saturating_mul(s))
            });
        if in_page > i32::MAX as usize {
            self.layout(
                arg,
                format!("offsets inside one slot reach {in_page}; they must fit in int32"),
            );
        }
    }

    /// A tensor the kernel writes must not overlap itself.
    pub fn non_overlapping(&mut self, arg: A, t: &HostTensor) {
        if !t.is_non_overlapping() {
            self.layout(
                arg,
                format!(
                    "strides {:?} make elements overlap; the kernel writes this tensor",
                    t.strides()
                ),
            );
        }
    }

    /// The slot caches' common rules: `state` rows moved as f32x4 vectors,
    /// 32-bit in-slot offsets for `state` and `conv_state`, and `output`,
    /// `state`, `conv_state` (each `(arg, tensor)`) free of self-overlap.
    pub fn slot_caches(
        &mut self,
        output: (A, &HostTensor),
        state: (A, &HostTensor),
        conv_state: (A, &HostTensor),
    ) {
        self.vector_rows(state.0, state.1, 4);
        self.page_offsets(state.0, state.1);
        self.page_offsets(conv_state.0, conv_state.1);
        for (arg, tensor) in [output, state, conv_state] {
            self.non_overlapping(arg, tensor);
        }
    }
}

/// `layout_errors`, or, if there are none, the slot-table violations
/// ([`check_slot_table`]) of `slots` / `accepted` against the slot counts of
/// `state` and `conv_state`: the second stage of every kernel's `validate`.
pub fn with_slot_table<E: From<SlotError>>(
    layout_errors: Vec<E>,
    tokens: u32,
    slots: &HostTensor,
    accepted: Option<&HostTensor>,
    state: &HostTensor,
    conv_state: &HostTensor,
) -> Vec<E> {
    if !layout_errors.is_empty() {
        return layout_errors;
    }
    check_slot_table(
        tokens,
        slots,
        accepted,
        state.shape()[0],
        conv_state.shape()[0],
    )
    .into_iter()
    .map(E::from)
    .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Clone, Copy, Debug, PartialEq)]
    enum Arg {
        X,
        State,
    }

    impl TensorArg for Arg {
        fn dtypes(self) -> &'static [DType] {
            match self {
                Arg::X => &[DType::Bf16, DType::F32],
                Arg::State => &[DType::F32],
            }
        }
    }

    #[test]
    fn checker_collects_issues_and_remembers_bad_arguments() {
        let mut c = Checker::<Arg, LayoutIssue<Arg>>::new();
        let x = HostTensor::zeros(DType::I32, vec![2, 3]);
        let state = HostTensor::strided(vec![0f32; 16], vec![2, 4], vec![8, 2]).unwrap();
        c.check(Arg::X, &x, vec![Dim::Any, Dim::Eq(4)]);
        c.check(Arg::State, &state, vec![Dim::Any, Dim::AtLeast(4)]);
        c.vector_rows(Arg::State, &state, 4);
        c.optional(Arg::X, None, true, "when tokens > 1", vec![]);
        assert!(!c.well_formed(Arg::X) && !c.well_formed(Arg::State));
        let issues = c.finish();
        assert_eq!(issues.len(), 4, "{issues:?}");
        assert!(matches!(
            issues[0],
            LayoutIssue::Dtype {
                arg: Arg::X,
                found: DType::I32
            }
        ));
        assert!(
            matches!(&issues[1], LayoutIssue::Shape { expected, .. } if expected.to_string() == "[_, 4]")
        );
        assert!(
            matches!(&issues[2], LayoutIssue::Layout { reason, .. } if reason.contains("stride 1"))
        );
        assert!(matches!(
            issues[3],
            LayoutIssue::Missing { arg: Arg::X, .. }
        ));
    }

    #[test]
    fn slot_tables_break_the_contract_by_entry() {
        let slots = HostTensor::new(vec![2i32, 5, 2, 3], vec![2, 2]).unwrap();
        let accepted = HostTensor::new(vec![1i32, 2], vec![2]).unwrap();
        let errors = check_slot_table(2, &slots, Some(&accepted), 4, 4);
        let text: Vec<String> = errors.iter().map(ToString::to_string).collect();
        assert_eq!(
            text,
            [
                "slots[0, 1] = 5 is outside the 4 slots of state",
                "slots[1, 0] = 2 is also used by slots[0, 0]; active requests must own distinct slots",
            ]
        );
        // Layout errors come first and stop the slot checks.
        let state = HostTensor::zeros(DType::F32, vec![4, 1]);
        let layout = vec![SlotError::ConvSlot {
            entry: SlotRef {
                request: 0,
                column: None,
            },
            slot: 0,
        }];
        assert_eq!(
            with_slot_table(layout.clone(), 2, &slots, Some(&accepted), &state, &state),
            layout
        );
        assert_eq!(
            with_slot_table(
                Vec::<SlotError>::new(),
                2,
                &slots,
                Some(&accepted),
                &state,
                &state
            ),
            errors
        );
    }
}
