//! The HGRN-2 decode step as a `#[cluster_kernel]` (the math: crate doc).
//!
//! ## Design
//!
//! One CTA of [`BLOCK`] = 128 threads (4 warps) per (32 value columns, head,
//! request): grid `(V / 32, H, B)`, no roles, no cluster.
//!
//! * **State.** Lane `l` owns value column `32·x + l` of the head's `K × V`
//!   state; warp `w` owns the key rows `w·K/4 .. (w+1)·K/4`, so a thread
//!   holds `K / 4` f32 of state in registers (32 at K = 128), loaded before
//!   the PDL wait (the state is ready: no launch in the chain writes it) and
//!   stored once after the last token. A warp's loads and stores of a row
//!   are 128 contiguous bytes.
//! * **Gates and q.** After `pdl_wait()`, thread `c` reads the forget
//!   logit and q of key channel `c` of every token (and its lower bound
//!   `lb`, where the configuration has one) and puts the decay
//!   `a = lb + (1 − lb)·σ(f)`, the input gate `k = (1 − lb)·σ(−f)` (= `1 − a`
//!   without the cancellation) and `scale · q` in shared memory; each thread
//!   loads the `v` of its column itself. One named barrier.
//! * **Per token** (comptime-unrolled, in order): `S[i] = a[i]·S[i] + k[i]·v`
//!   for the thread's rows, then its partial `Σ_i (scale·q[i])·S[i]` goes to
//!   shared memory.
//! * **Output.** After a second barrier warp `t mod 4` adds the four warps'
//!   partials of token `t` (fixed order) and stores `o` as bf16.

use kda::cluster_kernel;

/// Threads per CTA.
pub const BLOCK: u32 = 128;
/// Warps per CTA: each owns a quarter of the key rows.
pub const WARPS: u32 = BLOCK / 32;
/// Value columns per CTA (one per lane).
pub const COLUMNS: u32 = 32;

/// The comptime shape of one kernel: head dimensions and tokens per request.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Config {
    /// `K`: the key (forget) dimension of a head, a multiple of 32 up to 256.
    pub key_dim: u32,
    /// `V`: the value dimension of a head, a multiple of 32.
    pub value_dim: u32,
    /// `T`: tokens per request, processed in order in one launch (1..=16).
    pub tokens: u32,
    /// Whether the kernel takes HGRN-2's per-channel `lower_bound` (`[H, K]`,
    /// in `[0, 1)`); without it the bound is 0 (fla's first layer).
    pub lower_bound: bool,
}

impl Config {
    /// The configuration, or why the kernel is not built for it.
    pub fn new(
        key_dim: u32,
        value_dim: u32,
        tokens: u32,
        lower_bound: bool,
    ) -> Result<Config, String> {
        if !(32..=256).contains(&key_dim) || !key_dim.is_multiple_of(32) {
            return Err(format!("key_dim {key_dim}: a multiple of 32 up to 256"));
        }
        if value_dim == 0 || !value_dim.is_multiple_of(COLUMNS) {
            return Err(format!("value_dim {value_dim}: a multiple of {COLUMNS}"));
        }
        if !(1..=16).contains(&tokens) {
            return Err(format!("tokens {tokens}: 1..=16"));
        }
        Ok(Config {
            key_dim,
            value_dim,
            tokens,
            lower_bound,
        })
    }

    /// `[T, K, V]` as sizes.
    pub fn dims(&self) -> [usize; 3] {
        [self.tokens, self.key_dim, self.value_dim].map(|d| d as usize)
    }

    /// The launch grid for `batch` requests of `heads` heads.
    pub fn grid(&self, batch: usize, heads: usize) -> [u32; 3] {
        [self.value_dim / COLUMNS, heads as u32, batch as u32]
    }
}

#[cluster_kernel(block = BLOCK, early = true)]
pub fn hgrn2_decode(
    #[comptime] cfg: &Config,
    #[produced] q: Tensor<bf16, batch, { cfg.tokens }, heads, { cfg.key_dim }>,
    #[produced] f: Tensor<bf16, batch, { cfg.tokens }, heads, { cfg.key_dim }>,
    #[produced] v: Tensor<bf16, batch, { cfg.tokens }, heads, { cfg.value_dim }>,
    state: Tensor<f32, batch, heads, { cfg.key_dim }, { cfg.value_dim }>,
    o: Tensor<bf16, batch, { cfg.tokens }, heads, { cfg.value_dim }>,
    scale: f32,
    #[when(cfg.lower_bound)] lower_bound: Tensor<f32, heads, { cfg.key_dim }>,
) {
    let (t_n, k_dim) = (cfg.tokens, cfg.key_dim);
    let rows = k_dim / WARPS; // state rows per thread
    let tid = thread_idx();
    let (lane, warp) = (tid & 31, tid >> 5);
    let (column, head, b) = (block_idx(0) * COLUMNS + lane, block_idx(1), block_idx(2));
    let decay = shared!([f32; t_n, k_dim]);
    let input = shared!([f32; t_n, k_dim]);
    let query = shared!([f32; t_n, k_dim]);
    let partial = shared!([f32; t_n, WARPS, COLUMNS]);

    // ---- ready loads: this thread's column of its warp's rows
    let row = |i: u32| warp * rows + i;
    let mut s = regs!([f32; rows]);
    for i in 0..rows as usize {
        s[i] = state[[b, head, row(i as u32), column]];
    }

    // ---- produced loads: gates and scaled q per key channel, v per column
    pdl_wait();
    for c0 in (0..k_dim).step_by(BLOCK as usize) {
        let c = tid + c0;
        if c < k_dim {
            let bound = lower_bound.map(|lb| lb.load([head, c]));
            for t in 0..t_n {
                let logit: Val<f32> = f[[b, t, head, c]].cast::<f32>().val();
                let (keep, fresh) = (logit.sigmoid(), (-logit).sigmoid()); // σ(f), 1 − σ(f)
                let (a, k) = match bound {
                    Some(lb) => (fma(1.0 - lb, keep, lb), (1.0 - lb) * fresh),
                    None => (keep, fresh),
                };
                decay[[t, c]] = a;
                input[[t, c]] = k;
                query[[t, c]] = q[[b, t, head, c]].cast::<f32>().val() * scale;
            }
        }
    }
    let values: Vec<Val<f32>> = (0..t_n)
        .map(|t| v[[b, t, head, column]].cast::<f32>().val())
        .collect();
    pdl_trigger();
    bar_sync(1, BLOCK);

    // ---- the recurrence, token by token: S = diag(a)·S + k vᵀ, o = (scale·q)ᵀ S
    for t in 0..t_n {
        let mut acc: Option<Val<f32>> = None;
        for i in 0..rows as usize {
            let r = row(i as u32);
            s[i] = fma(decay[[t, r]], s[i], input[[t, r]] * values[t as usize]);
            acc = Some(match acc {
                Some(a) => fma(query[[t, r]], s[i], a),
                None => query[[t, r]] * s[i],
            });
        }
        partial[[t, warp, lane]] = acc.expect("at least one row");
    }
    for i in 0..rows as usize {
        state[[b, head, row(i as u32), column]] = s[i];
    }
    bar_sync(1, BLOCK);

    // ---- output: warp t mod 4 adds the four partials of token t
    for t in 0..t_n {
        if warp == t % WARPS {
            let p = |w: u32| partial[[t, w, lane]];
            let sum = (p(0) + p(1)) + (p(2) + p(3));
            o[[b, t, head, column]] = sum.cast::<bf16>();
        }
    }
}
