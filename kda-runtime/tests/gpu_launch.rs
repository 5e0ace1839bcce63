//! The CUDA runtime on hand-written PTX, independent of the PTX backend:
//! parameter packing, cluster and PDL launch attributes, stream-ordered and
//! graph-captured chains, the module cache, timing and error reports.
//! Skips (printing why) where there is no CUDA driver.

mod common;

use common::{bytes_f32, bytes_u32, f32_bytes, gpu};
use kda_ir::{Access, Builder, Dim, Kernel, LaunchDecl, Provenance, Scalar};
use kda_runtime::{
    CudaBuffer, CudaDevice, CudaKernel, Device, Graph, LaunchConfig, RuntimeError, ScalarArg,
};

const PDL_SCALE: &str = include_str!("ptx/pdl_scale.ptx");
const CLUSTER_IDS: &str = include_str!("ptx/cluster_ids.ptx");

/// The declarations `ptx/pdl_scale.ptx` was written for: `dst = k·src + 1`.
fn pdl_scale_decl() -> Kernel {
    let mut b = Builder::new(
        "pdl_scale",
        LaunchDecl {
            block: 128,
            cluster: 1,
            min_blocks_per_sm: None,
        },
    );
    let n = b.sym("n");
    let vector = [Dim::Sym(n)];
    b.tensor(
        "src",
        Scalar::F32,
        &vector,
        &[Dim::Const(1)],
        Provenance::Produced,
        Access::Read,
    );
    b.tensor(
        "dst",
        Scalar::F32,
        &vector,
        &[Dim::Const(1)],
        Provenance::Ready,
        Access::Write,
    );
    b.scalar("k", Scalar::F32);
    b.finish()
}

/// The declarations of `ptx/cluster_ids.ptx` for `ctas` CTAs in clusters of `cluster`.
fn cluster_ids_decl(cluster: u32, ctas: u32) -> Kernel {
    let mut b = Builder::new(
        "cluster_ids",
        LaunchDecl {
            block: 32,
            cluster,
            min_blocks_per_sm: None,
        },
    );
    let out = [Dim::Const(2 * ctas as u64)];
    b.tensor(
        "out",
        Scalar::U32,
        &out,
        &[Dim::Const(1)],
        Provenance::Ready,
        Access::Write,
    );
    b.finish()
}

const N: usize = 1000;

fn scale(k: f32) -> LaunchConfig {
    LaunchConfig {
        grid: [N.div_ceil(128) as u32, 1, 1],
        pdl: true,
        syms: vec![N as i64],
        scalars: vec![ScalarArg::F32(k)],
    }
}

/// One step of the chain: `b = 2a + 1`, then `a = b/2 + 1`, so `a` grows by 1.5.
fn step(
    dev: &CudaDevice,
    k: &CudaKernel,
    a: &CudaBuffer,
    b: &CudaBuffer,
) -> Result<(), RuntimeError> {
    dev.launch(k, &scale(2.0), &[a, b])?;
    dev.launch(k, &scale(0.5), &[b, a])
}

fn expect_a(dev: &CudaDevice, a: &CudaBuffer, steps: usize) {
    let got = bytes_f32(&dev.download(a).unwrap());
    let want: Vec<f32> = (0..N).map(|i| i as f32 + 1.5 * steps as f32).collect();
    assert_eq!(got, want, "after {steps} steps");
}

fn chain_buffers(dev: &CudaDevice) -> (CudaBuffer, CudaBuffer) {
    let a: Vec<f32> = (0..N).map(|i| i as f32).collect();
    (
        dev.upload(&f32_bytes(&a)).unwrap(),
        dev.upload(&f32_bytes(&[0.0; N])).unwrap(),
    )
}

#[test]
fn pdl_chain_on_the_stream() {
    let Some(dev) = gpu() else { return };
    println!("{}", dev.describe());
    let k = dev.load_ptx(&pdl_scale_decl(), PDL_SCALE, 0).unwrap();
    let (a, b) = chain_buffers(&dev);
    for _ in 0..3 {
        step(&dev, &k, &a, &b).unwrap();
    }
    dev.synchronize().unwrap();
    expect_a(&dev, &a, 3);
}

#[test]
fn pdl_chain_captured_in_a_graph_and_replayed() {
    let Some(dev) = gpu() else { return };
    let k = dev.load_ptx(&pdl_scale_decl(), PDL_SCALE, 0).unwrap();
    let (a, b) = chain_buffers(&dev);
    let graph = Graph::capture(&dev, |dev| step(dev, &k, &a, &b)).unwrap();
    assert_eq!(graph.launches(), 2);
    // Capturing ran nothing.
    expect_a(&dev, &a, 0);
    for replays in 1..=3 {
        graph.replay().unwrap();
        expect_a(&dev, &a, replays);
    }
    // Replays and direct launches share the stream, in order.
    step(&dev, &k, &a, &b).unwrap();
    graph.replay().unwrap();
    expect_a(&dev, &a, 5);
}

#[test]
fn graph_keeps_its_buffers_alive() {
    let Some(dev) = gpu() else { return };
    let k = dev.load_ptx(&pdl_scale_decl(), PDL_SCALE, 0).unwrap();
    let (a, b) = chain_buffers(&dev);
    let graph = Graph::capture(&dev, |dev| step(dev, &k, &a, &b)).unwrap();
    let a_again = a.clone();
    drop((a, b, k));
    graph.replay().unwrap();
    expect_a(&dev, &a_again, 1);
}

#[test]
fn cluster_shape_comes_from_the_launch() {
    let Some(dev) = gpu() else { return };
    // 16 is above the portable 8: the device opts the function in.
    for (cluster, ctas) in [(2u32, 8u32), (4, 16), (16, 32)] {
        let k = dev
            .load_ptx(&cluster_ids_decl(cluster, ctas), CLUSTER_IDS, 0)
            .unwrap();
        let out = dev.upload(&vec![0xff; 8 * ctas as usize]).unwrap();
        let cfg = LaunchConfig {
            grid: [ctas, 1, 1],
            ..Default::default()
        };
        dev.launch(&k, &cfg, &[&out]).unwrap();
        let got = bytes_u32(&dev.download(&out).unwrap());
        let want: Vec<u32> = (0..ctas).flat_map(|c| [c % cluster, cluster]).collect();
        assert_eq!(got, want, "clusters of {cluster}");
    }
    // One PTX text, one module, whatever the launch shape.
    assert_eq!(dev.loaded_modules(), 1);
}

#[test]
fn modules_are_cached_by_content() {
    let Some(dev) = gpu() else { return };
    let k1 = dev.load_ptx(&pdl_scale_decl(), PDL_SCALE, 0).unwrap();
    let k2 = dev.load_ptx(&pdl_scale_decl(), PDL_SCALE, 0).unwrap();
    assert_eq!(k1.content_hash(), k2.content_hash());
    assert_eq!(dev.loaded_modules(), 1);
    dev.load_ptx(&cluster_ids_decl(2, 2), CLUSTER_IDS, 0)
        .unwrap();
    assert_eq!(dev.loaded_modules(), 2);
    let r = k1.resources();
    assert_eq!((r.local_bytes, r.dyn_smem_bytes), (0, 0), "{r:?}");
    assert!(r.max_threads_per_block >= 128, "{r:?}");
    println!("pdl_scale: {r:?}\n{}", k1.jit_log());
}

#[test]
fn bad_launches_and_bad_ptx_are_reported() {
    let Some(dev) = gpu() else { return };
    let k = dev.load_ptx(&pdl_scale_decl(), PDL_SCALE, 0).unwrap();
    let (a, b) = chain_buffers(&dev);

    let err = dev.launch(&k, &scale(2.0), &[&a]).unwrap_err();
    assert!(matches!(err, RuntimeError::BadLaunch { .. }), "{err}");
    let small = dev.upload(&[0u8; 16]).unwrap();
    let err = dev.launch(&k, &scale(2.0), &[&a, &small]).unwrap_err();
    assert!(err.to_string().contains("spans 4000 bytes"), "{err}");

    let broken = PDL_SCALE.replace("fma.rn.f32", "fma.rx.f32");
    let err = dev.load_ptx(&pdl_scale_decl(), &broken, 0).unwrap_err();
    let RuntimeError::Driver { call, msg, .. } = &err else {
        panic!("{err}")
    };
    assert_eq!(*call, "cuModuleLoadDataEx");
    assert!(msg.contains("JIT log"), "{msg}");

    let mut renamed = pdl_scale_decl();
    renamed.name = "no_such_entry".into();
    let err = dev.load_ptx(&renamed, PDL_SCALE, 0).unwrap_err();
    assert!(
        matches!(
            err,
            RuntimeError::Driver {
                call: "cuModuleGetFunction",
                ..
            }
        ),
        "{err}"
    );

    // The device still works.
    step(&dev, &k, &a, &b).unwrap();
    expect_a(&dev, &a, 1);
}

#[test]
fn capture_refuses_synchronous_work_and_leaves_the_stream_usable() {
    let Some(dev) = gpu() else { return };
    let k = dev.load_ptx(&pdl_scale_decl(), PDL_SCALE, 0).unwrap();
    let (a, b) = chain_buffers(&dev);
    let err = Graph::capture(&dev, |dev| {
        step(dev, &k, &a, &b)?;
        dev.synchronize()
    })
    .err()
    .expect("synchronising inside a capture must fail");
    assert!(err.to_string().contains("captured"), "{err}");
    assert!(Graph::capture(&dev, |dev| dev.upload(&[1, 2, 3]).map(drop)).is_err());
    // Nothing of the failed captures ran, and the stream is out of capture mode.
    step(&dev, &k, &a, &b).unwrap();
    expect_a(&dev, &a, 1);
}

#[test]
fn replays_are_timed() {
    let Some(dev) = gpu() else { return };
    let k = dev.load_ptx(&pdl_scale_decl(), PDL_SCALE, 0).unwrap();
    let (a, b) = chain_buffers(&dev);
    let graph = Graph::capture(&dev, |dev| step(dev, &k, &a, &b)).unwrap();
    graph.replay().unwrap();
    let times = graph.time_replays(&dev, 20).unwrap();
    assert_eq!(times.len(), 20);
    assert!(times.iter().all(|&t| t > 0.0 && t < 1000.0), "{times:?}");
    let direct = dev.time(|dev| step(dev, &k, &a, &b)).unwrap();
    assert!(direct > 0.0, "{direct}");
    expect_a(&dev, &a, 22);
    println!(
        "chain of 2: graph replay median {:.2} µs, direct launches {:.2} µs",
        kda_runtime::cuda::median(&times) * 1e3,
        direct * 1e3
    );
}
