//! `bench --sim`: the benchmark's machinery on the CPU simulator, at sizes
//! it can run: the copy kernel copies exactly, the fill kernel fills, the
//! empty kernel launches, the same-bytes copy's steps write their `T`
//! copies over its rotating groups, and the KdaSplit workload (generated tensors,
//! device-filled rotating state, one slot table per group, symbols bound for
//! `S` slots) runs chains of steps that match the float64 reference step by
//! step. Nothing is timed.

use kda_ir::Scalar;
use kda_runtime::{Device, LaunchConfig, SimDevice};

use super::error::BenchError;
use super::kernels::{copy_kernel, copy_launch, copy_tile, empty_kernel, fill, fill_kernel};
use super::same_copy::{CopyRotation, check_rotation};
use super::schedule::Candidate;
use super::workload::{Plan, Point, Workload, rotation};
use crate::compare::compare;
use crate::config::KdaConfig;
use crate::reference::{RawGateOrder, reference};

type Result<T> = std::result::Result<T, BenchError>;

fn f32s(b: &[u8]) -> Vec<f32> {
    b.chunks_exact(4)
        .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect()
}

/// Copy `tiles` tiles of `copy_kernel(block, unroll)` on `dev` over filled
/// data into a poisoned destination; `Ok(())` when the copy is exact.
pub fn check_copy(dev: &SimDevice, block: u32, unroll: u32, tiles: usize) -> Result<()> {
    let floats = copy_tile(block, unroll) as usize * tiles;
    let fill_f32 = dev.load(&fill_kernel(Scalar::F32))?;
    let src = dev.upload(&vec![0; floats * 4])?;
    let dst = dev.upload(&vec![0; floats * 4])?;
    fill(dev, &fill_f32, &src, floats, 11, 1.0)?;
    fill(dev, &fill_f32, &dst, floats, 12, 1.0)?;
    let module = dev.load(&copy_kernel(block, unroll))?;
    dev.launch(&module, &copy_launch(block, unroll, floats), &[&src, &dst])?;
    let (s, d) = (f32s(&dev.download(&src)?), f32s(&dev.download(&dst)?));
    if let Some(i) = (0..floats).find(|&i| s[i].to_bits() != d[i].to_bits()) {
        return Err(BenchError::CopyMismatch {
            block,
            unroll,
            index: i,
            got: d[i],
            want: s[i],
        });
    }
    Ok(())
}

/// The same-bytes copy of `point` on the simulator, for each `(block,
/// unroll)` of `variants` ([`check_rotation`]): one small launch, then
/// `steps` PDL-chained steps (at least one per group) over its groups (as
/// many as the point's workload has under a plan of three groups), each
/// step's destination checked to hold `T` copies of its source. Returns one
/// line per variant.
pub fn check_same_copy(
    dev: &SimDevice,
    point: Point,
    variants: &[(u32, u32)],
    steps: usize,
) -> Result<Vec<String>> {
    let same = point.same_bytes()?;
    let plan = Plan {
        rotate_bytes: point
            .slots_per_group()
            .saturating_mul(point.slot_bytes())
            .saturating_mul(3),
        min_groups: 2,
        min_steps: steps,
        seed: 7,
    };
    let copies = CopyRotation::new(dev, same, rotation(&plan, &point), 7)?;
    Ok(check_rotation(dev, &copies, variants)?
        .into_iter()
        .map(|line| format!("{point} {line}"))
        .collect())
}

/// Run `steps` steps of every `schedules` entry valid at `point` on the
/// simulator, each checked against the reference; returns one line per
/// schedule.
pub fn check_workload(
    dev: &SimDevice,
    point: Point,
    schedules: &[Candidate],
    steps: usize,
) -> Result<Vec<String>> {
    let group = point.slots_per_group().saturating_mul(point.slot_bytes());
    let plan = Plan {
        rotate_bytes: group.saturating_mul(3),
        min_groups: 2,
        min_steps: steps,
        seed: 7,
    };
    let mut w = Workload::new(dev, point, &plan)?;
    let mut lines = Vec::new();
    for cand in schedules {
        let cfg = match KdaConfig::new(point.heads, point.batch, 0, true, &cand.raw, point.tokens) {
            Ok(cfg) => cfg,
            Err(e) => {
                lines.push(format!("{point} {}: skipped ({e})", cand.label));
                continue;
            }
        };
        let (kernel, launch): (_, LaunchConfig) = w.kernel(&cfg)?;
        let module = dev.load(&kernel)?;
        for step in 0..steps {
            w.poison_output(dev)?;
            let args = w.host_args(dev, step)?;
            let expected = reference(&cfg, &args, RawGateOrder::Exact).map_err(|errors| {
                BenchError::InvalidLaunch {
                    point,
                    schedule: cand.label.clone(),
                    errors,
                }
            })?;
            w.rotation.launch(dev, &module, &launch, step)?;
            let actual = w.actual(dev)?;
            let report = compare(&cfg, &args, &actual, &expected);
            if !report.passed() {
                return Err(BenchError::Mismatch {
                    point,
                    schedule: cand.label.clone(),
                    step,
                    group: step % w.groups,
                    report: Box::new(report),
                });
            }
        }
        lines.push(format!(
            "{point} {}: {steps} chained steps over {} slot groups ({} slots) match the reference",
            cand.label, w.groups, w.num_slots
        ));
    }
    Ok(lines)
}

/// The whole `--sim` check; prints what it checked.
pub fn sanity() -> Result<()> {
    let dev = SimDevice::new();
    println!(
        "bench --sim: the benchmark's kernels and workload on the CPU simulator (nothing is timed)"
    );
    for (block, unroll) in [(64, 2), (32, 4), (128, 1)] {
        check_copy(&dev, block, unroll, 3)?;
        println!("  copy b{block} u{unroll}: exact over 3 tiles");
    }
    let empty = dev.load(&empty_kernel(64, 2))?;
    dev.launch(
        &empty,
        &LaunchConfig {
            grid: [4, 1, 1],
            pdl: true,
            syms: vec![],
            scalars: vec![],
        },
        &[],
    )?;
    println!("  empty kernel (2-CTA clusters, PDL): launched");
    let point = Point {
        heads: 1,
        batch: 1,
        tokens: 3,
    };
    for line in check_same_copy(&dev, point, &[(64, 2), (128, 1)], 3)? {
        println!("  {line}");
    }
    let schedules = [
        Candidate::new("default", &[0, 0, 0]),
        Candidate::new("e1", &[1, 0, 0]),
        Candidate::new("e2-c2", &[2, 0, 0, 2]),
    ];
    for point in [
        Point {
            heads: 2,
            batch: 2,
            tokens: 1,
        },
        Point {
            heads: 2,
            batch: 2,
            tokens: 3,
        },
    ] {
        for line in check_workload(&dev, point, &schedules, 3)? {
            println!("  {line}");
        }
    }
    println!("bench --sim: ok");
    Ok(())
}
