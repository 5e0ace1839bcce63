//! Op-level tests of the simulator: mma fragments against a plain matrix
//! product, shuffles, divergent `if` with yields, `for` / `while` loops,
//! named barriers, async copies and numerics.

use half::bf16;
use kda_device::{Device, LaunchConfig, RuntimeError, ScalarArg};
use kda_ir::{
    Access, BinOp, Builder, CachePolicy, CmpOp, Dim, Kernel, LaunchDecl, Provenance, Scalar,
    ShflMode, Tensor, Type, UnOp, Value,
};
use kda_sim::{SimDevice, SimError, SimOptions, WaitOn};

const NORMAL: CachePolicy = CachePolicy::Normal;

fn kernel(name: &str, block: u32) -> Builder {
    Builder::new(
        name,
        LaunchDecl {
            block,
            cluster: 1,
            min_blocks_per_sm: None,
            cluster_policy: Default::default(),
        },
    )
}

/// A rank-1 tensor of `n` elements.
fn vec1(b: &mut Builder, name: &str, dtype: Scalar, n: u64, access: Access) -> Tensor {
    b.tensor(
        name,
        dtype,
        &[Dim::Const(n)],
        &[Dim::Const(1)],
        Provenance::Ready,
        access,
    )
}

/// Run a one-CTA kernel over the given tensor contents; returns them afterwards.
fn run_with(
    k: &Kernel,
    bufs: &[Vec<u8>],
    scalars: Vec<ScalarArg>,
    opts: SimOptions,
) -> Result<Vec<Vec<u8>>, RuntimeError> {
    let dev = SimDevice::with_options(opts);
    let m = dev.load_unverified(k)?;
    let bs: Vec<_> = bufs
        .iter()
        .map(|b| dev.upload(b))
        .collect::<Result<_, _>>()?;
    let refs: Vec<_> = bs.iter().collect();
    let cfg = LaunchConfig {
        grid: [1, 1, 1],
        pdl: false,
        syms: vec![],
        scalars,
    };
    dev.launch(&m, &cfg, &refs)?;
    bs.iter().map(|b| dev.download(b)).collect()
}

fn run(k: &Kernel, bufs: &[Vec<u8>]) -> Vec<Vec<u8>> {
    run_with(k, bufs, vec![], SimOptions::default()).unwrap_or_else(|e| panic!("{e}"))
}

fn f32s(b: &[u8]) -> Vec<f32> {
    b.chunks(4)
        .map(|c| f32::from_le_bytes(c.try_into().unwrap()))
        .collect()
}
fn u32s(b: &[u8]) -> Vec<u32> {
    b.chunks(4)
        .map(|c| u32::from_le_bytes(c.try_into().unwrap()))
        .collect()
}
fn bytes_f32(x: &[f32]) -> Vec<u8> {
    x.iter().flat_map(|v| v.to_le_bytes()).collect()
}
fn bytes_bf16(x: &[bf16]) -> Vec<u8> {
    x.iter().flat_map(|v| v.to_bits().to_le_bytes()).collect()
}

/// A tiny deterministic generator for test data.
struct Lcg(u64);
impl Lcg {
    fn next(&mut self) -> u32 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (self.0 >> 33) as u32
    }
    fn small(&mut self) -> f32 {
        (self.next() % 33) as f32 / 4.0 - 4.0
    }
    fn unit(&mut self) -> f32 {
        self.next() as f32 / (1u64 << 31) as f32 - 1.0
    }
}

fn lane_of(b: &mut Builder) -> (Value, Value) {
    let tid = b.thread_idx();
    let m = b.u32(31);
    let lane = b.bin(BinOp::And, tid, m);
    (tid, lane)
}

// ---------------------------------------------------------------- mma

/// `D = A·B + C` with A [16,16], B given transposed as Bt [8,16] (N×K, the
/// `.col` operand), C and D [16,8], each lane loading its own fragments.
fn mma_kernel() -> Kernel {
    let mut b = kernel("mma", 32);
    let a_t = b.tensor(
        "a",
        Scalar::BF16,
        &[Dim::Const(16), Dim::Const(16)],
        &[Dim::Const(16), Dim::Const(1)],
        Provenance::Ready,
        Access::Read,
    );
    let bt_t = b.tensor(
        "bt",
        Scalar::BF16,
        &[Dim::Const(8), Dim::Const(16)],
        &[Dim::Const(16), Dim::Const(1)],
        Provenance::Ready,
        Access::Read,
    );
    let c_t = b.tensor(
        "c",
        Scalar::F32,
        &[Dim::Const(16), Dim::Const(8)],
        &[Dim::Const(8), Dim::Const(1)],
        Provenance::Ready,
        Access::Read,
    );
    let d_t = b.tensor(
        "d",
        Scalar::F32,
        &[Dim::Const(16), Dim::Const(8)],
        &[Dim::Const(8), Dim::Const(1)],
        Provenance::Ready,
        Access::Write,
    );
    for t in [a_t, bt_t, c_t, d_t] {
        b.set_align(t, 16);
    }
    let (_, lane) = lane_of(&mut b);
    let two = b.u32(2);
    let eight = b.u32(8);
    let one = b.u32(1);
    let g = b.bin(BinOp::Shr, lane, two);
    let three = b.u32(3);
    let t = b.bin(BinOp::And, lane, three);
    let t2 = b.bin(BinOp::Shl, t, one);
    let g8 = b.add(g, eight);
    let t28 = b.add(t2, eight);
    let bf2 = Type::vec(Scalar::BF16, 2);
    let word = |b: &mut Builder, t: Tensor, r: Value, c: Value| {
        let v = b.ld_global(t, &[r, c], bf2, NORMAL);
        b.bitcast(v, Type::U32)
    };
    let a0 = word(&mut b, a_t, g, t2);
    let a1 = word(&mut b, a_t, g8, t2);
    let a2 = word(&mut b, a_t, g, t28);
    let a3 = word(&mut b, a_t, g8, t28);
    let av = b.pack(&[a0, a1, a2, a3]);
    let b0 = word(&mut b, bt_t, g, t2);
    let b1 = word(&mut b, bt_t, g, t28);
    let bv = b.pack(&[b0, b1]);
    let f2 = Type::vec(Scalar::F32, 2);
    let c01 = b.ld_global(c_t, &[g, t2], f2, NORMAL);
    let c23 = b.ld_global(c_t, &[g8, t2], f2, NORMAL);
    let cs: Vec<Value> = [(c01, 0), (c01, 1), (c23, 0), (c23, 1)]
        .iter()
        .map(|&(v, i)| b.extract(v, i))
        .collect();
    let cv = b.pack(&cs);
    let d = b.mma(av, bv, cv);
    let ds: Vec<Value> = (0..4).map(|i| b.extract(d, i)).collect();
    let d01 = b.pack(&ds[..2]);
    let d23 = b.pack(&ds[2..]);
    b.st_global(d_t, &[g, t2], d01, None, NORMAL);
    b.st_global(d_t, &[g8, t2], d23, None, NORMAL);
    b.finish()
}

fn mma_case(a: &[f32], bm: &[f32], c: &[f32]) -> (Vec<f32>, Vec<f64>) {
    let a16: Vec<bf16> = a.iter().map(|&x| bf16::from_f32(x)).collect();
    let b16: Vec<bf16> = bm.iter().map(|&x| bf16::from_f32(x)).collect();
    // Bt[n][k] = B[k][n]
    let bt: Vec<bf16> = (0..8 * 16).map(|i| b16[(i % 16) * 8 + i / 16]).collect();
    let out = run(
        &mma_kernel(),
        &[
            bytes_bf16(&a16),
            bytes_bf16(&bt),
            bytes_f32(c),
            vec![0; 16 * 8 * 4],
        ],
    );
    let mut want = vec![0f64; 16 * 8];
    for m in 0..16 {
        for n in 0..8 {
            let mut s = c[m * 8 + n] as f64;
            for k in 0..16 {
                s += a16[m * 16 + k].to_f64() * b16[k * 8 + n].to_f64();
            }
            want[m * 8 + n] = s;
        }
    }
    (f32s(&out[3]), want)
}

#[test]
fn mma_fragments_match_a_plain_matrix_product_exactly() {
    let mut r = Lcg(1);
    let a: Vec<f32> = (0..256).map(|_| r.small()).collect();
    let bm: Vec<f32> = (0..128).map(|_| r.small()).collect();
    let c: Vec<f32> = (0..128).map(|_| r.small()).collect();
    let (got, want) = mma_case(&a, &bm, &c);
    for i in 0..128 {
        assert_eq!(got[i] as f64, want[i], "D[{}][{}]", i / 8, i % 8);
    }
}

#[test]
fn mma_fragments_with_random_bf16() {
    let mut r = Lcg(2);
    let a: Vec<f32> = (0..256).map(|_| r.unit()).collect();
    let bm: Vec<f32> = (0..128).map(|_| r.unit()).collect();
    let c: Vec<f32> = (0..128).map(|_| r.unit()).collect();
    let (got, want) = mma_case(&a, &bm, &c);
    for i in 0..128 {
        assert!(
            (got[i] as f64 - want[i]).abs() <= 1e-6 * want[i].abs().max(1.0),
            "D[{}][{}]: {} vs {}",
            i / 8,
            i % 8,
            got[i],
            want[i]
        );
    }
}

#[test]
fn mma_identity_places_every_element() {
    // A = identity-like permutation picks B's rows: D[m][n] = B[p(m)][n].
    let mut a = vec![0f32; 256];
    for m in 0..16 {
        a[m * 16 + (m * 7 + 3) % 16] = 1.0;
    }
    let bm: Vec<f32> = (0..128).map(|i| i as f32).collect();
    let (got, _) = mma_case(&a, &bm, &[0.0; 128]);
    for m in 0..16 {
        for n in 0..8 {
            assert_eq!(
                got[m * 8 + n],
                bm[((m * 7 + 3) % 16) * 8 + n],
                "D[{m}][{n}]"
            );
        }
    }
}

// ---------------------------------------------------------------- shuffles

#[test]
fn shuffles_butterfly_idx_and_full_warp_reads() {
    let mut b = kernel("shfl", 64);
    let sum_t = vec1(&mut b, "sum", Scalar::F32, 64, Access::Write);
    let rev_t = vec1(&mut b, "rev", Scalar::F32, 64, Access::Write);
    let div_t = vec1(&mut b, "div", Scalar::F32, 64, Access::Write);
    let (tid, lane) = lane_of(&mut b);
    let xf = b.cvt(tid, Type::F32);
    let k = b.f32(1.5);
    let x = b.mul(xf, k);
    let mut s = x;
    for m in [16, 8, 4, 2, 1] {
        let mv = b.u32(m);
        let o = b.shfl(ShflMode::Bfly, s, mv);
        s = b.add(s, o);
    }
    let c31 = b.u32(31);
    let src = b.sub(c31, lane);
    let y = b.shfl(ShflMode::Idx, x, src);
    let sixteen = b.u32(16);
    let low = b.cmp(CmpOp::Lt, lane, sixteen);
    let z = b.if_else(
        low,
        |b| {
            let up = b.add(lane, sixteen);
            vec![b.shfl(ShflMode::Idx, x, up)]
        },
        |b| vec![b.f32(-1.0)],
    )[0];
    b.st_global(sum_t, &[tid], s, None, NORMAL);
    b.st_global(rev_t, &[tid], y, None, NORMAL);
    b.st_global(div_t, &[tid], z, None, NORMAL);
    let out = run(&b.finish(), &[vec![0; 256], vec![0; 256], vec![0; 256]]);
    let (sum, rev, div) = (f32s(&out[0]), f32s(&out[1]), f32s(&out[2]));
    for t in 0..64usize {
        let w = t / 32 * 32;
        let xs = |l: usize| (w + l) as f32 * 1.5;
        let l = t % 32;
        assert_eq!(sum[t], (0..32).map(xs).sum::<f32>(), "thread {t}");
        assert_eq!(rev[t], xs(31 - l), "thread {t}");
        assert_eq!(div[t], if l < 16 { xs(l + 16) } else { -1.0 }, "thread {t}");
    }
}

#[test]
fn elect_picks_the_lowest_active_lane() {
    let mut b = kernel("elect", 32);
    let out_t = vec1(&mut b, "out", Scalar::U32, 32, Access::Write);
    let (tid, lane) = lane_of(&mut b);
    let five = b.u32(5);
    let hi = b.cmp(CmpOp::Ge, lane, five);
    b.if_(hi, |b| {
        let e = b.elect();
        let one = b.u32(1);
        let zero = b.u32(0);
        let v = b.select(e, one, zero);
        b.st_global(out_t, &[tid], v, None, NORMAL);
    });
    let out = u32s(&run(&b.finish(), &[vec![0xff; 128]])[0]);
    for l in 0..32 {
        let want = if l < 5 { 0xffff_ffff } else { (l == 5) as u32 };
        assert_eq!(out[l], want, "lane {l}");
    }
}

// ---------------------------------------------------------------- control flow

#[test]
fn divergent_if_with_yields_and_nesting() {
    let mut b = kernel("ifs", 32);
    let o1 = vec1(&mut b, "o1", Scalar::U32, 32, Access::Write);
    let o2 = vec1(&mut b, "o2", Scalar::U32, 32, Access::Write);
    let o3 = vec1(&mut b, "o3", Scalar::U32, 32, Access::Write);
    let (tid, lane) = lane_of(&mut b);
    let three = b.u32(3);
    let zero = b.u32(0);
    let m3 = b.bin(BinOp::Rem, lane, three);
    let c1 = b.cmp(CmpOp::Eq, m3, zero);
    let outer = b.u32(1000);
    let r = b.if_else(
        c1,
        |b| {
            let two = b.u32(2);
            vec![b.mul(lane, two), outer]
        },
        |b| {
            let h = b.u32(100);
            vec![b.add(lane, h), lane]
        },
    );
    let sixteen = b.u32(16);
    let low = b.cmp(CmpOp::Lt, lane, sixteen);
    let r2 = b.if_else(
        low,
        |b| {
            let one = b.u32(1);
            let odd = b.bin(BinOp::And, lane, one);
            let even = b.cmp(CmpOp::Eq, odd, zero);
            b.if_else(even, |b| vec![b.u32(1)], |b| vec![b.u32(2)])
        },
        |b| vec![b.u32(3)],
    )[0];
    let sum = b.add(r[0], r[1]);
    b.st_global(o1, &[tid], sum, None, NORMAL);
    b.st_global(o2, &[tid], r2, None, NORMAL);
    // A uniform if whose then-side never runs.
    let f = b.bool(false);
    let r3 = b.if_else(f, |b| vec![b.u32(7)], |_| vec![lane])[0];
    b.st_global(o3, &[tid], r3, None, NORMAL);
    let out = run(&b.finish(), &[vec![0; 128], vec![0; 128], vec![0; 128]]);
    let (a, c, d) = (u32s(&out[0]), u32s(&out[1]), u32s(&out[2]));
    for l in 0..32u32 {
        let (x, y) = if l % 3 == 0 {
            (l * 2, 1000)
        } else {
            (l + 100, l)
        };
        assert_eq!(a[l as usize], x + y, "lane {l}");
        assert_eq!(
            c[l as usize],
            if l >= 16 {
                3
            } else if l % 2 == 0 {
                1
            } else {
                2
            },
            "lane {l}"
        );
        assert_eq!(d[l as usize], l);
    }
}

#[test]
fn for_loops_divergent_nested_and_swapping() {
    let mut b = kernel("fors", 32);
    let o1 = vec1(&mut b, "acc", Scalar::U32, 32, Access::Write);
    let o2 = vec1(&mut b, "swap", Scalar::U32, 32, Access::Write);
    let o3 = vec1(&mut b, "nested", Scalar::I32, 32, Access::Write);
    let (tid, lane) = lane_of(&mut b);
    let zero = b.u32(0);
    let one = b.u32(1);
    let seven = b.u32(7);
    let hi = b.bin(BinOp::Rem, lane, seven);
    // acc = Σ_{i<hi} i·lane + 1 per iteration (divergent trip counts), two carried values.
    let r = b.for_(zero, hi, one, &[zero, one], |b, i, c| {
        let p = b.mul(i, lane);
        let a = b.add(c[0], p);
        let two = b.u32(2);
        let q = b.mul(c[1], two);
        vec![a, q]
    });
    let res = b.add(r[0], r[1]);
    b.st_global(o1, &[tid], res, None, NORMAL);
    // Swapping carried values (a parallel copy).
    let two = b.u32(2);
    let s = b.for_(zero, lane, one, &[one, two], |_, _, c| vec![c[1], c[0]]);
    let ten = b.u32(10);
    let t = b.mul(s[0], ten);
    let sw = b.add(t, s[1]);
    b.st_global(o2, &[tid], sw, None, NORMAL);
    // Nested loops with a signed induction variable starting below zero, step 2.
    let lo = b.i32(-3);
    let hi2 = b.i32(4);
    let st = b.i32(2);
    let z = b.i32(0);
    let lane_i = b.cvt(lane, Type::I32);
    let three = b.i32(3);
    let inner_hi = b.bin(BinOp::Rem, lane_i, three);
    let n = b.for_(lo, hi2, st, &[z], |b, i, c| {
        let zi = b.i32(0);
        let onei = b.i32(1);
        b.for_(zi, inner_hi, onei, &[c[0]], |b, j, c| {
            let p = b.mul(i, j);
            vec![b.add(c[0], p)]
        })
    })[0];
    b.st_global(o3, &[tid], n, None, NORMAL);
    let out = run(&b.finish(), &[vec![0; 128], vec![0; 128], vec![0; 128]]);
    let (a, s, n) = (u32s(&out[0]), u32s(&out[1]), u32s(&out[2]));
    for l in 0..32u32 {
        let hi = l % 7;
        let want = (0..hi).map(|i| i * l).sum::<u32>() + (1u32 << hi);
        assert_eq!(a[l as usize], want, "lane {l}");
        let (x, y) = if l % 2 == 0 { (1, 2) } else { (2, 1) };
        assert_eq!(s[l as usize], 10 * x + y, "lane {l}");
        let mut acc = 0i32;
        for i in (-3..4).step_by(2) {
            for j in 0..(l as i32 % 3) {
                acc += i * j;
            }
        }
        assert_eq!(n[l as usize] as i32, acc, "lane {l}");
    }
}

#[test]
fn while_loop_collatz_steps() {
    let mut b = kernel("collatz", 32);
    let o1 = vec1(&mut b, "steps", Scalar::U32, 32, Access::Write);
    let o2 = vec1(&mut b, "last", Scalar::U32, 32, Access::Write);
    let (tid, lane) = lane_of(&mut b);
    let one = b.u32(1);
    let zero = b.u32(0);
    let n0 = b.add(lane, one);
    let r = b.while_(
        &[n0, zero],
        |b, c| {
            let one = b.u32(1);
            b.cmp(CmpOp::Ne, c[0], one)
        },
        |b, c| {
            let one = b.u32(1);
            let zero = b.u32(0);
            let bit = b.bin(BinOp::And, c[0], one);
            let even = b.cmp(CmpOp::Eq, bit, zero);
            let n = b.if_else(
                even,
                |b| vec![b.bin(BinOp::Shr, c[0], one)],
                |b| {
                    let three = b.u32(3);
                    let t = b.mul(c[0], three);
                    vec![b.add(t, one)]
                },
            )[0];
            let s = b.add(c[1], one);
            vec![n, s]
        },
    );
    b.st_global(o1, &[tid], r[1], None, NORMAL);
    b.st_global(o2, &[tid], r[0], None, NORMAL);
    let out = run(&b.finish(), &[vec![0; 128], vec![0; 128]]);
    let (steps, last) = (u32s(&out[0]), u32s(&out[1]));
    for l in 0..32u32 {
        let (mut n, mut s) = (l + 1, 0);
        while n != 1 {
            n = if n % 2 == 0 { n / 2 } else { 3 * n + 1 };
            s += 1;
        }
        assert_eq!((steps[l as usize], last[l as usize]), (s, 1), "lane {l}");
    }
}

#[test]
fn endless_loop_hits_the_step_limit() {
    let mut b = kernel("spin", 32);
    let t = b.bool(true);
    b.while_(&[t], |_, c| c[0], |_, c| vec![c[0]]);
    let e = run_with(
        &b.finish(),
        &[],
        vec![],
        SimOptions {
            max_steps: 10_000,
            ..SimOptions::default()
        },
    )
    .unwrap_err();
    assert!(
        matches!(e, RuntimeError::Sim(SimError::StepLimit { .. })),
        "{e}"
    );
}

// ---------------------------------------------------------------- barriers and memory

/// Warp 0 and warp 1 exchange halves of a shared buffer across `bar.sync`.
fn exchange_kernel(sync: bool) -> Kernel {
    let mut b = kernel("bar_sync", 64);
    let out_t = vec1(&mut b, "out", Scalar::F32, 64, Access::Write);
    let buf = b.shared("buf", Scalar::F32, 64, 16, &[], None);
    let (tid, _) = lane_of(&mut b);
    let x = b.cvt(tid, Type::F32);
    let two = b.f32(2.0);
    let y = b.mul(x, two);
    b.st_shared(buf, tid, y);
    if sync {
        b.bar_sync(1, 64);
    }
    let c63 = b.u32(63);
    let other = b.sub(c63, tid);
    let v = b.ld_shared(buf, other, Type::F32);
    b.st_global(out_t, &[tid], v, None, NORMAL);
    b.finish()
}

#[test]
fn bar_sync_orders_shared_memory_under_any_interleaving() {
    let want: Vec<f32> = (0..64).map(|t| (63 - t) as f32 * 2.0).collect();
    let k = exchange_kernel(true);
    assert_eq!(f32s(&run(&k, &[vec![0; 256]])[0]), want);
    for seed in 0..8 {
        let o = SimOptions {
            seed: Some(seed),
            max_slice: 2,
            ..SimOptions::default()
        };
        assert_eq!(
            f32s(&run_with(&k, &[vec![0; 256]], vec![], o).unwrap()[0]),
            want,
            "seed {seed}"
        );
    }
    // Without the barrier, the deterministic order (warp 0 to completion
    // first) shows the race: warp 0 reads warp 1's half before it is written
    // (with the race detector off: on, it reports the race, tests/sim_race.rs).
    let unchecked = SimOptions {
        race_check: false,
        ..SimOptions::default()
    };
    let racy = run_with(&exchange_kernel(false), &[vec![0; 256]], vec![], unchecked)
        .unwrap_or_else(|e| panic!("{e}"));
    let racy = f32s(&racy[0]);
    assert_ne!(racy, want);
}

#[test]
fn bar_sync_with_a_missing_warp_deadlocks() {
    let mut b = kernel("bar_dead", 64);
    let w0 = b.role("first", 0, 32);
    b.in_role(w0, |b| b.bar_sync(1, 64));
    let e = run_with(&b.finish(), &[], vec![], SimOptions::default()).unwrap_err();
    let RuntimeError::Sim(SimError::Deadlock(d)) = &e else {
        panic!("{e}")
    };
    assert_eq!(d.blocked.len(), 1);
    assert_eq!(
        d.blocked[0].wait,
        WaitOn::Named {
            id: 1,
            arrived: 32,
            expected: 64
        }
    );
    assert!(
        e.to_string().contains("bar.sync 1: 32/64 threads arrived"),
        "{e}"
    );
}

#[test]
fn cluster_barrier_counts_exited_threads() {
    let mut b = Builder::new(
        "early_exit",
        LaunchDecl {
            block: 64,
            cluster: 2,
            min_blocks_per_sm: None,
            cluster_policy: Default::default(),
        },
    );
    let out_t = vec1(&mut b, "out", Scalar::U32, 4, Access::Write);
    let w0 = b.role("stay", 0, 32);
    b.in_role(w0, |b| {
        b.cluster_arrive(false);
        b.cluster_wait();
        let cta = b.block_idx(0);
        let one = b.u32(1);
        b.st_global(out_t, &[cta], one, None, NORMAL);
    });
    let dev = SimDevice::new();
    let m = dev.load_unverified(&b.finish()).unwrap();
    let buf = dev.upload(&[0u8; 16]).unwrap();
    dev.launch(
        &m,
        &LaunchConfig {
            grid: [4, 1, 1],
            ..LaunchConfig::default()
        },
        &[&buf],
    )
    .unwrap();
    assert_eq!(u32s(&dev.download(&buf).unwrap()), vec![1, 1, 1, 1]);
}

#[test]
fn bulk_copy_completes_its_barrier() {
    let mut b = kernel("bulk", 32);
    let src = vec1(&mut b, "src", Scalar::F32, 64, Access::Read);
    b.set_align(src, 16);
    let out_t = vec1(&mut b, "out", Scalar::F32, 64, Access::Write);
    let loaded = b.mbarrier("loaded", 1, 256, &[]);
    let buf = b.shared("stage", Scalar::F32, 64, 128, &[], Some(loaded));
    let (tid, _) = lane_of(&mut b);
    let e = b.elect();
    b.if_(e, |b| {
        b.mbarrier_init(loaded);
        b.fence_mbarrier_init();
        b.mbarrier_arrive_expect_tx(loaded, 256);
        let z = b.u32(0);
        b.bulk_copy(buf, z, src, &[z], 256, loaded, CachePolicy::EvictFirst);
    });
    b.wait(loaded);
    let c32 = b.u32(32);
    let hi = b.add(tid, c32);
    for i in [tid, hi] {
        let v = b.ld_shared(buf, i, Type::F32);
        b.st_global(out_t, &[i], v, None, NORMAL);
    }
    let x: Vec<f32> = (0..64).map(|i| i as f32 - 0.5).collect();
    let out = run(&b.finish(), &[bytes_f32(&x), vec![0; 256]]);
    assert_eq!(f32s(&out[1]), x);
}

#[test]
fn cp_async_vector_shared_loads_and_half_word_stores() {
    let mut b = kernel("cp_async", 32);
    let src = vec1(&mut b, "src", Scalar::F32, 128, Access::Read);
    b.set_align(src, 16);
    let out_t = vec1(&mut b, "out", Scalar::BF16, 128, Access::Write);
    let buf = b.shared("stage", Scalar::F32, 128, 16, &[], None);
    let (tid, _) = lane_of(&mut b);
    let four = b.u32(4);
    let at = b.mul(tid, four);
    b.cp_async(buf, at, src, &[at]);
    b.cp_async_commit();
    b.cp_async_wait(0);
    b.bar_sync(0, 32);
    // Read the neighbour's 16 bytes as one f32x4 and store them as bf16, one
    // 2-byte store per element (neighbouring lanes share words).
    let next = b.add(at, four);
    let c127 = b.u32(127);
    let next = b.bin(BinOp::And, next, c127);
    let v = b.ld_shared(buf, next, Type::vec(Scalar::F32, 4));
    for e in 0..4u8 {
        let x = b.extract(v, e);
        let h = b.cvt(x, Type::BF16);
        let ei = b.u32(e as u32);
        let i = b.add(at, ei);
        b.st_global(out_t, &[i], h, None, NORMAL);
    }
    let x: Vec<f32> = (0..128).map(|i| i as f32 * 1.001).collect();
    let out = run(&b.finish(), &[bytes_f32(&x), vec![0; 256]]);
    for i in 0..128 {
        let h = bf16::from_bits(u16::from_le_bytes([out[1][2 * i], out[1][2 * i + 1]]));
        assert_eq!(h, bf16::from_f32(x[(i + 4) % 128]), "element {i}");
    }
}

#[test]
fn waiting_on_a_lapped_phase_is_reported() {
    let mut b = kernel("lapped", 32);
    let bar = b.mbarrier("twice", 1, 0, &[]);
    let e = b.elect();
    b.if_(e, |b| {
        b.mbarrier_init(bar);
        b.mbarrier_arrive(bar);
        b.mbarrier_arrive(bar);
    });
    b.wait_phase(bar, 0);
    let e = run_with(&b.finish(), &[], vec![], SimOptions::default()).unwrap_err();
    assert!(
        e.to_string()
            .contains("wait on phase 0 of mbarrier `twice`"),
        "{e}"
    );
}

#[test]
fn shared_out_of_bounds_names_the_buffer() {
    let mut b = kernel("smem_oob", 32);
    let buf = b.shared("small", Scalar::F32, 16, 16, &[], None);
    let (tid, _) = lane_of(&mut b);
    let x = b.f32(1.0);
    b.st_shared(buf, tid, x);
    let e = run_with(&b.finish(), &[], vec![], SimOptions::default()).unwrap_err();
    let RuntimeError::Sim(SimError::OutOfBounds(o)) = &e else {
        panic!("{e}")
    };
    assert_eq!(
        (o.name.as_str(), o.index.as_slice(), o.site.lane),
        ("small", &[16i64][..], Some(16))
    );
}

// ---------------------------------------------------------------- numerics

#[test]
fn numerics_match_ieee_and_ptx_rules() {
    let mut b = kernel("numerics", 32);
    let out_t = vec1(&mut b, "out", Scalar::U32, 16, Access::Write);
    let xp = b.scalar("x", Scalar::F32);
    let np = b.scalar("n", Scalar::I32);
    let (_, lane) = lane_of(&mut b);
    let x = b.param(xp);
    let n = b.param(np);
    let mut vals: Vec<Value> = vec![];
    // 0: f32 -> bf16 (RNE) -> f32
    let h = b.cvt(x, Type::BF16);
    let hf = b.cvt(h, Type::F32);
    vals.push(b.bitcast(hf, Type::U32));
    // 1: fma with ftz flushes a subnormal result; 2: without, it stays
    let tiny = b.f32(f32::MIN_POSITIVE);
    let half = b.f32(0.5);
    let zero = b.f32(0.0);
    let r = b.fma(tiny, half, zero, true);
    vals.push(b.bitcast(r, Type::U32));
    let r = b.fma(tiny, half, zero, false);
    vals.push(b.bitcast(r, Type::U32));
    // 3, 4, 5: signed div, rem, arithmetic shift
    let three = b.i32(3);
    let one = b.i32(1);
    for v in [
        b.bin(BinOp::Div, n, three),
        b.bin(BinOp::Rem, n, three),
        b.bin(BinOp::Shr, n, one),
    ] {
        vals.push(b.bitcast(v, Type::U32));
    }
    // 6: logical shift of the same bits
    let nu = b.bitcast(n, Type::U32);
    let oneu = b.u32(1);
    vals.push(b.bin(BinOp::Shr, nu, oneu));
    // 7: ne is unordered: true with a NaN
    let nan = b.f32(f32::NAN);
    let c = b.cmp(CmpOp::Ne, nan, x);
    vals.push(b.cvt(c, Type::U32));
    // 8: sigmoid (precise), 9: fast rsqrt (precise)
    let s = b.un(UnOp::Sigmoid { fast: true }, x);
    vals.push(b.bitcast(s, Type::U32));
    let rs = b.un(UnOp::Rsqrt { fast: true }, x);
    vals.push(b.bitcast(rs, Type::U32));
    // 10: f32 -> i32 truncates
    let neg = b.un(UnOp::Neg, x);
    let t = b.cvt(neg, Type::I32);
    vals.push(b.bitcast(t, Type::U32));
    // 11: bf16 arithmetic rounds once
    let hx = b.cvt(x, Type::BF16);
    let third = b.f32(1.0 / 3.0);
    let h3 = b.cvt(third, Type::BF16);
    let hs = b.add(hx, h3);
    let hsf = b.cvt(hs, Type::F32);
    vals.push(b.bitcast(hsf, Type::U32));
    // 12: bf16x2 packing: bitcast of pack(lo, hi)
    let p = b.pack(&[hx, h3]);
    vals.push(b.bitcast(p, Type::U32));
    // Only lane 0 stores (predicated stores).
    let z = b.u32(0);
    let first = b.cmp(CmpOp::Eq, lane, z);
    for (i, &v) in vals.iter().enumerate() {
        let ix = b.u32(i as u32);
        b.st_global(out_t, &[ix], v, Some(first), NORMAL);
    }
    let x = 2.7182817f32;
    let n = -7i32;
    let out = run_with(
        &b.finish(),
        &[vec![0; 64]],
        vec![ScalarArg::F32(x), ScalarArg::I32(n)],
        SimOptions::default(),
    )
    .unwrap();
    let o = u32s(&out[0]);
    let bfx = bf16::from_f32(x);
    let b3 = bf16::from_f32(1.0 / 3.0);
    assert_eq!(f32::from_bits(o[0]), bfx.to_f32());
    assert_eq!(o[1], 0);
    assert_eq!(f32::from_bits(o[2]), f32::MIN_POSITIVE * 0.5);
    assert_eq!((o[3] as i32, o[4] as i32, o[5] as i32), (-2, -1, -4));
    assert_eq!(o[6], (n as u32) >> 1);
    assert_eq!(o[7], 1);
    assert_eq!(f32::from_bits(o[8]), 1.0 / (1.0 + (-x).exp()));
    assert_eq!(f32::from_bits(o[9]), 1.0 / x.sqrt());
    assert_eq!(o[10] as i32, -2);
    assert_eq!(
        f32::from_bits(o[11]),
        bf16::from_f32(bfx.to_f32() + b3.to_f32()).to_f32()
    );
    assert_eq!(o[12], bfx.to_bits() as u32 | (b3.to_bits() as u32) << 16);
    assert_eq!(&o[13..], &[0, 0, 0]);
}

#[test]
fn registers_are_reused_along_a_long_chain() {
    let mut b = kernel("chain", 32);
    let out_t = vec1(&mut b, "out", Scalar::F32, 32, Access::Write);
    let (tid, _) = lane_of(&mut b);
    let mut x = b.cvt(tid, Type::F32);
    for i in 0..1000 {
        let c = b.f32(i as f32 * 0.001);
        x = b.add(x, c);
    }
    b.st_global(out_t, &[tid], x, None, NORMAL);
    let k = b.finish();
    let m = SimDevice::new().load_unverified(&k).unwrap();
    assert!(k.values.len() > 2000);
    assert!(
        m.register_words() <= 4,
        "{} register words",
        m.register_words()
    );
    let out = f32s(&run(&k, &[vec![0; 128]])[0]);
    for t in 0..32 {
        let mut x = t as f32;
        for i in 0..1000 {
            x += i as f32 * 0.001;
        }
        assert_eq!(out[t], x);
    }
}

/// Like `exchange_kernel(false)` (a race on shared memory) over a grid of 32 CTAs.
fn racy_grid_kernel() -> Kernel {
    let mut b = kernel("racy", 64);
    let out_t = vec1(&mut b, "out", Scalar::F32, 32 * 64, Access::Write);
    let buf = b.shared("buf", Scalar::F32, 64, 16, &[], None);
    let (tid, _) = lane_of(&mut b);
    let x = b.cvt(tid, Type::F32);
    b.st_shared(buf, tid, x);
    let c63 = b.u32(63);
    let other = b.sub(c63, tid);
    let v = b.ld_shared(buf, other, Type::F32);
    let bid = b.block_idx(0);
    let c64 = b.u32(64);
    let at = b.mul(bid, c64);
    let at = b.add(at, tid);
    b.st_global(out_t, &[at], v, None, NORMAL);
    b.finish()
}

#[test]
fn a_seed_gives_the_same_interleaving_whatever_the_thread_count() {
    let k = racy_grid_kernel();
    let run = |threads: usize, seed: u64| {
        let opts = SimOptions {
            seed: Some(seed),
            max_slice: 3,
            threads,
            // The kernel races on purpose (its output shows the
            // interleaving); the race detector would stop it first.
            race_check: false,
            ..SimOptions::default()
        };
        let dev = SimDevice::with_options(opts);
        let m = dev.load_unverified(&k).unwrap();
        let out = dev.upload(&[0u8; 32 * 64 * 4]).unwrap();
        let cfg = LaunchConfig {
            grid: [32, 1, 1],
            ..LaunchConfig::default()
        };
        dev.launch(&m, &cfg, &[&out]).unwrap();
        dev.download(&out).unwrap()
    };
    let mut distinct = std::collections::HashSet::new();
    for seed in 0..6 {
        let one = run(1, seed);
        assert_eq!(one, run(3, seed), "seed {seed}");
        assert_eq!(one, run(1, seed), "seed {seed}");
        distinct.insert(one);
    }
    // The race is visible: different seeds interleave differently.
    assert!(distinct.len() > 1);
}

/// The simulator lays out shared memory exactly as the PTX does (one
/// layout function: offsets, mbarriers and size agree), and a legal but
/// huge alignment (2^31) is an error, not an abort (issue 32 item 4).
#[test]
fn shared_layout_is_the_ptx_layout_and_huge_alignments_are_errors() {
    use kda_ir::ptx::Layout;
    let build = |align: u32| {
        let mut b = kernel("layout", 64);
        let out_t = vec1(&mut b, "out", Scalar::F32, 64, Access::Write);
        let small = b.shared("small", Scalar::F32, 65, 4, &[], None);
        let big = b.shared("big", Scalar::F32, 64, align, &[], None);
        let (tid, _) = lane_of(&mut b);
        let x = b.cvt(tid, Type::F32);
        b.st_shared(big, tid, x);
        b.st_shared(small, tid, x);
        b.bar_sync(1, 64);
        let v = b.ld_shared(big, tid, Type::F32);
        b.st_global(out_t, &[tid], v, None, NORMAL);
        b.finish()
    };
    let dev = SimDevice::new();
    for align in [16, 128, 1024, 1 << 31] {
        let k = build(align);
        let m = dev.load(&k).unwrap();
        let ptx = Layout::of(&k);
        assert_eq!(m.shared_bytes(), ptx.bytes, "align {align}");
        let offsets: Vec<u32> = k.buffers.keys().map(|b| ptx.buffers[b]).collect();
        assert_eq!(m.buffer_offsets(), offsets.as_slice(), "align {align}");
        let want: Vec<f32> = (0..64).map(|t| t as f32).collect();
        assert_eq!(f32s(&run(&k, &[vec![0; 256]])[0]), want, "align {align}");
    }
    // Two such buffers need 2 GiB of shared memory: refused, not allocated.
    let mut b = kernel("huge", 32);
    for name in ["a", "b"] {
        b.shared(name, Scalar::F32, 4, 1 << 31, &[], None);
    }
    let e = dev.load_unverified(&b.finish()).expect_err("refused");
    assert!(e.to_string().contains("past the"), "{e}");
}
