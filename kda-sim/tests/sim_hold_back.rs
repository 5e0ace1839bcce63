//! The `hold_back` schedule exposes a cross-CTA race that the default and
//! plain random schedules miss: every CTA of a cluster of 2 reads a global
//! value early; rank 0 overwrites it late. Without a cluster barrier between
//! the reads and the write, holding rank 1 back lets the write come first.

use kda_device::{Device, LaunchConfig};
use kda_ir::{
    Access, Builder, CachePolicy, CmpOp, Dim, Kernel, LaunchDecl, Provenance, Scalar, Type,
};
use kda_sim::{SimDevice, SimOptions};

const THREADS: u32 = 64;
const CLUSTERS: u32 = 3;

/// `out[cta, tid] = taps[cluster]`, then rank 0 sets `taps[cluster] += 100`;
/// with `ordered`, a cluster barrier separates the reads from the write.
fn kernel(ordered: bool) -> Kernel {
    let mut b = Builder::new(
        "early_read_late_write",
        LaunchDecl {
            block: THREADS,
            cluster: 2,
            min_blocks_per_sm: None,
            cluster_policy: Default::default(),
        },
    );
    let clusters = b.sym("clusters");
    let rows = b.sym("rows");
    let taps = b.tensor(
        "taps",
        Scalar::F32,
        &[Dim::Sym(clusters)],
        &[Dim::Const(1)],
        Provenance::Ready,
        Access::ReadWrite,
    );
    let out = b.tensor(
        "out",
        Scalar::F32,
        &[Dim::Sym(rows), Dim::Const(THREADS as u64)],
        &[Dim::Const(THREADS as u64), Dim::Const(1)],
        Provenance::Ready,
        Access::Write,
    );
    let tid = b.thread_idx();
    let cta = b.block_idx(0);
    let two = b.u32(2);
    let cl = b.bin(kda_ir::BinOp::Div, cta, two);
    let x = b.ld_global(taps, &[cl], Type::F32, CachePolicy::Normal);
    b.st_global(out, &[cta, tid], x, None, CachePolicy::Normal);
    b.cluster_arrive(false);
    if ordered {
        b.cluster_wait();
    }
    // A CTA-wide barrier: rank 0's first warp blocks here, so the default
    // schedule runs rank 1's reads before the write and hides the race.
    b.bar_sync(0, THREADS);
    let rank = b.cluster_rank();
    let zero = b.u32(0);
    let r0 = b.cmp(CmpOp::Eq, rank, zero);
    let t0 = b.cmp(CmpOp::Eq, tid, zero);
    let first = b.bin(kda_ir::BinOp::And, r0, t0);
    b.if_(first, |b| {
        let hundred = b.f32(100.0);
        let y = b.add(x, hundred);
        b.st_global(taps, &[cl], y, None, CachePolicy::Normal);
    });
    b.finish()
}

fn run(k: &Kernel, opts: SimOptions) -> Vec<f32> {
    let dev = SimDevice::with_options(opts);
    let m = dev.load_unverified(k).expect("load");
    let taps: Vec<u8> = (0..CLUSTERS)
        .flat_map(|c| (c as f32 + 1.0).to_le_bytes())
        .collect();
    let taps = dev.upload(&taps).unwrap();
    let rows = 2 * CLUSTERS;
    let out = dev
        .upload(&vec![0u8; (rows * THREADS * 4) as usize])
        .unwrap();
    let cfg = LaunchConfig {
        grid: [rows, 1, 1],
        pdl: false,
        syms: vec![CLUSTERS as i64, rows as i64],
        scalars: vec![],
    };
    dev.launch(&m, &cfg, &[&taps, &out])
        .unwrap_or_else(|e| panic!("launch failed:\n{e}"));
    dev.download(&out)
        .unwrap()
        .chunks(4)
        .map(|c| f32::from_le_bytes(c.try_into().unwrap()))
        .collect()
}

fn expected() -> Vec<f32> {
    (0..2 * CLUSTERS * THREADS)
        .map(|i| (i / THREADS / 2) as f32 + 1.0)
        .collect()
}

fn hold_back(seed: u64) -> SimOptions {
    SimOptions {
        seed: Some(seed),
        hold_back: true,
        ..SimOptions::default()
    }
}

#[test]
fn default_schedule_hides_the_race() {
    assert_eq!(run(&kernel(false), SimOptions::default()), expected());
}

#[test]
fn hold_back_exposes_a_missing_cluster_barrier() {
    let k = kernel(false);
    let wrong: Vec<u64> = (1..=6)
        .filter(|&s| run(&k, hold_back(s)) != expected())
        .collect();
    eprintln!("seeds exposing the race: {wrong:?}");
    assert!(!wrong.is_empty(), "no hold-back seed exposed the race");
}

#[test]
fn hold_back_with_the_cluster_barrier_is_always_right() {
    let k = kernel(true);
    for seed in 1..=6 {
        assert_eq!(run(&k, hold_back(seed)), expected(), "seed {seed}");
    }
    // Verified, too: the barrier version is a valid kernel.
    SimDevice::new().load(&k).expect("verifier");
}

#[test]
fn hold_back_never_deadlocks_a_cluster_barrier() {
    // Every warp of both CTAs waits on the cluster barrier: the held CTA must
    // be released when the others block there, not reported as a deadlock.
    let k = kernel(true);
    for seed in 0..16 {
        run(
            &k,
            SimOptions {
                max_slice: 1,
                ..hold_back(seed)
            },
        );
    }
}
