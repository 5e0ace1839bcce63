//! The host side of the guide's kernel: inputs, the float64 reference, and
//! one launch on any [`Device`] (the GPU or the simulator) through the typed
//! launch that `#[cluster_kernel]` generates beside the builder function.

use kda::ir::Kernel;
use kda::runtime::{Device, DeviceTensor, Launch, RuntimeError};
use kda_host::Draw;

// Arguments bind to the loaded kernel by name, so step 5's `Tensors` and
// `Args` launch the kernel of every step (all five share the signature).
use crate::step_5::ema_step::Tensors;

/// One launch's inputs: `rows` requests of `channels` channels, each
/// request updating the state in its cache slot.
#[derive(Clone, Debug)]
pub struct Problem {
    pub rows: usize,
    pub channels: usize,
    /// `[rows, channels]`: this step's input.
    pub x: Vec<f32>,
    /// `[channels]`: the gate weights and biases.
    pub w: Vec<f32>,
    pub b: Vec<f32>,
    /// `[rows]`: the cache slot of each request.
    pub slots: Vec<i32>,
    /// `[rows + 1, channels]`: the recurrent state, updated in place.
    pub state: Vec<f32>,
}

impl Problem {
    /// Deterministic inputs (`seed` picks them). Requests use slots in
    /// reverse order and slot 0 is never used, so a wrong slot shows.
    pub fn new(rows: usize, channels: usize, seed: u64) -> Problem {
        let mut d = Draw::new(seed);
        let mut draw = |n: usize, scale: f64| -> Vec<f32> {
            (0..n).map(|_| d.uniform(-scale, scale) as f32).collect()
        };
        Problem {
            rows,
            channels,
            x: draw(rows * channels, 1.0),
            w: draw(channels, 2.0),
            b: draw(channels, 1.0),
            slots: (0..rows).map(|r| (rows - r) as i32).collect(),
            state: draw((rows + 1) * channels, 1.0),
        }
    }

    /// `(state, y)` after one step, in float64.
    pub fn reference(&self) -> (Vec<f64>, Vec<f64>) {
        let n = self.channels;
        let mut state: Vec<f64> = self.state.iter().map(|&v| v as f64).collect();
        let mut y = vec![0.0; self.rows * n];
        for r in 0..self.rows {
            let slot = self.slots[r] as usize;
            for c in 0..n {
                let x = self.x[r * n + c] as f64;
                let a = 1.0 / (1.0 + (-(self.w[c] as f64 * x + self.b[c] as f64)).exp());
                let h = a * state[slot * n + c] + (1.0 - a) * x;
                state[slot * n + c] = h;
                y[r * n + c] = h;
            }
        }
        (state, y)
    }

    /// One CTA per 32 channels of each request.
    pub fn launch(&self, pdl: bool) -> Launch {
        Launch::grid([(self.rows * self.channels / 32) as u32, 1, 1]).pdl(pdl)
    }
}

/// The kernel's tensors on `dev`: `ema_step::Tensors`, generated with `Args`.
pub fn upload<D: Device>(dev: &D, p: &Problem) -> Result<Tensors<D>, RuntimeError> {
    let n = p.channels;
    Ok(Tensors {
        x: DeviceTensor::upload(dev, &p.x, [p.rows, n])?,
        w: DeviceTensor::upload(dev, &p.w, [n])?,
        b: DeviceTensor::upload(dev, &p.b, [n])?,
        slots: DeviceTensor::upload(dev, &p.slots, [p.rows])?,
        state: DeviceTensor::upload(dev, &p.state, [p.rows + 1, n])?,
        y: DeviceTensor::zeros(dev, [p.rows, n])?,
    })
}

/// Run one step of `kernel` on `dev`; returns `(state, y)`.
pub fn run<D: Device>(
    dev: &D,
    kernel: &Kernel,
    p: &Problem,
) -> Result<(Vec<f32>, Vec<f32>), RuntimeError> {
    let module = dev.load(kernel)?;
    let t = upload(dev, p)?;
    t.args().launch(dev, &module, p.launch(false))?;
    Ok((t.state.to_vec(dev)?, t.y.to_vec(dev)?))
}

/// The largest absolute difference from the reference (NaN-aware, infinite for a short result).
pub use kda_host::max_abs_error as max_error;
