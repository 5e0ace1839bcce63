//! One `cp.async.bulk` per CTA into shared memory, completed on an mbarrier
//! and read by every thread: the state-staging pattern of KdaSplit's early 2
//! and 3 schedules, alone, at the sizes those schedules copy (up to 64 KiB,
//! above the 48 KiB default so the runtime raises the shared-memory limit).
//! GPU results must equal the simulator's and `2·src`. One test per size, so
//! a sanitizer can be pointed at one size (`gpu_bulk_copy bulk_32k`); each
//! size also with the copy issued by a thread that does not wait for it.

mod common;

use common::kernels::bulk_stage;
use common::{bytes_f32, f32_bytes, gpu};
use kda_ir::Kernel;
use kda_runtime::{Device, LaunchConfig, SimDevice};

const CTAS: u32 = 2;

fn check(bytes: u32, separate_issuer: bool) {
    let words = (bytes / 4) as usize;
    let src: Vec<f32> = (0..CTAS as usize * words)
        .map(|i| (i % 977) as f32 * 0.25 - 3.0)
        .collect();
    let want: Vec<f32> = src.iter().map(|x| 2.0 * x).collect();
    let kernel = bulk_stage(bytes, separate_issuer);
    assert_eq!(
        stage_on(&SimDevice::new(), &kernel, &src),
        want,
        "simulator, {bytes} bytes"
    );
    let Some(dev) = gpu() else { return };
    assert_eq!(stage_on(&dev, &kernel, &src), want, "GPU, {bytes} bytes");
    println!(
        "bulk copy of {bytes} bytes per CTA (separate issuer: {separate_issuer}): GPU = simulator = 2·src"
    );
}

/// One launch of `kernel` over `CTAS` CTAs on `dev`: what it writes to `dst`.
fn stage_on<D: Device>(dev: &D, kernel: &Kernel, src: &[f32]) -> Vec<f32> {
    let cfg = LaunchConfig {
        grid: [CTAS, 1, 1],
        syms: vec![CTAS as i64],
        ..LaunchConfig::default()
    };
    let m = dev.load(kernel).unwrap();
    let (s, d) = (
        dev.upload(&f32_bytes(src)).unwrap(),
        dev.upload(&vec![0; 4 * src.len()]).unwrap(),
    );
    dev.launch(&m, &cfg, &[&s, &d]).unwrap();
    bytes_f32(&dev.download(&d).unwrap())
}

#[test]
fn bulk_2k() {
    check(2048, false);
}

#[test]
fn bulk_2k_separate_issuer() {
    check(2048, true);
}

#[test]
fn bulk_8k() {
    check(8192, false);
}

#[test]
fn bulk_8k_separate_issuer() {
    check(8192, true);
}

#[test]
fn bulk_32k() {
    check(32768, false);
}

#[test]
fn bulk_32k_separate_issuer() {
    check(32768, true);
}

#[test]
fn bulk_64k() {
    check(65536, false);
}

#[test]
fn bulk_64k_separate_issuer() {
    check(65536, true);
}
