//! [`Mamba2Config`]: the comptime shape of a Mamba-2 decode launch (crate doc
//! §0) and what it derives. Every rejection is a typed [`ConfigError`];
//! nothing here panics.

use thiserror::Error;

/// Head dimension P of the Mamba-2 models the kernel targets (Mamba-2,
/// Codestral Mamba, Nemotron-H).
pub const DEFAULT_HEAD_DIM: u32 = 64;

/// State size N of those models.
pub const DEFAULT_D_STATE: u32 = 128;

/// Allowed head dimensions: powers of two in this range.
pub const HEAD_DIM_RANGE: (u32, u32) = (16, 128);

/// Allowed state sizes: powers of two in this range.
pub const D_STATE_RANGE: (u32, u32) = (16, 256);

/// Why a configuration is rejected.
#[derive(Clone, Debug, Error, PartialEq, Eq)]
pub enum ConfigError {
    #[error("heads must be at least 1")]
    NoHeads,
    #[error("n_groups must be at least 1")]
    NoGroups,
    #[error(
        "n_groups must divide heads (each group's B and C serve heads / n_groups heads); got heads = {heads}, n_groups = {n_groups}"
    )]
    GroupsDivide { heads: u32, n_groups: u32 },
    #[error("head_dim must be a power of two in 16..=128 (the models use 64); got {head_dim}")]
    HeadDim { head_dim: u32 },
    #[error("d_state must be a power of two in 16..=256 (the models use 128); got {d_state}")]
    DState { d_state: u32 },
}

/// A validated Mamba-2 decode configuration. Build with
/// [`Mamba2Config::new`] (model defaults) or fill the fields, starting from
/// [`Mamba2Config::default`], and call [`Mamba2Config::validated`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Mamba2Config {
    /// H: SSM heads of this launch (per tensor-parallel rank).
    pub heads: u32,
    /// P: head dimension (default 64).
    pub head_dim: u32,
    /// N: state size per head row (default 128).
    pub d_state: u32,
    /// G: B/C groups of this launch; divides H.
    pub n_groups: u32,
    /// `z` is passed and the output is gated by `silu(z)`.
    pub has_z: bool,
    /// `d` is passed and the skip term `D · x` is added.
    pub has_d: bool,
    /// `conv_bias` is passed (Mamba-2's `use_conv_bias`, on by default).
    pub has_conv_bias: bool,
}

impl Default for Mamba2Config {
    /// One head, one group, the model defaults, every option on.
    fn default() -> Self {
        Self {
            heads: 1,
            head_dim: DEFAULT_HEAD_DIM,
            d_state: DEFAULT_D_STATE,
            n_groups: 1,
            has_z: true,
            has_d: true,
            has_conv_bias: true,
        }
    }
}

impl Mamba2Config {
    /// `heads` heads in `n_groups` groups with P = 64, N = 128, z, D and the
    /// conv bias on.
    pub fn new(heads: u32, n_groups: u32) -> Result<Self, ConfigError> {
        Self {
            heads,
            n_groups,
            ..Self::default()
        }
        .validated()
    }

    /// Checks, in order: heads, groups, grouping, head_dim, d_state.
    pub fn validated(self) -> Result<Self, ConfigError> {
        if self.heads == 0 {
            return Err(ConfigError::NoHeads);
        }
        if self.n_groups == 0 {
            return Err(ConfigError::NoGroups);
        }
        if !self.heads.is_multiple_of(self.n_groups) {
            return Err(ConfigError::GroupsDivide {
                heads: self.heads,
                n_groups: self.n_groups,
            });
        }
        let allowed =
            |v: u32, (low, high): (u32, u32)| v.is_power_of_two() && (low..=high).contains(&v);
        if !allowed(self.head_dim, HEAD_DIM_RANGE) {
            return Err(ConfigError::HeadDim {
                head_dim: self.head_dim,
            });
        }
        if !allowed(self.d_state, D_STATE_RANGE) {
            return Err(ConfigError::DState {
                d_state: self.d_state,
            });
        }
        Ok(self)
    }

    /// H as a size.
    pub fn h(&self) -> usize {
        self.heads as usize
    }

    /// P as a size.
    pub fn p(&self) -> usize {
        self.head_dim as usize
    }

    /// N as a size.
    pub fn n(&self) -> usize {
        self.d_state as usize
    }

    /// G as a size.
    pub fn g(&self) -> usize {
        self.n_groups as usize
    }

    /// `d_inner = H * P`: width of x, z and the output.
    pub fn d_inner(&self) -> usize {
        self.h() * self.p()
    }

    /// `conv_dim = d_inner + 2 * G * N`: channels of `xbc` and the conv
    /// (vLLM's mamba2 `conv_dim`: x, B and C all go through the conv).
    pub fn conv_dim(&self) -> usize {
        self.d_inner() + 2 * self.g() * self.n()
    }

    /// Heads per group, `H / G`.
    pub fn heads_per_group(&self) -> usize {
        self.h() / self.g()
    }

    /// The group whose B and C head `h` uses: `h / (H / G)` (vLLM's
    /// `pid_h // nheads_ngroups_ratio`).
    pub fn group(&self, head: usize) -> usize {
        head / self.heads_per_group()
    }

    /// Channel of x element `p` of head `h`.
    pub fn x_channel(&self, head: usize, p: usize) -> usize {
        head * self.p() + p
    }

    /// Channel of B element `n` of group `g`.
    pub fn b_channel(&self, group: usize, n: usize) -> usize {
        self.d_inner() + group * self.n() + n
    }

    /// Channel of C element `n` of group `g`.
    pub fn c_channel(&self, group: usize, n: usize) -> usize {
        self.d_inner() + (self.g() + group) * self.n() + n
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn derived_shapes() {
        // Mamba-2 2.7B: 80 heads of 64, one group, N = 128.
        let c = Mamba2Config::new(80, 1).unwrap();
        assert_eq!((c.d_inner(), c.conv_dim()), (5120, 5120 + 256));
        assert_eq!((c.b_channel(0, 0), c.c_channel(0, 127)), (5120, 5375));
        // Nemotron-H style: 8 groups; heads 0..9 use group 0, 10..19 group 1.
        let c = Mamba2Config::new(80, 8).unwrap();
        assert_eq!(c.heads_per_group(), 10);
        assert_eq!(
            (c.group(0), c.group(9), c.group(10), c.group(79)),
            (0, 0, 1, 7)
        );
        assert_eq!(c.c_channel(7, 127), c.conv_dim() - 1);
        assert_eq!(c.x_channel(79, 63), c.d_inner() - 1);
        assert!(c.has_z && c.has_d && c.has_conv_bias);
    }

    #[test]
    fn heads_and_groups() {
        assert_eq!(Mamba2Config::new(0, 1), Err(ConfigError::NoHeads));
        assert_eq!(Mamba2Config::new(4, 0), Err(ConfigError::NoGroups));
        let err = Mamba2Config::new(6, 4).unwrap_err();
        assert_eq!(
            err,
            ConfigError::GroupsDivide {
                heads: 6,
                n_groups: 4
            }
        );
        assert_eq!(
            err.to_string(),
            "n_groups must divide heads (each group's B and C serve heads / n_groups heads); got heads = 6, n_groups = 4"
        );
        Mamba2Config::new(6, 3).unwrap();
    }

    #[test]
    fn head_dim_and_d_state_are_powers_of_two_in_range() {
        for head_dim in [0, 8, 48, 256] {
            let c = Mamba2Config {
                head_dim,
                ..Mamba2Config::default()
            };
            assert_eq!(c.validated(), Err(ConfigError::HeadDim { head_dim }));
        }
        for d_state in [0, 8, 96, 512] {
            let c = Mamba2Config {
                d_state,
                ..Mamba2Config::default()
            };
            assert_eq!(c.validated(), Err(ConfigError::DState { d_state }));
        }
        let c = Mamba2Config {
            head_dim: 16,
            d_state: 256,
            ..Mamba2Config::default()
        };
        assert_eq!(c.validated(), Ok(c));
    }
}
