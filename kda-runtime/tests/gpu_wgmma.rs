//! wgmma on the GPU: the one-warpgroup GEMM tile of the simulator's tests
//! (`kda_ir::testkernels::wgmma_gemm`: bf16 A and B staged into swizzled
//! shared tiles by the kernel's own stores, K looped in steps of 16, f32
//! accumulators stored to global) on the H200, for N ∈ {8, 64, 128, 256}
//! and every swizzle, against the float64 product and the simulator. The
//! hardware's f32 summation order is its own, so the GPU is held to a
//! relative error against f64, and its distance from the simulator's
//! bit-exact host order is printed. Skips without a CUDA driver.

mod common;

use common::{bytes_f32, gpu};
use half::bf16;
use kda_ir::testkernels::{wgmma_gemm, wgmma_values};
use kda_ir::wgmma::Swizzle;
use kda_runtime::{Device, LaunchConfig, SimDevice};

fn bytes(x: &[bf16]) -> Vec<u8> {
    x.iter().flat_map(|v| v.to_bits().to_le_bytes()).collect()
}

fn run<D: Device>(dev: &D, k: &kda_ir::Kernel, bufs: &[Vec<u8>]) -> Vec<f32> {
    let m = dev.load(k).unwrap_or_else(|e| panic!("{}: {e}", k.name));
    let bs: Vec<_> = bufs.iter().map(|b| dev.upload(b).unwrap()).collect();
    let refs: Vec<_> = bs.iter().collect();
    let cfg = LaunchConfig {
        grid: [1, 1, 1],
        pdl: false,
        syms: vec![],
        scalars: vec![],
    };
    dev.launch(&m, &cfg, &refs)
        .unwrap_or_else(|e| panic!("{}: {e}", k.name));
    bytes_f32(&dev.download(&bs[2]).unwrap())
}

#[test]
fn wgmma_gemm_on_the_gpu_matches_f64_and_the_simulator() {
    let Some(dev) = gpu() else { return };
    let sim = SimDevice::new();
    for n in [8u32, 64, 128, 256] {
        for s in Swizzle::ALL {
            let kdim = 64u32;
            let k = wgmma_gemm(n, kdim, s);
            let (nu, ku) = (n as usize, kdim as usize);
            let a = wgmma_values(64 * ku, 3 + u64::from(n));
            let b = wgmma_values(nu * ku, 11);
            let bufs = [bytes(&a), bytes(&b), vec![0u8; 64 * nu * 4]];
            let got = run(&dev, &k, &bufs);
            let on_sim = run(&sim, &k, &bufs);
            // f64 reference: c[m][n] = sum_k a[m][k] b[n][k] (both K-major).
            let (mut err, mut norm, mut ulps) = (0f64, 0f64, 0u32);
            for m in 0..64 {
                for j in 0..nu {
                    let want: f64 = (0..ku)
                        .map(|x| a[m * ku + x].to_f64() * b[j * ku + x].to_f64())
                        .sum();
                    let g = got[m * nu + j];
                    err += (g as f64 - want).powi(2);
                    norm += want * want;
                    let d =
                        (g.to_bits() as i64 - on_sim[m * nu + j].to_bits() as i64).unsigned_abs();
                    ulps = ulps.max(d.min(u32::MAX as u64) as u32);
                }
            }
            let rel = (err / norm.max(1e-300)).sqrt();
            println!(
                "{}: relative error against f64 {rel:.2e}, at most {ulps} ulp from the simulator",
                k.name
            );
            assert!(rel < 1e-5, "{}: relative error {rel:e}", k.name);
            assert!(got.iter().any(|&x| x != 0.0), "{}", k.name);
        }
    }
}
