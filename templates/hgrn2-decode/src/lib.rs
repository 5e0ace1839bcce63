//! # hgrn2-decode — a template crate: HGRN-2's recurrent decode step
//!
//! A worked example of a kda kernel written *outside* the kda workspace: the
//! fused recurrent step of HGRN-2 (Qin et al., 2024, "HGRN2: Gated Linear
//! RNNs with State Expansion"), a model family the repository's own kernels
//! (`kernels/`) do not cover. It has the four parts every kernel crate has:
//!
//! | file | what |
//! |---|---|
//! | [`kernel`] (`src/kernel.rs`) | the `#[cluster_kernel]`: the GPU code, also run by the CPU simulator |
//! | [`host`] (`src/host.rs`) | the host program: seeded inputs, the float64 reference, a launch on the GPU or the simulator, the check (≤ 120 lines) |
//! | `tests/sim.rs` | the simulator against the reference at small shapes; every kernel through `ptxas` without spills |
//! | `tests/gpu.rs` | GPU 0 against the reference at model shapes (skipped without a CUDA driver) |
//! | `reference.py` | the same reference in NumPy, for a Python test of a binding |
//! | `python/` | **placeholder** for the Python binding and its pytest |
//!
//! `cargo run --release` runs the host program (on GPU 0, else on the
//! simulator); `cargo test --release` runs the tests; `ci.sh` is what CI runs.
//!
//! ## The math
//!
//! Per request `b`, head `h` and token `t = 0..T` (in order), with `K` the key
//! (forget) dimension, `V` the value dimension, `i ∈ [0, K)`, `j ∈ [0, V)`:
//!
//! ```text
//! a[i] = lb[h, i] + (1 − lb[h, i]) · σ(f[b, t, h, i])      decay, = exp(g)
//! k[i] = 1 − a[i]   = (1 − lb[h, i]) · σ(−f[b, t, h, i])   input gate
//! S[i, j] ← a[i] · S[i, j] + k[i] · v[b, t, h, j]          S = state[b, h] (K × V, f32)
//! o[b, t, h, j] = scale · Σ_i q[b, t, h, i] · S[i, j]
//! ```
//!
//! `σ` is the logistic sigmoid and `lb` the optional per-channel lower bound
//! (`[H, K]`, in `[0, 1)`; absent it is 0, and then `g = logsigmoid(f)`).
//! `scale` is a launch scalar, normally `K^-0.5`. `state` (`[B, H, K, V]`,
//! f32) is read once and holds the state after token `T − 1` when the launch
//! ends (updated in place); `o` (`[B, T, H, V]`) is fully overwritten.
//!
//! | tensor | shape | dtype |
//! |---|---|---|
//! | `q` | `[B, T, H, K]` | bf16 |
//! | `f` (forget logits) | `[B, T, H, K]` | bf16 |
//! | `v` (HGRN-2's input `i`) | `[B, T, H, V]` | bf16 |
//! | `state` | `[B, H, K, V]` | f32, read and written |
//! | `o` | `[B, T, H, V]` | bf16, written |
//! | `lower_bound` (with [`Config::lower_bound`]) | `[H, K]` | f32 |
//!
//! Every tensor may be a strided view with a unit innermost stride. The
//! kernel computes in f32 and rounds only `o` to bf16 (nearest even); the
//! f64 reference agrees to a relative Frobenius error of a few 1e-3 on `o`
//! (bf16 rounding) and ~1e-6 on the state.
//!
//! ## The mapping to fla
//!
//! fla's `HGRN2Attention` (`fla/layers/hgrn2.py`) computes, per layer,
//! `k, g = 1 - f.sigmoid(), F.logsigmoid(f)` (first layer, or no bound) or
//! `g = lb + (1 - lb) * f.sigmoid(); k, g = 1 - g, g.log()`, and then
//!
//! ```python
//! o, final_state = fused_recurrent_gla(q, k, v=i, gk=g, scale=None,  # K**-0.5
//!                                      initial_state=state, output_final_state=True)
//! ```
//!
//! with `q = swish(q_proj(x))`, `f = f_proj(x)`, `i = i_proj(x)` reshaped to
//! `[B, T, H, K]` / `[B, T, H, V]`, and the state `[B, H, K, V]` f32. This
//! kernel is that call with `q`, `f` (the raw forget logits, before the
//! sigmoid), `v = i`, `scale = K**-0.5`, `lower_bound = lb` viewed `[H, K]`
//! (HGRN-2's `lower_bounds[layer]`, one value per channel `h·K + i`), the
//! state updated in place. `fused_recurrent_gla`'s recurrence is
//! `h = h * exp(gk)[:, None] + k[:, None] * v[None, :]`,
//! `o = (h * (q * scale)[:, None]).sum(0)`, so `exp(g) = a` and `k = 1 − a`
//! above. Differences to expect: fla rounds `k` to the activation dtype
//! (`k.to(i)`, bf16) before the recurrence, this kernel keeps `k` (and `a`)
//! in f32 and computes `1 − a` as `(1 − lb)·σ(−f)`; the output dtype is bf16
//! in both. A GPU comparison against fla should therefore allow bf16-level
//! relative errors (~1e-2) on `o` and on the state, or feed fla a `k` kept in
//! f32 (then the two agree to f32 rounding on the state).
//!
//! ## Copying the template
//!
//! 1. Copy `templates/hgrn2-decode/` anywhere.
//! 2. In `Cargo.toml`, point the `kda` and `kda-host` dependencies at your
//!    kda checkout (or a git URL), rename the package, delete `Cargo.lock`.
//! 3. Replace the kernel in `src/kernel.rs` (`docs/guide.md` walks through
//!    writing one, `docs/language.md` is the reference), the reference and
//!    inputs in `src/host.rs`, the shapes in `tests/sim.rs`, `reference.py`.
//! 4. `cargo test --release`: the simulator needs no GPU; the `ptxas` check
//!    needs `ptxas` (`$KDA_PTXAS`, `PATH`, or the kda checkout's
//!    `scripts/provision-ptxas.sh`) and is skipped with `KDA_SKIP_PTXAS=1`.
//!
//! ## Python binding (placeholder)
//!
//! Not written yet. Its place is `python/` (see `python/README.md`): a
//! binding of at most 30 lines on kda's generic binding layer, and a pytest
//! that checks it on the simulator against `reference.py`'s
//! `hgrn2_decode_ref`.

pub mod host;
pub mod kernel;
pub mod object;

pub use kernel::{Config, hgrn2_decode};
pub use object::Hgrn2;
