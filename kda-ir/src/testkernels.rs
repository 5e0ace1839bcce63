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
