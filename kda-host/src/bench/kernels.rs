//! The benchmarks' helper kernels, written with the kda-ir builder (KdaSplit's
//! bench and `decode-bench` time the same copies with them):
//!
//! * [`copy_kernel`]: `dst = src` over f32, 16-byte (`f32x4`) loads and
//!   stores, `unroll` chunks per thread, one tile of `block · 4 · unroll`
//!   floats per CTA (the grid covers the tensor exactly): the copy ceiling.
//! * [`copy_step_kernel`]: the same tiles reading `N` floats and writing
//!   `T` copies of them, PDL-chained like a decode step (loads before the
//!   wait, stores after): the same-bytes copy ([`super::same_copy`]).
//! * [`fill_kernel`]: fills a tensor with hashed pseudo-random values in
//!   `[-amp, amp)` (f32 or bf16), so state buffers of gigabytes need no host
//!   copy and are never timed on zeros.
//! * [`empty_kernel`]: no instructions at all: the graph kernel-node floor.

use kda_ir::{
    Access, BinOp, Builder, CachePolicy, CmpOp, Dim, Kernel, LaunchDecl, Provenance, Scalar, Type,
    Value,
};
use kda_runtime::{Device, LaunchConfig, RuntimeError, ScalarArg};

/// The `(block, unroll)` variants of [`copy_kernel`] the copy ceiling times,
/// and of [`copy_step_kernel`] the same-bytes copy times (each reports its
/// best verified one). Their tiles divide a state page (`128·128` floats).
pub const COPY_VARIANTS: [(u32, u32); 5] = [(256, 1), (256, 2), (256, 4), (512, 2), (1024, 1)];

/// Threads per CTA of the fill kernel.
pub const FILL_BLOCK: u32 = 256;

fn launch(block: u32, cluster: u32) -> LaunchDecl {
    LaunchDecl {
        block,
        cluster,
        min_blocks_per_sm: None,
        cluster_policy: Default::default(),
    }
}

/// Floats one CTA of `copy_kernel(block, unroll)` copies.
pub fn copy_tile(block: u32, unroll: u32) -> u64 {
    block as u64 * 4 * unroll as u64
}

/// `dst[i] = src[i]` for `i < N` (`N` a multiple of [`copy_tile`]), launched
/// on `N / copy_tile` CTAs. Thread `t` of CTA `c` copies the `unroll` chunks
/// of four floats at `c·tile + (u·block + t)·4`: every load of a warp is one
/// contiguous 512-byte segment, and all `unroll` loads are issued before the
/// first store.
pub fn copy_kernel(block: u32, unroll: u32) -> Kernel {
    tiled_copy(
        format!("bench_copy_b{block}_u{unroll}"),
        block,
        unroll,
        None,
    )
}

/// One step of the same-bytes copy: `dst[c, i] = src[i]` for `i < N` and
/// each of the `copies` destination regions `c` (`dst` is `copies × N`),
/// with [`copy_kernel`]'s tiles (launched by
/// [`SameBytes::launch`](super::same_copy::SameBytes::launch)), chained
/// with PDL the way the decode kernels' steps are (KdaSplit, GDN, Mamba-2):
/// `griddepcontrol.launch_dependents` at the entry, the (ready) loads before
/// `griddepcontrol.wait`, every store after it. So step `s + 1` may load its
/// source while step `s` still runs and writes only once `s` is complete, as
/// their state loads and stores do. `N` floats read and `copies · N`
/// written: a point's state traffic (KdaSplit: `N = B·H·128·128`,
/// `copies = T`).
pub fn copy_step_kernel(block: u32, unroll: u32, copies: u32) -> Kernel {
    assert!(copies > 0);
    tiled_copy(
        format!("bench_copy_step_b{block}_u{unroll}_t{copies}"),
        block,
        unroll,
        Some(copies),
    )
}

/// [`copy_kernel`] (`step: None`: `dst` is `N`, no PDL) or
/// [`copy_step_kernel`] (`step: Some(copies)`).
fn tiled_copy(name: String, block: u32, unroll: u32, step: Option<u32>) -> Kernel {
    assert!(block.is_multiple_of(32) && block > 0 && unroll > 0);
    let mut b = Builder::new(name, launch(block, 1));
    let n = b.sym("N");
    let src = b.tensor(
        "src",
        Scalar::F32,
        &[Dim::Sym(n)],
        &[Dim::Const(1)],
        Provenance::Ready,
        Access::Read,
    );
    let dst = match step {
        None => b.tensor(
            "dst",
            Scalar::F32,
            &[Dim::Sym(n)],
            &[Dim::Const(1)],
            Provenance::Ready,
            Access::Write,
        ),
        Some(copies) => b.tensor(
            "dst",
            Scalar::F32,
            &[Dim::Const(copies as u64), Dim::Sym(n)],
            &[Dim::Sym(n), Dim::Const(1)],
            Provenance::Ready,
            Access::Write,
        ),
    };
    b.set_align(src, 16);
    b.set_align(dst, 16);
    if step.is_some() {
        // The wait stays where the program puts it (not moved to the entry).
        b.set_early(true);
        b.pdl_launch_dependents();
    }
    let tid = b.thread_idx();
    let cta = b.block_idx(0);
    let tile = b.u32(copy_tile(block, unroll) as u32);
    let base = b.mul(cta, tile);
    let four = b.u32(4);
    let lane4 = b.mul(tid, four);
    let base = b.add(base, lane4);
    let idx: Vec<Value> = (0..unroll)
        .map(|u| {
            if u == 0 {
                base
            } else {
                let off = b.u32(u * block * 4);
                b.add(base, off)
            }
        })
        .collect();
    let f32x4 = Type::vec(Scalar::F32, 4);
    let vals: Vec<Value> = idx
        .iter()
        .map(|&i| b.ld_global(src, &[i], f32x4, CachePolicy::Normal))
        .collect();
    match step {
        None => {
            for (&i, &v) in idx.iter().zip(&vals) {
                b.st_global(dst, &[i], v, None, CachePolicy::Normal);
            }
        }
        Some(copies) => {
            b.pdl_wait();
            for c in 0..copies {
                let c = b.u32(c);
                for (&i, &v) in idx.iter().zip(&vals) {
                    b.st_global(dst, &[c, i], v, None, CachePolicy::Normal);
                }
            }
        }
    }
    b.finish()
}

/// `dst[i] = amp · (2·u(hash(i, seed)) − 1)` for `i < count`, one element per
/// thread, `u` uniform in `[0, 1)` with 24 bits; `dtype` is F32 or BF16
/// (rounded from f32). Scalars: `count: u32`, `seed: u32`, `amp: f32`.
pub fn fill_kernel(dtype: Scalar) -> Kernel {
    assert!(matches!(dtype, Scalar::F32 | Scalar::BF16));
    let name = match dtype {
        Scalar::F32 => "bench_fill_f32",
        _ => "bench_fill_bf16",
    };
    let mut b = Builder::new(name, launch(FILL_BLOCK, 1));
    let n = b.sym("N");
    let dst = b.tensor(
        "dst",
        dtype,
        &[Dim::Sym(n)],
        &[Dim::Const(1)],
        Provenance::Ready,
        Access::Write,
    );
    let count = b.scalar("count", Scalar::U32);
    let seed = b.scalar("seed", Scalar::U32);
    let amp = b.scalar("amp", Scalar::F32);
    let tid = b.thread_idx();
    let cta = b.block_idx(0);
    let block = b.u32(FILL_BLOCK);
    let first = b.mul(cta, block);
    let i = b.add(first, tid);
    let count = b.param(count);
    let live = b.cmp(CmpOp::Lt, i, count);
    let seed = b.param(seed);
    let amp = b.param(amp);
    b.if_(live, |b| {
        // murmur3's finaliser of i·golden + seed.
        let golden = b.u32(0x9e37_79b1);
        let x = b.mul(i, golden);
        let x = b.add(x, seed);
        let mix = |b: &mut Builder, x: Value, shift: u32, mul: Option<u32>| {
            let s = b.u32(shift);
            let hi = b.bin(BinOp::Shr, x, s);
            let x = b.bin(BinOp::Xor, x, hi);
            match mul {
                Some(m) => {
                    let m = b.u32(m);
                    b.mul(x, m)
                }
                None => x,
            }
        };
        let x = mix(b, x, 16, Some(0x85eb_ca6b));
        let x = mix(b, x, 13, Some(0xc2b2_ae35));
        let x = mix(b, x, 16, None);
        let eight = b.u32(8);
        let bits = b.bin(BinOp::Shr, x, eight);
        let u = b.cvt(bits, Type::F32);
        // u · 2^-23 − 1 ∈ [-1, 1), times amp.
        let scale = b.f32(1.0 / (1u32 << 23) as f32);
        let neg_one = b.f32(-1.0);
        let centred = b.fma(u, scale, neg_one, false);
        let v = b.mul(centred, amp);
        let v = if dtype == Scalar::BF16 {
            b.cvt(v, Type::BF16)
        } else {
            v
        };
        b.st_global(dst, &[i], v, None, CachePolicy::Normal);
    });
    b.finish()
}

/// A kernel with no instructions, in blocks of `block` threads and clusters
/// of `cluster` CTAs.
pub fn empty_kernel(block: u32, cluster: u32) -> Kernel {
    Builder::new(
        format!("bench_empty_b{block}_c{cluster}"),
        launch(block, cluster),
    )
    .finish()
}

/// Most elements one fill launch covers (its u32 thread index must not wrap).
pub const FILL_MAX: usize = (u32::MAX - FILL_BLOCK) as usize;

/// Enqueue `fill_kernel(dtype)` (loaded as `module`) over the first `count`
/// elements of `buf`.
pub fn fill<D: Device>(
    dev: &D,
    module: &D::Module,
    buf: &D::Buffer,
    count: usize,
    seed: u32,
    amp: f32,
) -> Result<(), RuntimeError> {
    if count == 0 {
        return Ok(());
    }
    if count > FILL_MAX {
        return Err(RuntimeError::BadLaunch {
            kernel: "bench_fill".into(),
            msg: format!("{count} elements is more than one fill covers ({FILL_MAX})"),
        });
    }
    let cfg = LaunchConfig {
        grid: [count.div_ceil(FILL_BLOCK as usize) as u32, 1, 1],
        pdl: false,
        syms: vec![count as i64],
        scalars: vec![
            ScalarArg::U32(count as u32),
            ScalarArg::U32(seed),
            ScalarArg::F32(amp),
        ],
    };
    dev.launch(module, &cfg, &[buf])
}

/// The launch of `copy_kernel(block, unroll)` over `floats` floats (a
/// multiple of the tile).
pub fn copy_launch(block: u32, unroll: u32, floats: usize) -> LaunchConfig {
    let tile = copy_tile(block, unroll) as usize;
    assert!(
        floats.is_multiple_of(tile),
        "{floats} floats is not a multiple of the tile {tile}"
    );
    LaunchConfig {
        grid: [(floats / tile) as u32, 1, 1],
        pdl: false,
        syms: vec![floats as i64],
        scalars: vec![],
    }
}
