//! Kernels for the tests and benches of kda's own crates (and the builder-API
//! half of `examples/dsmem-exchange`, which re-exports them), built with the
//! builder API so that no compiler or runtime crate depends on an example.
//! Not a user API.

use crate::{
    Access, BinOp, Builder, CachePolicy, CmpOp, Dim, Kernel, LaunchDecl, Provenance, Scalar, Type,
};

/// Lanes (and so values) per CTA of [`dsmem_exchange`].
pub const LANES: u32 = 32;

/// The DSMEM exchange demo (`examples/dsmem-exchange`, built the same way
/// there): a cluster of `cluster` CTAs of two warps each. Warp 0 (`sender`)
/// waits for the preceding launch, reads its CTA's row of `input`, computes
/// `2·x + rank` and `st.async`s the 32 values into the next CTA's `inbox`;
/// warp 1 (`receiver`) arms `inbox_full`, waits on it and writes what arrived
/// to `output`.
pub fn dsmem_exchange(cluster: u32) -> Kernel {
    let mut b = Builder::new(
        "dsmem_exchange",
        LaunchDecl {
            block: 64,
            cluster,
            min_blocks_per_sm: None,
            cluster_policy: Default::default(),
        },
    );
    let rows = b.sym("rows");
    let input = b.tensor(
        "input",
        Scalar::F32,
        &[Dim::Sym(rows), Dim::Const(LANES as u64)],
        &[Dim::Const(LANES as u64), Dim::Const(1)],
        Provenance::Produced,
        Access::Read,
    );
    let output = b.tensor(
        "output",
        Scalar::F32,
        &[Dim::Sym(rows), Dim::Const(LANES as u64)],
        &[Dim::Const(LANES as u64), Dim::Const(1)],
        Provenance::Ready,
        Access::Write,
    );
    let sender = b.role("sender", 0, 32);
    let receiver = b.role("receiver", 32, 32);
    let full = b.mbarrier("inbox_full", 1, 4 * LANES, &[sender, receiver]);
    let inbox = b.shared(
        "inbox",
        Scalar::F32,
        LANES,
        16,
        &[sender, receiver],
        Some(full),
    );

    b.pdl_launch_dependents();
    let tid = b.thread_idx();
    let lane_mask = b.u32(31);
    let lane = b.bin(BinOp::And, tid, lane_mask);
    let cta = b.block_idx(0);
    let rank = b.cluster_rank();

    b.in_role(receiver, |b| {
        let zero = b.u32(0);
        let first = b.cmp(CmpOp::Eq, lane, zero);
        b.if_(first, |b| {
            b.mbarrier_init(full);
            b.mbarrier_arrive_expect_tx(full, 4 * LANES);
        });
        b.fence_mbarrier_init();
    });
    b.cluster_arrive(true);
    b.cluster_wait();

    b.in_role(sender, |b| {
        b.pdl_wait();
        let x = b.ld_global(input, &[cta, lane], Type::F32, CachePolicy::Normal);
        let two = b.f32(2.0);
        let r = b.cvt(rank, Type::F32);
        let y = b.fma(x, two, r, false);
        let one = b.u32(1);
        let c = b.u32(cluster);
        let next = b.add(rank, one);
        let peer = b.bin(BinOp::Rem, next, c);
        b.st_async(inbox, lane, y, peer, full);
    });

    b.in_role(receiver, |b| {
        b.wait(full);
        let v = b.ld_shared(inbox, lane, Type::F32);
        b.st_global(output, &[cta, lane], v, None, CachePolicy::Normal);
    });
    b.finish()
}

/// What [`dsmem_exchange`] computes, on the host: `output[cta] =
/// 2·input[prev] + rank(prev)` where `prev` is the CTA of the same cluster
/// that sends to `cta`.
pub fn dsmem_exchange_reference(input: &[f32], cluster: u32) -> Vec<f32> {
    let rows = input.len() / LANES as usize;
    let c = cluster as usize;
    let mut out = vec![0.0; input.len()];
    for cta in 0..rows {
        let rank = cta % c;
        let prev_rank = (rank + c - 1) % c;
        let prev = cta - rank + prev_rank;
        for l in 0..LANES as usize {
            out[cta * LANES as usize + l] =
                2.0 * input[prev * LANES as usize + l] + prev_rank as f32;
        }
    }
    out
}

/// A one-warpgroup GEMM tile on wgmma: `c[64×n] = a[64×kdim] · b[n×kdim]ᵀ`
/// (bf16 in, f32 out; `a` and `b` K-major, as wgmma reads them). The 128
/// threads copy `a` and `b` from global memory into two shared tiles with
/// `swizzle` (the store code applies it: [`Builder::tile_index`]), fence the
/// async proxy and meet at a barrier; then the first wgmma overwrites the
/// accumulators (`scale-d` 0) and a loop over K in steps of 16 accumulates,
/// each step fenced, committed and waited for; each thread stores its `n/2`
/// accumulators at their [`acc_coord`](crate::wgmma::acc_coord).
pub fn wgmma_gemm(n: u32, kdim: u32, swizzle: crate::wgmma::Swizzle) -> Kernel {
    wgmma_gemm_with(n, kdim, swizzle, 0)
}

/// [`wgmma_gemm`] with its K loop keeping one group in flight: each step
/// waits with `wgmma.wait_group 1` (the accumulator carried by the loop
/// while its newest group runs), and a `wait_group 0` follows the loop.
pub fn wgmma_gemm_pipelined(n: u32, kdim: u32, swizzle: crate::wgmma::Swizzle) -> Kernel {
    wgmma_gemm_with(n, kdim, swizzle, 1)
}

fn wgmma_gemm_with(n: u32, kdim: u32, swizzle: crate::wgmma::Swizzle, depth: u32) -> Kernel {
    let pipe = if depth > 0 { "_pipelined" } else { "" };
    let mut b = Builder::new(
        format!("wgmma_m64n{n}_k{kdim}_{}{pipe}", swizzle.name()),
        LaunchDecl {
            block: 128,
            cluster: 1,
            min_blocks_per_sm: None,
            cluster_policy: Default::default(),
        },
    );
    let c = |x: u32| Dim::Const(u64::from(x));
    let ta = b.tensor(
        "a",
        Scalar::BF16,
        &[c(64), c(kdim)],
        &[c(kdim), c(1)],
        Provenance::Ready,
        Access::Read,
    );
    let tb = b.tensor(
        "b",
        Scalar::BF16,
        &[c(n), c(kdim)],
        &[c(kdim), c(1)],
        Provenance::Ready,
        Access::Read,
    );
    let tc = b.tensor(
        "c",
        Scalar::F32,
        &[c(64), c(n)],
        &[c(n), c(1)],
        Provenance::Ready,
        Access::Write,
    );
    let wg = b.role("warpgroup", 0, 128);
    let sa = b.shared_tile("a_tile", 64, kdim, swizzle, &[wg]);
    let sb = b.shared_tile("b_tile", n, kdim, swizzle, &[wg]);
    b.in_role(wg, |b| {
        let t = b.thread_idx();
        let step = b.u32(128);
        let kd = b.u32(kdim);
        for (tensor, tile, rows) in [(ta, sa, 64), (tb, sb, n)] {
            let end = b.u32(rows * kdim);
            b.for_(t, end, step, &[], |b, e, _| {
                let r = b.bin(BinOp::Div, e, kd);
                let k = b.bin(BinOp::Rem, e, kd);
                let v = b.ld_global(tensor, &[r, k], Type::BF16, CachePolicy::Normal);
                let at = b.tile_index(tile, r, k);
                b.st_shared(tile, at, v);
                vec![]
            });
        }
        b.fence_proxy_async();
        b.bar_sync(0, 128);
        let zero = b.u32(0);
        b.wgmma_fence();
        let first = b.wgmma(n, sa, zero, sb, zero, None);
        b.wgmma_commit();
        b.wgmma_wait(0);
        let k16 = b.u32(16);
        let acc = b.for_(k16, kd, k16, &first, |b, k, acc| {
            b.wgmma_fence();
            let d = b.wgmma(n, sa, k, sb, k, Some(acc));
            b.wgmma_commit();
            b.wgmma_wait(depth);
            d
        });
        if depth > 0 {
            b.wgmma_wait(0);
        }
        // row = 16·warp + lane/4 (+8), col = 2·(lane%4) (+8·j +1).
        let (c5, c31, c2, c3, c1) = (b.u32(5), b.u32(31), b.u32(2), b.u32(3), b.u32(1));
        let warp = b.bin(BinOp::Shr, t, c5);
        let lane = b.bin(BinOp::And, t, c31);
        let c4 = b.u32(4);
        let w16 = b.bin(BinOp::Shl, warp, c4);
        let g = b.bin(BinOp::Shr, lane, c2);
        let row0 = b.add(w16, g);
        let q = b.bin(BinOp::And, lane, c3);
        let col0 = b.bin(BinOp::Shl, q, c1);
        for (i, &v) in acc.iter().enumerate() {
            let i = i as u32;
            let dr = b.u32(8 * ((i / 2) % 2));
            let dc = b.u32(8 * (i / 4) + i % 2);
            let row = b.add(row0, dr);
            let col = b.add(col0, dc);
            b.st_global(tc, &[row, col], v, None, CachePolicy::Normal);
        }
    });
    b.finish()
}

/// What [`wgmma_gemm`] computes, on the host, in the simulator's order:
/// for each K step of 16, `acc = f32(acc + Σ_k a·b)` with the 16 products
/// and `acc` summed in f64 (exact for bf16 products but for the final
/// rounding in all but extreme exponent spreads). `a`, `b` as f32 values of
/// bf16 numbers.
pub fn wgmma_gemm_reference(a: &[f32], b: &[f32], n: usize, kdim: usize) -> Vec<f32> {
    let mut c = vec![0f32; 64 * n];
    for r in 0..64 {
        for col in 0..n {
            let mut acc = 0f32;
            for k0 in (0..kdim).step_by(16) {
                let mut s = f64::from(acc);
                for k in k0..k0 + 16 {
                    s += f64::from(a[r * kdim + k]) * f64::from(b[col * kdim + k]);
                }
                acc = s as f32;
            }
            c[r * n + col] = acc;
        }
    }
    c
}

/// Deterministic bf16 values in [-6, 6) with varied exponents: the wgmma
/// tests' operands (simulator and GPU draw the same ones).
pub fn wgmma_values(n: usize, seed: u64) -> Vec<half::bf16> {
    let mut s = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..n)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            let x = ((s >> 40) as f32 / (1u64 << 24) as f32) * 4.0 - 2.0;
            let scale = [1.0, 0.5, 0.125, 3.0][(s & 3) as usize];
            half::bf16::from_f32(x * scale)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builds_and_prints() {
        let k = dsmem_exchange(2);
        let text = crate::write::write_kernel(&k);
        assert!(text.contains("st.async"), "{text}");
        assert!(text.contains("mbarrier.wait bar0, phase 0"), "{text}");
    }

    #[test]
    fn reference_rotates_within_cluster() {
        let input: Vec<f32> = (0..4 * LANES).map(|i| i as f32).collect();
        let out = dsmem_exchange_reference(&input, 2);
        // CTA 1 receives from CTA 0 (rank 0): 2·x
        assert_eq!(out[LANES as usize], 0.0);
        // CTA 0 receives from CTA 1 (rank 1): 2·x + 1
        assert_eq!(out[0], 2.0 * LANES as f32 + 1.0);
    }
}
