//! Running the kernel on a device and checking it against the host.

use kda_runtime::{Device, DeviceTensor, Launch, RuntimeError};

use crate::kernel::{Order, Ring, pipelined_copy};

/// Why a run did not match the host reference.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error(transparent)]
    Runtime(#[from] RuntimeError),
    #[error("{ring:?}, {tiles} tiles: the launch left the work queue at {left}, not 0")]
    QueueLeft { ring: Ring, tiles: u32, left: u32 },
    #[error(
        "{ring:?}, {tiles} tiles: element {index} (tile {}, column {}) is {got}, want {want}",
        index / ring.tile as usize,
        index % ring.tile as usize
    )]
    Mismatch {
        ring: Ring,
        tiles: u32,
        index: usize,
        got: f32,
        want: f32,
    },
}

/// The input of `tiles` tiles of `tile` floats: distinct per element, exact in f32.
pub fn input(tiles: u32, tile: u32) -> Vec<f32> {
    (0..tiles as usize * tile as usize)
        .map(|i| ((i * 7919) % 65_536) as f32 - 32_768.0)
        .collect()
}

/// `y = a * x + b`, rounded twice as the kernel does (a multiply, then an add).
pub fn reference(x: &[f32], a: f32, b: f32) -> Vec<f32> {
    x.iter().map(|&v| v * a + b).collect()
}

/// The persistent grid for `tiles` tiles: as many clusters as the device
/// holds at once, at most one per work item (a cluster's group of tiles, one
/// per CTA), and at most `max_ctas` CTAs (rounded down to whole clusters,
/// at least one) when given.
pub fn persistent_launch<D: Device>(
    dev: &D,
    module: &D::Module,
    ring: &Ring,
    tiles: u32,
    max_ctas: Option<u32>,
) -> Result<Launch, RuntimeError> {
    let launch = Launch::persistent(dev, module, tiles.div_ceil(ring.cluster) as u64)?;
    let c = ring.cluster;
    Ok(match max_ctas {
        Some(g) => Launch::grid([launch.grid[0].min(g.max(c) / c * c), 1, 1]),
        None => launch,
    })
}

/// The work queue of an [`Order::Queue`] ring: one `u32`, zero.
pub fn work_queue<D: Device>(
    dev: &D,
    ring: &Ring,
) -> Result<Option<DeviceTensor<D, u32, 1>>, RuntimeError> {
    (ring.order == Order::Queue)
        .then(|| DeviceTensor::zeros(dev, [1]))
        .transpose()
}

/// What one checked run launched.
#[derive(Copy, Clone, Debug)]
pub struct Ran {
    pub grid: u32,
}

/// Run the kernel `ring` over `tiles` tiles on `dev` with at most `max_grid`
/// CTAs (rounded down to whole clusters; the persistent grid when
/// the device holds fewer), and compare with the host.
pub fn run_checked<D: Device>(
    dev: &D,
    ring: &Ring,
    tiles: u32,
    max_grid: Option<u32>,
) -> Result<Ran, RunError> {
    let module = dev.load(&pipelined_copy(ring))?;
    let xs = input(tiles, ring.tile);
    let shape = [tiles as usize, ring.tile as usize];
    let x = DeviceTensor::upload(dev, &xs, shape)?;
    let y = DeviceTensor::<D, f32, 2>::zeros(dev, shape)?;
    let launch = persistent_launch(dev, &module, ring, tiles, max_grid)?;
    let grid = launch.grid[0];
    let queue = work_queue(dev, ring)?;
    // Two launches with different `b`, each checked in full: the second
    // runs on the work queue the first left (it must be back at 0), and
    // cannot pass on the first one's output.
    for (a, b) in [(0.5f32, 3.0f32), (0.5, -5.0)] {
        pipelined_copy::Args::<D> {
            x: x.arg(),
            y: y.arg(),
            tiles,
            a,
            b,
            queue: queue.as_ref().map(|q| q.arg()),
        }
        .launch(dev, &module, launch)?;
        if let Some(q) = &queue {
            let left = q.to_vec(dev)?[0];
            if left != 0 {
                return Err(RunError::QueueLeft {
                    ring: *ring,
                    tiles,
                    left,
                });
            }
        }
        let got = y.to_vec(dev)?;
        let want = reference(&xs, a, b);
        if let Some(index) = (0..want.len()).find(|&i| got[i].to_bits() != want[i].to_bits()) {
            return Err(RunError::Mismatch {
                ring: *ring,
                tiles,
                index,
                got: got[index],
                want: want[index],
            });
        }
    }
    Ok(Ran { grid })
}
