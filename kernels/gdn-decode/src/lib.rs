//! # GdnDecode — the gated delta net decode / speculative-verify step
//!
//! One fused step of the gated delta net layer of Qwen3-Next (GDN): causal
//! short convolution + SiLU on q, k and v, L2-normalised q and k, a scalar
//! per-head decay, the delta-rule update of an f32 state, the query readout and
//! a gated RMSNorm, for `B` requests of `T = 1..=4` tokens, with KdaSplit's
//! slot, padding and speculative-verify cache semantics (`shared/spec/KDA.md`
//! §2, §3.6). This crate is the host side — [`GdnConfig`], the arguments
//! [`GdnArgs`], the float64 [`reference()`], the seeded [`generate`], the
//! contract checks [`validate()`] and [`compare()`] — and this page is the spec
//! the DSL kernel is written against. Sections 1–5 are normative.
//!
//! ## 0. Notation
//!
//! * `HK` = `num_k_heads`, `HV` = `num_v_heads` (heads of this launch, i.e. per
//!   tensor-parallel rank); `HV` is a multiple of `HK` and `G = HV / HK`.
//! * `DK = DV = 128`: key and value head dimensions, hard-wired
//!   ([`config::HEAD_K_DIM`], [`config::HEAD_V_DIM`]).
//! * `key_dim = HK·DK`, `value_dim = HV·DV`, `conv_dim = 2·key_dim + value_dim`.
//! * **Grouped heads.** v-head `h` reads q and k of k-head `kh(h) = h / G`
//!   (integer division): v-heads `j·G .. j·G+G-1` share k-head `j`. This is
//!   fla's `i_h // (HV // H)` and Qwen3-Next's `repeat_interleave` of q, k.
//! * `T` = `tokens` (1..=4), `B` = requests (`slots.shape[0]`), `R = B·T`
//!   activation rows; request `b` owns rows `b·T + t`, `t = 0..T-1`.
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
//! | 0 | `x` | `[R, conv_dim]` | bf16 | `x[row, ch]`: channels `q = [0, key_dim)`, `k = [key_dim, 2·key_dim)`, `v = [2·key_dim, conv_dim)`; q of k-head `j` at `j·DK + c`, k at `key_dim + j·DK + c`, v of v-head `h` at `2·key_dim + h·DV + v` (vLLM's `mixed_qkv`) |
//! | 1 | `conv_weight` | `[conv_dim, 4]` | bf16 or f32 | `conv_weight[ch, i]`, tap `i = 0` oldest input, `i = 3` current (vLLM's `conv1d.weight` viewed `[conv_dim, 4]`) |
//! | 2 | `conv_bias` | `[conv_dim]` | bf16 or f32 | passed **only** if `has_bias` |
//! | 3 | `conv_state` | `[S, conv_dim, ≥3]` (T=1), `[S, conv_dim, ≥T+2]` (T>1) | bf16 | `conv_state[slot, ch, j]` |
//! | 4 | `a` | `[R, HV]` | bf16 | decay pre-activation (vLLM's `a`) |
//! | 5 | `beta` | `[R, HV]` | bf16 | β pre-sigmoid (vLLM's `b`) |
//! | 6 | `a_log` | `[HV]` | f32 | `a_log[h]` |
//! | 7 | `dt_bias` | `[HV]` | f32 | `dt_bias[h]` |
//! | 8 | `slots` | `[B]` (T=1), `[B, ≥T]` (T>1) | i32 | §2 |
//! | 9 | `state` | `[S, HV, DV (value), DK (key)]` | f32 | `state[slot, h, v, k]` |
//! | 10 | `output` | `[R, value_dim]` | bf16 | `output[row, h·DV + v]`, **fully overwritten** |
//! | 11 | `z` | `[R, value_dim]` | bf16 | `z[row, h·DV + v]`, output gate pre-SiLU |
//! | 12 | `norm_weight` | `[DV]` | bf16 or f32 | `norm_weight[v]`, shared by all heads |
//! | 13 | `scale` | scalar | f32 | query scale, normally `DK^-0.5` |
//! | 14 | `eps` | scalar | f32 | RMSNorm epsilon only (Qwen3-Next: 1e-6) |
//! | 15 | `accepted` | `[B]` | i32 | passed **only** if T > 1: accepted tokens of the previous verify step |
//!
//! Layouts: every tensor may be a strided view, except that `state` must be
//! key-contiguous (`k` stride 1) with 16-byte aligned rows (f32x4 access).
//! Slot page bases are 64-bit; offsets inside one slot of `state` and
//! `conv_state` must fit in int32. `output`, `state` and `conv_state` must not
//! overlap themselves. vLLM's dim-contiguous (SD) and tap-contiguous (DS)
//! conv-state layouts are both `[slot, ch, j]` views.
//!
//! ## 2. Slot resolution and padding (per request `b`) — exactly KdaSplit §2
//!
//! | | T = 1 | T > 1 (speculative verify) |
//! |---|---|---|
//! | offset `o` | 0 | `accepted[b] - 1` |
//! | read slot `r` | `slots[b]` | `slots[b, o]` |
//! | conv slot `c` | `slots[b]` | `slots[b, 0]` |
//! | write slot of token t | `slots[b]` | `slots[b, t]`, **only if > 0** |
//!
//! **Padding.** If `r <= 0` the request is padding: `output[b·T + t, :] = 0`
//! for every t and every head, and **no** state and **no** conv state is
//! written. For T > 1 the criterion is the *read* slot `slots[b, accepted-1]`.
//!
//! **Active request** (`r > 0`): all of §3 happens. A token whose write slot
//! is `<= 0` (a *write hole*) still produces its output; its state is simply
//! not stored. The resolution is KdaSplit's code
//! ([`kda_host::resolve_slots`], returned by [`resolve`]).
//!
//! T = 1 is the T > 1 semantics with one token and `accepted = 1`; only the
//! argument form differs (1-D `slots`, no `accepted`, conv columns 0..2).
//!
//! ## 3. Math of one active request
//!
//! Stored values are converted to float exactly. The kernel computes in f32,
//! the reference in f64, except at the rounding points of §5.
//!
//! **3.1 Short convolution (width 4, depthwise, causal).** For every channel
//! `ch` of `[0, conv_dim)`, with `C = conv_state[c]` read **before** any write:
//!
//! ```text
//! seq[ch]   = [C[ch, o], C[ch, o+1], C[ch, o+2], x[b·T+0, ch], ..., x[b·T+T-1, ch]]   (length T+3)
//! pre_t[ch] = conv_bias[ch]·[has_bias] + Σ_{i=0..3} conv_weight[ch, i] · seq[ch][t + i]
//! act_t[ch] = silu(pre_t[ch])                            (f32, NOT rounded to bf16)
//! ```
//!
//! **3.2 Per v-head `h` and token `t`** (`j = kh(h)`, `c, k ∈ [0, DK)`,
//! `v ∈ [0, DV)`, `row = b·T + t`):
//!
//! ```text
//! q_t[c] = act_t[j·DK + c]          k_t[c] = act_t[key_dim + j·DK + c]
//! v_t[v] = act_t[2·key_dim + h·DV + v]
//! q̂_t = q_t · scale / sqrt(Σ_c q_t[c]² + 1e-6)          (1e-6 hard-wired, not `eps`)
//! k̂_t = k_t / sqrt(Σ_c k_t[c]² + 1e-6)
//! g_t = -exp(a_log[h]) · softplus(a[row, h] + dt_bias[h])
//! decay_t = exp(g_t)                                      (one scalar per head and token)
//! β_t = σ(beta[row, h])
//! ```
//!
//! **3.3 Gated delta rule** (`S[v, k] = state[·, h, v, k]`, f32). Let `S` be
//! `state[r, h]`, read once before any write. For `t = 0..T-1`, in order:
//!
//! ```text
//! S      ← decay_t · S
//! u[v]   = Σ_k S[v, k] · k̂_t[k]
//! δ[v]   = (v_t[v] − u[v]) · β_t
//! S      ← S + δ[:, None] · k̂_t[None, :]
//! o_t[v] = Σ_k S[v, k] · q̂_t[k]
//! if write_slot(t) > 0:  state[write_slot(t), h] ← S
//! ```
//!
//! **3.4 Output (gated RMSNorm over the DV values of the head).**
//!
//! ```text
//! rstd   = 1 / sqrt((1/DV) Σ_v o_t[v]² + eps)
//! y_t[v] = ((o_t[v] · rstd) · norm_weight[v]) · silu(z[row, h·DV + v])
//! output[row, h·DV + v] = bf16(y_t[v])
//! ```
//!
//! `o_t` is **not** rounded before the norm.
//!
//! **3.5 Conv-state rewrite** (once per active request, every channel):
//!
//! ```text
//! T = 1 :  conv_state[c, ch, 0:3]   = [C[ch, 1], C[ch, 2], x_0]
//! T > 1 :  conv_state[c, ch, 0:T+2] = [C[ch, o+1], C[ch, o+2], x_0, ..., x_{T-1}]
//! ```
//!
//! Columns `>= 3` (T = 1) or `>= T+2` (T > 1) are never touched. After a
//! verify step, index `j` holds the input at position `j - 2` relative to
//! `x_0`, so a next step that accepts `a'` tokens reads the three inputs ending
//! at `x_{a'-1}` at indices `a'-1, a', a'+1`: two chained verify steps equal
//! one T = 1 token stream.
//!
//! **3.6 Side effects.** `output`: every element (active rows `bf16(y)`,
//! padding rows 0). `state`: `state[write slot, h]` for active requests and
//! positive write slots only. `conv_state`: `conv_state[c]`, columns `0..T+1`
//! (T = 1: `0..2`), active requests only. Nothing else is written.
//!
//! ## 4. Caller contract ([`validate()`]; violations are undefined behaviour)
//!
//! 1. `1 <= T <= 4` ([`GdnConfig`]), `HV` a positive multiple of `HK`, head
//!    dims 128; `x.shape[0] == B·T`; shapes and dtypes as in §1; `conv_bias`
//!    passed exactly when `has_bias`, `accepted` exactly when T > 1.
//! 2. T > 1: `1 <= accepted[b] <= T` for **every** request, padding included
//!    (the kernel indexes `slots[b, accepted-1]` before the padding test).
//! 3. Active requests own distinct slots: the sets {read slot, conv slot,
//!    positive write slots} of different active requests are disjoint; within
//!    a request positive write slots are distinct (the read slot may equal the
//!    write slot of token `accepted-1`, and the conv slot is read and rewritten
//!    in place).
//! 4. T > 1, active request: `slots[b, 0] > 0` (the conv slot).
//! 5. Slots of active requests lie inside `state` (read and write slots) and
//!    `conv_state` (conv slot). Conv width `>= 3` / `>= T+2`, `slots` columns
//!    `>= T`.
//! 6. `scale` finite, `eps` finite and `>= 0`; the layout rules of §1.
//!
//! ## 5. Precision and rounding points (KdaSplit's conventions)
//!
//! | quantity | kernel precision | rounding |
//! |---|---|---|
//! | x, conv taps, conv-state rewrite | bf16 in, bf16 out | copies are exact |
//! | conv accumulation, SiLU, q, k, v | f32 | **none** (vLLM rounds to bf16 here) |
//! | ‖q‖, ‖k‖, softplus, exp, σ, β, decay | f32 (approximate `rsqrt`/`ex2` allowed) | none (β stays f32) |
//! | delta rule, dots, state | f32 | state stored as f32 |
//! | o, RMSNorm, silu(z) | f32 | none before the norm |
//! | output | f32 → **bf16** | RNE |
//!
//! Expected agreement with the f64 reference (enforced by [`compare()`], same
//! limits as KdaSplit): output relative Frobenius error well under 1e-2 (bf16
//! rounding alone ≈ 3e-3), written state pages ~1e-5 relative per token
//! (limit 1e-4), conv state and untouched state slots bit-exact, padding
//! rows exactly zero. There is no gate projection and so no rounding
//! discontinuity as in KdaSplit's raw gate.
//!
//! ## 6. Decisions and differences from public code
//!
//! * **Norm gate.** Qwen3-Next's `RMSNormGated` (vLLM, HF `Qwen3NextRMSNormGated`,
//!   norm before gate) multiplies by `silu(z)`; KdaSplit's norm uses `σ(gate)`.
//!   `norm_weight` is the literal multiplier (that norm is not zero-centred).
//! * **Decay form.** vLLM's / sglang's `fused_gdn_gating`:
//!   `g = -exp(A_log) · softplus(a + dt_bias)`, `β = σ(b)`. Their softplus
//!   returns `x` for `x > 20`; the reference is exact, and the two differ by
//!   less than `ln(1 + e^-20) ≈ 2.1e-9` (absolute, on `g/A`).
//! * **Roundings.** vLLM rounds the conv output (q, k, v) to bf16, may store β
//!   in the activation dtype, and rounds `core_attn_out` to bf16 before the
//!   norm; this kernel keeps all three in f32 (KdaSplit's convention).
//! * **State layout** `[value, key]`, key-contiguous (fla's `STATE_V_FIRST`,
//!   KdaSplit's layout). vLLM versions whose recurrent kernel addresses the state
//!   as `[K, V]` would have their cache transposed by this kernel; the layout
//!   check rejects a `[K, V]` view (key stride ≠ 1).
//! * **Padding** is `slot <= 0` on the read slot (null block 0 or −1), and
//!   `accepted` is not clamped (vLLM clamps `accepted - 1` to `>= 0`): KdaSplit
//!   §8.6–§8.7, rejected by [`validate()`].
//! * **Conv cache** is vLLM's `W - 1 = 3` columns (`T + 2` when verifying),
//!   channels in q | k | v order, the same conv slot `slots[b, 0]` as vLLM's
//!   GDN spec path (`spec_state_indices_tensor[:, 0]`).
//! * **L2 epsilon** 1e-6 inside the square root (fla's in-kernel
//!   `use_qk_l2norm_in_kernel`), independent of `eps`.

pub mod args;
pub mod compare;
pub mod config;
pub mod generator;
pub mod kernel;
pub mod object;
pub mod reference;
pub mod run;
pub mod validate;

pub use args::{Arg, GdnArgs};
pub use compare::{compare, footprint};
pub use config::{ConfigError, GdnConfig, HeadKind};
pub use generator::{DtBias, GenOptions, generate};
pub use kda_host::{Actual, ConvLayout, Expected, Report, Request};
pub use object::{GdnKernel, GdnLaunch};
pub use reference::{reference, resolve};
pub use validate::{ArgError, validate, validate_layout};
