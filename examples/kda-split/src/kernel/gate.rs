//! The gate warp: F_B projection of the CTA's key features for every token,
//! the lower-bound gate, and the multicast of the decays to every CTA.
//!
//! Gate modes fix only the f32 reduction order before the bf16 rounding:
//! 0 = one chain of eight `mma.m16n8k16`, 1 = four chains of two, 2 = sixteen
//! 8-FMA partials summed in a butterfly (T = 1, `rows <= 32`). The projection
//! math stays IEEE.

use kda_ir::{BinOp, Builder, CachePolicy, CmpOp, Scalar, Type, UnOp, Value};

use super::layout::{Barriers, Params};
use super::ops::{addc, and, f32, mulc, shr, sigmoid};
use super::{channel, token_row};
use crate::config::{GateMode, KdaConfig};

pub(crate) fn gate_role(
    b: &mut Builder,
    cfg: &KdaConfig,
    p: &Params,
    bars: &Barriers,
    request: Value,
) {
    b.in_role(p.gate_role, |b| body(b, cfg, p, bars, request));
}

/// `lower_bound`, `exp(a_log)` and the lane's fast-math flag: everything the
/// decay formula needs besides the raw gate and dt_bias.
struct GateMath {
    lower_bound: Value,
    a: Value,
    fast: bool,
}

impl GateMath {
    /// `decay = exp(lower_bound · σ(exp(a_log) · (bf16(raw) + dt_bias)))`.
    fn decay(&self, b: &mut Builder, raw: Value, dt: Value) -> Value {
        let r = b.cvt(raw, Type::BF16);
        let r = b.cvt(r, Type::F32);
        let x = b.add(r, dt);
        let x = b.mul(self.a, x);
        let s = sigmoid(b, x, self.fast);
        let y = b.mul(self.lower_bound, s);
        b.un(UnOp::Exp { fast: true }, y)
    }
}

fn body(b: &mut Builder, cfg: &KdaConfig, p: &Params, bars: &Barriers, request: Value) {
    let rows = cfg.rows();
    let tid = b.thread_idx();
    let lane = and(b, tid, 31);
    let partition = b.cluster_rank();
    let head = b.block_idx(1);
    let value_base = mulc(b, partition, rows);
    b.cluster_arrive(true);
    b.cluster_wait();
    let a_log = b.ld_global(p.a_log, &[head], Type::F32, CachePolicy::Normal);
    let lower_bound = b.param(p.lower_bound);
    let a = b.un(UnOp::Exp { fast: true }, a_log);
    let math = GateMath {
        lower_bound,
        a,
        fast: cfg.fast_math(),
    };
    let feature_base = channel(b, head, value_base);

    if cfg.gate_mode == GateMode::Fma {
        let decay = fma_gate(b, p, &math, lane, feature_base, rows, request);
        multicast_packets(b, cfg, bars, &[decay], lane, value_base);
        return;
    }
    let acc = mma_gate(b, cfg, p, bars, lane, feature_base, request);
    let (g, q) = (shr(b, lane, 2), and(b, lane, 3));
    let chains = acc.len();
    // The raw gate of one D element, summed over chains ((c0+c1)+c2)+c3.
    let raw = |b: &mut Builder, tile: usize, e: u8| {
        let mut v = b.extract(acc[0][tile], e);
        for c in acc.iter().take(chains).skip(1) {
            let x = b.extract(c[tile], e);
            v = b.add(v, x);
        }
        v
    };
    if cfg.tokens == 1 {
        // Every B column is the same token: lane (g, q) owns features
        // 32r + 16(q>>1) + g + 8(q&1) of rows r = 0..per.
        let per = (rows / 32).max(1) as usize;
        let tiles = (rows / 16) as usize;
        let q_hi = shr(b, q, 1);
        let q_lo = and(b, q, 1);
        let z = b.u32(0);
        let hi = b.cmp(CmpOp::Ne, q_hi, z);
        let lo = b.cmp(CmpOp::Ne, q_lo, z);
        let feature = {
            let x = mulc(b, q_hi, 16);
            let x = b.add(x, g);
            let y = mulc(b, q_lo, 8);
            b.add(x, y)
        };
        let decays: Vec<Value> = (0..per)
            .map(|r| {
                let t0 = 2 * r;
                let c0 = raw(b, t0, 0);
                let c2 = raw(b, t0, 2);
                let mut v = b.select(lo, c2, c0);
                if tiles > t0 + 1 {
                    let d0 = raw(b, t0 + 1, 0);
                    let d2 = raw(b, t0 + 1, 2);
                    let w = b.select(lo, d2, d0);
                    v = b.select(hi, w, v);
                }
                let f = addc(b, feature, 32 * r as u32);
                let f = and(b, f, rows - 1);
                let fi = b.add(feature_base, f);
                let dt = b.ld_global(p.dt_bias, &[fi], Type::F32, CachePolicy::Normal);
                math.decay(b, v, dt)
            })
            .collect();
        multicast_packets(b, cfg, bars, &decays, lane, value_base);
    } else {
        // T > 1: column n = g holds token n % T; lane (g, q) holds tokens 2q,
        // 2q+1 of features 16·tile + g (+8): one 4-byte send per decay and CTA.
        for i in 0..(rows / 8) as usize {
            let (tile, half) = (i / 2, (i % 2) as u32);
            let f = addc(b, g, 16 * tile as u32 + 8 * half);
            let fi = b.add(feature_base, f);
            let dt = b.ld_global(p.dt_bias, &[fi], Type::F32, CachePolicy::Normal);
            for column in 0..2u32 {
                let v = raw(b, tile, (2 * half + column) as u8);
                let decay = math.decay(b, v, dt);
                let tq = mulc(b, q, 2);
                let token = addc(b, tq, column);
                let t = b.u32(cfg.tokens);
                let live = b.cmp(CmpOp::Lt, token, t);
                b.if_(live, |b| {
                    let tb = mulc(b, token, 128);
                    let o = b.add(tb, value_base);
                    let offset = b.add(o, f);
                    for rank in 0..cfg.cluster() {
                        let r = b.u32(rank);
                        b.st_async(bars.decay, offset, decay, r, bars.decay_full);
                    }
                });
            }
        }
    }
}

/// Mode 2: lane `l` computes feature `l mod rows` as sixteen chains of eight
/// FMAs over k = 8i..8i+7, summed in a butterfly (shifts 8, 4, 2, 1).
fn fma_gate(
    b: &mut Builder,
    p: &Params,
    math: &GateMath,
    lane: Value,
    feature_base: Value,
    rows: u32,
    request: Value,
) -> Value {
    let feature = and(b, lane, rows - 1);
    let row = b.add(feature_base, feature);
    let bf16x8 = Type::vec(Scalar::BF16, 8);
    let bf16x4 = Type::vec(Scalar::BF16, 4);
    let weights: Vec<Value> = (0..16)
        .map(|i| {
            let c = b.u32(8 * i);
            b.ld_global(p.f_b_weight, &[row, c], bf16x8, CachePolicy::Normal)
        })
        .collect();
    let dt = b.ld_global(p.dt_bias, &[row], Type::F32, CachePolicy::Normal);
    b.pdl_wait();
    let mut partial: Vec<Value> = (0..16u32)
        .map(|i| {
            let c0 = b.u32(8 * i);
            let c1 = b.u32(8 * i + 4);
            let a0 = b.ld_global(p.raw_gate, &[request, c0], bf16x4, CachePolicy::Normal);
            let a1 = b.ld_global(p.raw_gate, &[request, c1], bf16x4, CachePolicy::Normal);
            let mut acc = b.f32(0.0);
            for e in 0..8u8 {
                let x = b.extract(if e < 4 { a0 } else { a1 }, e % 4);
                let w = b.extract(weights[i as usize], e);
                let (x, w) = (f32(b, x), f32(b, w));
                acc = b.fma(x, w, acc, false);
            }
            acc
        })
        .collect();
    for shift in (0..4).rev() {
        for i in 0..(1usize << shift) {
            partial[i] = b.add(partial[i], partial[i | (1 << shift)]);
        }
    }
    math.decay(b, partial[0], dt)
}

/// Modes 0/1: `acc[chain][tile]` = D fragments of F_B rows (16 features per
/// tile) × activation columns, bf16 × bf16 → f32.
fn mma_gate(
    b: &mut Builder,
    cfg: &KdaConfig,
    p: &Params,
    bars: &Barriers,
    lane: Value,
    feature_base: Value,
    request: Value,
) -> Vec<Vec<Value>> {
    let rows = cfg.rows();
    let tiles = (rows / 16) as usize;
    let (g, q) = (shr(b, lane, 2), and(b, lane, 3));
    let u32x2 = Type::vec(Scalar::U32, 2);
    let u32x4 = Type::vec(Scalar::U32, 4);
    let bf16x4 = Type::vec(Scalar::BF16, 4);
    let bf16x8 = Type::vec(Scalar::BF16, 8);
    // Rows with two or more decays per lane load 16 bytes per row: chunk c
    // then covers columns 32(c/2) + 8q + 4(c%2) + [0, 4) instead of 16c + 4q;
    // A and B use the same permutation of k, so the dot product is unchanged.
    let wide = rows >= 64;
    let row_of = |b: &mut Builder, tile: usize, half: u32| {
        let r = addc(b, g, 16 * tile as u32 + 8 * half);
        b.add(feature_base, r)
    };
    // a[tile][chunk] = [a0, a1, a2, a3]
    let split = |b: &mut Builder, low: Value, high: Value| -> [[Value; 4]; 2] {
        [0u8, 1].map(|h| {
            [
                b.extract(low, 2 * h),
                b.extract(high, 2 * h),
                b.extract(low, 2 * h + 1),
                b.extract(high, 2 * h + 1),
            ]
        })
    };
    let mut a: Vec<Vec<[Value; 4]>> = vec![Vec::new(); tiles];
    if let Some(staged) = bars.gate_rows {
        for tile in 0..tiles {
            for chunk in 0..4u32 {
                for half in 0..2u32 {
                    let row = row_of(b, tile, half);
                    let c8 = mulc(b, q, 8);
                    let col = addc(b, c8, 32 * chunk);
                    let copy = (tile as u32 * 4 + chunk) * 2 + half;
                    let slot = addc(b, lane, 32 * copy);
                    let slot = mulc(b, slot, 4);
                    b.cp_async(staged, slot, p.f_b_weight, &[row, col]);
                }
            }
        }
        b.cp_async_commit();
    } else {
        for (tile, at) in a.iter_mut().enumerate() {
            let (lo_row, hi_row) = (row_of(b, tile, 0), row_of(b, tile, 1));
            if wide {
                for chunk in 0..4u32 {
                    let c8 = mulc(b, q, 8);
                    let col = addc(b, c8, 32 * chunk);
                    let low =
                        b.ld_global(p.f_b_weight, &[lo_row, col], bf16x8, CachePolicy::Normal);
                    let high =
                        b.ld_global(p.f_b_weight, &[hi_row, col], bf16x8, CachePolicy::Normal);
                    let (low, high) = (b.bitcast(low, u32x4), b.bitcast(high, u32x4));
                    at.extend(split(b, low, high));
                }
            } else {
                for chunk in 0..8u32 {
                    let c4 = mulc(b, q, 4);
                    let col = addc(b, c4, 16 * chunk);
                    let low =
                        b.ld_global(p.f_b_weight, &[lo_row, col], bf16x4, CachePolicy::Normal);
                    let high =
                        b.ld_global(p.f_b_weight, &[hi_row, col], bf16x4, CachePolicy::Normal);
                    let (low, high) = (b.bitcast(low, u32x2), b.bitcast(high, u32x2));
                    at.push([
                        b.extract(low, 0),
                        b.extract(high, 0),
                        b.extract(low, 1),
                        b.extract(high, 1),
                    ]);
                }
            }
        }
    }
    b.pdl_wait();
    let token = if cfg.tokens > 1 {
        let t = b.u32(cfg.tokens);
        let col = b.bin(BinOp::Rem, g, t);
        let base = token_row(b, request, cfg.tokens, 0);
        b.add(base, col)
    } else {
        request
    };
    let bfrag: Vec<[Value; 2]> = if wide {
        let pairs: Vec<Value> = (0..4u32)
            .map(|c| {
                let c8 = mulc(b, q, 8);
                let col = addc(b, c8, 32 * c);
                let v = b.ld_global(p.raw_gate, &[token, col], bf16x8, CachePolicy::Normal);
                b.bitcast(v, u32x4)
            })
            .collect();
        (0..8usize)
            .map(|c| {
                let h = 2 * (c % 2) as u8;
                [b.extract(pairs[c / 2], h), b.extract(pairs[c / 2], h + 1)]
            })
            .collect()
    } else {
        (0..8u32)
            .map(|c| {
                let c4 = mulc(b, q, 4);
                let col = addc(b, c4, 16 * c);
                let v = b.ld_global(p.raw_gate, &[token, col], bf16x4, CachePolicy::Normal);
                let v = b.bitcast(v, u32x2);
                [b.extract(v, 0), b.extract(v, 1)]
            })
            .collect()
    };
    if let Some(staged) = bars.gate_rows {
        b.cp_async_wait(0);
        for (tile, at) in a.iter_mut().enumerate() {
            for chunk in 0..4u32 {
                let copy = (tile as u32 * 4 + chunk) * 2;
                let lo = addc(b, lane, 32 * copy);
                let lo = mulc(b, lo, 4);
                let hi = addc(b, lane, 32 * (copy + 1));
                let hi = mulc(b, hi, 4);
                let low = b.ld_shared(staged, lo, u32x4);
                let high = b.ld_shared(staged, hi, u32x4);
                at.extend(split(b, low, high));
            }
        }
    }
    let chains = if cfg.gate_mode == GateMode::MmaChains {
        4
    } else {
        1
    };
    let zero = b.f32(0.0);
    let zero4 = b.pack(&[zero, zero, zero, zero]);
    let mut acc = vec![vec![zero4; tiles]; chains];
    for chunk in 0..8usize {
        let chain = if chains == 4 { chunk / 2 } else { 0 };
        let bv = b.pack(&bfrag[chunk]);
        for tile in 0..tiles {
            let av = b.pack(&a[tile][chunk]);
            acc[chain][tile] = b.mma(av, bv, acc[chain][tile]);
        }
    }
    acc
}

/// T = 1: each lane sends one float4 of decays (packet `lane % (rows/4)`) to
/// CTA `lane / (rows/4)`, gathering its four features from the lanes that
/// computed them. Mode 2 lanes hold feature `lane`; MMA lanes hold feature
/// `16(q>>1) + g + 8(q&1)` (+32 per extra decay).
fn multicast_packets(
    b: &mut Builder,
    cfg: &KdaConfig,
    bars: &Barriers,
    decays: &[Value],
    lane: Value,
    value_base: Value,
) {
    let rows = cfg.rows();
    let packets = rows / 4;
    let packet = and(b, lane, packets - 1);
    let destination = shr(b, lane, packets.trailing_zeros());
    let mma = cfg.gate_mode != GateMode::Fma;
    let values: Vec<Value> = (0..4u32)
        .map(|e| {
            let p4 = mulc(b, packet, 4);
            let source = addc(b, p4, e);
            let f = and(b, source, 31);
            let src = if mma {
                // lane of feature f: g = f & 7, q = ((f >> 4) << 1) | ((f >> 3) & 1)
                let g = and(b, f, 7);
                let g = mulc(b, g, 4);
                let hi = shr(b, f, 4);
                let hi = mulc(b, hi, 2);
                let lo = shr(b, f, 3);
                let lo = and(b, lo, 1);
                let x = b.bin(BinOp::Or, g, hi);
                b.bin(BinOp::Or, x, lo)
            } else {
                f
            };
            let shuffled: Vec<Value> = decays
                .iter()
                .map(|&d| b.shfl(kda_ir::ShflMode::Idx, d, src))
                .collect();
            // decays[r] covers features 32r..32r+31
            let mut v = shuffled[0];
            if shuffled.len() > 1 {
                let r = shr(b, packet, 3);
                for (n, &s) in shuffled.iter().enumerate().skip(1) {
                    let nn = b.u32(n as u32);
                    let hit = b.cmp(CmpOp::Eq, r, nn);
                    v = b.select(hit, s, v);
                }
            }
            v
        })
        .collect();
    let value = b.pack(&values);
    let p4 = mulc(b, packet, 4);
    let offset = b.add(value_base, p4);
    b.st_async(bars.decay, offset, value, destination, bars.decay_full);
}
