//! The machinery the decode benchmarks share (KdaSplit's `bench` and
//! `autotune`, `decode-bench` for GDN and Mamba-2): timing CUDA graph
//! replays with events ([`Timing`], [`Budget`], [`time_graph`],
//! [`time_steps`], [`time_driver_copy`]), and a workload whose state
//! rotates over disjoint slot groups sized from the L2 ([`Plan`],
//! [`slot_tables`]), so that successive steps never find their state in L2.
//!
//! Group `g` is one slot table: request `r`, token `j` → slot
//! `pool[g·B·T + r·T + j]`, `pool` a seeded shuffle of `1..S` (slot 0 is the
//! null block); step `s` of a graph uses group `s mod groups`. What a bench
//! builds on top (its launch, how it fills the state, its checks) stays in
//! its crate.
//!
//! Both benches also time the same reference kernels, built here with the
//! kda-ir builder ([`kernels`]: copy, fill, empty), and per point the
//! [`same_copy`]: a PDL-chained copy of exactly the point's state bytes over
//! the point's rotation, the "% of same-bytes copy" of their reports.

pub mod kernels;
pub mod same_copy;
pub mod trace;

use half::bf16;
use kda_ir::Kernel;
use kda_runtime::{CudaBuffer, CudaDevice, Device, Graph, LaunchConfig, RuntimeError, SimDevice};
use rand::SeedableRng;
use rand::seq::SliceRandom;
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};

use crate::generator::OUTPUT_SENTINEL;
use crate::tensor::{HostData, HostTensor};

/// Per-unit times (one copy, one node, one step) over the timed replays.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Timing {
    /// The median replay, per unit, in µs.
    pub median_us: f64,
    /// The 10th percentile (nearest rank), per unit, in µs.
    pub p10_us: f64,
    /// The 90th percentile (nearest rank), per unit, in µs.
    pub p90_us: f64,
    /// Timed replays.
    pub replays: usize,
    /// Units (launches) per replay.
    #[serde(rename = "units_per_replay")]
    pub units: usize,
}

impl Timing {
    /// From milliseconds per replay of `units` units each.
    pub fn of(ms_per_replay: &[f32], units: usize) -> Timing {
        let mut us: Vec<f64> = ms_per_replay
            .iter()
            .map(|&ms| ms as f64 * 1e3 / units as f64)
            .collect();
        us.sort_by(f64::total_cmp);
        let n = us.len();
        let at = |q: f64| us[((n - 1) as f64 * q).round() as usize];
        let median = if n % 2 == 1 {
            us[n / 2]
        } else {
            (us[n / 2 - 1] + us[n / 2]) / 2.0
        };
        Timing {
            median_us: median,
            p10_us: at(0.1),
            p90_us: at(0.9),
            replays: n,
            units,
        }
    }
}

/// How long to time one graph (or one driver copy).
#[derive(Clone, Copy, Debug)]
pub struct Budget {
    /// Untimed replays first.
    pub warmup: usize,
    /// Timed replays: about this many milliseconds of them...
    pub target_ms: f64,
    /// ...but at least / at most this many.
    pub min_replays: usize,
    /// See `min_replays`.
    pub max_replays: usize,
}

impl Default for Budget {
    /// 3 warm-up replays, then about 100 ms of timed ones, 10 to 200.
    fn default() -> Self {
        Budget {
            warmup: 3,
            target_ms: 100.0,
            min_replays: 10,
            max_replays: 200,
        }
    }
}

impl Budget {
    /// Timed replays for a probe of `per_replay_ms` per replay: about
    /// `target_ms` of them, within `min_replays..=max_replays`.
    pub fn replays(&self, per_replay_ms: f32) -> usize {
        let per_replay_ms = per_replay_ms.max(1e-4) as f64;
        ((self.target_ms / per_replay_ms).ceil() as usize).clamp(self.min_replays, self.max_replays)
    }
}

/// Warm `graph` up, size the number of replays from a short probe, time
/// them; `units` launches per replay.
pub fn time_graph(
    dev: &CudaDevice,
    graph: &Graph,
    units: usize,
    budget: &Budget,
) -> Result<Timing, RuntimeError> {
    for _ in 0..budget.warmup {
        graph.replay()?;
    }
    dev.synchronize()?;
    let probe = graph.time_replays(dev, 3)?;
    let n = budget.replays(kda_runtime::cuda::median(&probe));
    let ms = graph.time_replays(dev, n)?;
    Ok(Timing::of(&ms, units))
}

/// Capture `steps` launches into one graph (`launch(dev, s)` issues step
/// `s`), time its replays per step ([`time_graph`]) and destroy it.
pub fn time_steps(
    dev: &CudaDevice,
    steps: usize,
    budget: &Budget,
    launch: impl Fn(&CudaDevice, usize) -> Result<(), RuntimeError>,
) -> Result<Timing, RuntimeError> {
    let graph = Graph::capture(dev, |d| (0..steps).try_for_each(|s| launch(d, s)))?;
    time_graph(dev, &graph, steps, budget)
}

/// Time the driver's device-to-device copy (`cuMemcpyDtoDAsync`) of `src`
/// into `dst`, launched on the stream (a graph would hold a memcpy node):
/// warm-up copies, one probe, then the budget's number of copies, each
/// timed with events.
pub fn time_driver_copy(
    dev: &CudaDevice,
    src: &CudaBuffer,
    dst: &CudaBuffer,
    budget: &Budget,
) -> Result<Timing, RuntimeError> {
    for _ in 0..budget.warmup {
        dev.copy_buffer(src, dst)?;
    }
    dev.synchronize()?;
    let per_ms = dev.time(|d| d.copy_buffer(src, dst))?;
    let ms = (0..budget.replays(per_ms))
        .map(|_| dev.time(|d| d.copy_buffer(src, dst)))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(Timing::of(&ms, 1))
}

/// TB/s of `bytes` moved in `us` microseconds.
pub fn tbps(bytes: usize, us: f64) -> f64 {
    bytes as f64 / (us * 1e-6) / 1e12
}

/// A device a benchmark can allocate scratch memory on without a host copy.
pub trait BenchDevice: Device {
    /// A new buffer of `bytes` bytes, zeroed.
    fn alloc(&self, bytes: usize) -> Result<Self::Buffer, RuntimeError>;
}

impl BenchDevice for CudaDevice {
    fn alloc(&self, bytes: usize) -> Result<Self::Buffer, RuntimeError> {
        self.alloc_zeroed(bytes)
    }
}

impl BenchDevice for SimDevice {
    fn alloc(&self, bytes: usize) -> Result<Self::Buffer, RuntimeError> {
        self.upload(&vec![0; bytes])
    }
}

/// How much state to rotate through and how many steps a graph holds.
#[derive(Clone, Copy, Debug)]
pub struct Plan {
    /// The slot groups together hold at least this many bytes of state
    /// (4 × L2 on the GPU).
    pub rotate_bytes: usize,
    /// At least this many groups (two: consecutive steps touch different
    /// slots; three: with PDL a step may load its state while the step
    /// before the previous one still runs).
    pub min_groups: usize,
    /// Steps per graph: at least this, and at least one per group.
    pub min_steps: usize,
    /// Seeds the launch's generator and the slot pool's shuffle.
    pub seed: u64,
}

impl Plan {
    /// Slot groups of `group_bytes` of state each: enough to hold
    /// `rotate_bytes`, at least `min_groups`, at least one.
    pub fn groups(&self, group_bytes: usize) -> usize {
        self.rotate_bytes
            .div_ceil(group_bytes.max(1))
            .max(self.min_groups)
            .max(1)
    }

    /// Steps per graph for `groups` groups.
    pub fn steps(&self, groups: usize) -> usize {
        groups.max(self.min_steps)
    }

    /// `(groups, steps)` for `group_bytes` of state per group.
    pub fn shape(&self, group_bytes: usize) -> (usize, usize) {
        let groups = self.groups(group_bytes);
        (groups, self.steps(groups))
    }
}

/// Requests the benches generate; larger batches repeat them (the values
/// do not change the work, and generating the whole state on the host takes
/// seconds at batch 512).
pub const GEN_REQUESTS: usize = 16;

/// `t` with `rows` rows, row `r` a copy of row `src(r)` (row-major).
pub fn gather_rows(t: &HostTensor, rows: usize, src: impl Fn(usize) -> usize) -> HostTensor {
    let t = t.to_contiguous();
    let cols: usize = t.shape()[1..].iter().product();
    fn pick<T: Copy>(v: &[T], rows: usize, cols: usize, src: &dyn Fn(usize) -> usize) -> Vec<T> {
        (0..rows)
            .flat_map(|r| v[src(r) * cols..(src(r) + 1) * cols].iter().copied())
            .collect()
    }
    let data: HostData = match t.data() {
        HostData::Bf16(v) => pick(v, rows, cols, &src).into(),
        HostData::F32(v) => pick(v, rows, cols, &src).into(),
        HostData::I32(v) => pick(v, rows, cols, &src).into(),
    };
    let mut shape = t.shape().to_vec();
    shape[0] = rows;
    HostTensor::new(data, shape).expect("gathered rows fill the shape")
}

/// The slot table of each group over `num_slots` cache slots: `pool`, a
/// shuffle of `1..num_slots` seeded by `seed`, cut into tables of
/// `per_group` slots (`B·T`) of shape `shape`.
pub fn slot_tables(
    num_slots: usize,
    per_group: usize,
    shape: &[usize],
    seed: u64,
) -> Vec<HostTensor> {
    let mut pool: Vec<i32> = (1..num_slots as i32).collect();
    pool.shuffle(&mut ChaCha8Rng::seed_from_u64(seed ^ 0x5107));
    pool.chunks_exact(per_group)
        .map(|g| HostTensor::new(g.to_vec(), shape.to_vec()).expect("B·T slots per table"))
        .collect()
}

/// A rotating workload's tensors on the device: one buffer per launch
/// tensor under its kernel parameter name, but the slot table, which step
/// `s` takes from group `s mod groups`.
pub struct Rotation<B> {
    /// The kernel parameter name of each buffer.
    pub names: Vec<&'static str>,
    /// One per name; the slot table's entry is group 0's (the steps take
    /// theirs from `tables`).
    pub buffers: Vec<B>,
    /// The slot table of each group.
    pub tables: Vec<B>,
    /// Where the slot table is in `names`.
    pub slot_at: usize,
}

impl<B> Rotation<B> {
    /// The buffers of step `step` (its group's slot table) in the order of
    /// `kernel`'s tensor parameters, matched by name.
    pub fn step_buffers(&self, kernel: &Kernel, step: usize) -> Result<Vec<&B>, RuntimeError> {
        kernel
            .tensors
            .values()
            .map(|t| match self.names.iter().position(|&n| n == t.name) {
                Some(i) if i == self.slot_at => Ok(&self.tables[step % self.tables.len()]),
                Some(i) => Ok(&self.buffers[i]),
                None => Err(RuntimeError::BadLaunch {
                    kernel: kernel.name.clone(),
                    msg: format!("the bench has no tensor `{}`", t.name),
                }),
            })
            .collect()
    }

    /// Launch step `step` of the loaded kernel `module` on `dev`.
    pub fn launch<D: Device<Buffer = B>>(
        &self,
        dev: &D,
        module: &D::Module,
        cfg: &LaunchConfig,
        step: usize,
    ) -> Result<(), RuntimeError> {
        let buffers = self.step_buffers(dev.module_kernel(module), step)?;
        dev.launch(module, cfg, &buffers)
    }
}

/// Elements of a bf16 output (little-endian bytes) that are not finite or
/// still hold [`OUTPUT_SENTINEL`]: 0 when the last step wrote every element.
pub fn bad_outputs(bytes: &[u8]) -> usize {
    bytes
        .chunks_exact(2)
        .map(|c| bf16::from_le_bytes([c[0], c[1]]).to_f32())
        .filter(|v| !v.is_finite() || *v == OUTPUT_SENTINEL)
        .count()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timing_takes_the_median_and_nearest_rank_percentiles_per_unit() {
        let t = Timing::of(&[4.0, 1.0, 3.0, 2.0], 2);
        assert_eq!((t.median_us, t.replays, t.units), (1250.0, 4, 2));
        assert_eq!((t.p10_us, t.p90_us), (500.0, 2000.0));
        assert_eq!(Timing::of(&[3.0, 1.0, 2.0], 1).median_us, 2000.0);
    }

    #[test]
    fn replays_fill_the_target_within_the_bounds() {
        let b = Budget::default();
        assert_eq!(b.replays(1.0), 100);
        assert_eq!(b.replays(50.0), 10);
        assert_eq!(b.replays(0.0), 200);
    }

    #[test]
    fn plan_rotates_over_the_bytes_in_min_groups_at_least() {
        let plan = Plan {
            rotate_bytes: 200 << 20,
            min_groups: 3,
            min_steps: 32,
            seed: 1,
        };
        assert_eq!(plan.shape(1 << 20), (200, 200));
        assert_eq!(plan.shape(64 << 20), (4, 32));
        assert_eq!(plan.shape(256 << 20), (3, 32));
    }

    #[test]
    fn gathered_rows_repeat_the_generated_requests() {
        let t = HostTensor::new(vec![1i32, 2, 3, 4, 5, 6], vec![3, 2]).unwrap();
        let g = gather_rows(&t, 5, |r| r % 3);
        assert_eq!(g.shape(), &[5, 2]);
        assert_eq!(g.data(), &HostData::I32(vec![1, 2, 3, 4, 5, 6, 1, 2, 3, 4]));
    }

    #[test]
    fn slot_tables_are_disjoint_and_cover_the_cache() {
        let tables = slot_tables(13, 4, &[2, 2], 9);
        assert_eq!(tables.len(), 3);
        let mut seen: Vec<i32> = tables
            .iter()
            .flat_map(|t| match t.data() {
                HostData::I32(v) => v.clone(),
                _ => panic!("i32 slots"),
            })
            .collect();
        seen.sort();
        assert_eq!(seen, (1..13).collect::<Vec<_>>());
    }

    #[test]
    fn bad_outputs_count_the_sentinel_and_non_finite_values() {
        let bytes: Vec<u8> = [1.0, OUTPUT_SENTINEL, f32::NAN, 2.0]
            .iter()
            .flat_map(|&v| bf16::from_f32(v).to_le_bytes())
            .collect();
        assert_eq!(bad_outputs(&bytes), 2);
    }
}
