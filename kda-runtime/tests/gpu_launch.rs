//! The CUDA runtime on small kernels built with the IR builder and compiled
//! by `kda_ir::pipeline` (`common::kernels`): parameter packing, clusters
//! declared by the backend (`.reqnctapercluster`, up to the non-portable 16),
//! PDL launches, stream-ordered and graph-captured chains, loading PTX text
//! with `load_ptx`, the module cache, timing and error reports. These tests
//! therefore also depend on the PTX backend for these few ops; the kernels
//! are kept minimal so a failure here points at the runtime first.
//! The kernels are also run on the CPU simulator, which needs no driver.
//! The GPU tests skip (printing why) where there is no CUDA driver.

mod common;

use common::kernels::{SCALE_BLOCK, cluster_ids, count_launches, pdl_scale};
use common::{bytes_f32, bytes_u32, f32_bytes, gpu};
use kda_ir::pipeline::{self, Options};
use kda_runtime::{
    CudaBuffer, CudaDevice, CudaKernel, Device, Graph, LaunchConfig, RuntimeError, ScalarArg,
    SimDevice,
};

const N: usize = 1000;

fn scale(k: f32) -> LaunchConfig {
    LaunchConfig {
        grid: [N.div_ceil(SCALE_BLOCK as usize) as u32, 1, 1],
        pdl: true,
        syms: vec![N as i64],
        scalars: vec![ScalarArg::F32(k), ScalarArg::U32(N as u32)],
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
    let k = dev.load(&pdl_scale()).unwrap();
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
    let k = dev.load(&pdl_scale()).unwrap();
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
    let k = dev.load(&pdl_scale()).unwrap();
    let (a, b) = chain_buffers(&dev);
    let graph = Graph::capture(&dev, |dev| step(dev, &k, &a, &b)).unwrap();
    let a_again = a.clone();
    drop((a, b, k));
    graph.replay().unwrap();
    expect_a(&dev, &a_again, 1);
}

/// `cluster_ids` compiled by the pipeline: its PTX and its layout's bytes.
fn compiled_cluster_ids(cluster: u32, ctas: u32) -> (String, u32) {
    let c = pipeline::compile(&cluster_ids(cluster, ctas), &Options::default()).unwrap();
    (c.ptx, c.layout.bytes)
}

#[test]
fn borrowed_memory_and_a_callers_stream() {
    // Another library's allocation (here one of ours, borrowed by address)
    // and a launch on a stream given as a raw handle, as the Python
    // bindings do with torch tensors on torch's current stream.
    let Some(dev) = gpu() else { return };
    let k = dev.load(&pdl_scale()).unwrap();
    let input: Vec<f32> = (0..N).map(|i| i as f32).collect();
    let a = dev.upload(&f32_bytes(&input)).unwrap();
    let b = dev.alloc_zeroed(4 * N).unwrap();
    // SAFETY: both allocations outlive the launch (synchronised below).
    let (ea, eb) = unsafe {
        (
            dev.borrow_external(a.device_ptr(), a.bytes()),
            dev.borrow_external(b.device_ptr(), b.bytes()),
        )
    };
    // SAFETY: the device's own stream, live for the device's lifetime.
    unsafe { dev.launch_on_stream(dev.cu_stream(), &k, &scale(3.0), &[&ea, &eb]) }.unwrap();
    let got = bytes_f32(&dev.download(&eb).unwrap());
    let want: Vec<f32> = input.iter().map(|x| 3.0 * x + 1.0).collect();
    assert_eq!(got, want);
    assert_eq!(bytes_f32(&dev.download(&b).unwrap()), want);
    // A borrowed buffer too small for the tensor is refused like any other.
    // SAFETY: never launched successfully.
    let short = unsafe { dev.borrow_external(b.device_ptr(), 16) };
    let err = unsafe { dev.launch_on_stream(dev.cu_stream(), &k, &scale(1.0), &[&ea, &short]) }
        .unwrap_err();
    assert!(matches!(err, RuntimeError::BadLaunch { .. }), "{err}");
}

#[test]
fn persistent_grids_come_from_the_occupancy_calculator() {
    // The simulator answers its configured figure; the GPU the driver's
    // occupancy calculator, which must fit at least one cluster per 2 SMs
    // for these tiny kernels and shrink with larger clusters.
    let sim = SimDevice::new();
    let m = sim.load(&cluster_ids(2, 8)).unwrap();
    assert_eq!(sim.max_resident_clusters(&m).unwrap(), 2);
    let l = kda_runtime::Launch::persistent(&sim, &m, 1000).unwrap();
    assert_eq!(l.grid, [4, 1, 1]);
    // Fewer work items than resident clusters: one cluster per item.
    let l = kda_runtime::Launch::persistent(&sim, &m, 1).unwrap();
    assert_eq!(l.grid, [2, 1, 1]);

    let Some(dev) = gpu() else { return };
    let sms = dev.describe();
    let mut last = u32::MAX;
    for cluster in [1u32, 2, 4, 8] {
        let k = dev.load(&cluster_ids(cluster, 8 * cluster)).unwrap();
        let n = dev.max_resident_clusters(&k).unwrap();
        println!("clusters of {cluster}: {n} resident ({sms})");
        assert!(
            n >= 1 && n <= last,
            "clusters of {cluster}: {n} after {last}"
        );
        assert!(
            n * cluster >= 66,
            "clusters of {cluster}: only {n} resident"
        );
        last = n;
        let l = kda_runtime::Launch::persistent(&dev, &k, u64::MAX).unwrap();
        assert_eq!(l.grid, [n * cluster, 1, 1]);
    }
}

#[test]
fn cluster_shape_comes_from_the_backend() {
    let Some(dev) = gpu() else { return };
    // 16 is above the portable 8: the device opts the function in.
    for (cluster, ctas) in [(2u32, 8u32), (4, 16), (16, 32)] {
        let k = dev.load(&cluster_ids(cluster, ctas)).unwrap();
        // The backend fixes the cluster in the PTX; the runtime then launches
        // without the cluster attribute and the driver applies the directive.
        let directive = format!(".reqnctapercluster {cluster}, 1, 1");
        assert!(k.ptx().contains(&directive), "{}", k.ptx());
        let out = dev.upload(&vec![0xff; 8 * ctas as usize]).unwrap();
        let cfg = LaunchConfig {
            grid: [ctas, 1, 1],
            ..Default::default()
        };
        dev.launch(&k, &cfg, &[&out]).unwrap();
        let got = bytes_u32(&dev.download(&out).unwrap());
        let want: Vec<u32> = (0..ctas).flat_map(|c| [c % cluster, c]).collect();
        assert_eq!(got, want, "clusters of {cluster}");
    }
    // One PTX text per cluster shape, one module each.
    assert_eq!(dev.loaded_modules(), 3);

    // PTX that fixes clusters of 2 loaded for a kernel that declares 4: the
    // runtime reads the directive back from the function and refuses.
    let (ptx, smem) = compiled_cluster_ids(2, 8);
    let err = dev.load_ptx(&cluster_ids(4, 8), &ptx, smem).unwrap_err();
    assert!(
        err.to_string().contains("the PTX fixes clusters of 2 CTAs"),
        "{err}"
    );
}

#[test]
fn modules_are_cached_by_content() {
    let Some(dev) = gpu() else { return };
    let k1 = dev.load(&pdl_scale()).unwrap();
    let k2 = dev.load(&pdl_scale()).unwrap();
    assert_eq!(k1.content_hash(), k2.content_hash());
    assert_eq!(dev.loaded_modules(), 1);
    // The same text through `load_ptx` hits the same module.
    let k3 = dev.load_ptx(&pdl_scale(), k1.ptx(), 0).unwrap();
    assert_eq!(k3.content_hash(), k1.content_hash());
    assert_eq!(dev.loaded_modules(), 1);
    dev.load(&cluster_ids(2, 2)).unwrap();
    assert_eq!(dev.loaded_modules(), 2);
    let r = k1.resources();
    assert_eq!((r.local_bytes, r.dyn_smem_bytes), (0, 0), "{r:?}");
    assert!(r.max_threads_per_block >= SCALE_BLOCK, "{r:?}");
    println!("pdl_scale: {r:?}\n{}", k1.jit_log());
}

#[test]
fn load_ptx_runs_pipeline_output() {
    let Some(dev) = gpu() else { return };
    // `load_ptx` takes PTX text from elsewhere: here the pipeline's own
    // output, compiled outside the device, with the layout's shared bytes.
    let kernel = pdl_scale();
    let compiled = pipeline::compile(&kernel, &Options::default()).unwrap();
    let k = dev
        .load_ptx(&kernel, &compiled.ptx, compiled.layout.bytes)
        .unwrap();
    assert_eq!(k.ptx(), compiled.ptx);
    let (a, b) = chain_buffers(&dev);
    for _ in 0..2 {
        step(&dev, &k, &a, &b).unwrap();
    }
    expect_a(&dev, &a, 2);
}

/// Launches per chain in [`launch_chain_marks_every_slot`], as in the bench.
const CHAIN: u32 = 64;

/// What launch `slot` of round `round` writes.
fn mark(slot: u32, round: u32) -> u32 {
    round * 1000 + slot + 1
}

#[test]
fn launch_chain_marks_every_slot() {
    let Some(dev) = gpu() else { return };
    for cluster in [1u32, 2] {
        let k = dev.load(&count_launches(cluster, CHAIN)).unwrap();
        for pdl in [false, true] {
            let out = dev.upload(&vec![0; 4 * CHAIN as usize]).unwrap();
            let chain = |dev: &CudaDevice, round: u32| {
                (0..CHAIN).try_for_each(|slot| {
                    let cfg = LaunchConfig {
                        grid: [cluster, 1, 1],
                        pdl,
                        syms: vec![],
                        scalars: vec![ScalarArg::U32(slot), ScalarArg::U32(mark(slot, round))],
                    };
                    dev.launch(&k, &cfg, &[&out])
                })
            };
            let expect = |round: u32| {
                let got = bytes_u32(&dev.download(&out).unwrap());
                let want: Vec<u32> = (0..CHAIN).map(|s| mark(s, round)).collect();
                assert_eq!(got, want, "cluster {cluster}, pdl {pdl}, round {round}");
            };
            let graph = Graph::capture(&dev, |dev| chain(dev, 1)).unwrap();
            assert_eq!(graph.launches(), CHAIN as usize);
            // Capturing ran nothing.
            assert!(
                bytes_u32(&dev.download(&out).unwrap())
                    .iter()
                    .all(|&m| m == 0)
            );
            graph.replay().unwrap();
            expect(1);
            chain(&dev, 2).unwrap();
            expect(2);
            graph.replay().unwrap();
            expect(1);
        }
    }
}

/// The same kernels on the CPU simulator (no driver needed): PDL ordering
/// checked by the simulator, ranks within clusters, and marked slots.
#[test]
fn kernels_run_on_the_simulator() {
    let sim = SimDevice::default();
    let k = sim.load(&pdl_scale()).unwrap();
    let a: Vec<f32> = (0..N).map(|i| i as f32).collect();
    let a = sim.upload(&f32_bytes(&a)).unwrap();
    let b = sim.upload(&f32_bytes(&[0.0; N])).unwrap();
    sim.launch(&k, &scale(2.0), &[&a, &b]).unwrap();
    sim.launch(&k, &scale(0.5), &[&b, &a]).unwrap();
    let got = bytes_f32(&sim.download(&a).unwrap());
    let want: Vec<f32> = (0..N).map(|i| i as f32 + 1.5).collect();
    assert_eq!(got, want);

    for (cluster, ctas) in [(2u32, 8u32), (4, 16), (16, 32)] {
        let k = sim.load(&cluster_ids(cluster, ctas)).unwrap();
        let out = sim.upload(&vec![0xff; 8 * ctas as usize]).unwrap();
        let cfg = LaunchConfig {
            grid: [ctas, 1, 1],
            ..Default::default()
        };
        sim.launch(&k, &cfg, &[&out]).unwrap();
        let got = bytes_u32(&sim.download(&out).unwrap());
        let want: Vec<u32> = (0..ctas).flat_map(|c| [c % cluster, c]).collect();
        assert_eq!(got, want, "clusters of {cluster}");
        let ptx = compiled_cluster_ids(cluster, ctas).0;
        assert!(
            ptx.contains(&format!(".reqnctapercluster {cluster}, 1, 1")),
            "{ptx}"
        );
    }

    let k = sim.load(&count_launches(2, CHAIN)).unwrap();
    let out = sim.upload(&vec![0; 4 * CHAIN as usize]).unwrap();
    for slot in 0..CHAIN {
        let cfg = LaunchConfig {
            grid: [2, 1, 1],
            pdl: true,
            syms: vec![],
            scalars: vec![ScalarArg::U32(slot), ScalarArg::U32(mark(slot, 0))],
        };
        sim.launch(&k, &cfg, &[&out]).unwrap();
    }
    let got = bytes_u32(&sim.download(&out).unwrap());
    assert_eq!(got, (0..CHAIN).map(|s| mark(s, 0)).collect::<Vec<_>>());

    // The PTX keeps the intended PDL order: release at entry, wait later.
    for kernel in [pdl_scale(), count_launches(1, CHAIN)] {
        let ptx = pipeline::compile(&kernel, &Options::default()).unwrap().ptx;
        let release = ptx
            .find("griddepcontrol.launch_dependents")
            .expect("release");
        let wait = ptx.find("griddepcontrol.wait").expect("wait");
        assert!(release < wait, "{ptx}");
    }
}

#[test]
fn bad_launches_and_bad_ptx_are_reported() {
    let Some(dev) = gpu() else { return };
    let k = dev.load(&pdl_scale()).unwrap();
    let (a, b) = chain_buffers(&dev);

    let err = dev.launch(&k, &scale(2.0), &[&a]).unwrap_err();
    assert!(matches!(err, RuntimeError::BadLaunch { .. }), "{err}");
    let small = dev.upload(&[0u8; 16]).unwrap();
    let err = dev.launch(&k, &scale(2.0), &[&a, &small]).unwrap_err();
    assert!(err.to_string().contains("spans 4000 bytes"), "{err}");

    // The pipeline's pdl_scale text, damaged: an fma with no such rounding.
    let ptx = k.ptx();
    assert!(ptx.contains("fma.rn.f32"), "{ptx}");
    let broken = ptx.replace("fma.rn.f32", "fma.rx.f32");
    let err = dev.load_ptx(&pdl_scale(), &broken, 0).unwrap_err();
    let RuntimeError::Driver { call, msg, .. } = &err else {
        panic!("{err}")
    };
    assert_eq!(*call, "cuModuleLoadDataEx");
    assert!(msg.contains("JIT log"), "{msg}");

    let mut renamed = pdl_scale();
    renamed.name = "no_such_entry".into();
    let err = dev.load_ptx(&renamed, k.ptx(), 0).unwrap_err();
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
    let k = dev.load(&pdl_scale()).unwrap();
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
    let k = dev.load(&pdl_scale()).unwrap();
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
