//! What the simulator tests share: a small rotation and a small Mamba-2.

use decode_bench::family::Mamba2;
use decode_bench::workload::Plan;

/// A rotation of three groups, four steps per graph, whatever the size.
pub const PLAN: Plan = Plan {
    rotate_bytes: 0,
    min_groups: 3,
    min_steps: 4,
    seed: 9,
};

/// Mamba-2 with 2 heads of 16 × 16 f32 state in one group: small enough
/// for the simulator at a batch past the 16 generated requests.
pub fn small_mamba2() -> Mamba2 {
    let cfg = mamba2_decode::Mamba2Config {
        heads: 2,
        n_groups: 1,
        head_dim: 16,
        d_state: 16,
        ..mamba2_decode::Mamba2Config::default()
    }
    .validated()
    .unwrap();
    Mamba2 { cfg }
}
