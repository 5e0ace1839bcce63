//! wgmma from the DSL: `shared!([bf16; rows, k], swizzle = ..)` declares a
//! K-major operand tile whose `[[r, k]]` stores go through the swizzled
//! layout; `wgmma` / `wgmma_acc` chain over K; `wgmma_coord(i)` says where
//! accumulator `i` of this thread belongs. The kernel runs on the simulator
//! and matches a host GEMM in the simulator's summation order, bit for bit.

use kda::cluster_kernel;
use kda::dsl::bf16;
use kda::runtime::{Device, DeviceTensor, Launch, SimDevice};

#[cluster_kernel(block = 128)]
fn wg_tile(a: Tensor<bf16, 64, 64>, b: Tensor<bf16, 32, 64>, c: Tensor<f32, 64, 32>) {
    let wg = role!(0..128);
    let sa = shared!([bf16; 64, 64], swizzle = 128, roles = [wg]);
    let sb = shared!([bf16; 32, 64], swizzle = 64, roles = [wg]);
    in_role!(wg, {
        let t = thread_idx();
        for i in 0..32u32 {
            let e = t + 128 * i;
            sa[[e / 64, e % 64]] = a[[e / 64, e % 64]];
        }
        for i in 0..16u32 {
            let e = t + 128 * i;
            sb[[e / 64, e % 64]] = b[[e / 64, e % 64]];
        }
        fence_proxy_async();
        bar_sync(0, 128);
        wgmma_fence();
        let mut d = wgmma(32, sa, 0u32, sb, 0u32);
        for s in 1..4u32 {
            d = wgmma_acc(&d, sa, 16 * s, sb, 16 * s);
        }
        wgmma_commit();
        wgmma_wait(0);
        for i in 0..16u32 {
            let (row, col) = wgmma_coord(i);
            c[[row, col]] = d[i as usize];
        }
    });
}

#[test]
fn dsl_wgmma_matches_the_host() {
    let k = wg_tile();
    let text = kda::ir::write::write_kernel(&k);
    assert!(text.contains("tile(64, 64, sw128)"), "{text}");
    assert!(text.contains("tile(32, 64, sw64)"), "{text}");
    assert_eq!(text.matches("wgmma.mma_async 32").count(), 4, "{text}");
    let ptx = kda::ir::ptx::emit(&k).unwrap();
    if kda::ir::ptxas::find().is_some() {
        let r = kda::ir::ptxas::assemble(&ptx).unwrap_or_else(|e| panic!("{e}"));
        for w in ["C7510", "C7511", "C7515"] {
            assert!(!r.log.contains(w), "{}", r.log);
        }
    }
    let f = |i: usize, s: usize| bf16::from_f32(((i * 37 + s) % 23) as f32 / 8.0 - 1.375);
    let a: Vec<bf16> = (0..64 * 64).map(|i| f(i, 3)).collect();
    let b: Vec<bf16> = (0..32 * 64).map(|i| f(i, 11)).collect();
    let dev = SimDevice::new();
    let m = dev.load(&k).unwrap();
    let (da, db) = (
        DeviceTensor::upload(&dev, &a, [64, 64]).unwrap(),
        DeviceTensor::upload(&dev, &b, [32, 64]).unwrap(),
    );
    let dc = DeviceTensor::<SimDevice, f32, 2>::zeros(&dev, [64, 32]).unwrap();
    wg_tile::Args::<SimDevice> {
        a: da.arg(),
        b: db.arg(),
        c: dc.arg(),
    }
    .launch(&dev, &m, Launch::grid([1, 1, 1]))
    .unwrap_or_else(|e| panic!("{e}"));
    let got = dc.to_vec(&dev).unwrap();
    let af: Vec<f32> = a.iter().map(|x| x.to_f32()).collect();
    let bf: Vec<f32> = b.iter().map(|x| x.to_f32()).collect();
    let want = kda::ir::testkernels::wgmma_gemm_reference(&af, &bf, 32, 64);
    assert_eq!(got, want);
}
