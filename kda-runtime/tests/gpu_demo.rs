//! The DSMEM exchange demo compiled by the PTX backend and run on the GPU:
//! against the host reference for every cluster size, against the simulator,
//! and as a PDL chain captured in a graph and replayed. Skips (printing why)
//! where there is no CUDA driver.

mod common;

use common::{bytes_f32, f32_bytes, gpu};
use kda_ir::testkernels::{LANES, dsmem_exchange, dsmem_exchange_reference as reference};
use kda_runtime::{AnyDevice, Device, Graph, LaunchConfig, RuntimeError, SimDevice};

/// `clusters` clusters' worth of input rows, all values distinct.
fn input(cluster: u32, clusters: u32) -> Vec<f32> {
    let rows = cluster * clusters;
    (0..rows * LANES).map(|i| i as f32 * 0.25 - 100.0).collect()
}

fn cfg(rows: usize, pdl: bool) -> LaunchConfig {
    LaunchConfig {
        grid: [rows as u32, 1, 1],
        pdl,
        syms: vec![rows as i64],
        scalars: vec![],
    }
}

/// One launch of the demo on any device: `output` for `input`.
fn run<D: Device>(dev: &D, cluster: u32, input: &[f32]) -> Result<Vec<f32>, RuntimeError> {
    let module = dev.load(&dsmem_exchange(cluster))?;
    let rows = input.len() / LANES as usize;
    let src = dev.upload(&f32_bytes(input))?;
    let dst = dev.upload(&vec![0; input.len() * 4])?;
    dev.launch(&module, &cfg(rows, false), &[&src, &dst])?;
    dev.synchronize()?;
    Ok(bytes_f32(&dev.download(&dst)?))
}

#[test]
fn demo_matches_the_reference_for_every_cluster_size() {
    let Some(dev) = gpu() else { return };
    println!("{}", dev.describe());
    // 16 is above the portable cluster size: the device opts the kernel in.
    for cluster in [2, 4, 8, 16] {
        let x = input(cluster, 8);
        let got = run(&dev, cluster, &x).unwrap_or_else(|e| panic!("cluster {cluster}: {e}"));
        assert_eq!(got, reference(&x, cluster), "cluster {cluster}");
    }
}

#[test]
fn demo_pdl_chain_captured_in_a_graph_and_replayed() {
    let Some(dev) = gpu() else { return };
    let cluster = 2;
    let module = dev.load(&dsmem_exchange(cluster)).unwrap();
    let k = module.resources();
    println!("dsmem_exchange: {k:?}");
    let x = input(cluster, 132);
    let rows = x.len() / LANES as usize;
    let src = dev.upload(&f32_bytes(&x)).unwrap();
    let mid = dev.upload(&vec![0; x.len() * 4]).unwrap();
    let dst = dev.upload(&vec![0; x.len() * 4]).unwrap();
    // The second launch reads what the first produces: its sender warp waits
    // (griddepcontrol.wait) before the load; the first releases it at entry.
    let graph = Graph::capture(&dev, |dev| {
        dev.launch(&module, &cfg(rows, true), &[&src, &mid])?;
        dev.launch(&module, &cfg(rows, true), &[&mid, &dst])
    })
    .unwrap();
    let want = reference(&reference(&x, cluster), cluster);
    for _ in 0..3 {
        graph.replay().unwrap();
        assert_eq!(bytes_f32(&dev.download(&dst).unwrap()), want);
    }
}

#[test]
fn demo_on_the_gpu_matches_the_simulator() {
    let Some(gpu) = gpu() else { return };
    let sim = SimDevice::new();
    for cluster in [2, 4] {
        let x = input(cluster, 4);
        let on_gpu = run(&gpu, cluster, &x).unwrap();
        let on_sim = run(&sim, cluster, &x).unwrap();
        assert_eq!(on_gpu, on_sim, "cluster {cluster}");
    }
    // Behind AnyDevice, the same; buffers never cross devices.
    let (gpu, sim) = (AnyDevice::from(gpu), AnyDevice::from(sim));
    let x = input(2, 2);
    assert_eq!(run(&gpu, 2, &x).unwrap(), run(&sim, 2, &x).unwrap());
    let module = gpu.load(&dsmem_exchange(2)).unwrap();
    let foreign = sim.upload(&f32_bytes(&x)).unwrap();
    let err = gpu
        .launch(&module, &cfg(4, false), &[&foreign, &foreign])
        .unwrap_err();
    assert!(matches!(err, RuntimeError::BadLaunch { .. }), "{err}");
}
