//! The bulk-store experiment (schedule entry 6, T > 1) on the simulator:
//! each token's new state rows leave through the two-stage shared ring as
//! one `cp.async.bulk` store per token. It changes only how the rows reach
//! memory, so every result must be bit-identical to the same schedule with
//! register stores, and within the spec's tolerances of the float64
//! reference. The cases hold padding requests and write holes (checked), and
//! the points cover every cluster size (C = 8 with 4 lanes has masked
//! rows), odd and even token counts and stage reuse (T >= 3). The simulator
//! also reports any race of the stores with the stage rewrites (the source
//! read not waited for) or with other accesses of `state`. Last, the
//! benchmark's workload (steps chained over rotating slot groups, as
//! `kda-split bench` times them) with the variant, against the reference.

mod common;

use common::padding_and_holes;
use kda_runtime::{SimDevice, SimOptions};
use kda_split::bench::report::Candidate;
use kda_split::bench::sim::check_workload;
use kda_split::bench::workload::Point as BenchPoint;
use kda_split::run::run;
use kda_split::{Case, GateInputs, GenOptions, KdaConfig, RawGateOrder, compare};

/// (heads, requests, tokens, gate mode, bias, schedule without entry 6).
type Point = (u32, usize, u32, u32, bool, [u32; 5]);

const POINTS: &[Point] = &[
    // T = 2: each stage used once.
    (2, 6, 2, 0, true, [1, 16, 0, 2, 0]),
    // T = 4 in the tuned tables' shapes (H12 B64 and B8: cluster 4).
    (12, 6, 4, 0, true, [0, 16, 0, 4, 0]),
    (2, 6, 4, 1, false, [1, 8, 0, 4, 0]),
    // Masked rows (16 rows per CTA, 32 row groups), an odd token count.
    (2, 6, 3, 0, false, [0, 4, 0, 8, 0]),
    // One CTA per head (two 64 KiB stages), 32 lanes.
    (2, 5, 2, 0, true, [1, 32, 0, 1, 0]),
    // Eight tokens: each stage rewritten three times.
    (2, 6, 8, 0, true, [0, 16, 0, 2, 0]),
];

fn config(p: &Point, bulk: bool) -> KdaConfig {
    let &(heads, batch, tokens, mode, bias, schedule) = p;
    let mut raw = schedule.to_vec();
    raw.push(u32::from(bulk));
    KdaConfig::new(heads, batch as u32, mode, bias, &raw, tokens)
        .unwrap_or_else(|e| panic!("{p:?}: {e}"))
}

/// The first case from `seed` on with at least one padding request and one
/// write hole.
fn case(p: &Point, seed: u64) -> Case {
    let &(heads, batch, tokens, mode, bias, _) = p;
    let order = if mode == 2 {
        RawGateOrder::Mode2
    } else {
        RawGateOrder::Exact
    };
    (seed..seed + 64)
        .map(|s| {
            let opts = GenOptions::new(heads, batch, tokens)
                .seed(s)
                .has_bias(bias)
                .gate_inputs(GateInputs::Grid)
                .padding(0.25)
                .holes(0.25);
            Case::generate(&opts, order).unwrap_or_else(|e| panic!("{p:?}: {e}"))
        })
        .find(|c| {
            let (padding, holes) = padding_and_holes(c, tokens as usize);
            padding > 0 && holes > 0
        })
        .unwrap_or_else(|| panic!("{p:?}: no case with padding and a hole"))
}

#[test]
fn bulk_stores_match_register_stores_bit_for_bit() {
    let dev = SimDevice::new();
    let mut failed = Vec::new();
    for (n, p) in POINTS.iter().enumerate() {
        let case = case(p, 300 + 10 * n as u64);
        let (off, on) = (config(p, false), config(p, true));
        assert!(on.bulk_store() && !off.bulk_store());
        let plain = run(&dev, &off, &case.args).unwrap_or_else(|e| panic!("{p:?} off: {e}"));
        let bulk = run(&dev, &on, &case.args).unwrap_or_else(|e| panic!("{p:?} on: {e}"));
        let report = compare(&on, &case.args, &bulk, case.expected.as_ref().unwrap());
        let same = plain == bulk;
        println!(
            "{} {p:?}: reference {}, bit-identical to register stores: {same}",
            if report.passed() && same {
                "ok  "
            } else {
                "FAIL"
            },
            if report.passed() { "pass" } else { "FAIL" },
        );
        if !report.passed() {
            println!("{report}");
        }
        if !report.passed() || !same {
            failed.push(*p);
        }
    }
    assert!(failed.is_empty(), "failed: {failed:#?}");
}

#[test]
fn bulk_stores_under_random_interleavings() {
    let p = &POINTS[5];
    let case = case(p, 77);
    let cfg = config(p, true);
    let base = run(&SimDevice::new(), &cfg, &case.args).unwrap();
    for seed in 1..3 {
        let dev = SimDevice::with_options(SimOptions {
            seed: Some(seed),
            ..Default::default()
        });
        let shaken = run(&dev, &cfg, &case.args).unwrap();
        assert_eq!(base, shaken, "interleaving seed {seed} changed the result");
    }
}

#[test]
fn bulk_stores_in_the_benchmark_workload() {
    let dev = SimDevice::new();
    let schedules = [
        Candidate::new("[0,16,0,4,0,1]", &[0, 16, 0, 4, 0, 1]),
        Candidate::new("[1,8,0,4,0,1]", &[1, 8, 0, 4, 0, 1]),
    ];
    for tokens in [2, 4] {
        let point = BenchPoint {
            heads: 2,
            batch: 3,
            tokens,
        };
        let lines = check_workload(&dev, point, &schedules, 3).unwrap_or_else(|e| panic!("{e}"));
        for line in &lines {
            println!("{line}");
        }
        assert!(
            lines.len() == 2 && lines.iter().all(|l| l.contains("match the reference")),
            "{lines:#?}"
        );
    }
}
