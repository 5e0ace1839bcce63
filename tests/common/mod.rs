//! What the root simulator tests share.

use kda::runtime::SimOptions;

/// The deterministic schedule and three seeded interleavings, each with and
/// without hold-back (one CTA held until the others block or exit).
pub fn schedules() -> Vec<SimOptions> {
    let mut v = Vec::new();
    for seed in [None, Some(1), Some(2), Some(3)] {
        for hold_back in [false, true] {
            v.push(SimOptions {
                seed,
                hold_back,
                ..SimOptions::default()
            });
        }
    }
    v
}
