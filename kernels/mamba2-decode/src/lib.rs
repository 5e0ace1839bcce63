//! # Mamba2Decode — the Mamba-2 decode step
//!
//! One fused decode step of the Mamba-2 mixer: the causal conv update of
//! `xBC` (4 taps + SiLU) followed by the selective state update
//! (`dt = softplus(dt + dt_bias)`, `dA = exp(dt·A)`,
//! `state = state·dA + dt·B ⊗ x`, `y = state·C + D·x`, optionally `y·silu(z)`),
//! for `B` requests of one token each, with padding slots. This crate is the
//! host side — [`Mamba2Config`], the arguments [`Mamba2Args`], the float64
//! [`reference()`], the seeded [`generate`], the contract checks [`validate()`]
//! and [`compare()`] — and this page is the spec the DSL kernel is written
//! against. Sections 1–5 are normative.
//!
//! ## 0. Notation
//!
//! * `H` = `heads`, `P` = `head_dim` (64), `N` = `d_state` (128), `G` =
//!   `n_groups` (all per tensor-parallel rank); `G` divides `H`.
//! * `d_inner = H·P`; `conv_dim = d_inner + 2·G·N` (vLLM's mamba2 conv dim:
//!   x, B and C all go through the conv).
//! * **Groups.** Head `h` uses B and C of group `grp(h) = h / (H/G)` (integer
//!   division; vLLM's `pid_h // nheads_ngroups_ratio`): heads
//!   `g·H/G .. (g+1)·H/G - 1` share group `g`.
//! * `B` = requests (`slots.shape[0]`), one token each: activation row = `b`.
//! * `S` = cache slots (`state.shape[0]`, `conv_state.shape[0]`; they may
//!   differ). Slot `0` is the null block, slot `< 0` is padding
//!   (`PAD_SLOT_ID = -1`).
//! * `σ(z) = 1/(1+e^-z)`, `silu(z) = z·σ(z)`, `softplus(z) = ln(1+e^z)`;
//!   `bf16(·)` is round-to-nearest-even to bfloat16.
//!
//! ## 1. Arguments (positional, kernel order; [`Arg`])
//!
//! | # | name | logical shape | dtype | accessed as |
//! |---|---|---|---|---|
//! | 0 | `xbc` | `[B, conv_dim]` | bf16 | `xbc[b, ch]`: x of head `h` at `h·P + p`, B of group `g` at `d_inner + g·N + n`, C of group `g` at `d_inner + G·N + g·N + n` (vLLM's `xBC` split order) |
//! | 1 | `conv_weight` | `[conv_dim, 4]` | bf16 or f32 | `conv_weight[ch, i]`, tap `i = 0` oldest input, `i = 3` current (vLLM's `conv1d.weight` viewed `[conv_dim, 4]`) |
//! | 2 | `conv_bias` | `[conv_dim]` | bf16 or f32 | passed **only** if `has_conv_bias` |
//! | 3 | `conv_state` | `[S, conv_dim, ≥3]` | bf16 | `conv_state[slot, ch, j]`, `j = 0` oldest |
//! | 4 | `dt` | `[B, H]` | bf16 | raw time step of head `h` (before bias and softplus) |
//! | 5 | `dt_bias` | `[H]` | f32 | `dt_bias[h]` |
//! | 6 | `a` | `[H]` | f32 | `A[h]` itself, i.e. `-exp(A_log[h])` (negative), as vLLM stores it |
//! | 7 | `d` | `[H]` | f32 | skip `D[h]`; passed **only** if `has_d` |
//! | 8 | `z` | `[B, d_inner]` | bf16 | `z[b, h·P + p]`; passed **only** if `has_z` |
//! | 9 | `slots` | `[B]` | i32 | §2 |
//! | 10 | `state` | `[S, H, P, N]` | f32 | `state[slot, h, p, n]` |
//! | 11 | `output` | `[B, d_inner]` | bf16 | `output[b, h·P + p]`, **fully overwritten** |
//!
//! Layouts: every tensor may be a strided view, except that `state` must be
//! contiguous along `N` with 16-byte aligned rows (f32x4 access). Slot page
//! bases are 64-bit; offsets inside one slot of `state` and `conv_state` must
//! fit in int32. `output`, `state` and `conv_state` must not overlap
//! themselves. vLLM's dim-contiguous and tap-contiguous conv-state layouts
//! are both `[slot, ch, j]` views.
//!
//! ## 2. Slots and padding (per request `b`)
//!
//! `slot = slots[b]` is read, written and used for the conv state alike
//! ([`resolve`]). If `slot <= 0` the request is padding: `output[b, :] = 0`,
//! and **no** state and **no** conv state is read or written. Otherwise all of
//! §3 happens on `state[slot]` and `conv_state[slot]`.
//!
//! ## 3. Math of one active request
//!
//! Stored values are converted to float exactly. The kernel computes in f32,
//! the reference in f64, except at the rounding points of §5.
//!
//! **3.1 Causal conv update (width 4, depthwise) + SiLU**, every channel
//! `ch ∈ [0, conv_dim)`, with `C = conv_state[slot]` read **before** any write:
//!
//! ```text
//! seq[ch] = [C[ch, 0], C[ch, 1], C[ch, 2], xbc[b, ch]]
//! pre[ch] = conv_bias[ch]·[has_conv_bias] + Σ_{i=0..3} conv_weight[ch, i] · seq[ch][i]
//! act[ch] = silu(pre[ch])                                 (f32, NOT rounded to bf16)
//! x[h, p] = act[h·P + p]    B[g, n] = act[d_inner + g·N + n]    C[g, n] = act[d_inner + G·N + g·N + n]
//! ```
//!
//! **3.2 Time step and decay** (per head, scalar):
//!
//! ```text
//! Δ_h  = softplus(dt[b, h] + dt_bias[h])
//! dA_h = exp(Δ_h · a[h])
//! ```
//!
//! **3.3 Selective state update** (`g = grp(h)`, `S = state[slot, h]` read
//! before the write, `p ∈ [0, P)`, `n ∈ [0, N)`):
//!
//! ```text
//! S'[p, n] = S[p, n] · dA_h + (Δ_h · B[g, n]) · x[h, p]
//! state[slot, h, p, n] ← S'[p, n]                          (f32)
//! ```
//!
//! **3.4 Output:**
//!
//! ```text
//! y[p] = Σ_n S'[p, n] · C[g, n]  +  d[h] · x[h, p] · [has_d]
//! y[p] ← y[p] · silu(z[b, h·P + p])                        (only if has_z)
//! output[b, h·P + p] = bf16(y[p])
//! ```
//!
//! **3.5 Conv-state rewrite** (every channel): `conv_state[slot, ch, 0:3] =
//! [C[ch, 1], C[ch, 2], xbc[b, ch]]`; columns `>= 3` are never touched.
//!
//! **3.6 Side effects.** `output`: every element (active rows `bf16(y)`,
//! padding rows 0). `state[slot]` and `conv_state[slot]` (columns 0..2) of
//! active requests. Nothing else is written.
//!
//! ## 4. Caller contract ([`validate()`]; violations are undefined behaviour)
//!
//! 1. [`Mamba2Config`]: `H >= 1`, `G >= 1` divides `H`, `P` a power of two in
//!    16..=128, `N` a power of two in 16..=256.
//! 2. Shapes and dtypes as in §1, `B` from `slots`; `conv_bias`, `d`, `z`
//!    passed exactly with their flags.
//! 3. Active slots lie inside `state` and `conv_state` and are distinct across
//!    requests (padding entries may repeat).
//! 4. The layout rules of §1.
//!
//! ## 5. Precision and rounding points (KdaSplit's conventions)
//!
//! | quantity | kernel precision | rounding |
//! |---|---|---|
//! | xbc, conv taps, conv-state rewrite | bf16 in, bf16 out | copies are exact |
//! | conv accumulation, SiLU, x, B, C | f32 | **none** (vLLM rounds xBC to bf16 here) |
//! | softplus, Δ, exp, dA | f32 (approximate `ex2` allowed) | none |
//! | state update, `Σ S'·C`, D·x, silu(z) | f32 | state stored as f32 |
//! | output | f32 → **bf16** | RNE |
//!
//! Expected agreement with the f64 reference (enforced by [`compare()`], same
//! limits as KdaSplit): output relative Frobenius error well under 1e-2,
//! written state pages ~1e-6 relative (limit 1e-4), conv state and untouched
//! state slots bit-exact, padding rows exactly zero.
//!
//! ## 6. Decisions and differences from public code
//!
//! * **Padding.** vLLM's `selective_state_update` skips only `pad_slot_id`
//!   (−1), loads a zero state for it and still stores an output; here
//!   `slot <= 0` (null block 0 or −1) is padding and its output row is zero,
//!   like KdaSplit.
//! * **Roundings.** vLLM's `causal_conv1d_update` returns xBC in the
//!   activation dtype (bf16) before the SSM; this kernel keeps x, B, C in f32.
//! * **Softplus.** vLLM's kernels return `x` for `x > 20`; the reference is
//!   exact, and the two differ by less than `ln(1 + e^-20) ≈ 2.1e-9`.
//! * **Per-head parameters.** `dt`, `dt_bias`, `A` and `D` are per head (vLLM
//!   expands them over `head_dim` with stride 0, its `TIE_HDIM` path); `a` is
//!   `A = -exp(A_log)`, as vLLM's weight loader stores it.
//! * **z.** vLLM's Mamba-2 mixer passes `z = None` and gates inside its
//!   `Mixer2RMSNormGated`; `has_z` is the selective-state-update's own gate
//!   `out · silu(z)` (as in `mamba_ssm`), for callers that fuse it here.
//! * **No dt clamp** (Mamba-2's default `dt_limit = (0, ∞)`).
//! * **State layout** `[slot, H, P, N]`, `N`-contiguous: vLLM's
//!   `ssm_state` `(H, head_dim, d_state)`.

pub mod args;
pub mod compare;
pub mod config;
pub mod generator;
pub mod kernel;
pub mod object;
pub mod reference;
pub mod run;
pub mod validate;

pub use args::{Arg, Mamba2Args};
pub use compare::{compare, footprint};
pub use config::{ConfigError, Mamba2Config};
pub use generator::{DtBias, GenOptions, generate};
pub use kda_host::{Actual, ConvLayout, Expected, Report};
pub use object::{Mamba2Kernel, Mamba2Launch};
pub use reference::{reference, resolve};
pub use validate::{ArgError, validate, validate_layout};
