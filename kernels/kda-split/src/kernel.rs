//! The flagship written in the language: KdaSplit (the seed's CuTe-DSL
//! class) with every configuration the seed supports — 1 to 8 tokens,
//! padding slots, optional bias, gate modes 0/1/2, early 0–3, 1–16 CTAs per
//! head, every lane width, evict-first, fast math — in one
//! `#[cluster_kernel]`, run on the simulator against the float64 reference
//! (`tests/sim_matrix.rs`, `tests/gpu_kda.rs`).
//!
//! One cluster of C CTAs handles one (head, request); each CTA has 160
//! threads: the `state` role (128 threads) runs the conv, the L2 norms, the
//! delta rule on its `rows = 128 / C` value rows and the gated RMSNorm of the
//! tokens it owns; the `gate` warp projects F_B for its rows' key features
//! and multicasts the decays to every CTA over DSMEM. PDL waits sit before
//! each role's first read of a produced tensor and cluster waits right after
//! mbarrier setup; the scheduler derives the seed's early schedules from
//! that (`early = ..`): ready loads move above the PDL wait, cluster waits
//! down to each role's first DSMEM send. The PDL trigger follows the last
//! produced read (and ends the padding branch); for a batch of one the
//! scheduler moves it to the entry (`trigger_at_entry = ..`). The body
//! reads and writes `state` without a cache policy: the seed's `evict`
//! (L2 evict-first on the staged state's bulk copy and write-back) is the
//! parameter's `#[evict_first(..)]` hint, which the scheduler applies to
//! every access of it. Where ready data waits is the scheduler's too: the
//! CTA's state rows are a tile (`state.tile(..)`), loaded into registers
//! with the ready loads or, with `#[stage_through_shared(cfg.staged())]`
//! (the seed's early >= 2), bulk-copied to shared memory there and read row
//! by row in the chains; the gate warp's F_B loads, with
//! `#[stage_through_shared(cfg.gate_staged())]` (early 3), go through
//! per-lane shared slots by cp.async across its PDL wait (pass
//! `stage_through_shared`). The delta rule states one value row's chain once, in
//! phases (`chains(..)`: load, decay and S·k̂, update and S·q̂, send and
//! store); how many rows are issued side by side (the seed's waves of
//! passes, at most 4 when the state is staged in shared memory) is the
//! `wave = ..` hint.
//!
//! Where each token's new state rows go is the scheduler's too: the
//! program stores them through a tile writer (`state.tile_writer(..)`, one
//! tile per token: `row(r).store4(..)` in the chain, `finish` after it,
//! `drain` before the role ends), as register stores or, with
//! `#[store_through_shared(cfg.bulk_store())]` (schedule entry 6, T > 1;
//! issue 15, "T > 1 restructured for bandwidth"), into a ring of two shared
//! stages, each token's stage leaving as one bulk store (`rows · 512`
//! contiguous bytes, none for a write hole) after the state threads' named
//! barrier, while the next token is computed.
//!
//! How the GPU starts the clusters is a launch property, not the body's:
//! `cluster_policy = cfg.cluster_policy()` (schedule entry 7, `balance`,
//! cluster > 1) asks for the load-balancing policy.

use crate::config::{GateMode, KdaConfig};
use kda::cluster_kernel;
use kda::dsl::{Elem, Val, bf16};
use kda::ir::{Kernel, Scalar};
use kda_ir::occupancy::{Occupancy, ctas_per_sm};
pub use kda_std::{RequestSlots, conv_silu, request_slots, row_dot, sigmoid};

/// `decay = exp(lower_bound · σ(exp(a_log) · (bf16(raw) + dt_bias)))`.
fn decay(raw: Val<f32>, dt: Val<f32>, a: Val<f32>, lower: Val<f32>, fast: bool) -> Val<f32> {
    let x = a * (raw.cast::<bf16>().val().cast::<f32>() + dt);
    (lower * sigmoid(x, fast)).fast_exp()
}

/// Where value row `row`'s output lands in `out`, so that the RMSNorm's
/// float4 reads see each row once (a bijection of 0..128).
fn output_position(row: Val<u32>) -> Val<u32> {
    ((row & 7) << 4) | ((row >> 5) << 2) | ((row & 31) >> 3)
}

/// The seed's occupancy knob: a `.minnctapersm` bound, or none for 0.
fn occupancy(cfg: &KdaConfig) -> Option<u32> {
    (cfg.schedule.occupancy > 0).then_some(cfg.schedule.occupancy)
}

#[cluster_kernel(
    block = 160,
    cluster = cfg.cluster(),
    min_blocks = occupancy(cfg),
    early = cfg.early(),
    trigger_at_entry = cfg.trigger_at_entry(),
    cluster_policy = cfg.cluster_policy(),
    wave = cfg.wave()
)]
pub fn kda_split<W: Elem, Bi: Elem, Be: Elem, G: Elem, N: Elem>(
    #[comptime] cfg: &KdaConfig,
    #[produced] x: Tensor<bf16, rows, { 3 * cfg.dim() }>,
    weights: Tensor<W, 3, 4, { cfg.dim() }>,
    bias: Tensor<Bi, { 3 * cfg.dim() }>,
    #[strides(_, _, _)] conv_state: Tensor<bf16, cache, { 3 * cfg.dim() }, conv_width>,
    #[produced]
    #[align(16)]
    raw_gate: Tensor<bf16, rows, 128>,
    #[produced] beta: Tensor<Be, rows, { cfg.heads }>,
    a_log: Tensor<f32, { cfg.heads }>,
    dt_bias: Tensor<f32, { cfg.dim() }>,
    #[when(cfg.tokens == 1)] slots: Tensor<i32, requests>,
    #[when(cfg.tokens > 1)]
    #[name = "slots"]
    slot_table: Tensor<i32, requests, slot_width>,
    #[align(16)]
    #[strides(_, _, { (cfg.staged() || cfg.bulk_store()).then_some(128) }, 1)]
    #[evict_first(cfg.schedule.evict)]
    #[stage_through_shared(cfg.staged())]
    #[store_through_shared(cfg.bulk_store())]
    state: Tensor<f32, cache, { cfg.heads }, 128, 128>,
    output: Tensor<bf16, rows, { cfg.dim() }>,
    #[produced] gate: Tensor<G, rows, { cfg.dim() }>,
    norm_weight: Tensor<N, 128>,
    lower_bound: f32,
    scale: f32,
    eps: f32,
    #[align(16)]
    #[stage_through_shared(cfg.gate_staged())]
    f_b_weight: Tensor<bf16, { cfg.dim() }, 128>,
    #[when(cfg.tokens > 1)] accepted: Tensor<i32, requests>,
) {
    let (t_n, c_n, rows, lanes) = (cfg.tokens, cfg.cluster(), cfg.rows(), cfg.lanes());
    let (chunks, groups, passes) = (cfg.chunks() as usize, cfg.groups(), cfg.passes() as usize);
    let (dim, fast) = (cfg.dim() as u32, cfg.fast_math());
    let state_role = role!(0..128);
    let gate_role = role!(128..160);
    let request = block_idx(2);
    let head = block_idx(1);
    let partition = cluster_rank();
    let value_base = partition * rows;
    let token_row = |tok: u32| request * t_n + tok;

    let RequestSlots {
        read,
        conv: conv_slot,
        offset,
        writes,
    } = request_slots(t_n, request, slots, slot_table, accepted);

    if read <= 0 {
        // Padding: CTA 0 zeroes the outputs; nothing else is written.
        in_role!(state_role, {
            pdl_wait();
            if partition == 0 {
                for tok in 0..t_n {
                    output[[token_row(tok), head * 128 + thread_idx()]] = val::<bf16>(0.0);
                }
            }
        });
        pdl_trigger();
    } else {
        let owned = t_n.div_ceil(c_n);
        let out_full = mbarrier!(arrivals = 1, tx = 512, roles = [state_role], count = owned);
        let decay_full = mbarrier!(
            arrivals = 1,
            tx = 512 * t_n,
            roles = [state_role, gate_role]
        );
        let decays = shared!([f32; t_n, 128], guard = decay_full, roles = [state_role, gate_role]);
        let state_rows = state.tile([read, head, value_base, 0], [rows, 128]);
        let (q, k) = (shared!([f32; t_n, 128]), shared!([f32; t_n, 128]));
        let (v, out) = (shared!([f32; t_n, rows]), shared!([f32; owned, 128]));
        let reductions = shared!([f32; t_n, 8]);
        // Each token's new state rows: one tile per token, stored by the state
        // threads (named barrier 1 when the scheduler stages them in shared
        // memory).
        let new_state = state.tile_writer([rows, 128], t_n, &state_role, 1);

        in_role!(state_role, {
            let tid = thread_idx();
            // Thread 0 arms the barriers of the tokens this CTA owns (p, p + C,
            // ...) and the decay barrier, then the CTA joins the cluster barrier.
            if tid == 0 {
                for (n, bar) in out_full.iter().enumerate() {
                    if partition + n as u32 * c_n < t_n {
                        bar.init();
                        bar.arm();
                    }
                }
                decay_full.init();
                decay_full.arm();
                state_rows.init();
            }
            fence_mbarrier_init();
            cluster_arrive_relaxed();
            cluster_wait();
            let (lane, warp) = (tid & 31, tid >> 5);
            let group = tid >> lanes.trailing_zeros();
            let group_lane = tid & (lanes - 1);
            // Pass p covers value rows p·groups + group; the last pass may run
            // past `rows`: its threads use a clamped row and are masked.
            let row: Vec<Val<u32>> = (0..passes as u32).map(|p| group + p * groups).collect();
            let safe_row: Vec<Val<u32>> = row.iter().map(|&r| r & (rows - 1)).collect();
            let column = |j: usize| (group_lane + lanes * j as u32) * 4;
            let qk_channel = head * 128 + tid;
            let v_channel = head * 128 + value_base + (tid & (rows - 1));
            let channel = |s: usize| (if s == 2 { v_channel } else { qk_channel }) + s as u32 * dim;

            // ---- ready loads: this CTA's state rows, conv taps, weights. Row p
            // of the state tile goes to registers here, or (staged by the
            // scheduler) thread 0 bulk-copies the tile and row p is read from
            // shared memory in phase 0 of its chain.
            let mut history = regs!([f32; passes, chunks, 4]);
            let load_row = |history: &mut Regs<f32>, p: usize| {
                for j in 0..chunks {
                    let v4 = state_rows.row(safe_row[p]).load4(column(j));
                    for e in 0..4 {
                        history[[p, j, e]] = v4.lane(e);
                    }
                }
            };
            state_rows.issue(
                || tid == 0,
                || (0..passes).for_each(|p| load_row(&mut history, p)),
            );
            let (mut taps, mut coeff, mut acc) =
                (regs!([bf16; 3, 3]), regs!([W; 3, 4]), regs!([f32; 3]));
            for s in 0..3 {
                for t in 0..3 {
                    taps[[s, t]] = conv_state[[conv_slot, channel(s), offset + t]];
                }
                for i in 0..4 {
                    coeff[[s, i]] = weights[[s, i, channel(s) - s as u32 * dim]];
                }
                acc[s] = if cfg.has_bias {
                    bias[channel(s)].cast::<f32>().val()
                } else {
                    val(0.0)
                };
            }
            let nw = norm_weight[tid];

            // ---- produced loads: this step's activations
            pdl_wait();
            let (mut inputs, mut betas, mut gates) =
                (regs!([bf16; t_n, 3]), Vec::new(), Vec::new());
            for tok in 0..t_n as usize {
                let r = token_row(tok as u32);
                for s in 0..3 {
                    inputs[[tok, s]] = x[[r, channel(s)]];
                }
                betas.push(beta[[r, head]]);
                gates.push(gate[[r, qk_channel]]);
            }
            pdl_trigger();

            // ---- conv (bias, then taps oldest first) and SiLU; q, k, v shared
            let mut act = regs!([f32; t_n, 3]);
            for tok in 0..t_n as usize {
                for s in 0..3 {
                    act[[tok, s]] = conv_silu(acc[s], &taps, &inputs, &coeff, s, tok, fast);
                }
                q[[tok, tid]] = act[[tok, 0]];
                k[[tok, tid]] = act[[tok, 1]];
            }
            let betas: Vec<_> = betas
                .iter()
                .map(|b| sigmoid(b.cast::<f32>().val(), fast))
                .collect();
            let gates: Vec<_> = gates
                .iter()
                .map(|g| sigmoid(g.cast::<f32>().val(), fast))
                .collect();
            if tid < rows {
                for tok in 0..t_n as usize {
                    v[[tok, tid]] = act[[tok, 2]];
                }
            }
            // Per-warp partial sums of q² and k², combined per token below.
            let squares: Vec<_> = (0..t_n as usize)
                .map(|t| [0, 1].map(|s| warp_sum(act[[t, s]] * act[[t, s]], 32)))
                .collect();
            if lane == 0 {
                for (tok, sq) in squares.iter().enumerate() {
                    reductions[[tok, warp]] = sq[0];
                    reductions[[tok, warp + 4]] = sq[1];
                }
            }
            bar_sync(1, 128);

            // ---- per token: operands, then the delta rule, one row's chain in phases
            for tok in 0..t_n as usize {
                let r = |i: usize| reductions[[tok, i]];
                let norm = |o| (((r(o) + r(o + 2)) + (r(o + 1) + r(o + 3))) + 1.0e-6).fast_rsqrt();
                let (fq, fk) = (norm(0) * scale, norm(4));
                let (mut qr, mut kr, mut dk) = (
                    regs!([f32; chunks, 4]),
                    regs!([f32; chunks, 4]),
                    regs!([f32; chunks, 4]),
                );
                for j in 0..chunks {
                    let (q4, k4) = (
                        q.load4([tok, column(j)]).lanes(),
                        k.load4([tok, column(j)]).lanes(),
                    );
                    for e in 0..4 {
                        qr[[j, e]] = q4[e] * fq;
                        kr[[j, e]] = k4[e] * fk;
                    }
                }
                if tok == 0 {
                    decay_full.wait();
                }
                for j in 0..chunks {
                    let d4 = decays.load4([tok, column(j)]).lanes();
                    for e in 0..4 {
                        dk[[j, e]] = d4[e];
                    }
                }
                let (owner, slot) = (tok as u32 % c_n, tok / c_n as usize);
                // The token's new rows go to its write slot; none to a hole (T > 1).
                let write = writes[tok];
                let live = || if t_n > 1 { Some(write > 0) } else { None };
                let new_rows = new_state.tile([write, head, value_base, 0], live);
                let (mut dots, mut outs) = (regs!([f32; passes]), regs!([f32; passes]));
                chains(passes, 4, |p, phase| match phase {
                    // the row (when staged: from shared memory)
                    0 => state_rows.read(|| load_row(&mut history, p)),
                    // decay, then u = S·k̂ summed over the row's lanes
                    1 => {
                        for j in 0..chunks {
                            for e in 0..4 {
                                history[[p, j, e]] *= dk[[j, e]];
                            }
                        }
                        dots[p] = warp_sum(row_dot(&history, &kr, p, fast), lanes);
                    }
                    // δ = (v − u)·β; S += δ k̂ᵀ; o = S·q̂
                    2 => {
                        let delta = (v[[tok, safe_row[p]]] - dots[p]) * betas[tok];
                        for j in 0..chunks {
                            for e in 0..4 {
                                history[[p, j, e]] =
                                    fma_with(kr[[j, e]], delta, history[[p, j, e]], fast);
                            }
                        }
                        outs[p] = warp_sum(row_dot(&history, &qr, p, fast), lanes);
                    }
                    // o to the token's owner; the new state row to memory
                    _ => {
                        let masked = (p as u32 + 1) * groups > rows;
                        let valid = row[p] < rows;
                        let leader = group_lane == 0;
                        let o = outs[p];
                        if if masked { leader & valid } else { leader } {
                            let pos = output_position(value_base + row[p]);
                            send!(out[[slot, pos]] = o, to = owner, completes = out_full[slot]);
                        }
                        // the new state row where the row is real and the write slot live
                        let mask = new_rows.mask(masked.then_some(valid));
                        for j in 0..chunks {
                            let h4 = [0, 1, 2, 3].map(|e| history[[p, j, e]]);
                            new_rows.row(safe_row[p]).store4(column(j), pack(h4), &mask);
                        }
                    }
                });
                new_rows.finish(|| tid == 0);
            }

            // ---- conv state: [tap 1, tap 2, inputs..] of the v rows here, of
            // q and k by the owner of token 0 (CTA 0)
            let window = |s: usize| {
                let mut w = vec![taps[[s, 1]], taps[[s, 2]]];
                w.extend((0..t_n as usize).map(|t| inputs[[t, s]]));
                w
            };
            let v_window = window(2);
            if tid < rows {
                for (i, &xv) in v_window.iter().enumerate() {
                    conv_state[[conv_slot, channel(2), i]] = xv;
                }
            }

            // ---- gated RMSNorm of the tokens this CTA owns
            let nw = nw.cast::<f32>().val();
            for tok in 0..t_n {
                let slot = (tok / c_n) as usize;
                let windows: Vec<_> = if tok == 0 {
                    (0..2).map(window).collect()
                } else {
                    vec![]
                };
                if partition == tok % c_n {
                    out_full[slot].wait();
                    let raw = out[[slot, output_position(tid)]];
                    let mut sums = Vec::new();
                    for g in 0..4 {
                        let sq = out
                            .load4([slot, (lane & 7) * 16 + 4 * g])
                            .lanes()
                            .map(|o| o * o);
                        sums.push(warp_sum((sq[0] + sq[2]) + (sq[1] + sq[3]), 8));
                    }
                    let sumsq = (sums[0] + sums[2]) + (sums[1] + sums[3]);
                    let rstd = (sumsq * (1.0 / 128.0) + eps).fast_rsqrt();
                    let y = raw * rstd * nw * gates[tok as usize];
                    output[[token_row(tok), qk_channel]] = y.cast::<bf16>();
                    for (s, w) in windows.iter().enumerate() {
                        for (i, &xv) in w.iter().enumerate() {
                            conv_state[[conv_slot, channel(s), i]] = xv;
                        }
                    }
                }
            }
            // The last stores are out of shared memory before the CTA exits.
            new_state.drain(|| tid == 0);
        });

        in_role!(gate_role, {
            let lane = thread_idx() & 31;
            cluster_arrive_relaxed();
            cluster_wait();
            let a = a_log[head].fast_exp();
            let feature_base = head * 128 + value_base;
            let decay_of = |raw: Val<f32>, dt: Val<f32>| decay(raw, dt, a, lower_bound, fast);

            // T = 1: each lane sends one float4 of decays (packet `lane % (rows/4)`)
            // to CTA `lane / (rows/4)`, gathered from the lanes that computed
            // them: feature f is in lane 4(f & 7) + 2(f >> 4) + ((f >> 3) & 1)
            // (mma layout) or lane f (mode 2); decays[r] covers features 32r...
            let multicast = |ds: &[Val<f32>]| {
                let packet = lane & (rows / 4 - 1);
                let destination = lane >> (rows / 4).trailing_zeros();
                let values = [0, 1, 2, 3].map(|e| {
                    let f = (packet * 4 + e) & 31;
                    let src = match cfg.gate_mode {
                        GateMode::Fma => f,
                        _ => ((f & 7) * 4) | ((f >> 4) * 2) | ((f >> 3) & 1),
                    };
                    let shuffled: Vec<_> = ds.iter().map(|&d| shfl_idx(d, src)).collect();
                    let mut value = shuffled[0];
                    for (r, &s) in shuffled.iter().enumerate().skip(1) {
                        value = select((packet >> 3) == r as u32, s, value);
                    }
                    value
                });
                let [v0, v1, v2, v3] = values;
                send!(
                    decays[value_base + packet * 4] = [v0, v1, v2, v3],
                    to = destination,
                    completes = decay_full
                );
            };

            if cfg.gate_mode == GateMode::Fma {
                // Mode 2: lane l computes feature l mod rows as sixteen chains of
                // eight FMAs over k = 8i..8i+7, summed in a butterfly.
                let row = feature_base + (lane & (rows - 1));
                let w: Vec<_> = (0..16)
                    .map(|i| f_b_weight.load8([row, 8 * i]).lanes())
                    .collect();
                let dt = dt_bias[row];
                pdl_wait();
                let mut partial = Vec::new();
                for i in 0..16 {
                    let (a0, a1) = (
                        raw_gate.load4([request, 8 * i]).lanes(),
                        raw_gate.load4([request, 8 * i + 4]).lanes(),
                    );
                    let mut acc = val::<f32>(0.0);
                    for e in 0..8 {
                        let xe = if e < 4 { a0[e] } else { a1[e - 4] };
                        acc = fma(xe.cast::<f32>(), w[i as usize][e].cast::<f32>(), acc);
                    }
                    partial.push(acc);
                }
                for shift in (0..4).rev() {
                    for i in 0..(1usize << shift) {
                        partial[i] = partial[i] + partial[i | (1 << shift)];
                    }
                }
                multicast(&[decay_of(partial[0], dt)]);
            } else {
                // Modes 0/1: F_B rows (16 features per tile) × activation
                // columns with mma.m16n8k16, one chain (mode 0) or four (mode 1).
                let tiles = (rows / 16) as usize;
                let (g, qd) = (lane >> 2, lane & 3);
                let wide = rows >= 64;
                let row_of =
                    |tile: usize, half: u32| feature_base + g + 16 * tile as u32 + 8 * half;
                // A fragments of chunks 2c, 2c + 1 from 16 bytes of rows r, r + 8
                let split = |l: Val<[u32; 4]>, h: Val<[u32; 4]>| {
                    let (l, h) = (l.lanes(), h.lanes());
                    [[l[0], h[0], l[1], h[1]], [l[2], h[2], l[3], h[3]]]
                };
                // Staged by the scheduler (early 3), each 16-byte piece goes
                // through the lane's own shared slot by cp.async, read back
                // after the PDL wait.
                let mut af: Vec<Vec<[Val<u32>; 4]>> = vec![Vec::new(); tiles];
                for (tile, at) in af.iter_mut().enumerate() {
                    for chunk in 0..(if wide { 4 } else { 8 }) {
                        if wide {
                            let col = qd * 8 + 32 * chunk;
                            let low = f_b_weight.load8([row_of(tile, 0), col]).bitcast();
                            let high = f_b_weight.load8([row_of(tile, 1), col]).bitcast();
                            at.extend(split(low, high));
                        } else {
                            let col = qd * 4 + 16 * chunk;
                            let l = f_b_weight
                                .load4([row_of(tile, 0), col])
                                .bitcast::<[u32; 2]>()
                                .lanes();
                            let h = f_b_weight
                                .load4([row_of(tile, 1), col])
                                .bitcast::<[u32; 2]>()
                                .lanes();
                            at.push([l[0], h[0], l[1], h[1]]);
                        }
                    }
                }
                pdl_wait();
                // B fragments: column g is token g % T of this request.
                let token = if t_n > 1 {
                    token_row(0) + g % t_n
                } else {
                    request
                };
                let bfrag: Vec<[Val<u32>; 2]> = if wide {
                    let pairs: Vec<_> = (0..4)
                        .map(|c| {
                            raw_gate
                                .load8([token, qd * 8 + 32 * c])
                                .bitcast::<[u32; 4]>()
                                .lanes()
                        })
                        .collect();
                    (0..8)
                        .map(|c| [pairs[c / 2][2 * (c % 2)], pairs[c / 2][2 * (c % 2) + 1]])
                        .collect()
                } else {
                    (0..8)
                        .map(|c| {
                            raw_gate
                                .load4([token, qd * 4 + 16 * c])
                                .bitcast::<[u32; 2]>()
                                .lanes()
                        })
                        .collect()
                };
                let chains = if cfg.gate_mode == GateMode::MmaChains {
                    4
                } else {
                    1
                };
                let zero = val::<f32>(0.0);
                let mut acc = vec![vec![pack([zero; 4]); tiles]; chains];
                for chunk in 0..8 {
                    let (chain, bv) = (chunk * chains / 8, pack(bfrag[chunk]));
                    for tile in 0..tiles {
                        acc[chain][tile] = mma(pack(af[tile][chunk]), bv, acc[chain][tile]);
                    }
                }
                // The raw gate of one D element, summed over chains ((c0+c1)+c2)+c3.
                let raw = |tile: usize, e: usize| {
                    let mut r = acc[0][tile].lane(e);
                    for c in acc.iter().skip(1) {
                        r += c[tile].lane(e);
                    }
                    r
                };
                if t_n == 1 {
                    // Lane (g, q) owns features 32r + 16(q >> 1) + g + 8(q & 1).
                    let (hi, lo) = ((qd >> 1) != 0, (qd & 1) != 0);
                    let feature = (qd >> 1) * 16 + g + (qd & 1) * 8;
                    let ds: Vec<_> = (0..(rows / 32).max(1) as usize)
                        .map(|r| {
                            let mut value = select(lo, raw(2 * r, 2), raw(2 * r, 0));
                            if tiles > 2 * r + 1 {
                                value = select(
                                    hi,
                                    select(lo, raw(2 * r + 1, 2), raw(2 * r + 1, 0)),
                                    value,
                                );
                            }
                            let f = (feature + 32 * r as u32) & (rows - 1);
                            decay_of(value, dt_bias[feature_base + f])
                        })
                        .collect();
                    multicast(&ds);
                } else {
                    // T > 1: lane (g, q) holds tokens 2q, 2q + 1 of features
                    // 16·tile + g (+8): one 4-byte send per decay and CTA.
                    for i in 0..(rows / 8) as usize {
                        let (tile, half) = (i / 2, (i % 2) as u32);
                        let f = g + 16 * tile as u32 + 8 * half;
                        let dt = dt_bias[feature_base + f];
                        for column in 0..2u32 {
                            let d = decay_of(raw(tile, (2 * half + column) as usize), dt);
                            let token = qd * 2 + column;
                            if token < t_n {
                                send!(
                                    decays[token * 128 + value_base + f] = d,
                                    to = all,
                                    completes = decay_full
                                );
                            }
                        }
                    }
                }
            }
        });
    }
}

/// Element types of the arguments the spec leaves generic (converted to f32
/// at first use).
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct Dtypes {
    pub weights: Scalar,
    pub bias: Scalar,
    pub beta: Scalar,
    pub gate: Scalar,
    pub norm_weight: Scalar,
}

impl Default for Dtypes {
    fn default() -> Self {
        Dtypes {
            weights: Scalar::BF16,
            bias: Scalar::BF16,
            beta: Scalar::BF16,
            gate: Scalar::BF16,
            norm_weight: Scalar::BF16,
        }
    }
}

/// Threads per CTA: the state role (128) and the gate warp.
pub const BLOCK: u32 = 160;

/// How many KdaSplit CTAs one SM holds with `registers` per thread and
/// `shared` bytes of shared memory per CTA (`kda_ir::occupancy`, sm_90
/// limits), and the state those CTAs read, in KiB: `128 / cluster` value
/// rows of 512 bytes each. What `info` and the bench's rows print as
/// `CTAs/SM` and `state/SM`.
pub fn residency(registers: u32, shared: u32, cluster: u32) -> (Occupancy, u64) {
    let occupancy = ctas_per_sm(BLOCK, registers, shared);
    let rows = crate::config::HEAD_DIM as u64 / u64::from(cluster.max(1));
    (occupancy, u64::from(occupancy.ctas) * rows * 512 / 1024)
}

/// Trace KdaSplit for one configuration and argument dtypes: `weights` may be
/// bf16 or f32 (vLLM keeps conv weights in f32); `bias`, `beta`, `gate` and
/// `norm_weight` are all bf16 or all f32.
pub fn build(cfg: &KdaConfig, dt: &Dtypes) -> Result<Kernel, UnsupportedDtypes> {
    use Scalar::{BF16, F32};
    let rest = [dt.bias, dt.beta, dt.gate, dt.norm_weight];
    let all = |s: Scalar| rest.iter().all(|&r| r == s);
    Ok(match (dt.weights, all(BF16), all(F32)) {
        (BF16, true, _) => kda_split::<bf16, bf16, bf16, bf16, bf16>(cfg),
        (F32, true, _) => kda_split::<f32, bf16, bf16, bf16, bf16>(cfg),
        (BF16, _, true) => kda_split::<bf16, f32, f32, f32, f32>(cfg),
        (F32, _, true) => kda_split::<f32, f32, f32, f32, f32>(cfg),
        _ => return Err(UnsupportedDtypes(*dt)),
    })
}

/// A dtype combination the kernel is not instantiated for.
#[derive(Debug, thiserror::Error)]
#[error(
    "unsupported argument dtypes {0:?}: weights bf16 or f32, and bias, beta, gate, norm_weight all bf16 or all f32"
)]
pub struct UnsupportedDtypes(pub Dtypes);
