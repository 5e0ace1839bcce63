//! The DSMEM exchange demo on the simulator: clusters of 2 and 4 against the
//! host reference, under deterministic and seeded random scheduling.

use kda_device::{Device, LaunchConfig};
use kda_ir::testkernels::{LANES, dsmem_exchange, dsmem_exchange_reference as reference};
use kda_sim::{SimDevice, SimOptions};

fn to_bytes(x: &[f32]) -> Vec<u8> {
    x.iter().flat_map(|v| v.to_le_bytes()).collect()
}

fn to_f32(b: &[u8]) -> Vec<f32> {
    b.chunks(4)
        .map(|c| f32::from_le_bytes(c.try_into().unwrap()))
        .collect()
}

fn input(rows: u32) -> Vec<f32> {
    (0..rows * LANES)
        .map(|i| (i as f32) * 0.25 - 17.0)
        .collect()
}

fn run(dev: &SimDevice, cluster: u32, rows: u32) -> Vec<f32> {
    let k = dsmem_exchange(cluster);
    let m = dev.load(&k).expect("load");
    let x = input(rows);
    let inp = dev.upload(&to_bytes(&x)).unwrap();
    let out = dev.upload(&vec![0u8; x.len() * 4]).unwrap();
    let cfg = LaunchConfig {
        grid: [rows, 1, 1],
        pdl: true,
        syms: vec![rows as i64],
        scalars: vec![],
    };
    dev.launch(&m, &cfg, &[&inp, &out])
        .unwrap_or_else(|e| panic!("launch failed:\n{e}"));
    dev.synchronize().unwrap();
    to_f32(&dev.download(&out).unwrap())
}

#[test]
fn demo_cluster_2_matches_reference() {
    let dev = SimDevice::new();
    let rows = 8;
    assert_eq!(run(&dev, 2, rows), reference(&input(rows), 2));
    let s = dev.last_stats();
    assert_eq!(s.clusters, 4);
    assert!(s.warp_instructions > 0);
}

#[test]
fn demo_cluster_4_matches_reference() {
    let dev = SimDevice::new();
    let rows = 16;
    assert_eq!(run(&dev, 4, rows), reference(&input(rows), 4));
}

#[test]
fn demo_single_thread_and_many_clusters() {
    let dev = SimDevice::with_options(SimOptions {
        threads: 1,
        ..SimOptions::default()
    });
    let rows = 64;
    assert_eq!(run(&dev, 4, rows), reference(&input(rows), 4));
}

#[test]
fn seeded_random_interleavings_give_the_same_result() {
    let rows = 16;
    let want = reference(&input(rows), 4);
    for seed in 0..16 {
        for slice in [1, 3, 16] {
            let dev = SimDevice::with_options(SimOptions {
                seed: Some(seed),
                max_slice: slice,
                ..SimOptions::default()
            });
            assert_eq!(run(&dev, 4, rows), want, "seed {seed}, slice {slice}");
            assert_eq!(
                run(&dev, 2, rows),
                reference(&input(rows), 2),
                "seed {seed}, slice {slice}"
            );
        }
    }
}

#[test]
fn module_reports_layout() {
    let dev = SimDevice::new();
    let m = dev.load(&dsmem_exchange(2)).unwrap();
    // inbox (128 bytes at 0), then the 8-byte mbarrier.
    assert_eq!(m.buffer_offsets(), &[0]);
    assert_eq!(m.barrier_offsets(), &[128]);
    assert_eq!(m.shared_bytes(), 144);
    assert!(m.register_words() > 0);
    assert_eq!(dev.describe(), "CPU simulator");
}
