//! The Mamba-2 decode step written in the language: the causal conv update
//! of `xBC` and the selective state update (crate doc §2–§3), every
//! configuration of [`Mamba2Config`] (optional `z`, `D` and conv bias, any
//! grouping, padding slots), in one `#[cluster_kernel]`.
//!
//! ## Layout
//!
//! A head's state is `P × N` f32 (32 KiB at P = 64, N = 128): enough data for
//! one CTA, so a CTA handles one head of one request (or several heads when a
//! group has more than [`MAX_CLUSTER`] of them, see below). Its
//! [`Plan::block`] threads cover the head as `lanes` threads per state row,
//! each holding `chunks` float4 of the row (columns interleaved so that
//! consecutive lanes touch consecutive 16 bytes), `block / lanes` rows per
//! pass and `passes` passes: at P = 64, N = 128 that is 128 threads, 8 lanes
//! × 4 float4 per row, 16 rows × 4 passes, 64 state values per thread, all
//! loaded before the PDL wait. `y[p] = Σ_n S'[p, n]·C[n]` is a per-thread dot
//! over its 16 columns and a butterfly over the row's 8 lanes.
//!
//! ## Why a cluster: the group's conv state
//!
//! The heads of group `g` share its B and C, which come out of the conv of
//! `2N` channels whose conv state the step also shifts (§3.5). Every CTA of
//! the group reads those taps, and one must rewrite them: without ordering,
//! a CTA could read taps another already shifted. The heads of a group
//! therefore form one cluster (`H/G` CTAs, one head each; for `H/G > 16`, the
//! largest divisor of `H/G` up to 16, each CTA looping over `H/G / cluster`
//! heads), and rank 0 rewrites the B/C conv state after a cluster barrier
//! that every CTA arrives at (release) once its taps are read. The x channels
//! of a head belong to its CTA alone. No DSMEM is used: recomputing the
//! group's `2N` conv channels in every CTA costs `2N·(3 + 4 + 1)` small loads
//! that hit L2, against `P·N·8` bytes of state traffic per head, and there is
//! no cross-CTA reduction; the cluster is only the barrier that makes the
//! shared conv state race-free without a second launch or a workspace.
//!
//! ## Schedules
//!
//! [`Schedule`] changes the layout within these rules — a smaller cluster
//! (more heads per CTA), 1, 2 or 4 float4 per row and thread (32, 16 or 8
//! lanes), the wave depth (fewer passes held at once: fewer registers, more
//! CTAs per SM) — and the scheduling: `min_blocks`, evict-first on the
//! state's loads and stores, the early schedule, the PDL trigger at entry
//! and the driver's load-balancing cluster scheduling policy (`balance`;
//! only where the plan has clusters of more than one CTA). None changes the
//! math; `sweep_schedules` lists what the bench measures. The default
//! depends on the batch ([`Schedule::for_batch`]): below [`TUNED_BATCH`]
//! requests the early schedule with clusters of up to 8 CTAs
//! ([`Schedule::for_config`]), from it on clusters of up to 4 with the
//! load-balancing policy where those fit.
//!
//! ## Order
//!
//! Ready data first (slot, conv taps, weights, bias, per-head parameters, the
//! first head's state), then the PDL wait, the step's activations (`xbc`,
//! `dt`, `z`: `#[produced]`) and the PDL trigger. The conv results (x of the
//! CTA's heads, B and C of the group, f32) go to shared memory; after a CTA
//! barrier each thread reads the B and C of its columns and the x of its
//! rows.

use kda::cluster_kernel;
use kda::dsl::{Elem, Ix, StoreValue, Tensor, Val, bf16, fma, val};
use kda::ir::Kernel;

use crate::config::Mamba2Config;

/// Largest cluster (CTAs sharing one group's conv state). 16 needs the
/// non-portable cluster size the runtime opts into; Hopper schedules it.
pub const MAX_CLUSTER: u32 = 16;
/// Most heads per CTA [`Schedule::for_config`] trades a smaller cluster for.
pub const MAX_DEFAULT_HEADS_PER_CTA: u32 = 6;

/// The least batch that gets the bandwidth schedule of [`Schedule::for_batch`]
/// (the smallest batch measured to gain from it).
pub const TUNED_BATCH: usize = 64;

/// State values a thread holds per wave.
pub const WAVE_VALUES: u32 = 64;

/// Threads per CTA at most.
const MAX_BLOCK: u32 = 128;

/// The kernel's schedule knobs (none change the math). The default is the
/// schedule the kernel was first measured with.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Schedule {
    /// Largest cluster: the heads of a group are spread over the largest
    /// divisor of `H/G` up to this many CTAs (at most [`MAX_CLUSTER`]);
    /// fewer CTAs per group means more heads per CTA.
    pub max_cluster: u32,
    /// float4 chunks of a state row per thread (1, 2 or 4; lanes per row
    /// `N / (4·chunks)`, at most 32); 0: the plan's choice (4 where the
    /// head fills 128 threads).
    pub chunks: u32,
    /// Passes whose state a thread holds at once (a divisor of the passes;
    /// the next wave is loaded while this one is computed); 0: as many as
    /// hold [`WAVE_VALUES`] values.
    pub wave: u32,
    /// `.minnctapersm` (`min_blocks`); 0 leaves the register count to ptxas.
    pub min_blocks: u32,
    /// L2 evict-first on the state's loads and stores.
    pub evict: bool,
    /// The scheduler's early schedule (ready loads — conv taps, weights, the
    /// first wave of state — before the PDL wait). Off: one PDL wait at the
    /// kernel's entry.
    pub early: bool,
    /// Trigger dependent launches at the kernel's entry.
    pub trigger_at_entry: bool,
    /// Ask the driver to place the clusters with its load-balancing
    /// scheduling policy (`cluster_policy = ClusterPolicy::LoadBalancing`:
    /// the runtime adds it to each launch as
    /// `CU_LAUNCH_ATTRIBUTE_CLUSTER_SCHEDULING_POLICY_PREFERENCE`), which changes where and when clusters
    /// start, never what they compute. It applies only where the plan has
    /// clusters of more than one CTA ([`Plan::cluster`] > 1); with clusters
    /// of one the kernel keeps the default policy and the knob does nothing.
    /// Measured on the H200 with an environment switch (docs/perf.md,
    /// "Cluster scheduling policy"): every H24 G1 cluster schedule 3–5 %
    /// faster at batch 128.
    pub balance: bool,
}

impl Default for Schedule {
    fn default() -> Self {
        Schedule::DEFAULT
    }
}

impl Schedule {
    /// The schedule the kernel was first measured with: clusters of up to
    /// [`MAX_CLUSTER`] CTAs, every other knob off or automatic. Labels and
    /// the bench sweep are relative to it.
    pub const PLAIN: Schedule = Schedule {
        max_cluster: MAX_CLUSTER,
        chunks: 0,
        wave: 0,
        min_blocks: 0,
        evict: false,
        early: false,
        trigger_at_entry: false,
        balance: false,
    };

    /// The early schedule on [`Schedule::PLAIN`], for `const` contexts (the
    /// test matrices): it fits every configuration with the plain one's
    /// registers. What a configuration gets by default is
    /// [`Schedule::for_config`].
    pub const DEFAULT: Schedule = Schedule {
        early: true,
        ..Schedule::PLAIN
    };

    /// The small-batch default (what [`Schedule::for_batch`] gives below
    /// [`TUNED_BATCH`], and what [`build`] and [`Plan::new`] use where the
    /// batch is not known): [`Schedule::DEFAULT`] with
    /// clusters of up to 8 CTAs where that puts at most
    /// [`MAX_DEFAULT_HEADS_PER_CTA`] heads in a CTA. Measured on the H200
    /// (`decode-bench`, 2026-12-02, docs/perf.md) at H24 G1: clusters of 8
    /// (3 heads per CTA) reach 85.1 % of the copy ceiling at batch 128,
    /// clusters of 12 (2 per CTA) 79.9 %, and are faster at batches 1, 64
    /// and 512 too; 4 and 6 heads per CTA measure 83.6–84.1 %. At 80 heads
    /// in one group clusters of 8 would put 10 heads in a CTA, which
    /// spills: those keep the largest cluster.
    pub fn for_config(cfg: &Mamba2Config) -> Schedule {
        let wide = Schedule {
            max_cluster: 8,
            ..Schedule::DEFAULT
        };
        match Plan::with(cfg, &wide) {
            Ok(plan) if plan.heads_per_cta <= MAX_DEFAULT_HEADS_PER_CTA => wide,
            _ => Schedule::DEFAULT,
        }
    }

    /// The schedule a launch of `batch` requests gets by default
    /// (`run::run`, `run::prepare`, the Python package, the bench): below
    /// [`TUNED_BATCH`] [`Schedule::for_config`]; from it on the same with
    /// clusters of up to 4 CTAs and the load-balancing cluster policy
    /// (`balance`), where that plan has clusters of more than one CTA and at
    /// most [`MAX_DEFAULT_HEADS_PER_CTA`] heads in a CTA — else
    /// [`Schedule::for_config`] again. Measured on the H200 (`decode-bench`,
    /// 2026-12-03, docs/gpu-runs/2026-12-03-balance-3f0150f) at H24 G1 P64
    /// N128: `c4 early bal` (6 heads per CTA) reaches 86.3 / 86.7 / 88.7 % of
    /// the copy ceiling at batch 64 / 128 / 512 against 79.1 / 85.4 / 87.3 %
    /// for `c8 early`, but takes 7.38 µs at batch 1 against 4.20 µs (half
    /// the CTAs). Clusters of 4 without the policy (82.9 % at batch 128) or
    /// the policy on clusters of 8 (83.8 %) lose, so a plan whose clusters
    /// of 4 fall to one CTA (the policy does nothing there) keeps
    /// [`Schedule::for_config`], as does one that would put more heads in a
    /// CTA than the limit (spills).
    pub fn for_batch(cfg: &Mamba2Config, batch: usize) -> Schedule {
        let small = Schedule::for_config(cfg);
        if batch < TUNED_BATCH {
            return small;
        }
        let tuned = Schedule {
            max_cluster: 4,
            balance: true,
            ..small
        };
        match Plan::with(cfg, &tuned) {
            Ok(plan) if plan.cluster > 1 && plan.heads_per_cta <= MAX_DEFAULT_HEADS_PER_CTA => {
                tuned
            }
            _ => small,
        }
    }

    /// A short label: `plain`, or the knobs that differ from
    /// [`Schedule::PLAIN`] (`cN`, `chN`, `wN`, `occN`, `evict`, `early`,
    /// `trig`, `bal`); [`Schedule::DEFAULT`] is `early`.
    pub fn label(&self) -> String {
        let d = Schedule::PLAIN;
        let mut parts = Vec::new();
        if self.max_cluster != d.max_cluster {
            parts.push(format!("c{}", self.max_cluster));
        }
        if self.chunks != 0 {
            parts.push(format!("ch{}", self.chunks));
        }
        if self.wave != 0 {
            parts.push(format!("w{}", self.wave));
        }
        if self.min_blocks != 0 {
            parts.push(format!("occ{}", self.min_blocks));
        }
        for (on, name) in [
            (self.evict, "evict"),
            (self.early, "early"),
            (self.trigger_at_entry, "trig"),
            (self.balance, "bal"),
        ] {
            if on {
                parts.push(name.to_string());
            }
        }
        if parts.is_empty() {
            "plain".into()
        } else {
            parts.join(" ")
        }
    }
}

/// Why a schedule does not fit a configuration.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ScheduleError {
    #[error("max_cluster must be 1..={MAX_CLUSTER}; got {0}")]
    Cluster(u32),
    #[error(
        "chunks must be 0, 1, 2 or 4 with N / (4·chunks) lanes a power of two up to 32 and P·lanes >= 32; got {0}"
    )]
    Chunks(u32),
    #[error("wave must be 0 or divide the {passes} passes; got {wave}")]
    Wave { wave: u32, passes: u32 },
    #[error(
        "min_blocks must be at most {max} (2048 threads per SM of {block}-thread CTAs); got {min_blocks}"
    )]
    MinBlocks {
        min_blocks: u32,
        block: u32,
        max: u32,
    },
}

/// How a launch is laid out; comptime, derived from the config and the
/// schedule ([`Plan::with`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Plan {
    /// float4 chunks of a state row per thread.
    pub chunks: u32,
    /// Threads per state row (`N / (4·chunks)`, a power of two up to 32).
    pub lanes: u32,
    /// Threads per CTA.
    pub block: u32,
    /// Row passes per head (`P·lanes / block`).
    pub passes: u32,
    /// CTAs per cluster: the heads of one group, all in one cluster.
    pub cluster: u32,
    /// Heads per CTA (`H/G / cluster`).
    pub heads_per_cta: u32,
    /// Passes whose state a thread holds at once (at most [`WAVE_VALUES`]
    /// values; the next wave is loaded while this one is computed).
    pub wave: u32,
}

impl Plan {
    /// The plan of `cfg`'s small-batch default schedule
    /// ([`Schedule::for_config`]); a launch of known batch uses
    /// `Plan::with(cfg, &Schedule::for_batch(cfg, batch))`.
    pub fn new(cfg: &Mamba2Config) -> Plan {
        Plan::with(cfg, &Schedule::for_config(cfg)).expect("the default schedule fits every config")
    }

    /// Four float4 per thread and row (or `schedule.chunks`), fewer when the
    /// head is too small to fill 128 threads; the largest cluster dividing
    /// `H/G` up to `schedule.max_cluster`; waves of [`WAVE_VALUES`] values
    /// (or `schedule.wave` passes).
    pub fn with(cfg: &Mamba2Config, schedule: &Schedule) -> Result<Plan, ScheduleError> {
        let (p, n) = (cfg.head_dim, cfg.d_state);
        if !(1..=MAX_CLUSTER).contains(&schedule.max_cluster) {
            return Err(ScheduleError::Cluster(schedule.max_cluster));
        }
        let chunks = if schedule.chunks == 0 {
            let mut chunks = 4;
            while chunks > 1 && p * n / (4 * chunks) < MAX_BLOCK {
                chunks /= 2;
            }
            chunks
        } else {
            let c = schedule.chunks;
            let ok = [1, 2, 4].contains(&c)
                && n.is_multiple_of(4 * c)
                && (n / (4 * c)).is_power_of_two()
                && n / (4 * c) <= 32
                && p * (n / (4 * c)) >= 32;
            if !ok {
                return Err(ScheduleError::Chunks(c));
            }
            c
        };
        let lanes = n / (4 * chunks);
        let block = (p * lanes).min(MAX_BLOCK);
        let passes = p * lanes / block;
        let per_group = cfg.heads / cfg.n_groups;
        let cluster = (1..=per_group.min(schedule.max_cluster))
            .rev()
            .find(|k| per_group.is_multiple_of(*k))
            .expect("1 divides everything");
        let wave = match schedule.wave {
            0 => (WAVE_VALUES / (4 * chunks)).clamp(1, passes),
            w if passes.is_multiple_of(w) => w,
            wave => return Err(ScheduleError::Wave { wave, passes }),
        };
        let max = 2048 / block;
        if schedule.min_blocks > max {
            return Err(ScheduleError::MinBlocks {
                min_blocks: schedule.min_blocks,
                block,
                max,
            });
        }
        Ok(Plan {
            chunks,
            lanes,
            block,
            passes,
            cluster,
            heads_per_cta: per_group / cluster,
            wave,
        })
    }

    /// The launch grid for `requests` requests: CTAs along heads, requests
    /// along y.
    pub fn grid(&self, cfg: &Mamba2Config, requests: u32) -> [u32; 3] {
        [cfg.heads / self.heads_per_cta, requests, 1]
    }
}

/// `ln(1 + u)` for `u ∈ [0, 1]`: `2·atanh(s)`, `s = u / (2 + u) ≤ 1/3`, by
/// its series to `s^13` (truncation below 2e-8 relative; no `log`
/// instruction, which is only approximate).
fn log1p_unit(u: Val<f32>) -> Val<f32> {
    let s = u / (u + 2.0);
    let s2 = s * s;
    let mut poly = val(1.0f32 / 13.0);
    for k in [11.0f32, 9.0, 7.0, 5.0, 3.0, 1.0] {
        poly = fma(poly, s2, 1.0 / k);
    }
    (s * 2.0) * poly
}

/// `softplus(z) = max(z, 0) + ln(1 + e^-|z|)`.
fn softplus(z: Val<f32>) -> Val<f32> {
    z.max(0.0) + log1p_unit((-z.abs()).exp())
}

/// `t[at] = v`, where `ok` holds if given.
fn store_where<T: Elem, const R: usize>(
    t: Tensor<T, R>,
    at: [Ix; R],
    v: impl StoreValue<T>,
    ok: Option<Val<bool>>,
) {
    match ok {
        Some(ok) => t.store_if(at, v, ok),
        None => t.store(at, v),
    }
}

fn silu(z: Val<f32>) -> Val<f32> {
    z * z.sigmoid()
}

#[cluster_kernel(
    block = plan.block,
    cluster = plan.cluster,
    min_blocks = (schedule.min_blocks > 0).then_some(schedule.min_blocks),
    early = schedule.early,
    trigger_at_entry = schedule.trigger_at_entry,
    cluster_policy = ClusterPolicy::load_balancing_if(schedule.balance, plan.cluster)
)]
pub fn mamba2_decode<W: Elem, Bi: Elem>(
    #[comptime] cfg: &Mamba2Config,
    #[comptime] plan: &Plan,
    #[comptime] schedule: &Schedule,
    #[produced]
    #[strides(_, _)]
    xbc: Tensor<bf16, requests, { cfg.conv_dim() }>,
    #[strides(_, _)] conv_weight: Tensor<W, { cfg.conv_dim() }, 4>,
    #[when(cfg.has_conv_bias)]
    #[strides(_)]
    conv_bias: Tensor<Bi, { cfg.conv_dim() }>,
    #[strides(_, _, _)] conv_state: Tensor<bf16, conv_slots, { cfg.conv_dim() }, conv_width>,
    #[produced]
    #[strides(_, _)]
    dt: Tensor<bf16, requests, { cfg.heads }>,
    #[strides(_)] dt_bias: Tensor<f32, { cfg.heads }>,
    #[strides(_)] a: Tensor<f32, { cfg.heads }>,
    #[when(cfg.has_d)]
    #[strides(_)]
    d: Tensor<f32, { cfg.heads }>,
    #[when(cfg.has_z)]
    #[produced]
    #[strides(_, _)]
    z: Tensor<bf16, requests, { cfg.d_inner() }>,
    #[strides(_)] slots: Tensor<i32, requests>,
    #[align(16)]
    #[strides(_, _, _, 1)]
    state: Tensor<f32, state_slots, { cfg.heads }, { cfg.head_dim }, { cfg.d_state }>,
    #[strides(_, _)] output: Tensor<bf16, requests, { cfg.d_inner() }>,
) {
    let (block, lanes, m) = (plan.block, plan.lanes, plan.heads_per_cta);
    let (chunks, passes, wave) = (
        plan.chunks as usize,
        plan.passes as usize,
        plan.wave as usize,
    );
    let (p_n, n_n) = (cfg.head_dim, cfg.d_state);
    let rows = block / lanes;
    let d_inner = cfg.d_inner() as u32;
    let cta = block_idx(0);
    let request = block_idx(1);
    let head0 = cta * m;
    let tid = thread_idx();
    let slot = slots[request];
    // Evict-first on the state's loads and stores where the schedule asks.
    let state_io = if schedule.evict {
        state.evict_first()
    } else {
        state
    };
    // Thread `tid`'s `j`-th element of a span of `count` (an index clamped
    // into the span, and whether it is real where `count` is not a multiple
    // of the block).
    let span = |count: u32, j: u32| {
        let i = tid + block * j;
        if count.is_multiple_of(block) {
            (i, None)
        } else {
            (i.min(count - 1), Some(i < count))
        }
    };
    let spans = |count: u32| 0..count.div_ceil(block);

    if slot <= 0 {
        // Padding: zero output rows, nothing else read or written.
        pdl_wait();
        for j in spans(m * p_n) {
            let (i, real) = span(m * p_n, j);
            store_where(output, [ix(request), ix(head0 * p_n + i)], 0.0, real);
        }
        pdl_trigger();
    } else {
        let xs = shared!([f32; m * p_n]);
        let bc = shared!([f32; 2, n_n]);
        let group = cta / plan.cluster;
        let group_lane = tid & (lanes - 1);
        let row = |pass: usize| (tid >> lanes.trailing_zeros()) + rows * pass as u32;
        let column = |j: usize| (group_lane + lanes * j as u32) * 4;

        // ---- ready loads: conv taps, weights and bias of the CTA's x
        // channels and the group's B and C channels
        // (kind, span index j, index in the span, real, channel)
        let mut channels = Vec::new();
        for j in spans(m * p_n) {
            let (i, real) = span(m * p_n, j);
            channels.push((0, i, real, head0 * p_n + i));
        }
        for kind in 1..3u32 {
            let base = d_inner + ((kind - 1) * cfg.n_groups) * n_n + group * n_n;
            for j in spans(n_n) {
                let (i, real) = span(n_n, j);
                channels.push((kind, i, real, base + i));
            }
        }
        let mut taps = Vec::new();
        let mut partial = Vec::new();
        let mut current = Vec::new();
        for &(_, _, _, ch) in &channels {
            let t = [0u32, 1, 2].map(|j| conv_state[[slot, ch, j]]);
            let w = [0u32, 1, 2, 3].map(|i| conv_weight[[ch, i]].cast::<f32>().val());
            let mut acc = match conv_bias {
                Some(bias) => bias.load(ch).cast::<f32>().val(),
                None => val(0.0f32),
            };
            for i in 0..3 {
                acc = fma(t[i].cast::<f32>(), w[i], acc);
            }
            taps.push(t);
            partial.push(acc);
            current.push(w[3]);
        }
        if plan.cluster > 1 {
            // This CTA's reads of the group's conv state are done.
            cluster_arrive();
        }
        let (bias_dt, decay_a) = (
            (0..m).map(|hh| dt_bias[head0 + hh]).collect::<Vec<_>>(),
            (0..m).map(|hh| a[head0 + hh]).collect::<Vec<_>>(),
        );
        let skips: Vec<Option<Val<f32>>> = (0..m).map(|hh| d.map(|d| d[head0 + hh])).collect();
        // The state of wave `w` of head `hh` (passes `w·wave ..`), `chunks`
        // float4 per pass and thread. Waves are issued one ahead.
        let units: Vec<(usize, usize)> = (0..m as usize)
            .flat_map(|hh| (0..passes / wave).map(move |w| (hh, w)))
            .collect();
        let load_state = |(hh, w): (usize, usize)| {
            let mut s = regs!([f32; wave, chunks, 4]);
            for k in 0..wave {
                for j in 0..chunks {
                    let h = head0 + hh as u32;
                    let v4 = state_io.load4([slot, h, row(w * wave + k), column(j)]);
                    for e in 0..4 {
                        s[[k, j, e]] = v4.lane(e);
                    }
                }
            }
            s
        };
        let mut next = Some(load_state(units[0]));

        // ---- produced loads: this step's activations
        pdl_wait();
        let inputs: Vec<Val<bf16>> = channels
            .iter()
            .map(|&(_, _, _, ch)| xbc[[request, ch]])
            .collect();
        let raw_dt: Vec<Val<bf16>> = (0..m).map(|hh| dt[[request, head0 + hh]]).collect();
        let gates: Vec<Vec<Val<bf16>>> = (0..m)
            .map(|hh| match z {
                Some(z) => (0..passes)
                    .map(|pass| z[[request, (head0 + hh) * p_n + row(pass)]])
                    .collect(),
                None => Vec::new(),
            })
            .collect();
        pdl_trigger();

        // Channel `n`'s conv state after the step: [tap 1, tap 2, input].
        let shift_conv = |n: usize| {
            let (_, _, real, ch) = channels[n];
            let values = [taps[n][1], taps[n][2], inputs[n]];
            for (j, &v) in values.iter().enumerate() {
                store_where(conv_state, [ix(slot), ix(ch), ix(j as u32)], v, real);
            }
        };

        // ---- conv (bias, the three taps oldest first, the input) and SiLU
        for (n, &(kind, i, real, _)) in channels.iter().enumerate() {
            let pre = fma(inputs[n].cast::<f32>(), current[n], partial[n]);
            let act = silu(pre);
            let real: Val<bool> = real.unwrap_or(val(true));
            if real {
                if kind == 0 {
                    xs[i] = act;
                } else {
                    bc[[kind - 1, i]] = act;
                }
            }
            if kind == 0 {
                // The x channels are this CTA's alone.
                shift_conv(n);
            }
        }
        bar_sync(1, block);

        // ---- per head: Δ, dA, then the state update and y = S'·C
        let mut b_cols = regs!([f32; chunks, 4]);
        let mut c_cols = regs!([f32; chunks, 4]);
        for j in 0..chunks {
            let (b4, c4) = (bc.load4([0, column(j)]), bc.load4([1, column(j)]));
            for e in 0..4 {
                b_cols[[j, e]] = b4.lane(e);
                c_cols[[j, e]] = c4.lane(e);
            }
        }
        let mut step = None;
        for (u, &(hh, w)) in units.iter().enumerate() {
            let h = head0 + hh as u32;
            let mut s = next.take().expect("issued one unit ahead");
            if let Some(&ahead) = units.get(u + 1) {
                next = Some(load_state(ahead));
            }
            if w == 0 {
                let delta = softplus(raw_dt[hh].cast::<f32>() + bias_dt[hh]);
                let da = (delta * decay_a[hh]).exp();
                let mut db = regs!([f32; chunks, 4]);
                for j in 0..chunks {
                    for e in 0..4 {
                        db[[j, e]] = delta * b_cols[[j, e]];
                    }
                }
                step = Some((da, db));
            }
            let (da, db) = step.as_ref().expect("set at wave 0");
            for k in 0..wave {
                let pass = w * wave + k;
                let p = row(pass);
                let x = xs[hh as u32 * p_n + p];
                let mut y = val(0.0f32);
                for j in 0..chunks {
                    for e in 0..4 {
                        let new = fma(s[[k, j, e]], *da, db[[j, e]] * x);
                        s[[k, j, e]] = new;
                        y = fma(new, c_cols[[j, e]], y);
                    }
                    let s4 = pack([0, 1, 2, 3].map(|e| s[[k, j, e]]));
                    state_io.store([slot, h, p, column(j)], s4);
                }
                y = warp_sum(y, lanes);
                if let Some(skip) = skips[hh] {
                    y = fma(skip, x, y);
                }
                if let Some(&g) = gates[hh].get(pass) {
                    y *= silu(g.cast::<f32>().val());
                }
                let writer = (lanes > 1).then(|| group_lane == 0);
                store_where(
                    output,
                    [ix(request), ix(h * p_n + p)],
                    y.cast::<bf16>(),
                    writer,
                );
            }
        }

        // ---- the group's B/C conv state, once every CTA has read it
        if plan.cluster > 1 {
            cluster_wait();
        }
        if cluster_rank() == 0 {
            for (n, &(kind, ..)) in channels.iter().enumerate() {
                if kind != 0 {
                    shift_conv(n);
                }
            }
        }
    }
}

/// The kernel for `cfg` with `conv_weight` and `conv_bias` stored as f32
/// (else bf16; the bias flag is ignored without a bias), small-batch default
/// schedule ([`Schedule::for_config`]; a launch of known batch builds
/// [`Schedule::for_batch`] with [`build_with`]).
pub fn build(cfg: &Mamba2Config, weights_f32: bool, bias_f32: bool) -> Kernel {
    build_with(cfg, weights_f32, bias_f32, &Schedule::for_config(cfg))
        .expect("the default schedule fits every config")
}

/// [`build`] with `schedule`.
pub fn build_with(
    cfg: &Mamba2Config,
    weights_f32: bool,
    bias_f32: bool,
    schedule: &Schedule,
) -> Result<Kernel, ScheduleError> {
    let plan = &Plan::with(cfg, schedule)?;
    Ok(match (weights_f32, bias_f32) {
        (false, false) => mamba2_decode::<bf16, bf16>(cfg, plan, schedule),
        (false, true) => mamba2_decode::<bf16, f32>(cfg, plan, schedule),
        (true, false) => mamba2_decode::<f32, bf16>(cfg, plan, schedule),
        (true, true) => mamba2_decode::<f32, f32>(cfg, plan, schedule),
    })
}

/// The schedules the bench sweep (`decode-bench`) measures at batch 128,
/// around [`Schedule::PLAIN`] (first): the early schedule, evict-first,
/// trigger at entry, smaller clusters (more heads per CTA, the default among
/// them), lane widths, waves and occupancy; then each of those with the early
/// schedule again with the load-balancing cluster policy (`balance`).
/// `tests/ptxas.rs` assembles each at the bench's shape without spills.
pub fn sweep_schedules() -> Vec<Schedule> {
    let d = Schedule::PLAIN;
    let e = Schedule { early: true, ..d };
    let list = vec![
        d,
        e,
        Schedule { evict: true, ..d },
        Schedule { evict: true, ..e },
        Schedule {
            trigger_at_entry: true,
            ..e
        },
        Schedule {
            evict: true,
            trigger_at_entry: true,
            ..e
        },
        Schedule {
            max_cluster: 8,
            ..e
        },
        Schedule {
            max_cluster: 6,
            ..e
        },
        Schedule {
            max_cluster: 4,
            ..e
        },
        Schedule { chunks: 2, ..e },
        Schedule { chunks: 1, ..e },
        Schedule { wave: 2, ..e },
        Schedule { wave: 1, ..e },
        // Waves of fewer passes free registers (default 223 at this shape:
        // two CTAs per SM; waves of 2: 157, three; of 1: 128, four).
        Schedule {
            wave: 2,
            min_blocks: 3,
            ..e
        },
        Schedule {
            wave: 1,
            min_blocks: 4,
            ..e
        },
        Schedule {
            wave: 2,
            min_blocks: 3,
            evict: true,
            ..e
        },
        Schedule {
            wave: 1,
            min_blocks: 4,
            evict: true,
            trigger_at_entry: true,
            ..e
        },
        Schedule {
            max_cluster: 8,
            wave: 1,
            min_blocks: 4,
            ..e
        },
        Schedule {
            chunks: 2,
            wave: 2,
            min_blocks: 4,
            ..e
        },
        Schedule {
            max_cluster: 8,
            evict: true,
            trigger_at_entry: true,
            ..e
        },
        // The default (clusters of 8) with evict-first alone: evict gained
        // about a point on the plain early schedule and the trigger at entry
        // lost 0.1–0.4 (decode-bench at 6bfe441); measured at af1151d: 83.5 %
        // against the default's 85.1 %.
        Schedule {
            max_cluster: 8,
            evict: true,
            ..e
        },
    ];
    // Every schedule above has clusters at the bench's shape (H24 G1: 24
    // heads in one group, clusters of 12, 8, 6 or 4). The load-balancing
    // policy made each of them 3–5 % faster at batch 128 (docs/perf.md,
    // measured with an environment switch); the early ones again with it
    // (the two without the early schedule are only its baseline), so the
    // bench measures the knob on every layout: 21 + 19 schedules.
    let balanced: Vec<Schedule> = list
        .iter()
        .filter(|s| s.early)
        .map(|s| Schedule {
            balance: true,
            ..*s
        })
        .collect();
    list.into_iter().chain(balanced).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan(heads: u32, n_groups: u32, head_dim: u32, d_state: u32) -> Plan {
        let cfg = Mamba2Config {
            heads,
            n_groups,
            head_dim,
            d_state,
            ..Mamba2Config::default()
        };
        Plan::new(&cfg.validated().unwrap())
    }

    fn config(heads: u32, n_groups: u32) -> Mamba2Config {
        Mamba2Config {
            heads,
            n_groups,
            ..Mamba2Config::default()
        }
        .validated()
        .unwrap()
    }

    #[test]
    fn for_batch_takes_clusters_of_4_balanced_from_the_tuned_batch() {
        // Below the tuned batch: the small-batch default, whatever the shape.
        for (h, g) in [(24, 1), (80, 1), (48, 1), (16, 1), (5, 1), (4, 4)] {
            let cfg = config(h, g);
            for batch in [0, 1, 8, TUNED_BATCH - 1] {
                assert_eq!(
                    Schedule::for_batch(&cfg, batch),
                    Schedule::for_config(&cfg),
                    "H{h} G{g} B{batch}"
                );
            }
        }
        // The measured shape (H24 G1): `c8 early` below, `c4 early bal`
        // (clusters of 4, 6 heads per CTA) from 64 on.
        let cfg = config(24, 1);
        assert_eq!(Schedule::for_config(&cfg).label(), "c8 early");
        for batch in [TUNED_BATCH, 128, 512, 1 << 20] {
            let s = Schedule::for_batch(&cfg, batch);
            assert_eq!(
                s,
                Schedule {
                    max_cluster: 4,
                    balance: true,
                    ..Schedule::for_config(&cfg)
                }
            );
            assert_eq!(s.label(), "c4 early bal");
            let p = Plan::with(&cfg, &s).unwrap();
            assert_eq!((p.cluster, p.heads_per_cta), (4, 6));
        }
        // 16 heads: clusters of 4 (4 heads per CTA) fit too.
        let p = Plan::with(&config(16, 1), &Schedule::for_batch(&config(16, 1), 64)).unwrap();
        assert_eq!((p.cluster, p.heads_per_cta), (4, 4));
        // Where clusters of 4 would put more than MAX_DEFAULT_HEADS_PER_CTA
        // heads in a CTA (80 heads: 20; 48: 12), or fall to one CTA where the
        // policy does nothing (5 heads: one CTA of 5; 17: one of 17; one head
        // per group), the small-batch default stays.
        for (h, g) in [(80, 1), (48, 1), (5, 1), (17, 1), (4, 4)] {
            let cfg = config(h, g);
            assert_eq!(
                Schedule::for_batch(&cfg, 128),
                Schedule::for_config(&cfg),
                "H{h} G{g}"
            );
        }
        assert_eq!(Schedule::for_config(&config(48, 1)).label(), "c8 early");
        assert_eq!(Schedule::for_config(&config(80, 1)).label(), "early");
    }

    #[test]
    fn plans_cover_the_head_and_keep_groups_in_one_cluster() {
        // The model head: 128 threads, 8 lanes × 4 float4 per row, 16 rows ×
        // 4 passes, one wave; 80 heads in one group: clusters of 16, 5 heads
        // per CTA.
        let p = plan(80, 1, 64, 128);
        assert_eq!(
            (p.chunks, p.lanes, p.block, p.passes, p.wave),
            (4, 8, 128, 4, 4)
        );
        assert_eq!((p.cluster, p.heads_per_cta), (16, 5));
        // 24 heads: clusters of 8 (3 heads per CTA), the measured default.
        assert_eq!(plan(24, 1, 64, 128).cluster, 8);
        assert_eq!(plan(48, 1, 64, 128).cluster, 8);
        // 60 heads: clusters of at most 8 would be 6 CTAs of 10 heads; the
        // largest cluster instead, 15 CTAs of 4.
        assert_eq!(plan(60, 1, 64, 128).cluster, 15);
        assert_eq!(
            (plan(17, 1, 64, 128).cluster, plan(4, 4, 64, 128).cluster),
            (1, 1)
        );
        // The smallest head: 64 threads of one float4 each.
        let p = plan(2, 1, 16, 16);
        assert_eq!((p.chunks, p.lanes, p.block, p.passes), (1, 4, 64, 1));
        // The largest: 16 passes in waves of 4.
        let p = plan(2, 1, 128, 256);
        assert_eq!((p.lanes, p.passes, p.wave), (16, 16, 4));
        for (h, g, dim, n) in [(6, 3, 32, 64), (8, 2, 128, 16), (1, 1, 16, 256)] {
            let p = plan(h, g, dim, n);
            assert_eq!(p.lanes * 4 * p.chunks, n);
            assert_eq!(p.block * p.passes, dim * p.lanes);
            assert!(p.block.is_multiple_of(32) && p.lanes <= 32);
            assert!(p.passes.is_multiple_of(p.wave));
        }
    }
}
