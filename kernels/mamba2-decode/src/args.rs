//! Host-side arguments of a Mamba-2 decode launch (crate doc §1). Tensors are
//! [`kda_host::HostTensor`] strided views, so the reference and the checks
//! read through the caller's strides exactly as the kernel will.

use std::fmt;

use kda_host::args::named_in_order;
use kda_host::{DType, Expected, HostTensor, KernelArgs};

use crate::config::Mamba2Config;

/// The kernel's positional arguments, in kernel order (crate doc §1).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Arg {
    Xbc,
    ConvWeight,
    ConvBias,
    ConvState,
    Dt,
    DtBias,
    A,
    D,
    Z,
    Slots,
    State,
    Output,
}

impl Arg {
    /// Every argument in kernel order; `conv_bias`, `d` and `z` are passed
    /// only with their config flags (see [`Arg::for_config`]).
    pub const ALL: [Arg; 12] = [
        Arg::Xbc,
        Arg::ConvWeight,
        Arg::ConvBias,
        Arg::ConvState,
        Arg::Dt,
        Arg::DtBias,
        Arg::A,
        Arg::D,
        Arg::Z,
        Arg::Slots,
        Arg::State,
        Arg::Output,
    ];

    /// The arguments a launch with `config` passes, in kernel order.
    pub fn for_config(config: &Mamba2Config) -> Vec<Arg> {
        Self::ALL
            .into_iter()
            .filter(|&a| match a {
                Arg::ConvBias => config.has_conv_bias,
                Arg::D => config.has_d,
                Arg::Z => config.has_z,
                _ => true,
            })
            .collect()
    }

    /// The argument's name (kernel parameter name and case-file key).
    pub fn name(self) -> &'static str {
        match self {
            Arg::Xbc => "xbc",
            Arg::ConvWeight => "conv_weight",
            Arg::ConvBias => "conv_bias",
            Arg::ConvState => "conv_state",
            Arg::Dt => "dt",
            Arg::DtBias => "dt_bias",
            Arg::A => "a",
            Arg::D => "d",
            Arg::Z => "z",
            Arg::Slots => "slots",
            Arg::State => "state",
            Arg::Output => "output",
        }
    }

    pub fn from_name(name: &str) -> Option<Arg> {
        Self::ALL.into_iter().find(|a| a.name() == name)
    }

    /// Dtypes the kernel accepts: bf16 activations, conv cache and output;
    /// f32 state and per-head parameters; i32 slots; bf16 or f32 conv weights
    /// (every use converts them to f32).
    pub fn dtypes(self) -> &'static [DType] {
        use DType::{Bf16, F32, I32};
        match self {
            Arg::Xbc | Arg::ConvState | Arg::Dt | Arg::Z | Arg::Output => &[Bf16],
            Arg::ConvWeight | Arg::ConvBias => &[Bf16, F32],
            Arg::DtBias | Arg::A | Arg::D | Arg::State => &[F32],
            Arg::Slots => &[I32],
        }
    }

    /// The config flag that passes an optional argument, for messages.
    pub fn flag(self) -> Option<&'static str> {
        match self {
            Arg::ConvBias => Some("has_conv_bias"),
            Arg::D => Some("has_d"),
            Arg::Z => Some("has_z"),
            _ => None,
        }
    }
}

impl fmt::Display for Arg {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The arguments of one launch. `conv_bias`, `d` and `z` are present exactly
/// when their config flags are on.
#[derive(Clone, Debug, PartialEq)]
pub struct Mamba2Args {
    /// `[B, conv_dim]` bf16: x | B | C before the conv.
    pub xbc: HostTensor,
    /// `[conv_dim, 4]` bf16/f32: `conv_weight[ch, i]`, tap 0 oldest.
    pub conv_weight: HostTensor,
    /// `[conv_dim]` bf16/f32, only with `has_conv_bias`.
    pub conv_bias: Option<HostTensor>,
    /// `[S, conv_dim, >= 3]` bf16.
    pub conv_state: HostTensor,
    /// `[B, H]` bf16: raw time step, before bias and softplus.
    pub dt: HostTensor,
    /// `[H]` f32.
    pub dt_bias: HostTensor,
    /// `[H]` f32: A itself (`-exp(A_log)`, negative).
    pub a: HostTensor,
    /// `[H]` f32, only with `has_d`.
    pub d: Option<HostTensor>,
    /// `[B, d_inner]` bf16, only with `has_z`.
    pub z: Option<HostTensor>,
    /// `[B]` i32.
    pub slots: HostTensor,
    /// `[S, H, P, N]` f32.
    pub state: HostTensor,
    /// `[B, d_inner]` bf16, fully overwritten.
    pub output: HostTensor,
}

impl Mamba2Args {
    /// The tensor passed for `arg`; `None` for absent optionals.
    pub fn tensor(&self, arg: Arg) -> Option<&HostTensor> {
        Some(match arg {
            Arg::Xbc => &self.xbc,
            Arg::ConvWeight => &self.conv_weight,
            Arg::ConvBias => return self.conv_bias.as_ref(),
            Arg::ConvState => &self.conv_state,
            Arg::Dt => &self.dt,
            Arg::DtBias => &self.dt_bias,
            Arg::A => &self.a,
            Arg::D => return self.d.as_ref(),
            Arg::Z => return self.z.as_ref(),
            Arg::Slots => &self.slots,
            Arg::State => &self.state,
            Arg::Output => &self.output,
        })
    }

    /// Number of requests B (= rows, one token each).
    pub fn requests(&self) -> usize {
        self.slots.shape().first().copied().unwrap_or(0)
    }

    /// Writes `expected` into the arguments as the kernel would (row-major
    /// copies of output, state and conv state), so a stream's next step can
    /// run on them.
    pub fn apply(&mut self, expected: &Expected) {
        expected.write_back(&mut self.output, &mut self.state, &mut self.conv_state);
    }
}

impl KernelArgs for Mamba2Args {
    /// Under the kernel's parameter names (the spec's), absent optionals left out.
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
    fn names_round_trip_and_options_follow_the_config() {
        for arg in Arg::ALL {
            assert_eq!(Arg::from_name(arg.name()), Some(arg));
        }
        let all = Mamba2Config::new(2, 1).unwrap();
        assert_eq!(Arg::for_config(&all), Arg::ALL.to_vec());
        let bare = Mamba2Config {
            has_z: false,
            has_d: false,
            has_conv_bias: false,
            ..all
        };
        let passed = Arg::for_config(&bare);
        assert_eq!(passed.len(), 9);
        assert!(passed.iter().all(|a| a.flag().is_none()));
    }
}
