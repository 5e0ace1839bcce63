//! The 18 positional arguments of spec §1.1, as strided host tensors
//! ([`kda_host::tensor`], re-exported here).
//!
//! Strides are kept because the kernel accepts strided views for most arguments
//! (the conv state in particular may be vLLM's SD or DS layout); the reference
//! and the checks read through them, and case files store the logical
//! (row-major) contents.

use std::fmt;

use kda_host::KernelArgs;
use kda_host::args::named_in_order;
pub use kda_host::tensor::{
    DType, HostData, HostTensor, TensorError, contiguous_strides, dtype_list, element_count,
};

/// The kernel's positional arguments (spec §1.1), in kernel order.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Arg {
    X,
    Weights,
    Bias,
    ConvState,
    RawGate,
    Beta,
    ALog,
    DtBias,
    Slots,
    State,
    Output,
    Gate,
    NormWeight,
    LowerBound,
    Scale,
    Eps,
    FBWeight,
    Accepted,
}

impl Arg {
    /// Every argument in kernel order; `Accepted` (T > 1 only) last.
    pub const ALL: [Arg; 18] = [
        Arg::X,
        Arg::Weights,
        Arg::Bias,
        Arg::ConvState,
        Arg::RawGate,
        Arg::Beta,
        Arg::ALog,
        Arg::DtBias,
        Arg::Slots,
        Arg::State,
        Arg::Output,
        Arg::Gate,
        Arg::NormWeight,
        Arg::LowerBound,
        Arg::Scale,
        Arg::Eps,
        Arg::FBWeight,
        Arg::Accepted,
    ];

    /// The arguments of a launch with `tokens` tokens per request.
    pub fn for_tokens(tokens: u32) -> &'static [Arg] {
        if tokens > 1 {
            &Self::ALL
        } else {
            &Self::ALL[..17]
        }
    }

    /// The name the seed's kernel gives the argument (and the case-file key).
    pub fn name(self) -> &'static str {
        match self {
            Arg::X => "x",
            Arg::Weights => "weights",
            Arg::Bias => "bias",
            Arg::ConvState => "conv_state",
            Arg::RawGate => "raw_gate",
            Arg::Beta => "beta",
            Arg::ALog => "a_log",
            Arg::DtBias => "dt_bias",
            Arg::Slots => "slots",
            Arg::State => "state",
            Arg::Output => "output",
            Arg::Gate => "gate",
            Arg::NormWeight => "norm_weight",
            Arg::LowerBound => "lower_bound",
            Arg::Scale => "scale",
            Arg::Eps => "eps",
            Arg::FBWeight => "f_b_weight",
            Arg::Accepted => "accepted",
        }
    }

    pub fn from_name(name: &str) -> Option<Arg> {
        Self::ALL.into_iter().find(|a| a.name() == name)
    }

    /// Scalars are passed by value, not as tensors.
    pub fn is_scalar(self) -> bool {
        matches!(self, Arg::LowerBound | Arg::Scale | Arg::Eps)
    }

    /// Dtypes the kernel accepts: bf16 where it loads bf16 vectors or stores
    /// bf16, f32 for f32 tensors and scalars, i32 for slot tables, and either
    /// float where every use converts to f32 (spec §8.3).
    pub fn dtypes(self) -> &'static [DType] {
        use DType::{Bf16, F32, I32};
        match self {
            Arg::X | Arg::ConvState | Arg::RawGate | Arg::Output | Arg::FBWeight => &[Bf16],
            Arg::Weights | Arg::Bias | Arg::Beta | Arg::Gate | Arg::NormWeight => &[Bf16, F32],
            Arg::ALog | Arg::DtBias | Arg::State | Arg::LowerBound | Arg::Scale | Arg::Eps => {
                &[F32]
            }
            Arg::Slots | Arg::Accepted => &[I32],
        }
    }
}

impl fmt::Display for Arg {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The arguments of one launch. `accepted` is present exactly when T > 1.
#[derive(Clone, Debug, PartialEq)]
pub struct KdaArgs {
    pub x: HostTensor,
    pub weights: HostTensor,
    pub bias: HostTensor,
    pub conv_state: HostTensor,
    /// f_a: the F_B activation row, not a gate (spec §8.2).
    pub raw_gate: HostTensor,
    pub beta: HostTensor,
    pub a_log: HostTensor,
    pub dt_bias: HostTensor,
    pub slots: HostTensor,
    pub state: HostTensor,
    pub output: HostTensor,
    pub gate: HostTensor,
    pub norm_weight: HostTensor,
    pub lower_bound: f32,
    pub scale: f32,
    pub eps: f32,
    pub f_b_weight: HostTensor,
    pub accepted: Option<HostTensor>,
}

impl KdaArgs {
    /// The tensor passed for `arg`; `None` for scalars and an absent `accepted`.
    pub fn tensor(&self, arg: Arg) -> Option<&HostTensor> {
        Some(match arg {
            Arg::X => &self.x,
            Arg::Weights => &self.weights,
            Arg::Bias => &self.bias,
            Arg::ConvState => &self.conv_state,
            Arg::RawGate => &self.raw_gate,
            Arg::Beta => &self.beta,
            Arg::ALog => &self.a_log,
            Arg::DtBias => &self.dt_bias,
            Arg::Slots => &self.slots,
            Arg::State => &self.state,
            Arg::Output => &self.output,
            Arg::Gate => &self.gate,
            Arg::NormWeight => &self.norm_weight,
            Arg::FBWeight => &self.f_b_weight,
            Arg::Accepted => return self.accepted.as_ref(),
            Arg::LowerBound | Arg::Scale | Arg::Eps => return None,
        })
    }

    /// The scalar passed for `arg`; `None` for tensors.
    pub fn scalar(&self, arg: Arg) -> Option<f32> {
        match arg {
            Arg::LowerBound => Some(self.lower_bound),
            Arg::Scale => Some(self.scale),
            Arg::Eps => Some(self.eps),
            _ => None,
        }
    }

    /// Number of requests B (rows of `slots`).
    pub fn requests(&self) -> usize {
        self.slots.shape().first().copied().unwrap_or(0)
    }

    /// Number of activation rows R = B * T (rows of `x`).
    pub fn rows(&self) -> usize {
        self.x.shape().first().copied().unwrap_or(0)
    }
}

impl KernelArgs for KdaArgs {
    /// Under the kernel's parameter names (the spec's: the multi-token
    /// slot table's form is `slots` too, by `#[name]`).
    fn named_tensors(&self) -> Vec<(&'static str, &HostTensor)> {
        named_in_order(&Arg::ALL, |a| self.tensor(a), Arg::name)
    }

    fn written_mut(&mut self) -> [&mut HostTensor; 3] {
        [&mut self.output, &mut self.state, &mut self.conv_state]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arg_names_round_trip_in_kernel_order() {
        for (i, arg) in Arg::ALL.into_iter().enumerate() {
            assert_eq!(Arg::from_name(arg.name()), Some(arg));
            assert_eq!(Arg::ALL[i], arg);
        }
        assert_eq!(Arg::for_tokens(1).len(), 17);
        assert_eq!(Arg::for_tokens(2).last(), Some(&Arg::Accepted));
    }
}
