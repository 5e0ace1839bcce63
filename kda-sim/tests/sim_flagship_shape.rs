//! A kernel shaped like the KdaSplit decode step (160 threads: 128 state
//! threads and a gate warp; decays multicast to every CTA of the cluster over
//! DSMEM; unrolled f32x4 state rows, fma chains and butterfly shuffles), run
//! against a host reference, under several schedules. Prints the simulator's
//! throughput.

use kda_device::{Device, LaunchConfig};
use kda_ir::{
    Access, BinOp, Builder, CachePolicy, CmpOp, Dim, Kernel, LaunchDecl, Provenance, Scalar,
    ShflMode, Special, Type, UnOp, Value,
};
use kda_sim::{SimDevice, SimOptions};

const NORMAL: CachePolicy = CachePolicy::Normal;

/// `cluster` CTAs per head; each state thread owns `4 * p` floats.
fn kernel(cluster: u32, p: u32) -> Kernel {
    let mut b = Builder::new(
        "flagship_shape",
        LaunchDecl {
            block: 160,
            cluster,
            min_blocks_per_sm: None,
            cluster_policy: Default::default(),
        },
    );
    let ctas = b.sym("ctas");
    let w = 4 * p as u64;
    let state = b.tensor(
        "state",
        Scalar::F32,
        &[Dim::Sym(ctas), Dim::Const(128), Dim::Const(w)],
        &[Dim::Const(128 * w), Dim::Const(w), Dim::Const(1)],
        Provenance::Ready,
        Access::ReadWrite,
    );
    b.set_align(state, 16);
    let kv = b.tensor(
        "k",
        Scalar::F32,
        &[Dim::Const(w)],
        &[Dim::Const(1)],
        Provenance::Ready,
        Access::Read,
    );
    b.set_align(kv, 16);
    let gate = b.tensor(
        "gate",
        Scalar::F32,
        &[Dim::Sym(ctas), Dim::Const(128)],
        &[Dim::Const(128), Dim::Const(1)],
        Provenance::Produced,
        Access::Read,
    );
    b.set_align(gate, 16);
    let out = b.tensor(
        "out",
        Scalar::F32,
        &[Dim::Sym(ctas), Dim::Const(128)],
        &[Dim::Const(128), Dim::Const(1)],
        Provenance::Ready,
        Access::Write,
    );
    let main = b.role("state", 0, 128);
    let gw = b.role("gate", 128, 32);
    let full = b.mbarrier("decay_full", 1, 512 * cluster, &[main, gw]);
    let decay = b.shared(
        "decay",
        Scalar::F32,
        128 * cluster,
        16,
        &[main, gw],
        Some(full),
    );

    let tid = b.thread_idx();
    let c31 = b.u32(31);
    let lane = b.bin(BinOp::And, tid, c31);
    let bx = b.block_idx(0);
    let by = b.block_idx(1);
    let bz = b.block_idx(2);
    let gx = b.special(Special::GridDim(0));
    let gy = b.special(Special::GridDim(1));
    let t = b.mul(gy, bz);
    let t = b.add(t, by);
    let t = b.mul(t, gx);
    let cid = b.add(t, bx);
    let rank = b.cluster_rank();

    b.in_role(main, |b| {
        let zero = b.u32(0);
        let first = b.cmp(CmpOp::Eq, tid, zero);
        b.if_(first, |b| {
            b.mbarrier_init(full);
            b.mbarrier_arrive_expect_tx(full, 512 * cluster);
        });
        b.fence_mbarrier_init();
    });
    b.cluster_arrive(true);
    b.cluster_wait();

    b.in_role(gw, |b| {
        b.pdl_wait();
        let four = b.u32(4);
        let col = b.mul(lane, four);
        let g4 = b.ld_global(gate, &[cid, col], Type::vec(Scalar::F32, 4), NORMAL);
        let c128 = b.u32(128);
        let base = b.mul(rank, c128);
        let base = b.add(base, col);
        for e in 0..4u8 {
            let g = b.extract(g4, e);
            let s = b.un(UnOp::Sigmoid { fast: false }, g);
            let ns = b.un(UnOp::Neg, s);
            let d = b.un(UnOp::Exp { fast: true }, ns);
            let ei = b.u32(e as u32);
            let at = b.add(base, ei);
            for q in 0..cluster {
                let qv = b.u32(q);
                b.st_async(decay, at, d, qv, full);
            }
        }
    });

    b.in_role(main, |b| {
        let mut h: Vec<Value> = vec![];
        let mut kr: Vec<Value> = vec![];
        for j in 0..p {
            let c = b.u32(4 * j);
            let v = b.ld_global(state, &[cid, tid, c], Type::vec(Scalar::F32, 4), NORMAL);
            let k4 = b.ld_global(kv, &[c], Type::vec(Scalar::F32, 4), NORMAL);
            for e in 0..4 {
                h.push(b.extract(v, e));
                kr.push(b.extract(k4, e));
            }
        }
        b.wait(full);
        let n = b.u32(128 * cluster);
        for (i, x) in h.iter_mut().enumerate() {
            let ii = b.u32(i as u32);
            let at = b.add(tid, ii);
            let at = b.bin(BinOp::Rem, at, n);
            let d = b.ld_shared(decay, at, Type::F32);
            *x = b.mul(*x, d);
        }
        let mut dot = b.f32(0.0);
        for i in 0..h.len() {
            dot = b.fma(h[i], kr[i], dot, false);
        }
        for m in [4, 2, 1] {
            let mv = b.u32(m);
            let o = b.shfl(ShflMode::Bfly, dot, mv);
            dot = b.add(dot, o);
        }
        let half = b.f32(0.5);
        let v = b.mul(dot, half);
        for x in h.iter_mut() {
            *x = b.fma(kr[0], v, *x, true);
        }
        for j in 0..p as usize {
            let c = b.u32(4 * j as u32);
            let v4 = b.pack(&h[4 * j..4 * j + 4]);
            b.st_global(state, &[cid, tid, c], v4, None, NORMAL);
        }
        b.st_global(out, &[cid, tid], dot, None, NORMAL);
    });
    b.finish()
}

fn sigmoid(x: f32) -> f32 {
    1.0 / (1.0 + (-x).exp())
}

/// The host reference: same operations in the same order.
fn reference(
    cluster: usize,
    p: usize,
    nctas: usize,
    state: &mut [f32],
    k: &[f32],
    gate: &[f32],
    out: &mut [f32],
) {
    let w = 4 * p;
    for c0 in (0..nctas).step_by(cluster) {
        let mut decay = vec![0f32; 128 * cluster];
        for r in 0..cluster {
            for i in 0..128 {
                decay[r * 128 + i] = (-sigmoid(gate[(c0 + r) * 128 + i])).exp();
            }
        }
        for cid in c0..c0 + cluster {
            let mut dots = [0f32; 128];
            let mut hs = vec![vec![0f32; w]; 128];
            for tid in 0..128 {
                let h = &mut hs[tid];
                h.copy_from_slice(&state[(cid * 128 + tid) * w..][..w]);
                for (i, x) in h.iter_mut().enumerate() {
                    *x *= decay[(tid + i) % (128 * cluster)];
                }
                let mut dot = 0f32;
                for i in 0..w {
                    dot = h[i].mul_add(k[i], dot);
                }
                dots[tid] = dot;
            }
            for m in [4, 2, 1] {
                let prev = dots;
                for l in 0..128 {
                    dots[l] = prev[l] + prev[l ^ m];
                }
            }
            for tid in 0..128 {
                let v = dots[tid] * 0.5;
                let h = &mut hs[tid];
                for x in h.iter_mut() {
                    let r = k[0].mul_add(v, *x);
                    *x = if r.is_subnormal() { 0.0 } else { r };
                }
                state[(cid * 128 + tid) * w..][..w].copy_from_slice(h);
                out[cid * 128 + tid] = dots[tid];
            }
        }
    }
}

fn bytes(x: &[f32]) -> Vec<u8> {
    x.iter().flat_map(|v| v.to_le_bytes()).collect()
}
fn floats(b: &[u8]) -> Vec<f32> {
    b.chunks(4)
        .map(|c| f32::from_le_bytes(c.try_into().unwrap()))
        .collect()
}

fn check(cluster: u32, p: u32, heads: u32, batch: u32, opts: SimOptions) {
    let nctas = (cluster * heads * batch) as usize;
    let w = 4 * p as usize;
    let state: Vec<f32> = (0..nctas * 128 * w)
        .map(|i| ((i * 7919) % 1000) as f32 / 500.0 - 1.0)
        .collect();
    let k: Vec<f32> = (0..w).map(|i| (i as f32 * 0.37).sin()).collect();
    let gate: Vec<f32> = (0..nctas * 128)
        .map(|i| ((i * 104729) % 2000) as f32 / 400.0 - 2.5)
        .collect();
    let (mut want_state, mut want_out) = (state.clone(), vec![0f32; nctas * 128]);
    reference(
        cluster as usize,
        p as usize,
        nctas,
        &mut want_state,
        &k,
        &gate,
        &mut want_out,
    );

    let dev = SimDevice::with_options(opts);
    let m = dev.load(&kernel(cluster, p)).unwrap();
    let bufs = [bytes(&state), bytes(&k), bytes(&gate), vec![0; nctas * 512]];
    let bufs: Vec<_> = bufs.iter().map(|b| dev.upload(b).unwrap()).collect();
    let refs: Vec<_> = bufs.iter().collect();
    let cfg = LaunchConfig {
        grid: [cluster, heads, batch],
        pdl: true,
        syms: vec![nctas as i64],
        scalars: vec![],
    };
    dev.launch(&m, &cfg, &refs)
        .unwrap_or_else(|e| panic!("{e}"));
    let s = dev.last_stats();
    println!(
        "cluster {cluster}, {p} f32x4/thread, grid [{cluster}, {heads}, {batch}] ({} clusters, {} CTAs): \
         {} warp-instructions in {:?} ({:.1} M warp-instr/s), {} ops, {} register words",
        s.clusters,
        nctas,
        s.warp_instructions,
        s.wall,
        s.warp_instructions as f64 / s.wall.as_secs_f64() / 1e6,
        m.program_len(),
        m.register_words(),
    );
    assert_eq!(floats(&dev.download(&bufs[3]).unwrap()), want_out);
    assert_eq!(floats(&dev.download(&bufs[0]).unwrap()), want_state);
}

#[test]
fn flagship_shape_cluster_2_4_8() {
    check(2, 4, 2, 2, SimOptions::default());
    check(4, 8, 2, 2, SimOptions::default());
    check(8, 4, 1, 2, SimOptions::default());
}

#[test]
fn flagship_shape_random_interleavings() {
    for seed in 0..4 {
        check(
            4,
            2,
            1,
            2,
            SimOptions {
                seed: Some(seed),
                max_slice: 4,
                ..SimOptions::default()
            },
        );
    }
}

/// A bigger grid for timing (`cargo test --release -p kda-runtime --test
/// sim_flagship_shape -- --ignored --nocapture`).
#[test]
#[ignore]
fn flagship_shape_timing() {
    check(8, 4, 16, 8, SimOptions::default());
    check(4, 8, 32, 4, SimOptions::default());
    check(
        4,
        8,
        32,
        4,
        SimOptions {
            threads: 1,
            ..SimOptions::default()
        },
    );
}
