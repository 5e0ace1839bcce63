//! The configuration matrix shared by the simulator, ptxas and GPU tests:
//! every T = 1..4, bias on and off, head groupings G = 1, 2, 4 and 8, every
//! lane width, bf16 and f32 weights, both conv-state layouts, extra conv and
//! slot columns; every case has padding requests and write holes drawn at
//! 25 % (the seeds are chosen so that both occur).
#![allow(dead_code)] // each test binary uses its own subset

use gdn_decode::kernel::Schedule;
use gdn_decode::run::{RunError, run_with};
use gdn_decode::{ConvLayout, GdnArgs, GdnConfig, GenOptions, compare, generate, reference};
use kda_host::testing::{Agreement, Verdict, Verdicts, run_matrix};
use kda_runtime::{Device, SimDevice};

#[derive(Clone, Debug)]
pub struct Point {
    pub num_k_heads: u32,
    pub num_v_heads: u32,
    pub tokens: u32,
    pub has_bias: bool,
    pub requests: usize,
    pub schedule: Schedule,
    /// f32 conv weights, bias and norm weight; SD conv layout with a spare
    /// conv column and spare slot columns.
    pub variant: bool,
}

const fn p(
    num_k_heads: u32,
    num_v_heads: u32,
    tokens: u32,
    has_bias: bool,
    requests: usize,
    lanes: u32,
    variant: bool,
) -> Point {
    Point {
        num_k_heads,
        num_v_heads,
        tokens,
        has_bias,
        requests,
        schedule: Schedule {
            lanes,
            min_blocks: 0,
            evict: false,
            early: true,
            trigger_at_entry: false,
            staged: false,
            early_release: false,
            balance: false,
        },
        variant,
    }
}

/// `point` with schedule knobs changed by `f`.
const fn knob(
    mut point: Point,
    min_blocks: u32,
    evict: bool,
    early: bool,
    trigger: bool,
    staged: bool,
) -> Point {
    point.schedule.min_blocks = min_blocks;
    point.schedule.evict = evict;
    point.schedule.early = early;
    point.schedule.trigger_at_entry = trigger;
    point.schedule.staged = staged;
    point
}

/// `point` with the conv taps released right after their loads.
const fn early_release(mut point: Point) -> Point {
    point.schedule.early_release = true;
    point
}

/// `point` with the load-balancing cluster scheduling policy.
const fn balance(mut point: Point) -> Point {
    point.schedule.balance = true;
    point
}

pub const MATRIX: &[Point] = &[
    p(1, 1, 1, false, 4, 8, false),
    p(2, 4, 1, true, 3, 16, true),
    p(1, 8, 1, false, 2, 16, false),
    p(1, 2, 2, true, 4, 8, false),
    p(2, 2, 2, false, 3, 32, true),
    p(1, 2, 3, false, 4, 16, true),
    p(1, 4, 3, true, 3, 8, false),
    p(2, 4, 4, true, 3, 8, true),
    p(1, 1, 4, false, 4, 16, false),
];

/// One small point per schedule knob value other than the default (the
/// bench sweeps them): occupancy, evict-first, no early schedule, trigger at
/// entry, staging, the early release of the conv taps, the load-balancing
/// cluster policy (at each lane width, T = 1 and T > 1, grouped heads).
pub const KNOBS: &[Point] = &[
    knob(p(1, 2, 1, true, 3, 16, false), 2, false, true, false, false),
    knob(p(2, 2, 1, false, 3, 16, true), 0, true, true, false, false),
    knob(
        p(1, 2, 2, true, 3, 16, false),
        0,
        false,
        false,
        false,
        false,
    ),
    knob(p(1, 1, 1, true, 4, 16, false), 0, false, true, true, false),
    knob(p(1, 2, 1, true, 4, 16, false), 0, false, true, false, true),
    knob(p(1, 2, 1, false, 4, 32, true), 0, true, true, false, true),
    knob(p(1, 2, 3, true, 3, 8, false), 0, true, true, true, true),
    knob(p(1, 2, 1, true, 3, 8, false), 3, false, true, false, true),
    early_release(p(1, 2, 1, true, 3, 16, false)),
    early_release(knob(
        p(1, 4, 4, false, 4, 8, true),
        0,
        true,
        true,
        true,
        false,
    )),
    balance(p(1, 2, 1, true, 3, 16, false)),
];

impl Point {
    pub fn config(&self) -> GdnConfig {
        GdnConfig::new(
            self.num_k_heads,
            self.num_v_heads,
            self.tokens,
            self.has_bias,
        )
        .unwrap_or_else(|e| panic!("{self:?}: {e}"))
    }

    pub fn schedule(&self) -> Schedule {
        self.schedule
    }

    pub fn options(&self, seed: u64) -> GenOptions {
        let o = GenOptions::new(self.requests).seed(seed);
        if self.variant {
            o.weights_f32(true)
                .conv_layout(ConvLayout::Sd)
                .conv_extra(1)
                .slot_extra(1)
        } else {
            o
        }
    }

    pub fn args(&self, seed: u64) -> GdnArgs {
        generate(&self.config(), &self.options(seed))
    }

    pub fn label(&self) -> String {
        format!(
            "HK{} HV{} T{} bias{} B{} {}{}",
            self.num_k_heads,
            self.num_v_heads,
            self.tokens,
            self.has_bias as u8,
            self.requests,
            self.schedule.label(),
            if self.variant { " f32-weights SD" } else { "" }
        )
    }
}

/// Runs `point`'s launch drawn with `seed` on `dev` and compares it with the
/// reference and, with `against_sim`, with the simulator (whose conv state
/// must be identical).
pub fn check<D: Device>(
    dev: &D,
    point: &Point,
    seed: u64,
    against_sim: bool,
) -> Result<Verdict, RunError> {
    let (cfg, args) = (point.config(), point.args(seed));
    let expected = reference(&cfg, &args).expect("valid arguments");
    let schedule = point.schedule();
    let actual = run_with(dev, &cfg, &args, &schedule)?;
    let report = compare(&cfg, &args, &actual, &expected);
    if !against_sim {
        return Ok(report.into());
    }
    let sim = run_with(&SimDevice::new(), &cfg, &args, &schedule)?;
    let agreement = Agreement::of(&actual, &sim);
    Ok(Verdict {
        report,
        extra_ok: agreement.conv_identical,
        note: format!(": vs simulator: {agreement}"),
    })
}

/// [`check`] of every matrix point on `dev` (point `n` drawn with seed
/// `100 + n`).
pub fn check_matrix<D: Device>(dev: &D, against_sim: bool) -> Verdicts {
    check_points(dev, MATRIX, 100, against_sim)
}

/// [`check`] of every schedule-knob point on `dev` (point `n` drawn with
/// seed `200 + n`).
pub fn check_knobs<D: Device>(dev: &D, against_sim: bool) -> Verdicts {
    check_points(dev, KNOBS, 200, against_sim)
}

fn check_points<D: Device>(dev: &D, points: &[Point], seed: u64, against_sim: bool) -> Verdicts {
    run_matrix(
        dev,
        points.iter().enumerate(),
        |(_, point)| point.label(),
        |dev, &(n, point)| check(dev, point, seed + n as u64, against_sim),
    )
}
