//! Bandwidth on the GPU: the kernel over 1 GiB for 2, 3 and 4 stages, each
//! with the register-store and the bulk-store output path, and with other
//! tile sizes and L2 policies ([`default_rings`]; CUDA graph replays timed
//! with events), next to the device's copy
//! ceiling measured in the same run (the driver's device-to-device copy of
//! the same bytes). Both figures count bytes read plus bytes written.

use kda_runtime::cuda::median;
use kda_runtime::{CudaDevice, Device, DeviceTensor, Graph, Launch, RuntimeError};

use crate::control::{BLOCK, plain_copy};
use crate::kernel::{Order, Ring, TILE, pipelined_copy};
use crate::run::{persistent_launch, work_queue};

/// One measured configuration.
#[derive(Clone, Debug)]
pub struct BenchRow {
    pub name: String,
    /// Bytes read + written per run.
    pub bytes: u64,
    pub median_ms: f32,
    pub gbps: f64,
    pub grid: u32,
    /// Every output element was checked after the timed runs (`y = x + b`
    /// with a `b` no other row uses, so a stale output cannot pass);
    /// false for the driver copy, which is not checked.
    pub checked: bool,
}

fn gbps(bytes: u64, ms: f32) -> f64 {
    bytes as f64 / (ms as f64 * 1e-3) / 1e9
}

/// One measured configuration: a ring and how many of its CTAs the
/// persistent grid puts on each SM.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct Point {
    pub ring: Ring,
    /// At most this many CTAs per SM (rounded down to whole clusters);
    /// 0: as many as fit (`cuOccupancyMaxActiveClusters`).
    pub per_sm: u32,
}

impl From<Ring> for Point {
    fn from(ring: Ring) -> Point {
        Point { ring, per_sm: 0 }
    }
}

/// The configurations `--bench` measures by default: 2, 3 and 4 stages with
/// either output path (tiles from the work queue), the same stages with the
/// fixed strided order, then the tile size, the L2 policy, the consumer
/// count and the cluster shape varied around the register-store path.
pub fn default_rings() -> Vec<Ring> {
    let mut out: Vec<Ring> = [2, 3, 4]
        .into_iter()
        .flat_map(|s| [Ring::new(s, false), Ring::new(s, true)])
        .collect();
    for stages in [2, 3, 4] {
        out.push(Ring {
            order: Order::Strided,
            ..Ring::new(stages, false)
        });
    }
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

/// `--sweep`: the tile orders side by side (a fixed stride against the
/// work queue) over stages and tile sizes in one-CTA clusters, then the work
/// queue with fewer CTAs per SM, clusters of two, bulk stores and several
/// bulk copies per stage.
pub fn sweep_points() -> Vec<Point> {
    let ring = |stages, tile, order| Ring {
        tile,
        cluster: 1,
        order,
        ..Ring::new(stages, false)
    };
    let mut out: Vec<Point> = Vec::new();
    for order in [Order::Strided, Order::Queue] {
        for (stages, tile) in [
            (2, TILE),
            (3, TILE),
            (4, TILE),
            (2, TILE * 2),
            (3, TILE * 2),
            (4, TILE / 2),
        ] {
            out.push(ring(stages, tile, order).into());
        }
    }
    for per_sm in [2, 3, 4] {
        out.push(Point {
            ring: ring(2, TILE * 2, Order::Queue),
            per_sm,
        });
    }
    for stages in [2, 4] {
        for bulk_out in [false, true] {
            out.push(
                Ring {
                    order: Order::Queue,
                    ..Ring::new(stages, bulk_out)
                }
                .into(),
            );
        }
    }
    out.push(
        Ring {
            split: 4,
            ..ring(2, TILE * 2, Order::Queue)
        }
        .into(),
    );
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
    ) + &match r.split {
        1 => String::new(),
        n => format!(", {n} copies per stage"),
    } + match r.order {
        Order::Strided => "",
        Order::Contiguous => ", contiguous tiles",
        Order::Queue => ", work queue",
    }
}

/// Measure each of `points` over `bytes` of input (rounded down to whole
/// tiles of the largest tile), `reps` timed runs each, between two
/// measurements of the copy ceilings of the same bytes: the driver copy and
/// a plain register kernel ([`plain_copy()`]) on a grid of one float4 per
/// thread and on the persistent grid. Row 0 is the driver copy (first
/// measurement); the ring rows follow in the order of `points`, then the
/// repeated driver copy and the controls.
pub fn bench(
    dev: &CudaDevice,
    bytes: u64,
    points: &[Point],
    reps: usize,
) -> Result<Vec<BenchRow>, RuntimeError> {
    let largest = points.iter().map(|p| p.ring.tile).max().unwrap_or(TILE) as u64;
    let floats = (bytes / 4 / largest).max(1) * largest;
    let value = |i: usize| (i % 1000) as f32;
    let xs: Vec<f32> = (0..floats as usize).map(value).collect();
    let x = DeviceTensor::upload(dev, &xs, [floats as usize])?;
    drop(xs);
    // Each kernel row adds its own `b`; the output must be exactly `x + b`.
    let mut next_b = 0.0f32;
    let mut fresh_b = || {
        next_b += 1.0;
        next_b
    };
    let y = DeviceTensor::<CudaDevice, f32, 1>::zeros(dev, [floats as usize])?;
    let moved = 2 * 4 * floats;
    let check = |b: f32, what: &str| -> Result<(), RuntimeError> {
        let got = y.to_vec(dev)?;
        match (0..got.len()).find(|&i| got[i] != value(i) + b) {
            None => Ok(()),
            Some(i) => Err(RuntimeError::BadLaunch {
                kernel: what.into(),
                msg: format!("element {i} is {}, want {}", got[i], value(i) + b),
            }),
        }
    };
    let sms = dev.sm_count()?;
    let row = |name: String, ms: &[f32], grid: u32| {
        let m = median(ms);
        BenchRow {
            name,
            bytes: moved,
            median_ms: m,
            gbps: gbps(moved, m),
            grid,
            checked: false,
        }
    };

    let driver_copy = |label: &str| -> Result<BenchRow, RuntimeError> {
        let copy = |d: &CudaDevice| d.copy_buffer(x.buffer(), y.buffer());
        for _ in 0..3 {
            copy(dev)?;
        }
        let ms: Vec<f32> = (0..reps)
            .map(|_| dev.time(copy))
            .collect::<Result<_, _>>()?;
        Ok(row(format!("cuMemcpyDtoDAsync ({label})"), &ms, 0))
    };
    let time_graph = |f: &dyn Fn(&CudaDevice) -> Result<(), RuntimeError>| {
        let graph = Graph::capture(dev, f)?;
        for _ in 0..3 {
            graph.replay()?;
        }
        graph.time_replays(dev, reps)
    };

    let mut rows = vec![driver_copy("copy ceiling")?];
    for point in points {
        let ring = &point.ring;
        let module = dev.load(&pipelined_copy(ring))?;
        let tile = ring.tile as usize;
        let tiles = floats as usize / tile;
        let ctas_per_sm = (point.per_sm / ring.cluster).max(1) * ring.cluster;
        let cap = (point.per_sm > 0).then(|| ctas_per_sm * sms);
        let launch = persistent_launch(dev, &module, ring, tiles as u32, cap)?;
        let b = fresh_b();
        let queue = work_queue(dev, ring)?;
        let args = pipelined_copy::Args::<CudaDevice> {
            x: x.view([tiles, tile], [tile, 1])?,
            y: y.view([tiles, tile], [tile, 1])?,
            tiles: tiles as u32,
            a: 1.0,
            b,
            queue: queue.as_ref().map(|q| q.arg()),
        };
        let ms = time_graph(&|d| args.launch(d, &module, launch))?;
        let per_sm = match point.per_sm {
            0 => String::new(),
            n => format!(", at most {n} CTAs/SM"),
        };
        let name = format!("pipelined_copy, {}{per_sm}", describe(ring));
        check(b, &name)?;
        rows.push(BenchRow {
            checked: true,
            ..row(name, &ms, launch.grid[0])
        });
    }

    rows.push(driver_copy("again, after the rings")?);
    let module = dev.load(&plain_copy())?;
    let quads = floats as usize / 4;
    let one_each = quads.div_ceil(BLOCK as usize) as u32;
    let persistent = Launch::persistent(dev, &module, one_each as u64)?;
    for (what, launch) in [
        ("one float4 per thread", Launch::grid([one_each, 1, 1])),
        ("persistent grid", persistent),
    ] {
        let b = fresh_b();
        let args = plain_copy::Args::<CudaDevice> {
            x: x.view([quads, 4], [4, 1])?,
            y: y.view([quads, 4], [4, 1])?,
            quads: quads as u32,
            a: 1.0,
            b,
        };
        let ms = time_graph(&|d| args.launch(d, &module, launch))?;
        let name = format!("plain_copy (registers, no ring), {what}");
        check(b, &name)?;
        rows.push(BenchRow {
            checked: true,
            ..row(name, &ms, launch.grid[0])
        });
    }
    Ok(rows)
}
