//! [`GdnConfig`]: the comptime shape of a GDN decode launch (crate doc §0) and
//! what it derives. Every rejection is a typed [`ConfigError`]; nothing here
//! panics.

use thiserror::Error;

/// Key head dimension DK (q and k rows, state columns). Hard-wired.
pub const HEAD_K_DIM: u32 = 128;

/// Value head dimension DV (v rows, state rows, output and norm width).
/// Hard-wired.
pub const HEAD_V_DIM: u32 = 128;

/// Most tokens per request (speculative verify with up to three draft tokens).
pub const MAX_TOKENS: u32 = 4;

/// Which head dimension a [`ConfigError::HeadDim`] is about.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum HeadKind {
    Key,
    Value,
}

impl std::fmt::Display for HeadKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::Key => "key",
            Self::Value => "value",
        })
    }
}

/// Why a configuration is rejected.
#[derive(Clone, Debug, Error, PartialEq, Eq)]
pub enum ConfigError {
    #[error("tokens must be in 1..={MAX_TOKENS} (one to four tokens per request); got {tokens}")]
    Tokens { tokens: u32 },
    #[error(
        "num_k_heads and num_v_heads must be at least 1; got num_k_heads = {num_k_heads}, num_v_heads = {num_v_heads}"
    )]
    NoHeads { num_k_heads: u32, num_v_heads: u32 },
    #[error(
        "num_v_heads must be a multiple of num_k_heads (each k-head serves num_v_heads / num_k_heads v-heads); got num_k_heads = {num_k_heads}, num_v_heads = {num_v_heads}"
    )]
    VHeadsNotMultiple { num_k_heads: u32, num_v_heads: u32 },
    #[error("the {kind} head dimension must be 128; got {dim}")]
    HeadDim { kind: HeadKind, dim: u32 },
}

/// A validated GDN decode configuration. Build with [`GdnConfig::new`] (head
/// dims 128) or fill the fields and call [`GdnConfig::validated`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct GdnConfig {
    /// HK: key heads of this launch (per tensor-parallel rank).
    pub num_k_heads: u32,
    /// HV: value heads of this launch; a multiple of HK.
    pub num_v_heads: u32,
    /// DK; must be 128.
    pub head_k_dim: u32,
    /// DV; must be 128.
    pub head_v_dim: u32,
    /// Tokens per request T, 1..=4.
    pub tokens: u32,
    /// The causal conv has a bias (`conv_bias` is passed).
    pub has_bias: bool,
}

impl GdnConfig {
    /// A configuration with the hard-wired head dims DK = DV = 128.
    pub fn new(
        num_k_heads: u32,
        num_v_heads: u32,
        tokens: u32,
        has_bias: bool,
    ) -> Result<Self, ConfigError> {
        Self {
            num_k_heads,
            num_v_heads,
            head_k_dim: HEAD_K_DIM,
            head_v_dim: HEAD_V_DIM,
            tokens,
            has_bias,
        }
        .validated()
    }

    /// Checks, in order: tokens, head counts, head grouping, head dims.
    pub fn validated(self) -> Result<Self, ConfigError> {
        if !(1..=MAX_TOKENS).contains(&self.tokens) {
            return Err(ConfigError::Tokens {
                tokens: self.tokens,
            });
        }
        let (num_k_heads, num_v_heads) = (self.num_k_heads, self.num_v_heads);
        if num_k_heads == 0 || num_v_heads == 0 {
            return Err(ConfigError::NoHeads {
                num_k_heads,
                num_v_heads,
            });
        }
        if !num_v_heads.is_multiple_of(num_k_heads) {
            return Err(ConfigError::VHeadsNotMultiple {
                num_k_heads,
                num_v_heads,
            });
        }
        for (kind, dim, want) in [
            (HeadKind::Key, self.head_k_dim, HEAD_K_DIM),
            (HeadKind::Value, self.head_v_dim, HEAD_V_DIM),
        ] {
            if dim != want {
                return Err(ConfigError::HeadDim { kind, dim });
            }
        }
        Ok(self)
    }

    /// DK as a size.
    pub fn dk(&self) -> usize {
        self.head_k_dim as usize
    }

    /// DV as a size.
    pub fn dv(&self) -> usize {
        self.head_v_dim as usize
    }

    /// HK as a size.
    pub fn hk(&self) -> usize {
        self.num_k_heads as usize
    }

    /// HV as a size.
    pub fn hv(&self) -> usize {
        self.num_v_heads as usize
    }

    /// G = HV / HK: v-heads per k-head.
    pub fn group(&self) -> usize {
        self.hv() / self.hk()
    }

    /// The k-head whose q and k v-head `h` uses: `h / G` (fla's
    /// `i_h // (HV // H)`; v-heads `j*G .. j*G + G - 1` share k-head `j`).
    pub fn k_head(&self, v_head: usize) -> usize {
        v_head / self.group()
    }

    /// `key_dim = HK * DK`: width of the q section and of the k section.
    pub fn key_dim(&self) -> usize {
        self.hk() * self.dk()
    }

    /// `value_dim = HV * DV`: width of the v section, the output and `z`.
    pub fn value_dim(&self) -> usize {
        self.hv() * self.dv()
    }

    /// `conv_dim = 2 * key_dim + value_dim`: channels of `x` and the conv.
    pub fn conv_dim(&self) -> usize {
        2 * self.key_dim() + self.value_dim()
    }

    /// Channel of q element `c` of k-head `j`.
    pub fn q_channel(&self, k_head: usize, c: usize) -> usize {
        k_head * self.dk() + c
    }

    /// Channel of k element `c` of k-head `j`.
    pub fn k_channel(&self, k_head: usize, c: usize) -> usize {
        self.key_dim() + k_head * self.dk() + c
    }

    /// Channel of v element `v` of v-head `h`.
    pub fn v_channel(&self, v_head: usize, v: usize) -> usize {
        2 * self.key_dim() + v_head * self.dv() + v
    }

    /// Conv-state columns the launch uses: 3 (T = 1) or T + 2 (T > 1).
    pub fn conv_width(&self) -> usize {
        match self.tokens {
            1 => 3,
            t => t as usize + 2,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn derived_shapes_follow_the_head_counts() {
        // Qwen3-Next at TP 2: 8 k-heads, 16 v-heads.
        let c = GdnConfig::new(8, 16, 1, false).unwrap();
        assert_eq!((c.group(), c.key_dim(), c.value_dim()), (2, 1024, 2048));
        assert_eq!(c.conv_dim(), 4096);
        assert_eq!(
            (c.k_head(0), c.k_head(1), c.k_head(2), c.k_head(15)),
            (0, 0, 1, 7)
        );
        assert_eq!(c.q_channel(7, 127), 1023);
        assert_eq!(c.k_channel(0, 0), 1024);
        assert_eq!(c.v_channel(15, 127), 4095);
        assert_eq!(c.conv_width(), 3);
        assert_eq!(GdnConfig::new(8, 16, 4, true).unwrap().conv_width(), 6);
    }

    #[test]
    fn tokens_must_be_1_to_4() {
        for tokens in [0, 5] {
            assert_eq!(
                GdnConfig::new(1, 1, tokens, false),
                Err(ConfigError::Tokens { tokens })
            );
        }
        for tokens in 1..=4 {
            GdnConfig::new(1, 1, tokens, false).unwrap();
        }
    }

    #[test]
    fn heads_must_be_positive_and_grouped() {
        assert_eq!(
            GdnConfig::new(0, 4, 1, false),
            Err(ConfigError::NoHeads {
                num_k_heads: 0,
                num_v_heads: 4
            })
        );
        let err = GdnConfig::new(4, 6, 1, false).unwrap_err();
        assert_eq!(
            err,
            ConfigError::VHeadsNotMultiple {
                num_k_heads: 4,
                num_v_heads: 6
            }
        );
        assert!(
            err.to_string()
                .starts_with("num_v_heads must be a multiple")
        );
        // Fewer v-heads than k-heads is not a grouping either.
        assert!(GdnConfig::new(4, 2, 1, false).is_err());
    }

    #[test]
    fn head_dims_are_hard_wired_to_128() {
        let base = GdnConfig::new(2, 4, 2, true).unwrap();
        let err = GdnConfig {
            head_v_dim: 64,
            ..base
        }
        .validated()
        .unwrap_err();
        assert_eq!(
            err,
            ConfigError::HeadDim {
                kind: HeadKind::Value,
                dim: 64
            }
        );
        assert_eq!(
            err.to_string(),
            "the value head dimension must be 128; got 64"
        );
        assert!(matches!(
            GdnConfig {
                head_k_dim: 256,
                ..base
            }
            .validated(),
            Err(ConfigError::HeadDim {
                kind: HeadKind::Key,
                ..
            })
        ));
    }
}
