//! Remote arrivals (`mbarrier.arrive.remote`) on the simulator: what one
//! warp's lanes do when they name different CTAs' barriers.

use kda_device::{Device, LaunchConfig, RuntimeError};
use kda_ir::Kernel;
use kda_ir::parse::parse_kernel;
use kda_sim::{SimDevice, SimOptions};

/// One launch of `k` (no arguments) on `ctas` CTAs under interleaving `seed`.
fn launch_seeded(k: &Kernel, ctas: u32, seed: u64) -> Result<(), RuntimeError> {
    let dev = SimDevice::with_options(SimOptions {
        seed: Some(seed),
        ..SimOptions::default()
    });
    let m = dev.load_unverified(k)?;
    let cfg = LaunchConfig {
        grid: [ctas, 1, 1],
        pdl: false,
        syms: vec![],
        scalars: vec![],
    };
    dev.launch(&m, &cfg, &[])
}

/// Lane `r` (r < 4) of every CTA of a cluster of 4 arrives on CTA `r`'s
/// barrier (count 4): each CTA's barrier receives one arrival from each
/// CTA, and one warp's lanes reach four different barriers at once. The
/// last CTA to arrive completes every barrier, lane by lane; the lanes
/// after the first arrive on other CTAs' barriers, not on the next phase
/// of the one just completed, which is legal on the hardware.
const ALL_TO_ALL: &str = r#"
kernel all_to_all block=32 cluster=4 {
  mbarrier bar0 "full": arrivals 4 tx 0  ; @a.rs:1:1
  v0:u32 = special tid  ; @a.rs:2:1
  v1:u32 = iconst 0  ; @a.rs:3:1
  v2:bool = cmp.eq v0, v1  ; @a.rs:4:1
  if v2 {
    mbarrier.init bar0  ; @a.rs:5:1
  } else {
  }  ; @a.rs:4:1
  fence.mbarrier_init  ; @a.rs:6:1
  cluster.arrive  ; @a.rs:7:1
  cluster.wait  ; @a.rs:8:1
  v3:u32 = iconst 4  ; @a.rs:9:1
  v4:bool = cmp.lt v0, v3  ; @a.rs:10:1
  if v4 {
    mbarrier.arrive.remote bar0, cta v0  ; @a.rs:11:1
  } else {
  }  ; @a.rs:10:1
  if v2 {
    mbarrier.wait bar0, phase 0  ; @a.rs:12:1
  } else {
  }  ; @a.rs:4:1
}
"#;

#[test]
fn one_warps_arrivals_on_different_ctas_barriers_each_count_once() {
    let k = parse_kernel(ALL_TO_ALL).unwrap_or_else(|e| panic!("{e}"));
    if let Err(errs) = kda_ir::verifier::verify(&k) {
        panic!("{errs:?}");
    }
    for seed in 0..8 {
        launch_seeded(&k, 4, seed).unwrap_or_else(|e| panic!("seed {seed}: {e}"));
    }
}

/// Thread 0 of rank 0 arrives on rank 1's barrier after the cluster
/// barrier that follows the init, and rank 1 exits without waiting for it
/// (no cluster barrier after the arrival): on the GPU rank 1's shared
/// memory may be gone (or another CTA's) when the arrival lands.
const ARRIVE_AFTER_PEER_EXIT: &str = r#"
kernel arrive_after_exit block=32 cluster=2 {
  mbarrier bar0 "empty": arrivals 1 tx 0  ; @b.rs:1:1
  v0:u32 = special tid  ; @b.rs:2:1
  v1:u32 = iconst 0  ; @b.rs:3:1
  v2:bool = cmp.eq v0, v1  ; @b.rs:4:1
  if v2 {
    mbarrier.init bar0  ; @b.rs:5:1
  } else {
  }  ; @b.rs:4:1
  fence.mbarrier_init  ; @b.rs:6:1
  cluster.arrive  ; @b.rs:7:1
  cluster.wait  ; @b.rs:8:1
  v3:u32 = special cluster_rank  ; @b.rs:9:1
  v4:bool = cmp.eq v3, v1  ; @b.rs:10:1
  v5:bool = and v2, v4  ; @b.rs:11:1
  v6:u32 = iconst 1  ; @b.rs:12:1
  if v5 {
    mbarrier.arrive.remote bar0, cta v6  ; @b.rs:13:1
  } else {
  }  ; @b.rs:11:1
}
"#;

#[test]
fn an_arrival_on_an_exited_peer_is_reported() {
    let k = parse_kernel(ARRIVE_AFTER_PEER_EXIT).unwrap_or_else(|e| panic!("{e}"));
    let mut reported = 0;
    for seed in 0..16 {
        if let Err(e) = launch_seeded(&k, 2, seed) {
            let e = e.to_string();
            assert!(e.contains("which has exited"), "seed {seed}: {e}");
            reported += 1;
        }
    }
    assert!(reported > 0, "no interleaving ran rank 1 to its exit first");
}
