//! Remote arrivals (`mbarrier.arrive.remote`) on the simulator: what one
//! warp's lanes do when they name different CTAs' barriers.

use kda_ir::parse::parse_kernel;
use kda_runtime::{Device, LaunchConfig, SimDevice, SimOptions};

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
        let dev = SimDevice::with_options(SimOptions {
            seed: Some(seed),
            ..SimOptions::default()
        });
        let m = dev.load_unverified(&k).unwrap();
        let cfg = LaunchConfig {
            grid: [4, 1, 1],
            pdl: false,
            syms: vec![],
            scalars: vec![],
        };
        dev.launch(&m, &cfg, &[])
            .unwrap_or_else(|e| panic!("seed {seed}: {e}"));
    }
}
