//! The GDN decode / speculative-verify step in the kda language (crate doc
//! §1–§5): one `#[cluster_kernel]` for every T = 1..4, bias on or off, any
//! head grouping G = HV / HK up to 8, and bf16 or f32 weights.
//!
//! ## Design
//!
//! One CTA of 256 threads per (v-head, request), grid `(HV, B)`, no roles:
//!
//! * **Conv + SiLU.** Thread `t` runs the conv of q/k channel `t & 127` of
//!   k-head `h / G` (q for warps 0–3, k for warps 4–7) and of v channel
//!   `t & 127` of v-head `h` (both halves compute it; the first stores it),
//!   and keeps its inputs for the conv-state rewrite. q and k go to shared
//!   memory, their squares to per-warp sums (`warp_sum`) combined after a
//!   named barrier into the two L2 norms (1e-6 inside the root).
//! * **Decay and β** are one scalar per head and token:
//!   `exp(-exp(a_log) · softplus(a + dt_bias))`, every thread computes them
//!   (no gate warp, no MMA, no decay multicast as in KdaSplit). softplus is
//!   `max(x, 0) + ln2 · log2(1 + e^-|x|)` with the approximate `lg2`.
//! * **State.** KdaSplit's state role on 256 threads: `lanes` threads per
//!   value row (8, 16 or 32; default 16), `256 / lanes` rows per pass,
//!   `lanes / 2` passes cover the 128 rows, so each thread holds 64 f32 of
//!   state in registers whatever the lane width. Per token and row: decay, `u = S·k̂` (butterfly
//!   over the row's lanes), `δ = (v − u)·β`, `S += δ k̂ᵀ`, `o = S·q̂`; the row
//!   leader puts `o` in shared memory, the row goes to its write slot
//!   (predicated on `> 0` for T > 1).
//! * **Gated RMSNorm.** After a barrier every warp sums `o²` of each token
//!   (a float4 per lane, `warp_sum`); thread `t` writes value `t & 127` of the
//!   tokens `t >> 7, t >> 7 + 2, ..` scaled by `rstd · norm_weight · silu(z)`.
//!
//! ## Schedules
//!
//! [`Schedule`] picks the lane width, `min_blocks`, evict-first on the
//! state's loads and stores, the scheduler's early schedule (ready loads
//! above the PDL wait; the default), the PDL trigger at entry, where a
//! cluster releases the shared conv taps (`early_release`), the driver's
//! load-balancing cluster scheduling policy (`balance`; only where there
//! are clusters, G > 1, a no-op at G = 1), and **staging**: thread 0 bulk-copies the head's 64 KiB page into shared
//! memory (one `cp.async.bulk` on an mbarrier, issued with the ready loads)
//! and each pass of token 0 reads its rows from there, so at T = 1 no
//! thread holds the page in registers (64 registers instead of 127: the
//! CTA count per SM is then bounded by shared memory, three). None changes
//! the math; `sweep_schedules` lists what the bench measures.
//!
//! ## Why one CTA, and where the cluster comes from
//!
//! KdaSplit splits a head's value rows over a cluster because its gate warp
//! projects 128 per-key decays with MMAs and multicasts them, and 128 rows
//! in registers do not fit one 128-thread CTA at T > 1. Here the decay is a
//! scalar, so nothing needs to be shared between CTAs, and 256 threads hold
//! the 64 KB state in registers at every T. Splitting rows over C CTAs would
//! add a DSMEM gather of the o rows for the RMSNorm (the norm needs all 128)
//! and cluster barriers, and would only pay when `B · HV` is far below the
//! SM count (batch 1 latency); it is not done here.
//!
//! The cluster this kernel does use is for **grouped heads**: the G v-heads
//! of a k-head read the same q/k conv taps, and one of them rewrites those
//! taps (crate doc §3.5). Without ordering, a CTA could rewrite them before
//! another has read them. So the grid's G consecutive v-heads `jG..jG+G-1`
//! (exactly the v-heads of k-head j) form a cluster: every CTA arrives
//! (release) after its tap loads, and the first waits before the rewrite.
//! With G = 1 there is no cluster.
//!
//! Padding (`read slot <= 0`, uniform over the cluster) writes the head's
//! output rows as zeros and nothing else.

use kda::cluster_kernel;
use kda::dsl::{Elem, Val, bf16};
use kda::ir::{Kernel, Scalar};
use kda_std::{RequestSlots, conv_silu, request_slots, row_dot};
use thiserror::Error;

use crate::config::GdnConfig;

/// Threads per CTA.
pub const BLOCK: u32 = 256;

/// Largest head grouping G (CTAs per cluster) the kernel is built for: the
/// portable cluster size.
pub const MAX_GROUP: u32 = 8;

/// `silu(x) = x · σ(x)` (IEEE sigmoid).
fn silu(x: Val<f32>) -> Val<f32> {
    x * x.sigmoid()
}

/// `exp(g)`, `g = -exp(a_log) · softplus(x)` with
/// `softplus(x) = max(x, 0) + ln 2 · log2(1 + e^-|x|)` (crate doc §3.2).
fn decay(x: Val<f32>, a: Val<f32>) -> Val<f32> {
    let tail = ((-x.abs()).exp() + 1.0).fast_log2() * std::f32::consts::LN_2;
    (-(a * (x.max(0.0) + tail))).exp()
}

/// The kernel's schedule knobs (none change the math).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Schedule {
    /// Threads per state row: 8, 16 or 32 (4 leaves 64 key values of q̂
    /// and k̂ per thread and spills at T > 1).
    pub lanes: u32,
    /// `.minnctapersm` (`min_blocks`): CTAs per SM that ptxas must fit in
    /// the register file; 0 leaves the register count to ptxas.
    pub min_blocks: u32,
    /// L2 evict-first on the state's loads and stores: the state of a step
    /// is read and written once, and is not read again before many more
    /// bytes have streamed through L2.
    pub evict: bool,
    /// The scheduler's early schedule: ready loads (the state rows, conv
    /// taps, weights) are issued before the PDL wait, so they overlap the
    /// previous launch's tail. Off: one PDL wait at the kernel's entry.
    pub early: bool,
    /// Trigger dependent launches at the kernel's entry rather than after
    /// the last produced read.
    pub trigger_at_entry: bool,
    /// Stage the state through shared memory: one thread bulk-copies the
    /// head's 64 KiB page (`cp.async.bulk`, completing on an mbarrier) before
    /// the PDL wait, and each pass reads its rows from there when it needs
    /// them, so the page never sits in registers (T = 1: one pass's rows;
    /// T > 1 keeps the rows in registers across tokens as unstaged).
    pub staged: bool,
    /// Where a cluster of CTAs (v-heads sharing a k-head) says it has read
    /// the shared q/k conv taps (its releasing `barrier.cluster.arrive`,
    /// which ptxas makes wait for the thread's loads in flight): right after
    /// the taps' loads, before the PDL wait, where that wait overlaps the
    /// previous launch (on: what a batch of one wants); off, after the conv
    /// has consumed the taps, where nothing is left in flight (3–5 % faster
    /// at batch 64–512, 10 % slower at batch 1; docs/perf.md). The kernel
    /// states the release at the early place; off asks the scheduler to sink
    /// it (`late_release`, pass `sink_cluster_release`) past the conv, to
    /// the conv's first store to shared memory.
    pub early_release: bool,
    /// Ask the driver to place the clusters with its load-balancing
    /// scheduling policy (`cluster_policy = ClusterPolicy::LoadBalancing`:
    /// the runtime adds it to each launch as
    /// `CU_LAUNCH_ATTRIBUTE_CLUSTER_SCHEDULING_POLICY_PREFERENCE`), which changes where and when clusters
    /// start, never what they compute. It applies only where the kernel has
    /// clusters of more than one CTA (G = HV / HK > 1); at G = 1 the kernel
    /// keeps the default policy and the knob does nothing. Measured on the
    /// H200 with an environment switch (docs/perf.md, "Cluster scheduling
    /// policy"): GDN HK4 HV8 unchanged at batch 128.
    pub balance: bool,
}

/// The least batch that gets the bandwidth schedule of [`Schedule::for_batch`]
/// (the smallest batch measured to gain from it).
pub const TUNED_BATCH: usize = 64;

impl Default for Schedule {
    /// 16 lanes (127–172 registers over T = 1..4; 8 lanes: 138–255), early,
    /// nothing else: the schedule the kernel was first measured with.
    fn default() -> Self {
        Schedule {
            lanes: 16,
            min_blocks: 0,
            evict: false,
            early: true,
            trigger_at_entry: false,
            staged: false,
            early_release: false,
            balance: false,
        }
    }
}

impl Schedule {
    /// The schedule a launch of `batch` requests gets by default
    /// (`run::run`, the Python package): from batch [`TUNED_BATCH`] on,
    /// evict-first and trigger at entry, and at T = 1 the state staged
    /// through shared memory; below it the [`Schedule::default`] with the
    /// early release of the conv taps (`early_release`). Measured on
    /// the H200 (`decode-bench`, 2026-12-02, docs/perf.md): at T = 1 +10 %
    /// bandwidth at batches 64, 128 and 512 but 5 % slower at batch 1; at
    /// T = 4 +8 % at batch 64, +5 % at 128, within 1 % at 1 and 512.
    pub fn for_batch(tokens: u32, batch: usize) -> Self {
        let d = Schedule::default();
        if batch < TUNED_BATCH {
            return Schedule {
                early_release: true,
                ..d
            };
        }
        Schedule {
            evict: true,
            trigger_at_entry: true,
            staged: tokens == 1,
            ..d
        }
    }

    /// The default schedule with `lanes` threads per row.
    pub fn lanes(lanes: u32) -> Self {
        Schedule {
            lanes,
            ..Schedule::default()
        }
    }

    /// A short label: `l16`, then `occN`, `evict`, `late` (no early
    /// schedule), `trig`, `staged`, `erel` (early release), `bal` (the
    /// load-balancing cluster policy) where they differ from the default.
    pub fn label(&self) -> String {
        let mut s = format!("l{}", self.lanes);
        if self.min_blocks > 0 {
            s += &format!(" occ{}", self.min_blocks);
        }
        for (on, name) in [
            (self.evict, "evict"),
            (!self.early, "late"),
            (self.trigger_at_entry, "trig"),
            (self.staged, "staged"),
            (self.early_release, "erel"),
            (self.balance, "bal"),
        ] {
            if on {
                s += " ";
                s += name;
            }
        }
        s
    }
}

#[cluster_kernel(
    block = BLOCK,
    cluster = cfg.num_v_heads / cfg.num_k_heads,
    min_blocks = (schedule.min_blocks > 0).then_some(schedule.min_blocks),
    early = schedule.early,
    trigger_at_entry = schedule.trigger_at_entry,
    late_release = !schedule.early_release,
    cluster_policy = ClusterPolicy::load_balancing_if(schedule.balance, cfg.group() as u32)
)]
pub fn gdn_decode<W: Elem, Bi: Elem, N: Elem>(
    #[comptime] cfg: &GdnConfig,
    #[comptime] schedule: &Schedule,
    #[produced]
    #[strides(_, _)]
    x: Tensor<bf16, rows, { cfg.conv_dim() }>,
    #[strides(_, _)] conv_weight: Tensor<W, { cfg.conv_dim() }, 4>,
    #[when(cfg.has_bias)]
    #[strides(_)]
    conv_bias: Tensor<Bi, { cfg.conv_dim() }>,
    #[strides(_, _, _)] conv_state: Tensor<bf16, conv_slots, { cfg.conv_dim() }, conv_width>,
    #[produced]
    #[strides(_, _)]
    a: Tensor<bf16, rows, { cfg.hv() }>,
    #[produced]
    #[strides(_, _)]
    beta: Tensor<bf16, rows, { cfg.hv() }>,
    #[strides(_)] a_log: Tensor<f32, { cfg.hv() }>,
    #[strides(_)] dt_bias: Tensor<f32, { cfg.hv() }>,
    #[when(cfg.tokens == 1)]
    #[strides(_)]
    slots: Tensor<i32, requests>,
    #[when(cfg.tokens > 1)]
    #[name = "slots"]
    #[strides(_, _)]
    slot_table: Tensor<i32, requests, slot_width>,
    #[align(16)]
    #[strides(_, _, { schedule.staged.then_some(128) }, 1)]
    state: Tensor<f32, state_slots, { cfg.hv() }, 128, 128>,
    #[strides(_, _)] output: Tensor<bf16, rows, { cfg.value_dim() }>,
    #[produced]
    #[strides(_, _)]
    z: Tensor<bf16, rows, { cfg.value_dim() }>,
    #[strides(_)] norm_weight: Tensor<N, 128>,
    scale: f32,
    eps: f32,
    #[when(cfg.tokens > 1)]
    #[strides(_)]
    accepted: Tensor<i32, requests>,
) {
    let t_n = cfg.tokens;
    let lanes = schedule.lanes;
    // Evict-first on the state's loads and stores where the schedule asks.
    let state_io = if schedule.evict {
        state.evict_first()
    } else {
        state
    };
    let group_size = cfg.num_v_heads / cfg.num_k_heads;
    let key_dim = cfg.key_dim() as u32;
    let (groups, passes, chunks) = (BLOCK / lanes, (lanes / 2) as usize, (32 / lanes) as usize);
    let head = block_idx(0);
    let request = block_idx(1);
    let token_row = |tok: u32| request * t_n + tok;
    let tid = thread_idx();
    let (lane, warp, value) = (tid & 31, tid >> 5, tid & 127);
    let half = tid >> 7;
    let resolved: RequestSlots = request_slots(t_n, request, slots, slot_table, accepted);
    let (read, conv_slot, offset) = (resolved.read, resolved.conv, resolved.offset);

    if read <= 0 {
        // Padding: zero this head's output rows; nothing else is written.
        pdl_wait();
        for tok in 0..t_n {
            if half == 0 {
                output[[token_row(tok), head * 128 + value]] = val::<bf16>(0.0);
            }
        }
        pdl_trigger();
    } else {
        let qk = shared!([f32; t_n, 256]);
        let v = shared!([f32; t_n, 128]);
        let out = shared!([f32; t_n, 128]);
        let reductions = shared!([f32; t_n, 8]);
        // Staged: the head's page in shared memory, completed on `page_full`.
        let page_full = schedule
            .staged
            .then(|| mbarrier!(arrivals = 1, tx = 128 * 512));
        let page = schedule
            .staged
            .then(|| shared!([f32; 128 * 128], align = 128));

        // Stream 0: q (half 0) or k (half 1) of k-head h / G; stream 1: v.
        let k_head = head / group_size;
        let channels = [
            half * key_dim + k_head * 128 + value,
            2 * key_dim + head * 128 + value,
        ];

        // ---- ready loads: state rows, conv taps, weights
        let group = tid / lanes;
        let group_lane = tid & (lanes - 1);
        let row: Vec<Val<u32>> = (0..passes as u32).map(|p| group + p * groups).collect();
        let column = |j: usize| (group_lane + lanes * j as u32) * 4;
        let mut history = regs!([f32; passes, chunks, 4]);
        if let (Some(page), Some(full)) = (page, page_full) {
            if tid == 0 {
                full.init();
            }
            fence_mbarrier_init();
            bar_sync(2, BLOCK);
            if tid == 0 {
                full.arm();
                bulk_copy!(
                    page[0] = state[[read, head, 0, 0]],
                    bytes = 128 * 512,
                    completes = full,
                    evict_first = schedule.evict
                );
            }
        } else {
            for (p, j) in (0..passes).flat_map(|p| (0..chunks).map(move |j| (p, j))) {
                let v4 = state_io.load4([read, head, row[p], column(j)]).lanes();
                for (e, &x) in v4.iter().enumerate() {
                    history[[p, j, e]] = x;
                }
            }
        }
        let (mut taps, mut coeff, mut acc) =
            (regs!([bf16; 2, 3]), regs!([W; 2, 4]), regs!([f32; 2]));
        for s in 0..2 {
            for t in 0..3 {
                taps[[s, t]] = conv_state[[conv_slot, channels[s], offset + t]];
            }
            for i in 0..4 {
                coeff[[s, i]] = conv_weight[[channels[s], i]];
            }
            acc[s] = match conv_bias {
                Some(bias) => bias.load(channels[s]).cast::<f32>().val(),
                None => val(0.0),
            };
        }
        // Every CTA of the group has read its q/k taps (rewritten below,
        // after the `cluster_wait`). Where the release runs is the
        // schedule's: here, before the PDL wait, with `early_release`;
        // otherwise the scheduler sinks it (`late_release`) past the conv to
        // the conv's first shared store below, where no load of this thread
        // is in flight for its membar to wait on.
        if group_size > 1 {
            cluster_arrive();
        }
        let nw = norm_weight[value].cast::<f32>().val();
        let a_head = a_log[head].exp();
        let dt = dt_bias[head];

        // ---- produced loads: this step's activations
        pdl_wait();
        let mut inputs = regs!([bf16; t_n, 2]);
        let (mut decays, mut betas) = (Vec::new(), Vec::new());
        for tok in 0..t_n as usize {
            let r = token_row(tok as u32);
            for s in 0..2 {
                inputs[[tok, s]] = x[[r, channels[s]]];
            }
            decays.push(decay(a[[r, head]].cast::<f32>().val() + dt, a_head));
            betas.push(beta[[r, head]].cast::<f32>().val().sigmoid());
        }
        // The tokens whose output this thread writes: half, half + 2, ...
        let mine: Vec<Val<u32>> = (0..t_n.div_ceil(2)).map(|i| half + 2 * i).collect();
        let gates: Vec<Val<f32>> = mine
            .iter()
            .map(|&tok| {
                let r = token_row(0) + tok.min(t_n - 1);
                silu(z[[r, head * 128 + value]].cast::<f32>().val())
            })
            .collect();
        pdl_trigger();

        // ---- conv (bias, then taps oldest first) and SiLU
        let act: Vec<[Val<f32>; 2]> = (0..t_n as usize)
            .map(|tok| [0, 1].map(|s| conv_silu(acc[s], &taps, &inputs, &coeff, s, tok, false)))
            .collect();
        for (tok, [qk_act, v_act]) in act.iter().copied().enumerate() {
            qk[[tok, tid]] = qk_act;
            if half == 0 {
                v[[tok, value]] = v_act;
            }
        }
        // Per-warp sums of q² (warps 0-3) and k² (warps 4-7).
        let squares: Vec<_> = act.iter().map(|a| warp_sum(a[0] * a[0], 32)).collect();
        if lane == 0 {
            for (tok, sq) in squares.iter().enumerate() {
                reductions[[tok, warp]] = *sq;
            }
        }
        bar_sync(1, BLOCK);

        // ---- per token: q̂, k̂, then the delta rule on this thread's rows
        for tok in 0..t_n as usize {
            let r = |i: usize| reductions[[tok, i]];
            let norm = |o| (((r(o) + r(o + 2)) + (r(o + 1) + r(o + 3))) + 1.0e-6).fast_rsqrt();
            let (fq, fk) = (norm(0) * scale, norm(4));
            let (mut qr, mut kr) = (regs!([f32; chunks, 4]), regs!([f32; chunks, 4]));
            for j in 0..chunks {
                let (q4, k4) = (
                    qk.load4([tok, column(j)]).lanes(),
                    qk.load4([tok, 128 + column(j)]).lanes(),
                );
                for e in 0..4 {
                    qr[[j, e]] = q4[e] * fq;
                    kr[[j, e]] = k4[e] * fk;
                }
            }
            let (d, b) = (decays[tok], betas[tok]);
            let write = resolved.writes[tok];
            if let (0, Some(full)) = (tok, page_full) {
                full.wait();
            }
            for p in 0..passes {
                // Staged: this pass's rows from shared memory (token 0; later
                // tokens keep them in registers).
                if let (0, Some(page)) = (tok, page) {
                    for j in 0..chunks {
                        let v4 = page.load4(row[p] * 128 + column(j)).lanes();
                        for e in 0..4 {
                            history[[p, j, e]] = v4[e];
                        }
                    }
                }
                for j in 0..chunks {
                    for e in 0..4 {
                        history[[p, j, e]] *= d;
                    }
                }
                let u = warp_sum(row_dot(&history, &kr, p, false), lanes);
                let delta = (v[[tok, row[p]]] - u) * b;
                for j in 0..chunks {
                    for e in 0..4 {
                        history[[p, j, e]] = fma(kr[[j, e]], delta, history[[p, j, e]]);
                    }
                }
                let o = warp_sum(row_dot(&history, &qr, p, false), lanes);
                if group_lane == 0 {
                    out[[tok, row[p]]] = o;
                }
                for j in 0..chunks {
                    let idx = [ix(write), ix(head), ix(row[p]), ix(column(j))];
                    let h4 = pack([0, 1, 2, 3].map(|e| history[[p, j, e]]));
                    if t_n > 1 {
                        state_io.store_if(idx, h4, write > 0);
                    } else {
                        state_io.store(idx, h4);
                    }
                }
            }
        }
        bar_sync(1, BLOCK);

        // ---- gated RMSNorm: every warp sums o² of every token
        let rstd: Vec<Val<f32>> = (0..t_n)
            .map(|tok| {
                let sq = out.load4([tok, lane * 4]).lanes().map(|o| o * o);
                let sumsq = warp_sum((sq[0] + sq[2]) + (sq[1] + sq[3]), 32);
                (sumsq * (1.0 / 128.0) + eps).fast_rsqrt()
            })
            .collect();
        for (i, &tok) in mine.iter().enumerate() {
            let i = i as u32;
            let r = if 2 * i + 1 < t_n {
                select(
                    half == 1,
                    rstd[(2 * i + 1) as usize],
                    rstd[(2 * i) as usize],
                )
            } else {
                rstd[(2 * i) as usize]
            };
            if tok < t_n {
                let y = out[[tok, value]] * r * nw * gates[i as usize];
                output[[token_row(0) + tok, head * 128 + value]] = y.cast::<bf16>();
            }
        }

        // ---- conv state: [tap 1, tap 2, inputs..] of the v channel (first
        // half) and of the q/k channel (by the group's first v-head, after
        // every CTA of the group has read it)
        let window = |s: usize| {
            let mut w = vec![taps[[s, 1]], taps[[s, 2]]];
            w.extend((0..t_n as usize).map(|t| inputs[[t, s]]));
            w
        };
        let (qk_window, v_window) = (window(0), window(1));
        if half == 0 {
            for (i, &xv) in v_window.iter().enumerate() {
                conv_state[[conv_slot, channels[1], i]] = xv;
            }
        }
        let rewrite_qk = || {
            for (i, &xv) in qk_window.iter().enumerate() {
                conv_state.store([ix(conv_slot), ix(channels[0]), ix(i as u32)], xv);
            }
        };
        if group_size > 1 {
            cluster_wait();
            if head % group_size == 0 {
                rewrite_qk();
            }
        } else {
            rewrite_qk();
        }
    }
}

/// Element types of the arguments that may be bf16 or f32 (crate doc §1).
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct Dtypes {
    pub conv_weight: Scalar,
    pub conv_bias: Scalar,
    pub norm_weight: Scalar,
}

impl Default for Dtypes {
    fn default() -> Self {
        Dtypes {
            conv_weight: Scalar::BF16,
            conv_bias: Scalar::BF16,
            norm_weight: Scalar::BF16,
        }
    }
}

/// Why a kernel is not built.
#[derive(Debug, Error, PartialEq, Eq)]
pub enum BuildError {
    #[error(
        "unsupported argument dtypes {0:?}: conv_weight, conv_bias and norm_weight are each bf16 or f32"
    )]
    Dtypes(Dtypes),
    #[error("lanes per state row must be 8, 16 or 32; got {0}")]
    Lanes(u32),
    #[error("min_blocks must be at most 8 (2048 threads per SM of 256); got {0}")]
    MinBlocks(u32),
    #[error(
        "num_v_heads / num_k_heads = {0}: at most {MAX_GROUP} v-heads per k-head (one cluster per k-head and request)"
    )]
    Group(u32),
}

/// Trace the kernel for one configuration, argument dtypes and schedule.
pub fn build(cfg: &GdnConfig, dt: &Dtypes, schedule: &Schedule) -> Result<Kernel, BuildError> {
    use Scalar::{BF16, F32};
    if ![8, 16, 32].contains(&schedule.lanes) {
        return Err(BuildError::Lanes(schedule.lanes));
    }
    if schedule.min_blocks > 2048 / BLOCK {
        return Err(BuildError::MinBlocks(schedule.min_blocks));
    }
    let group = cfg.num_v_heads / cfg.num_k_heads;
    if group > MAX_GROUP {
        return Err(BuildError::Group(group));
    }
    let l = schedule;
    Ok(match (dt.conv_weight, dt.conv_bias, dt.norm_weight) {
        (BF16, BF16, BF16) => gdn_decode::<bf16, bf16, bf16>(cfg, l),
        (BF16, BF16, F32) => gdn_decode::<bf16, bf16, f32>(cfg, l),
        (BF16, F32, BF16) => gdn_decode::<bf16, f32, bf16>(cfg, l),
        (BF16, F32, F32) => gdn_decode::<bf16, f32, f32>(cfg, l),
        (F32, BF16, BF16) => gdn_decode::<f32, bf16, bf16>(cfg, l),
        (F32, BF16, F32) => gdn_decode::<f32, bf16, f32>(cfg, l),
        (F32, F32, BF16) => gdn_decode::<f32, f32, bf16>(cfg, l),
        (F32, F32, F32) => gdn_decode::<f32, f32, f32>(cfg, l),
        _ => return Err(BuildError::Dtypes(*dt)),
    })
}

/// The schedules the bench sweep (`decode-bench`) measures at batch 128 for
/// `tokens` tokens, default first: lane widths, no early schedule,
/// evict-first, trigger at entry, occupancy, staging, the early release and
/// the load-balancing cluster policy, and their combinations.
/// `tests/ptxas.rs` assembles each at the bench's shapes without spills.
pub fn sweep_schedules(tokens: u32) -> Vec<Schedule> {
    let d = Schedule::default();
    let mut list = vec![
        d,
        Schedule::lanes(8),
        Schedule::lanes(32),
        Schedule { early: false, ..d },
        Schedule { evict: true, ..d },
        Schedule {
            trigger_at_entry: true,
            ..d
        },
        Schedule {
            evict: true,
            trigger_at_entry: true,
            ..d
        },
        Schedule { staged: true, ..d },
        Schedule {
            staged: true,
            evict: true,
            ..d
        },
        Schedule {
            staged: true,
            evict: true,
            trigger_at_entry: true,
            ..d
        },
        // The conv taps' release where a batch of one wants it, with the
        // default and with the bandwidth schedule.
        Schedule {
            early_release: true,
            ..d
        },
        Schedule {
            early_release: true,
            ..Schedule::for_batch(tokens, TUNED_BATCH)
        },
        // The load-balancing cluster policy (the bench's HV8 / HK4 has
        // clusters of 2), with the default and with the bandwidth schedule.
        Schedule { balance: true, ..d },
        Schedule {
            balance: true,
            ..Schedule::for_batch(tokens, TUNED_BATCH)
        },
    ];
    if tokens == 1 {
        // 127 registers at T = 1: two CTAs per SM either way; staged, the
        // page is in shared memory and three CTAs may fit.
        list.extend([
            Schedule { min_blocks: 2, ..d },
            Schedule {
                staged: true,
                min_blocks: 3,
                ..d
            },
            Schedule {
                staged: true,
                evict: true,
                min_blocks: 3,
                ..d
            },
            Schedule {
                staged: true,
                lanes: 32,
                ..d
            },
        ]);
    }
    list
}
