//! What the float64 references of the decode kernels share: their results
//! ([`Expected`]), the slot-table semantics of KdaSplit spec §2
//! ([`Request`], [`resolve_slots`]) and the elementwise activations, all in
//! f64.

use half::bf16;

use crate::args::KernelArgs;
use crate::tensor::{HostData, HostTensor};

/// Results of one call, each a row-major copy of the whole tensor.
#[derive(Clone, Debug, PartialEq)]
pub struct Expected {
    /// `[R, dim]`; padding rows are zero.
    pub output: Vec<bf16>,
    /// `[R, dim]`, the output before its bf16 rounding.
    pub output_f32: Vec<f32>,
    /// The state cache after the call; unwritten slots keep their values.
    pub state: Vec<f32>,
    /// The conv state's logical shape after the call.
    pub conv_state: Vec<bf16>,
}

impl Expected {
    /// The results before any request runs: `output_len` zero outputs (what
    /// padding rows keep) and row-major copies of `state` (f32) and
    /// `conv_state` (bf16), which unwritten slots keep.
    pub fn initial(output_len: usize, state: &HostTensor, conv_state: &HostTensor) -> Self {
        Self {
            output: vec![bf16::ZERO; output_len],
            output_f32: vec![0.0; output_len],
            state: state
                .to_contiguous()
                .values()
                .iter()
                .map(|&v| v as f32) // exact: the values are f32
                .collect(),
            conv_state: conv_state
                .to_contiguous()
                .values()
                .iter()
                .map(|&v| bf16::from_f64(v)) // exact: the values are bf16
                .collect(),
        }
    }

    /// Writes the results into a launch's `output`, `state` and `conv_state`
    /// as the kernel would (row-major copies of the same shapes), so the next
    /// step of a chain can run on them. Panics if a result does not have its
    /// tensor's element count (results of another launch).
    pub fn write_back(
        &self,
        output: &mut HostTensor,
        state: &mut HostTensor,
        conv_state: &mut HostTensor,
    ) {
        let replace = |t: &mut HostTensor, data: HostData| {
            *t = HostTensor::new(data, t.shape().to_vec())
                .expect("expected results have the argument's shape");
        };
        replace(output, HostData::Bf16(self.output.clone()));
        replace(state, HostData::F32(self.state.clone()));
        replace(conv_state, HostData::Bf16(self.conv_state.clone()));
    }

    /// [`Expected::write_back`] into the written tensors of `args`.
    pub fn apply<A: KernelArgs>(&self, args: &mut A) {
        let [output, state, conv_state] = args.written_mut();
        self.write_back(output, state, conv_state);
    }
}

/// How request `b` uses the slot table (KdaSplit spec §2).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Request {
    /// The read slot is `<= 0`: zero outputs, no writes.
    Padding,
    /// A request that reads a state and writes results.
    Active {
        /// `accepted - 1` (T > 1), else 0: where the conv taps start.
        offset: usize,
        /// State slot read before any write.
        read: usize,
        /// Conv-state slot, read then rewritten in place.
        conv: usize,
        /// Per token, the state slot it stores to (`None` for a hole).
        writes: Vec<Option<usize>>,
    },
}

/// KdaSplit spec §2 from the slot table alone, for any kernel with its cache
/// semantics: `slots` is I32 `[B]` (T = 1) or `[B, >= T]` (T > 1), and
/// `accepted` is I32 `[B]` with values in `1..=T` when T > 1 (ignored when
/// T = 1). Panics on other layouts; validate first (see
/// [`crate::validate::check_slot_table`]).
///
/// ```
/// use kda_host::{HostTensor, Request, resolve_slots};
///
/// // Two requests of T = 2: request 0 accepted both tokens, request 1 is
/// // padding (its read slot, column 0, is -1).
/// let slots = HostTensor::new(vec![3i32, 4, -1, 7], vec![2, 2])?;
/// let accepted = HostTensor::new(vec![2i32, 1], vec![2])?;
/// let request = resolve_slots(2, &slots, Some(&accepted), 0);
/// assert_eq!(
///     request,
///     Request::Active { offset: 1, read: 4, conv: 3, writes: vec![Some(3), Some(4)] }
/// );
/// assert_eq!(resolve_slots(2, &slots, Some(&accepted), 1), Request::Padding);
/// # Ok::<(), kda_host::TensorError>(())
/// ```
pub fn resolve_slots(
    tokens: u32,
    slots: &HostTensor,
    accepted: Option<&HostTensor>,
    b: usize,
) -> Request {
    let t = tokens as usize;
    let slot = |column: usize| {
        let index: &[usize] = if t == 1 { &[b] } else { &[b, column] };
        slots.get_i32(index).expect("slots is I32")
    };
    let offset = match accepted {
        Some(accepted) if t > 1 => accepted.get_i32(&[b]).expect("accepted is I32") as usize - 1,
        _ => 0,
    };
    let read = slot(offset);
    if read <= 0 {
        return Request::Padding;
    }
    Request::Active {
        offset,
        read: read as usize,
        conv: slot(0) as usize,
        writes: (0..t)
            .map(|column| usize::try_from(slot(column)).ok().filter(|&s| s > 0))
            .collect(),
    }
}

/// `1 / (1 + e^-z)`.
pub fn sigmoid(z: f64) -> f64 {
    1.0 / (1.0 + (-z).exp())
}

/// `z · σ(z)`.
pub fn silu(z: f64) -> f64 {
    z * sigmoid(z)
}

/// `ln(1 + e^z)`, exact (no threshold: kernels that return `z` above 20
/// differ by less than `ln(1 + e^-20) ≈ 2.1e-9`).
pub fn softplus(z: f64) -> f64 {
    z.max(0.0) + (-z.abs()).exp().ln_1p()
}
