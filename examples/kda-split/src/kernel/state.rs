//! The state role: conv + SiLU, L2 norms, the gated delta rule on the CTA's
//! value rows, and the gated RMSNorm of the tokens this CTA owns.

use kda_ir::{Builder, CachePolicy, CmpOp, Type, UnOp, Value};

use super::layout::{Barriers, Params, output_position};
use super::ops::{addc, and, dot4, f32, group_sum, lanes4, mulc, shr, sigmoid, silu, tree_sum};
use super::{Slots, channel, token_row};
use crate::config::KdaConfig;

pub(crate) fn state_role(
    b: &mut Builder,
    cfg: &KdaConfig,
    p: &Params,
    bars: &Barriers,
    slots: &Slots,
    request: Value,
) {
    b.in_role(p.state_role, |b| body(b, cfg, p, bars, slots, request));
}

fn body(
    b: &mut Builder,
    cfg: &KdaConfig,
    p: &Params,
    bars: &Barriers,
    slots: &Slots,
    request: Value,
) {
    let (t_n, rows, lanes, chunks) = (cfg.tokens, cfg.rows(), cfg.lanes(), cfg.chunks());
    let (groups, passes) = (cfg.groups(), cfg.passes());
    let dim = cfg.heads * 128;
    let (ftz, fast) = (cfg.fast_math(), cfg.fast_math());
    let policy = if cfg.schedule.evict {
        CachePolicy::EvictFirst
    } else {
        CachePolicy::Normal
    };

    let tid = b.thread_idx();
    let partition = b.cluster_rank();
    let head = b.block_idx(1);
    bars.setup(b, cfg, partition, tid);
    b.cluster_arrive(true);
    b.cluster_wait();

    let lane = and(b, tid, 31);
    let warp = shr(b, tid, 5);
    let group = shr(b, tid, lanes.trailing_zeros());
    let group_lane = and(b, tid, lanes - 1);
    let value_base = mulc(b, partition, rows);
    // Pass p covers value rows p·groups + group; the last pass may run past
    // `rows` (groups > rows): those threads use a clamped row and are masked.
    let row: Vec<Value> = (0..passes)
        .map(|pass| addc(b, group, pass * groups))
        .collect();
    let safe_row: Vec<Value> = row.iter().map(|&r| and(b, r, rows - 1)).collect();
    let valid: Vec<Option<Value>> = (0..passes)
        .map(|pass| {
            ((pass + 1) * groups > rows).then(|| {
                let n = b.u32(rows);
                b.cmp(CmpOp::Lt, row[pass as usize], n)
            })
        })
        .collect();
    let column: Vec<Value> = (0..chunks)
        .map(|j| {
            let c = addc(b, group_lane, lanes * j);
            mulc(b, c, 4)
        })
        .collect();
    let state_row_index = |b: &mut Builder, slot: Value, pass: usize| {
        let r = b.add(value_base, safe_row[pass]);
        [slot, head, r]
    };

    // ---- ready loads: state rows (or their bulk copy), conv taps, weights
    let f32x4 = Type::vec(kda_ir::Scalar::F32, 4);
    let mut history: Vec<Vec<Value>> = Vec::new();
    if let (Some(staged), Some(full)) = (bars.staged, bars.state_full) {
        let z = b.u32(0);
        let first = b.cmp(CmpOp::Eq, tid, z);
        let bytes = rows * 512;
        b.if_(first, |b| {
            b.mbarrier_init(full);
            b.fence_mbarrier_init();
            b.mbarrier_arrive_expect_tx(full, bytes);
            let zero = b.u32(0);
            let src = [slots.read, head, value_base, zero];
            b.bulk_copy(staged, zero, p.state, &src, bytes, full, policy);
        });
    } else {
        for pass in 0..passes as usize {
            let idx = state_row_index(b, slots.read, pass);
            history.push(
                column
                    .iter()
                    .map(|&c| {
                        b.ld_global(
                            p.state,
                            &[idx[0], idx[1], idx[2], c],
                            f32x4,
                            CachePolicy::Normal,
                        )
                    })
                    .collect(),
            );
        }
    }
    let qk_channel = channel(b, head, tid);
    let v_row = and(b, tid, rows - 1);
    let vr = b.add(value_base, v_row);
    let v_channel = channel(b, head, vr);
    let section = |b: &mut Builder, s: u32| {
        let local = if s == 2 { v_channel } else { qk_channel };
        (local, addc(b, local, s * dim))
    };
    let mut taps = Vec::new();
    let mut coeff = Vec::new();
    let mut acc0 = Vec::new();
    for s in 0..3 {
        let (local, ch) = section(b, s);
        taps.push(
            (0..3)
                .map(|i| {
                    let col = addc(b, slots.offset, i);
                    b.ld_global(
                        p.conv_state,
                        &[slots.conv, ch, col],
                        Type::BF16,
                        CachePolicy::Normal,
                    )
                })
                .collect::<Vec<_>>(),
        );
        let sc = b.u32(s);
        let wty = b.kernel().tensors[p.weights].dtype.into();
        coeff.push(
            (0..4)
                .map(|i| {
                    let ic = b.u32(i);
                    b.ld_global(p.weights, &[sc, ic, local], wty, CachePolicy::Normal)
                })
                .collect::<Vec<_>>(),
        );
        acc0.push(if cfg.has_bias {
            let bty = b.kernel().tensors[p.bias].dtype.into();
            b.ld_global(p.bias, &[ch], bty, CachePolicy::Normal)
        } else {
            b.f32(0.0)
        });
    }
    let nty = b.kernel().tensors[p.norm_weight].dtype.into();
    let nw = b.ld_global(p.norm_weight, &[tid], nty, CachePolicy::Normal);

    // ---- produced loads: this step's activations
    b.pdl_wait();
    let bty = b.kernel().tensors[p.beta].dtype.into();
    let gty = b.kernel().tensors[p.gate].dtype.into();
    let mut inputs = Vec::new();
    let mut betas = Vec::new();
    let mut gates = Vec::new();
    for tok in 0..t_n {
        let r = token_row(b, request, t_n, tok);
        inputs.push(
            (0..3)
                .map(|s| {
                    let (_, ch) = section(b, s);
                    b.ld_global(p.x, &[r, ch], Type::BF16, CachePolicy::Normal)
                })
                .collect::<Vec<_>>(),
        );
        betas.push(b.ld_global(p.beta, &[r, head], bty, CachePolicy::Normal));
        gates.push(b.ld_global(p.gate, &[r, qk_channel], gty, CachePolicy::Normal));
    }
    if !cfg.trigger_at_entry() {
        b.pdl_launch_dependents();
    }

    // ---- conv (bias, then taps oldest first) and SiLU, per token and section
    let mut act = Vec::new(); // act[t][s]
    for tok in 0..t_n as usize {
        let mut qkv = Vec::new();
        for s in 0..3 {
            let mut acc = f32(b, acc0[s]);
            for i in 0..4 {
                let w = tok + i;
                let term = if w < 3 { taps[s][w] } else { inputs[w - 3][s] };
                let term = f32(b, term);
                let c = f32(b, coeff[s][i]);
                acc = b.fma(term, c, acc, ftz);
            }
            qkv.push(silu(b, acc, fast));
        }
        act.push(qkv);
    }
    let betas: Vec<Value> = betas
        .iter()
        .map(|&x| {
            let x = f32(b, x);
            sigmoid(b, x, fast)
        })
        .collect();
    let gates: Vec<Value> = gates
        .iter()
        .map(|&x| {
            let x = f32(b, x);
            sigmoid(b, x, fast)
        })
        .collect();

    // ---- share q, k, v; per-warp partial norms
    for tok in 0..t_n as usize {
        let i = addc(b, tid, 128 * tok as u32);
        b.st_shared(bars.q, i, act[tok][0]);
        b.st_shared(bars.k, i, act[tok][1]);
    }
    let n_rows = b.u32(rows);
    let holds_v = b.cmp(CmpOp::Lt, tid, n_rows);
    let vs: Vec<Value> = act.iter().map(|a| a[2]).collect();
    b.if_(holds_v, |b| {
        for (tok, &v) in vs.iter().enumerate() {
            let i = addc(b, tid, rows * tok as u32);
            b.st_shared(bars.v, i, v);
        }
    });
    let mut squares = Vec::new();
    for a in &act {
        let qq = b.mul(a[0], a[0]);
        let kk = b.mul(a[1], a[1]);
        squares.push((group_sum(b, qq, 32), group_sum(b, kk, 32)));
    }
    let z = b.u32(0);
    let lane0 = b.cmp(CmpOp::Eq, lane, z);
    b.if_(lane0, |b| {
        for (tok, &(sq, sk)) in squares.iter().enumerate() {
            let i = addc(b, warp, 8 * tok as u32);
            b.st_shared(bars.reductions, i, sq);
            let i = addc(b, warp, 8 * tok as u32 + 4);
            b.st_shared(bars.reductions, i, sk);
        }
    });
    b.bar_sync(1, 128);

    // ---- per token: operands, then the delta rule in waves of passes
    let scale = b.param(p.scale);
    let lower_eps = b.f32(1.0e-6);
    let mut dots_out: Vec<Vec<Value>> = Vec::new();
    let _ = &mut dots_out;
    for tok in 0..t_n as usize {
        let t32 = tok as u32;
        let r: Vec<Value> = (0..8)
            .map(|i| {
                let c = b.u32(8 * t32 + i);
                b.ld_shared(bars.reductions, c, Type::F32)
            })
            .collect();
        let norm = |b: &mut Builder, o: usize| {
            let x = b.add(r[o], r[o + 2]);
            let y = b.add(r[o + 1], r[o + 3]);
            let n = b.add(x, y);
            let n = b.add(n, lower_eps);
            b.un(UnOp::Rsqrt { fast: true }, n)
        };
        let fq = norm(b, 0);
        let fq = b.mul(fq, scale);
        let fk = norm(b, 4);
        let mut qr = Vec::new();
        let mut kr = Vec::new();
        for &c in &column {
            let i = addc(b, c, 128 * t32);
            let q4 = b.ld_shared(bars.q, i, f32x4);
            let k4 = b.ld_shared(bars.k, i, f32x4);
            let q4 = lanes4(b, q4);
            let k4 = lanes4(b, k4);
            qr.push(q4.map(|x| b.mul(x, fq)));
            kr.push(k4.map(|x| b.mul(x, fk)));
        }
        if tok == 0 {
            b.wait(bars.decay_full);
        }
        let decays: Vec<[Value; 4]> = column
            .iter()
            .map(|&c| {
                let i = addc(b, c, 128 * t32);
                let d = b.ld_shared(bars.decay, i, f32x4);
                lanes4(b, d)
            })
            .collect();
        let beta = betas[tok];
        let owner = t32 % cfg.cluster();
        let (out_buf, out_bar) = (
            bars.out[(t32 / cfg.cluster()) as usize],
            bars.out_full[(t32 / cfg.cluster()) as usize],
        );
        if let Some(full) = bars.state_full {
            b.wait(full);
        }
        let wave = cfg.wave() as usize;
        let mut start = 0usize;
        while start < passes as usize {
            let stop = (start + wave).min(passes as usize);
            let span = start..stop;
            if let Some(staged) = bars.staged {
                for pass in span.clone() {
                    let base = mulc(b, safe_row[pass], 128);
                    let loaded = column
                        .iter()
                        .map(|&c| {
                            let i = b.add(base, c);
                            b.ld_shared(staged, i, f32x4)
                        })
                        .collect();
                    if history.len() <= pass {
                        history.push(loaded);
                    } else {
                        history[pass] = loaded;
                    }
                }
            }
            // decay, then u = S·k̂
            let mut hist: Vec<Vec<[Value; 4]>> = Vec::new();
            let mut dots = Vec::new();
            for pass in span.clone() {
                let h: Vec<[Value; 4]> = history[pass]
                    .iter()
                    .zip(&decays)
                    .map(|(&v, d)| {
                        let e = lanes4(b, v);
                        [0, 1, 2, 3].map(|i| b.mul(e[i], d[i]))
                    })
                    .collect();
                let partial: Vec<Value> = h
                    .iter()
                    .zip(&kr)
                    .map(|(h4, k4)| dot4(b, h4, k4, ftz))
                    .collect();
                dots.push(tree_sum(b, partial));
                hist.push(h);
            }
            let dots: Vec<Value> = dots.into_iter().map(|d| group_sum(b, d, lanes)).collect();
            // δ = (v − u)·β; S += δ k̂ᵀ; o = S·q̂
            let mut outs = Vec::new();
            for (n, pass) in span.clone().enumerate() {
                let vi = addc(b, safe_row[pass], rows * t32);
                let vv = b.ld_shared(bars.v, vi, Type::F32);
                let d = b.sub(vv, dots[n]);
                let delta = b.mul(d, beta);
                for (j, k4) in kr.iter().enumerate() {
                    hist[n][j] = [0, 1, 2, 3].map(|e| b.fma(k4[e], delta, hist[n][j][e], ftz));
                }
                let partial: Vec<Value> = hist[n]
                    .iter()
                    .zip(&qr)
                    .map(|(h4, q4)| dot4(b, h4, q4, ftz))
                    .collect();
                outs.push(tree_sum(b, partial));
            }
            let outs: Vec<Value> = outs.into_iter().map(|d| group_sum(b, d, lanes)).collect();
            // send o rows to the token's owner; store the new state rows
            let owner_rank = b.u32(owner);
            for (n, pass) in span.clone().enumerate() {
                let z = b.u32(0);
                let leader = b.cmp(CmpOp::Eq, group_lane, z);
                let send = match valid[pass] {
                    Some(v) => b.bin(kda_ir::BinOp::And, leader, v),
                    None => leader,
                };
                let o = outs[n];
                let r = row[pass];
                b.if_(send, |b| {
                    let vrow = b.add(value_base, r);
                    let pos = output_position(b, vrow);
                    b.st_async(out_buf, pos, o, owner_rank, out_bar);
                });
                let write = slots.writes[tok];
                let mut pred = valid[pass];
                if t_n > 1 {
                    let z = b.i32(0);
                    let live = b.cmp(CmpOp::Gt, write, z);
                    pred = Some(match pred {
                        Some(v) => b.bin(kda_ir::BinOp::And, v, live),
                        None => live,
                    });
                }
                let idx = state_row_index(b, write, pass);
                for (j, &c) in column.iter().enumerate() {
                    let v = b.pack(&hist[n][j]);
                    b.st_global(p.state, &[idx[0], idx[1], idx[2], c], v, pred, policy);
                }
                history[pass] = hist[n].iter().map(|h4| b.pack(h4)).collect();
            }
            start = stop;
        }
    }

    // ---- conv state: v rows here, q/k by the owner of token 0 (CTA 0)
    let conv_window = |s: usize| -> Vec<Value> {
        let mut w = vec![taps[s][1], taps[s][2]];
        w.extend(inputs.iter().map(|i| i[s]));
        w
    };
    let v_window = conv_window(2);
    b.if_(holds_v, |b| {
        let ch = addc(b, v_channel, 2 * dim);
        for (i, &x) in v_window.iter().enumerate() {
            let c = b.u32(i as u32);
            b.st_global(
                p.conv_state,
                &[slots.conv, ch, c],
                x,
                None,
                CachePolicy::Normal,
            );
        }
    });

    // ---- gated RMSNorm of owned tokens
    let nw = f32(b, nw);
    let eps = b.param(p.eps);
    for tok in 0..t_n {
        let owner = b.u32(tok % cfg.cluster());
        let mine = b.cmp(CmpOp::Eq, partition, owner);
        let k = (tok / cfg.cluster()) as usize;
        let (buf, bar) = (bars.out[k], bars.out_full[k]);
        let gate = gates[tok as usize];
        let windows: Vec<Vec<Value>> = if tok == 0 {
            (0..2).map(conv_window).collect()
        } else {
            vec![]
        };
        b.if_(mine, |b| {
            b.wait(bar);
            let pos = output_position(b, tid);
            let raw = b.ld_shared(buf, pos, Type::F32);
            let l8 = and(b, lane, 7);
            let base = mulc(b, l8, 16);
            let sums: Vec<Value> = (0..4)
                .map(|g| {
                    let i = addc(b, base, 4 * g);
                    let o4 = b.ld_shared(buf, i, f32x4);
                    let o = lanes4(b, o4);
                    let sq = o.map(|x| b.mul(x, x));
                    let x = b.add(sq[0], sq[2]);
                    let y = b.add(sq[1], sq[3]);
                    let s = b.add(x, y);
                    group_sum(b, s, 8)
                })
                .collect();
            let x = b.add(sums[0], sums[2]);
            let y = b.add(sums[1], sums[3]);
            let sumsq = b.add(x, y);
            let inv = b.f32(1.0 / 128.0);
            let mean = b.mul(sumsq, inv);
            let m = b.add(mean, eps);
            let rstd = b.un(UnOp::Rsqrt { fast: true }, m);
            let y = b.mul(raw, rstd);
            let y = b.mul(y, nw);
            let y = b.mul(y, gate);
            let y = b.cvt(y, Type::BF16);
            let r = token_row(b, request, t_n, tok);
            b.st_global(p.output, &[r, qk_channel], y, None, CachePolicy::Normal);
            for (s, w) in windows.iter().enumerate() {
                let ch = addc(b, qk_channel, s as u32 * dim);
                for (i, &x) in w.iter().enumerate() {
                    let c = b.u32(i as u32);
                    b.st_global(
                        p.conv_state,
                        &[slots.conv, ch, c],
                        x,
                        None,
                        CachePolicy::Normal,
                    );
                }
            }
        });
    }
}
