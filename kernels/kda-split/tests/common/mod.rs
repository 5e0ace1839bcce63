//! The configuration matrix shared by the simulator and GPU tests: every
//! token count 1..8, both bias settings, all gate modes, every early level,
//! every cluster size and lane width at least once (pairwise-style), each
//! within the seed's constructor constraints. One CTA per head keeps all 128
//! state rows in registers unless the rows are staged (early >= 2), which
//! spills at T > 1 or 32 lanes: the matrix covers cluster 1 with early 3.
//! The gate warp holds `2·rows` words of F_B operands (early 3 stages them),
//! so gate mode 1's four accumulator chains at T > 1 fit from 4 CTAs up.
#![allow(dead_code)] // each test binary uses its own subset

use kda_split::{Case, GateInputs, GenOptions, KdaConfig, RawGateOrder};

#[derive(Clone, Debug)]
pub struct Point {
    pub heads: u32,
    pub batch: usize,
    pub tokens: u32,
    pub gate_mode: u32,
    pub has_bias: bool,
    /// (early, lanes, occupancy, cluster, evict[, bulk_store[, balance]]);
    /// zeros select defaults.
    pub schedule: &'static [u32],
}

const fn p(
    heads: u32,
    batch: usize,
    tokens: u32,
    gate_mode: u32,
    has_bias: bool,
    schedule: &'static [u32],
) -> Point {
    Point {
        heads,
        batch,
        tokens,
        gate_mode,
        has_bias,
        schedule,
    }
}

pub const MATRIX: &[Point] = &[
    // T = 1: defaults, fast math (12 heads), every gate mode and early level.
    p(2, 2, 1, 0, false, &[0, 0, 0, 0, 0]),
    p(12, 1, 1, 1, true, &[1, 16, 0, 8, 0]),
    p(2, 3, 1, 2, true, &[0, 16, 0, 0, 0]),
    p(2, 1, 1, 2, false, &[0, 8, 0, 0, 0]),
    // Balance (schedule entry 7, the clusters' load-balancing policy) here
    // and at the tuned T = 4 shape below: the runtime adds it to each launch.
    p(2, 2, 1, 0, true, &[2, 16, 0, 2, 1, 0, 1]),
    p(2, 2, 1, 1, false, &[3, 8, 1, 1, 0]),
    p(12, 2, 1, 0, false, &[3, 32, 0, 2, 1]),
    p(2, 2, 1, 1, true, &[2, 4, 0, 4, 0]),
    p(6, 2, 1, 0, false, &[1, 32, 0, 4, 0]),
    // T > 1: speculative verify.
    p(2, 2, 2, 0, true, &[1, 16, 0, 2, 0]),
    p(2, 2, 3, 1, false, &[0, 16, 0, 4, 0]),
    p(12, 2, 4, 0, false, &[1, 16, 0, 8, 0]),
    p(2, 2, 5, 1, true, &[0, 8, 0, 4, 0]),
    p(2, 2, 6, 0, true, &[0, 32, 0, 2, 0]),
    p(2, 2, 7, 1, false, &[1, 8, 0, 8, 0]),
    p(2, 2, 8, 0, false, &[0, 16, 0, 8, 0]),
    p(6, 3, 8, 1, true, &[1, 16, 1, 2, 0]),
    // T > 1 with bulk_store (schedule entry 6: each token's state rows through
    // the shared ring, one bulk store per token), each case with padding and
    // a write hole (checked by sim_matrix): two tokens, the tuned T = 4 shape
    // (12 heads, cluster 4), eight tokens with masked rows (lanes 4 < cluster
    // 8) and gate mode 1.
    p(2, 8, 2, 0, true, &[1, 16, 0, 2, 0, 1]),
    p(12, 6, 4, 0, true, &[0, 16, 0, 4, 0, 1, 1]),
    p(2, 7, 8, 1, false, &[1, 4, 0, 8, 0, 1]),
];

impl Point {
    pub fn config(&self) -> KdaConfig {
        KdaConfig::new(
            self.heads,
            self.batch as u32,
            self.gate_mode,
            self.has_bias,
            self.schedule,
            self.tokens,
        )
        .unwrap_or_else(|e| panic!("{self:?}: {e}"))
    }

    /// A generated case whose expectation matches this point's gate mode.
    pub fn case(&self, seed: u64) -> Case {
        let opts = GenOptions::new(self.heads, self.batch, self.tokens)
            .seed(seed)
            .has_bias(self.has_bias)
            .gate_inputs(GateInputs::Grid)
            .padding(0.25)
            .holes(0.25);
        let order = if self.gate_mode == 2 {
            RawGateOrder::Mode2
        } else {
            RawGateOrder::Exact
        };
        Case::generate(&opts, order).unwrap_or_else(|e| panic!("{self:?}: {e}"))
    }

    /// Schedule entry 6 (bulk_store) is on.
    pub fn bulk_store(&self) -> bool {
        self.schedule.get(5).is_some_and(|&b| b != 0)
    }

    pub fn label(&self) -> String {
        format!(
            "H{} B{} T{} mode{} bias{} sched{:?}",
            self.heads, self.batch, self.tokens, self.gate_mode, self.has_bias as u8, self.schedule
        )
    }
}

/// (padding requests, write holes of live requests) of a T > 1 case: a
/// request is padding where its read slot (the last accepted token's) is
/// not positive; a live request's write slot that is not positive is a hole.
pub fn padding_and_holes(case: &Case, tokens: usize) -> (usize, usize) {
    let args = &case.args;
    let table = args.slots.values();
    let width = args.slots.shape()[1];
    let accepted = args.accepted.as_ref().expect("T > 1").values();
    let (mut padding, mut holes) = (0, 0);
    for (b, &a) in accepted.iter().enumerate() {
        let row = &table[b * width..b * width + tokens];
        if table[b * width + a as usize - 1] <= 0.0 {
            padding += 1;
        } else {
            holes += row.iter().filter(|&&s| s <= 0.0).count();
        }
    }
    (padding, holes)
}
