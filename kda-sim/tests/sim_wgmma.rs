//! wgmma on the simulator: the one-warpgroup GEMM tile
//! ([`kda_ir::testkernels::wgmma_gemm`]: bf16 A and B staged into swizzled
//! shared tiles by the kernel's own store code, K looped in steps of 16)
//! against a host GEMM in the simulator's summation order (bit-exact), for
//! N ∈ {8, 64, 128} and every swizzle; and reading an accumulator before the
//! `wgmma.wait_group` that covers it is a simulator error.

use half::bf16;
use kda_device::{Device, LaunchConfig, RuntimeError};
use kda_ir::testkernels::{wgmma_gemm, wgmma_gemm_pipelined, wgmma_gemm_reference, wgmma_values};
use kda_ir::wgmma::Swizzle;
use kda_ir::{Access, BinOp, Builder, CachePolicy, Dim, Kernel, LaunchDecl, Provenance, Scalar};
use kda_sim::{SimDevice, SimError, SimOptions};

fn run(k: &Kernel, bufs: &[Vec<u8>]) -> Result<Vec<Vec<u8>>, RuntimeError> {
    run_with(k, bufs, true)
}

/// Without the verifier, whose group check would reject the early reads
/// first: the simulator's own check is what these tests exercise.
fn run_unverified(k: &Kernel, bufs: &[Vec<u8>]) -> Result<Vec<Vec<u8>>, RuntimeError> {
    run_with(k, bufs, false)
}

fn run_with(k: &Kernel, bufs: &[Vec<u8>], verify: bool) -> Result<Vec<Vec<u8>>, RuntimeError> {
    let dev = SimDevice::with_options(SimOptions::default());
    let m = if verify {
        dev.load(k)?
    } else {
        dev.load_unverified(k)?
    };
    let bs: Vec<_> = bufs
        .iter()
        .map(|b| dev.upload(b))
        .collect::<Result<_, _>>()?;
    let refs: Vec<_> = bs.iter().collect();
    let cfg = LaunchConfig {
        grid: [1, 1, 1],
        pdl: false,
        syms: vec![],
        scalars: vec![],
    };
    dev.launch(&m, &cfg, &refs)?;
    bs.iter().map(|b| dev.download(b)).collect()
}

fn bytes_bf16(x: &[bf16]) -> Vec<u8> {
    x.iter().flat_map(|v| v.to_bits().to_le_bytes()).collect()
}

fn f32s(b: &[u8]) -> Vec<f32> {
    b.chunks(4)
        .map(|c| f32::from_le_bytes(c.try_into().unwrap()))
        .collect()
}

fn check(n: u32, kdim: u32, s: Swizzle) {
    check_kernel(wgmma_gemm(n, kdim, s), n, kdim);
}

fn check_kernel(k: Kernel, n: u32, kdim: u32) {
    let (nu, ku) = (n as usize, kdim as usize);
    let a = wgmma_values(64 * ku, 1 + u64::from(n));
    let b = wgmma_values(nu * ku, 7 + u64::from(kdim));
    let out = run(&k, &[bytes_bf16(&a), bytes_bf16(&b), vec![0; 64 * nu * 4]])
        .unwrap_or_else(|e| panic!("{}: {e}", k.name));
    let got = f32s(&out[2]);
    let af: Vec<f32> = a.iter().map(|x| x.to_f32()).collect();
    let bf: Vec<f32> = b.iter().map(|x| x.to_f32()).collect();
    let want = wgmma_gemm_reference(&af, &bf, nu, ku);
    for (i, (g, w)) in got.iter().zip(&want).enumerate() {
        assert_eq!(
            g.to_bits(),
            w.to_bits(),
            "{}: c[{}][{}] = {g}, host {w}",
            k.name,
            i / nu,
            i % nu
        );
    }
    // Not all zero: the data went through.
    assert!(got.iter().any(|&x| x != 0.0), "{}", k.name);
}

#[test]
fn wgmma_gemm_matches_host_n8() {
    for s in Swizzle::ALL {
        check(8, 64, s);
        check(8, 128, s);
    }
}

#[test]
fn wgmma_gemm_matches_host_n64() {
    for s in Swizzle::ALL {
        check(64, 64, s);
    }
    check(64, 16, Swizzle::B32);
}

#[test]
fn wgmma_gemm_matches_host_n128() {
    for s in Swizzle::ALL {
        check(128, 64, s);
    }
}

/// One wgmma m64n8k16 on zeroed tiles, committed or not, waited or not,
/// then each thread stores its first accumulator.
fn early_read(commit: bool, wait: bool) -> Kernel {
    wgmma_then(commit, wait, None)
}

/// The same; with `overwrite`, a write into A:
/// `Some(true)` between the commit and the wait, `Some(false)` after it
/// (thread 0 writes A's first element).
fn wgmma_then(commit: bool, wait: bool, overwrite: Option<bool>) -> Kernel {
    let mut b = Builder::new(
        "wgmma_early_read",
        LaunchDecl {
            block: 128,
            cluster: 1,
            min_blocks_per_sm: None,
            cluster_policy: Default::default(),
        },
    );
    let out = b.tensor(
        "out",
        Scalar::F32,
        &[Dim::Const(128)],
        &[Dim::Const(1)],
        Provenance::Ready,
        Access::Write,
    );
    let wg = b.role("wg", 0, 128);
    let sa = b.shared_tile("a", 64, 16, Swizzle::None, &[wg]);
    let sb = b.shared_tile("b", 8, 16, Swizzle::None, &[wg]);
    b.in_role(wg, |b| {
        let t = b.thread_idx();
        let z = b.u32(0);
        b.wgmma_fence();
        let d = b.wgmma(8, sa, z, sb, z, None);
        if commit {
            b.wgmma_commit();
        }
        let write = |b: &mut Builder| {
            let first = b.u32(0);
            let is0 = b.cmp(kda_ir::CmpOp::Eq, t, first);
            b.if_(is0, |b| {
                let zero = b.f32(0.0);
                let x = b.cvt(zero, kda_ir::Type::BF16);
                b.st_shared(sa, first, x);
            });
        };
        if overwrite == Some(true) {
            write(b);
        }
        if wait {
            b.wgmma_wait(0);
        }
        if overwrite == Some(false) {
            write(b);
        }
        let one = b.u32(0);
        let at = b.bin(BinOp::Add, t, one);
        b.st_global(out, &[at], d[0], None, CachePolicy::Normal);
    });
    b.finish()
}

#[test]
fn reading_an_accumulator_before_its_wait_is_an_error() {
    assert!(run(&early_read(true, true), &[vec![0; 512]]).is_ok());
    for (commit, what) in [
        (true, "may still be in flight"),
        (false, "before its group is committed"),
    ] {
        let k = early_read(commit, false);
        assert!(
            kda_ir::verifier::verify(&k).is_err(),
            "the verifier sees this one too"
        );
        let e = run_unverified(&k, &[vec![0; 512]]).unwrap_err();
        let RuntimeError::Sim(SimError::Wgmma { msg, site }) = &e else {
            panic!("{e}")
        };
        assert!(msg.contains(what), "{e}");
        assert_eq!(site.op, "st.global", "{e}");
        assert!(e.to_string().contains("wgmma.wait_group"), "{e}");
    }
}

#[test]
fn overwriting_an_operand_before_the_wait_is_an_error() {
    // Written between commit and wait: the wgmma may still be reading it.
    if let Err(e) = run(&wgmma_then(true, true, Some(false)), &[vec![0; 512]]) {
        panic!("{e}");
    }
    let e = run(&wgmma_then(true, true, Some(true)), &[vec![0; 512]]).unwrap_err();
    let RuntimeError::Sim(SimError::Wgmma { msg, site }) = &e else {
        panic!("{e}")
    };
    assert!(
        msg.contains("writes shared buffer `a` while the wgmma at"),
        "{e}"
    );
    assert_eq!(site.op, "st.shared", "{e}");
}

/// The K loop keeps one group in flight (`wait_group 1`), the accumulator
/// carried by the loop: verified, run, and the same result.
#[test]
fn pipelined_k_loop_matches_host() {
    for s in [Swizzle::B128, Swizzle::None] {
        check_kernel(wgmma_gemm_pipelined(64, 128, s), 64, 128);
    }
}
