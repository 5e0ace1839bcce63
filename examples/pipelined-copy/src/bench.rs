//! Bandwidth on the GPU: the kernel over 1 GiB for 2, 3 and 4 stages, each
//! with the register-store and the bulk-store output path
//! (CUDA graph replays timed with events), next to the device's copy
//! ceiling measured in the same run (the driver's device-to-device copy of
//! the same bytes). Both figures count bytes read plus bytes written.

use kda_runtime::cuda::median;
use kda_runtime::{CudaDevice, Device, DeviceTensor, Graph, Launch, RuntimeError};

use crate::kernel::{TILE, pipelined_copy};

/// One measured configuration.
#[derive(Clone, Debug)]
pub struct BenchRow {
    pub name: String,
    /// Bytes read + written per run.
    pub bytes: u64,
    pub median_ms: f32,
    pub gbps: f64,
    pub grid: u32,
}

fn gbps(bytes: u64, ms: f32) -> f64 {
    bytes as f64 / (ms as f64 * 1e-3) / 1e9
}

/// Measure `stages` over `bytes` of input (rounded down to whole tiles),
/// and the driver copy of the same size, `reps` timed runs each.
pub fn bench(
    dev: &CudaDevice,
    bytes: u64,
    stage_counts: &[u32],
    reps: usize,
) -> Result<Vec<BenchRow>, RuntimeError> {
    let tile_bytes = TILE as u64 * 4;
    let tiles = (bytes / tile_bytes).max(1) as u32;
    let shape = [tiles as usize, TILE as usize];
    let xs: Vec<f32> = (0..tiles as usize * TILE as usize)
        .map(|i| (i % 1000) as f32)
        .collect();
    let x = DeviceTensor::upload(dev, &xs, shape)?;
    drop(xs);
    let y = DeviceTensor::<CudaDevice, f32, 2>::zeros(dev, shape)?;
    let moved = 2 * tiles as u64 * tile_bytes;
    let mut rows = Vec::new();

    let copy = |d: &CudaDevice| d.copy_buffer(x.buffer(), y.buffer());
    for _ in 0..3 {
        copy(dev)?;
    }
    let ms: Vec<f32> = (0..reps)
        .map(|_| dev.time(copy))
        .collect::<Result<_, _>>()?;
    let m = median(&ms);
    rows.push(BenchRow {
        name: "cuMemcpyDtoDAsync (copy ceiling)".into(),
        bytes: moved,
        median_ms: m,
        gbps: gbps(moved, m),
        grid: 0,
    });

    for (&stages, bulk_out) in stage_counts.iter().flat_map(|s| [(s, false), (s, true)]) {
        let module = dev.load(&pipelined_copy(stages, bulk_out))?;
        let launch = Launch::persistent(dev, &module, tiles as u64)?;
        let args = pipelined_copy::Args::<CudaDevice> {
            x: x.arg(),
            y: y.arg(),
            tiles,
            a: 1.0,
            b: 0.0,
        };
        let graph = Graph::capture(dev, |d| args.launch(d, &module, launch))?;
        for _ in 0..3 {
            graph.replay()?;
        }
        let m = median(&graph.time_replays(dev, reps)?);
        rows.push(BenchRow {
            name: format!(
                "pipelined_copy, {stages} stages, {}",
                if bulk_out { "bulk store" } else { "st.global" }
            ),
            bytes: moved,
            median_ms: m,
            gbps: gbps(moved, m),
            grid: launch.grid[0],
        });
    }
    Ok(rows)
}
