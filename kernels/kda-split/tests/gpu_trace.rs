//! `bench --trace` on the GPU: KdaSplit's tuned default at a small point,
//! measured, then traced with CTA timeline probes over the same chained
//! steps. Every CTA of the last step must have written its records, each
//! wait a warp passed must fall inside the lifetimes, the state role's
//! warps and the gate warp must each pass some, and the
//! residency must not exceed what the occupancy calculation allows. Skips
//! where there is no CUDA driver.

use kda_host::bench::Budget;
use kda_runtime::cuda::gpu_or_skip;
use kda_split::KdaConfig;
use kda_split::bench::gpu::{measure_kda, trace_kda};
use kda_split::bench::workload::{Plan, Point, Workload};

#[test]
fn traced_steps_record_every_cta_and_wait() {
    let Some(gpu) = gpu_or_skip() else { return };
    let point = Point {
        heads: 12,
        batch: 8,
        tokens: 1,
    };
    let plan = Plan {
        rotate_bytes: 64 << 20,
        min_groups: 2,
        min_steps: 8,
        seed: 1,
    };
    let mut w = Workload::new(&gpu, point, &plan).unwrap();
    let cfg = KdaConfig::tuned(12, 8, 0, true, 1).unwrap();
    let budget = Budget {
        warmup: 1,
        target_ms: 5.0,
        min_replays: 3,
        max_replays: 20,
    };
    let plain = measure_kda(&gpu, &mut w, &cfg, &budget, false).unwrap();
    let t = trace_kda(&gpu, &w, &cfg, &plain, &budget).unwrap();
    println!("{}", t.render());
    let r = &t.report;
    let ctas = u64::from(cfg.cluster() * 12 * 8);
    assert_eq!(r.ctas, ctas);
    assert_eq!(r.ctas_recorded, ctas, "every CTA of the last step wrote");
    assert_eq!(r.warps_missing, 0);
    assert!(t.probed_registers <= plain.resources.registers.div_ceil(8) * 8);
    assert!(r.lifetime.median_us > 0.0 && r.lifetime.max_us < 1000.0);
    assert!(r.clock_ghz > 0.5 && r.clock_ghz < 3.0, "{}", r.clock_ghz);
    let expected = r.residency.expected.unwrap();
    assert!(
        r.residency.max <= u64::from(expected),
        "{} > {expected}",
        r.residency.max
    );
    // Sites of branches no request takes (padding) are never passed; the
    // rest fall inside the lifetimes, and both roles pass some.
    let passed: Vec<_> = r.sites.iter().filter(|s| s.offset.is_some()).collect();
    for s in &passed {
        let q = s.offset.as_ref().unwrap();
        assert!(q.max_us <= r.lifetime.max_us, "{} after every exit", s.what);
    }
    assert!(passed.iter().any(|s| s.warps == "w0-3"), "state warps");
    assert!(passed.iter().any(|s| s.warps == "w4"), "gate warp");
    assert!(passed.iter().any(|s| s.what.starts_with("pdl.wait")));
}
