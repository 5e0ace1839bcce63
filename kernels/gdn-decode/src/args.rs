//! Host-side arguments of a GDN decode launch (crate doc §1). Tensors are
//! [`kda_host::HostTensor`] strided views, so the reference and the checks
//! read through the caller's strides exactly as the kernel will.

use std::fmt;

use kda_host::args::named_in_order;
use kda_host::{DType, Expected, HostTensor, KernelArgs};

use crate::config::GdnConfig;

/// The kernel's positional arguments, in kernel order (crate doc §1).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Arg {
    X,
    ConvWeight,
    ConvBias,
    ConvState,
    A,
    Beta,
    ALog,
    DtBias,
    Slots,
    State,
    Output,
    Z,
    NormWeight,
    Scale,
    Eps,
    Accepted,
}

impl Arg {
    /// Every argument in kernel order; `conv_bias` is passed only with
    /// `has_bias`, `accepted` only for T > 1 (see [`Arg::for_config`]).
    pub const ALL: [Arg; 16] = [
        Arg::X,
        Arg::ConvWeight,
        Arg::ConvBias,
        Arg::ConvState,
        Arg::A,
        Arg::Beta,
        Arg::ALog,
        Arg::DtBias,
        Arg::Slots,
        Arg::State,
        Arg::Output,
        Arg::Z,
        Arg::NormWeight,
        Arg::Scale,
        Arg::Eps,
        Arg::Accepted,
    ];

    /// The arguments a launch with `config` passes, in kernel order.
    pub fn for_config(config: &GdnConfig) -> Vec<Arg> {
        Self::ALL
            .into_iter()
            .filter(|&a| match a {
                Arg::ConvBias => config.has_bias,
                Arg::Accepted => config.tokens > 1,
                _ => true,
            })
            .collect()
    }

    /// The argument's name (kernel parameter name and case-file key).
    pub fn name(self) -> &'static str {
        match self {
            Arg::X => "x",
            Arg::ConvWeight => "conv_weight",
            Arg::ConvBias => "conv_bias",
            Arg::ConvState => "conv_state",
            Arg::A => "a",
            Arg::Beta => "beta",
            Arg::ALog => "a_log",
            Arg::DtBias => "dt_bias",
            Arg::Slots => "slots",
            Arg::State => "state",
            Arg::Output => "output",
            Arg::Z => "z",
            Arg::NormWeight => "norm_weight",
            Arg::Scale => "scale",
            Arg::Eps => "eps",
            Arg::Accepted => "accepted",
        }
    }

    pub fn from_name(name: &str) -> Option<Arg> {
        Self::ALL.into_iter().find(|a| a.name() == name)
    }

    /// Scalars are passed by value, not as tensors.
    pub fn is_scalar(self) -> bool {
        matches!(self, Arg::Scale | Arg::Eps)
    }

    /// Dtypes the kernel accepts: bf16 activations, caches and output; f32
    /// state, per-head parameters and scalars; i32 slot tables; bf16 or f32
    /// for the weights (every use converts them to f32).
    pub fn dtypes(self) -> &'static [DType] {
        use DType::{Bf16, F32, I32};
        match self {
            Arg::X | Arg::ConvState | Arg::A | Arg::Beta | Arg::Output | Arg::Z => &[Bf16],
            Arg::ConvWeight | Arg::ConvBias | Arg::NormWeight => &[Bf16, F32],
            Arg::ALog | Arg::DtBias | Arg::State | Arg::Scale | Arg::Eps => &[F32],
            Arg::Slots | Arg::Accepted => &[I32],
        }
    }
}

impl fmt::Display for Arg {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The arguments of one launch. `conv_bias` is present exactly when the
/// config has a bias, `accepted` exactly when T > 1.
#[derive(Clone, Debug, PartialEq)]
pub struct GdnArgs {
    /// `[R, conv_dim]` bf16: mixed q | k | v before the conv.
    pub x: HostTensor,
    /// `[conv_dim, 4]` bf16/f32: `conv_weight[ch, i]`, tap 0 oldest.
    pub conv_weight: HostTensor,
    /// `[conv_dim]` bf16/f32, only with `has_bias`.
    pub conv_bias: Option<HostTensor>,
    /// `[S, conv_dim, >= 3 | >= T + 2]` bf16.
    pub conv_state: HostTensor,
    /// `[R, HV]` bf16: decay pre-activation (vLLM's `a`).
    pub a: HostTensor,
    /// `[R, HV]` bf16: β pre-sigmoid (vLLM's `b`).
    pub beta: HostTensor,
    /// `[HV]` f32.
    pub a_log: HostTensor,
    /// `[HV]` f32.
    pub dt_bias: HostTensor,
    /// `[B]` (T = 1) or `[B, >= T]` i32.
    pub slots: HostTensor,
    /// `[S, HV, DV, DK]` f32.
    pub state: HostTensor,
    /// `[R, value_dim]` bf16, fully overwritten.
    pub output: HostTensor,
    /// `[R, value_dim]` bf16: output gate pre-SiLU.
    pub z: HostTensor,
    /// `[DV]` bf16/f32, shared by all heads.
    pub norm_weight: HostTensor,
    pub scale: f32,
    pub eps: f32,
    /// `[B]` i32, T > 1 only.
    pub accepted: Option<HostTensor>,
}

impl GdnArgs {
    /// The tensor passed for `arg`; `None` for scalars and absent optionals.
    pub fn tensor(&self, arg: Arg) -> Option<&HostTensor> {
        Some(match arg {
            Arg::X => &self.x,
            Arg::ConvWeight => &self.conv_weight,
            Arg::ConvBias => return self.conv_bias.as_ref(),
            Arg::ConvState => &self.conv_state,
            Arg::A => &self.a,
            Arg::Beta => &self.beta,
            Arg::ALog => &self.a_log,
            Arg::DtBias => &self.dt_bias,
            Arg::Slots => &self.slots,
            Arg::State => &self.state,
            Arg::Output => &self.output,
            Arg::Z => &self.z,
            Arg::NormWeight => &self.norm_weight,
            Arg::Accepted => return self.accepted.as_ref(),
            Arg::Scale | Arg::Eps => return None,
        })
    }

    /// The scalar passed for `arg`; `None` for tensors.
    pub fn scalar(&self, arg: Arg) -> Option<f32> {
        match arg {
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

    /// Writes `expected` into the arguments as the kernel would (row-major
    /// copies of output, state and conv state), so a chain's next step can run
    /// on them.
    pub fn apply(&mut self, expected: &Expected) {
        expected.write_back(&mut self.output, &mut self.state, &mut self.conv_state);
    }
}

impl KernelArgs for GdnArgs {
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
    fn names_round_trip_in_kernel_order() {
        for arg in Arg::ALL {
            assert_eq!(Arg::from_name(arg.name()), Some(arg));
        }
        let c = GdnConfig::new(1, 2, 1, false).unwrap();
        let passed = Arg::for_config(&c);
        assert_eq!(passed.len(), 14);
        assert!(!passed.contains(&Arg::ConvBias) && !passed.contains(&Arg::Accepted));
        let c = GdnConfig::new(1, 2, 3, true).unwrap();
        assert_eq!(Arg::for_config(&c), Arg::ALL.to_vec());
    }
}
