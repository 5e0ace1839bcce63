//! Bandwidth on the GPU: the kernel over 1 GiB for 2, 3 and 4 stages, each
//! with the register-store and the bulk-store output path, and with other
//! tile sizes and L2 policies ([`default_rings`]; CUDA graph replays timed
//! with events), next to the device's copy
//! ceiling measured in the same run (the driver's device-to-device copy of
//! the same bytes). Both figures count bytes read plus bytes written.

use kda_runtime::cuda::median;
use kda_runtime::{CudaDevice, Device, DeviceTensor, Graph, RuntimeError};

use crate::kernel::{Ring, TILE, pipelined_copy};
use crate::run::persistent_launch;

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

/// The configurations `--bench` measures by default: 2, 3 and 4 stages with
/// either output path, then the tile size and the L2 policy varied around
/// the register-store path.
pub fn default_rings() -> Vec<Ring> {
    let mut out: Vec<Ring> = [2, 3, 4]
        .into_iter()
        .flat_map(|s| [Ring::new(s, false), Ring::new(s, true)])
        .collect();
    for stages in [2, 4] {
        for tile in [TILE / 2, TILE * 2] {
            out.push(Ring {
                tile,
                ..Ring::new(stages, false)
            });
        }
        for bulk_out in [false, true] {
            out.push(Ring {
                evict_first: false,
                ..Ring::new(stages, bulk_out)
            });
        }
        out.push(Ring {
            consumers: 256,
            ..Ring::new(stages, false)
        });
        out.push(Ring {
            cluster: 1,
            ..Ring::new(stages, false)
        });
    }
    out
}

/// What a configuration is called in the bench's table.
pub fn describe(r: &Ring) -> String {
    format!(
        "{} stages, {}, {} KiB tiles, {} consumers, cluster {}{}",
        r.stages,
        if r.bulk_out {
            "bulk store"
        } else {
            "st.global"
        },
        r.tile / 256,
        r.consumers,
        r.cluster,
        if r.evict_first {
            ""
        } else {
            ", no evict-first"
        }
    )
}

/// Measure each of `rings` over `bytes` of input (rounded down to whole
/// tiles of the largest tile), and the driver copy of the same size, `reps`
/// timed runs each.
pub fn bench(
    dev: &CudaDevice,
    bytes: u64,
    rings: &[Ring],
    reps: usize,
) -> Result<Vec<BenchRow>, RuntimeError> {
    let largest = rings.iter().map(|r| r.tile).max().unwrap_or(TILE) as u64;
    let floats = (bytes / 4 / largest).max(1) * largest;
    let xs: Vec<f32> = (0..floats as usize).map(|i| (i % 1000) as f32).collect();
    let x = DeviceTensor::upload(dev, &xs, [floats as usize])?;
    drop(xs);
    let y = DeviceTensor::<CudaDevice, f32, 1>::zeros(dev, [floats as usize])?;
    let moved = 2 * 4 * floats;
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

    for ring in rings {
        let module = dev.load(&pipelined_copy(ring))?;
        let tile = ring.tile as usize;
        let tiles = floats as usize / tile;
        let launch = persistent_launch(dev, &module, ring, tiles as u32)?;
        let args = pipelined_copy::Args::<CudaDevice> {
            x: x.view([tiles, tile], [tile, 1])?,
            y: y.view([tiles, tile], [tile, 1])?,
            tiles: tiles as u32,
            a: 1.0,
            b: 0.0,
        };
        let graph = Graph::capture(dev, |d| args.launch(d, &module, launch))?;
        for _ in 0..3 {
            graph.replay()?;
        }
        let m = median(&graph.time_replays(dev, reps)?);
        rows.push(BenchRow {
            name: format!("pipelined_copy, {}", describe(ring)),
            bytes: moved,
            median_ms: m,
            gbps: gbps(moved, m),
            grid: launch.grid[0],
        });
    }
    Ok(rows)
}
