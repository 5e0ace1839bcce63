//! The configuration matrix the simulator, GPU and ptxas tests share: every
//! option (z, D, conv bias, f32 weights, both conv-state layouts, extra conv
//! columns, padding), groupings that give clusters of 1 to 16 CTAs and
//! 1 to 17 heads per CTA, and the head sizes that change the thread layout.

#![allow(dead_code)]

use kda_host::testing::{Agreement, Verdict, run_matrix};
use kda_runtime::{Device, SimDevice};
use mamba2_decode::kernel::Schedule;
use mamba2_decode::run::{RunError, run_with};
use mamba2_decode::{
    ConvLayout, DtBias, GenOptions, Mamba2Args, Mamba2Config, compare, generate, reference,
};

/// One matrix point: a configuration and how its launch is generated.
pub struct Point {
    pub heads: u32,
    pub n_groups: u32,
    pub head_dim: u32,
    pub d_state: u32,
    /// has_z, has_d, has_conv_bias.
    pub flags: [bool; 3],
    pub requests: usize,
    pub padding: f64,
    pub weights_f32: bool,
    pub layout: ConvLayout,
    pub schedule: Schedule,
}

pub const fn point(heads: u32, n_groups: u32, head_dim: u32, d_state: u32) -> Point {
    Point {
        heads,
        n_groups,
        head_dim,
        d_state,
        flags: [true; 3],
        requests: 3,
        padding: 0.25,
        weights_f32: false,
        layout: ConvLayout::Ds,
        schedule: Schedule::DEFAULT,
    }
}

/// A model shape (P = 64, N = 128, every option on).
pub const fn model(heads: u32, n_groups: u32) -> Point {
    point(heads, n_groups, 64, 128)
}

const fn flags(mut p: Point, flags: [bool; 3]) -> Point {
    p.flags = flags;
    p
}

const fn requests(mut p: Point, requests: usize, padding: f64) -> Point {
    p.requests = requests;
    p.padding = padding;
    p
}

const fn f32_weights_sd(mut p: Point) -> Point {
    p.weights_f32 = true;
    p.layout = ConvLayout::Sd;
    p
}

pub const MATRIX: [Point; 14] = [
    point(2, 1, 64, 128),
    flags(point(4, 2, 64, 128), [false, false, false]),
    flags(point(4, 4, 64, 128), [true, false, true]),
    flags(point(2, 2, 64, 128), [false, true, false]),
    f32_weights_sd(point(4, 1, 64, 128)),
    f32_weights_sd(flags(point(2, 1, 64, 128), [true, true, false])),
    requests(point(2, 1, 64, 128), 3, 1.0),
    requests(point(8, 1, 64, 128), 6, 0.3),
    point(16, 1, 16, 32),
    point(20, 2, 16, 16),
    point(17, 1, 16, 16),
    point(2, 1, 16, 16),
    point(2, 2, 128, 64),
    point(1, 1, 32, 256),
];

/// `p` with schedule knobs: (max_cluster, chunks, wave, min_blocks) and
/// (evict, early, trigger at entry).
const fn knob(mut p: Point, sizes: [u32; 4], flags: [bool; 3]) -> Point {
    let [max_cluster, chunks, wave, min_blocks] = sizes;
    let [evict, early, trigger_at_entry] = flags;
    p.schedule = Schedule {
        max_cluster,
        chunks,
        wave,
        min_blocks,
        evict,
        early,
        trigger_at_entry,
        balance: false,
    };
    p
}

/// `p` with the load-balancing cluster scheduling policy.
const fn balance(mut p: Point) -> Point {
    p.schedule.balance = true;
    p
}

/// One small point per schedule knob value other than the default that the
/// bench sweeps: smaller clusters (more heads per CTA), 2 and 1 chunks per
/// row (16 and 32 lanes), waves of 1 and 2 passes, occupancy, evict-first,
/// the early schedule, trigger at entry, the load-balancing cluster policy;
/// model-sized heads (P 64, N 128), padding included.
pub const KNOBS: [Point; 9] = [
    knob(point(8, 1, 64, 128), [4, 0, 0, 0], [false; 3]),
    knob(point(4, 1, 64, 128), [2, 2, 0, 0], [false, true, false]),
    knob(point(2, 1, 64, 128), [16, 1, 0, 0], [true, false, false]),
    knob(point(4, 2, 64, 128), [16, 0, 1, 0], [false, true, true]),
    knob(point(6, 1, 64, 128), [3, 0, 2, 3], [false; 3]),
    knob(point(2, 1, 64, 128), [16, 0, 0, 0], [true, true, true]),
    knob(point(4, 1, 64, 128), [1, 0, 0, 2], [false, false, true]),
    knob(point(6, 3, 64, 128), [16, 0, 0, 4], [true, true, false]),
    balance(point(8, 1, 64, 128)),
];

impl Point {
    pub fn config(&self) -> Mamba2Config {
        let [has_z, has_d, has_conv_bias] = self.flags;
        Mamba2Config {
            heads: self.heads,
            n_groups: self.n_groups,
            head_dim: self.head_dim,
            d_state: self.d_state,
            has_z,
            has_d,
            has_conv_bias,
        }
        .validated()
        .expect("matrix configurations are valid")
    }

    pub fn label(&self) -> String {
        let [z, d, bias] = self.flags;
        format!(
            "H{} G{} P{} N{} z{} d{} bias{} B{} pad{} {}{:?} [{}]",
            self.heads,
            self.n_groups,
            self.head_dim,
            self.d_state,
            z as u8,
            d as u8,
            bias as u8,
            self.requests,
            self.padding,
            if self.weights_f32 { "f32w " } else { "" },
            self.layout,
            self.schedule.label(),
        )
    }

    pub fn args(&self, seed: u64) -> Mamba2Args {
        let options = GenOptions::new(self.requests)
            .seed(seed)
            .padding(self.padding)
            .weights_f32(self.weights_f32)
            .conv_layout(self.layout)
            .conv_extra(usize::from(self.layout == ConvLayout::Sd))
            .dt_bias(if seed.is_multiple_of(2) {
                DtBias::Spread
            } else {
                DtBias::Init
            });
        generate(&self.config(), &options)
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
    let actual = run_with(dev, &cfg, &args, &point.schedule)?;
    let report = compare(&cfg, &args, &actual, &expected);
    if !against_sim {
        return Ok(report.into());
    }
    let sim = run_with(&SimDevice::new(), &cfg, &args, &point.schedule)?;
    let agreement = Agreement::of(&actual, &sim);
    Ok(Verdict {
        report,
        extra_ok: agreement.conv_identical,
        note: format!(": vs simulator {agreement}"),
    })
}

/// [`check`] of every matrix point on `dev` (point `n` drawn with seed
/// `100 + n`); panics listing the failures.
pub fn check_matrix<D: Device>(dev: &D, against_sim: bool) {
    check_points(dev, &MATRIX, 100, against_sim);
}

/// [`check`] of every schedule-knob point on `dev` (point `n` drawn with
/// seed `200 + n`); panics listing the failures.
pub fn check_knobs<D: Device>(dev: &D, against_sim: bool) {
    check_points(dev, &KNOBS, 200, against_sim);
}

fn check_points<D: Device>(dev: &D, points: &[Point], seed: u64, against_sim: bool) {
    run_matrix(
        dev,
        points.iter().enumerate(),
        |(_, point)| point.label(),
        |dev, &(n, point)| check(dev, point, seed + n as u64, against_sim),
    )
    .assert_all_passed();
}
