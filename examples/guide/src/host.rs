//! The host side of the guide's kernel: inputs, the float64 reference, and
//! one launch on any [`Device`] (the GPU or the simulator).

use kda::ir::Kernel;
use kda::runtime::{Device, LaunchConfig, RuntimeError, TensorShape, bind_syms};

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
    /// `[cache, channels]`: the recurrent state, updated in place.
    pub state: Vec<f32>,
}

impl Problem {
    /// Deterministic inputs (`seed` picks them). Requests use slots in
    /// reverse order and slot 0 is never used, so a wrong slot shows.
    pub fn new(rows: usize, channels: usize, seed: u64) -> Problem {
        let mut s = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
        let mut next = move || {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            (s >> 40) as f32 / (1u64 << 24) as f32 * 2.0 - 1.0 // in [-1, 1)
        };
        let cache = rows + 1;
        Problem {
            rows,
            channels,
            x: (0..rows * channels).map(|_| next()).collect(),
            w: (0..channels).map(|_| 2.0 * next()).collect(),
            b: (0..channels).map(|_| next()).collect(),
            slots: (0..rows).map(|r| (rows - r) as i32).collect(),
            state: (0..cache * channels).map(|_| next()).collect(),
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

    /// The launch for `kernel`: one CTA per 32 channels of each request,
    /// symbols bound from the tensors' shapes.
    pub fn launch_config(&self, kernel: &Kernel, pdl: bool) -> Result<LaunchConfig, RuntimeError> {
        let n = self.channels;
        let matrix = |rows: usize| TensorShape {
            shape: vec![rows, n],
            strides: vec![n, 1],
        };
        let vector = |len: usize| TensorShape {
            shape: vec![len],
            strides: vec![1],
        };
        let shapes = [
            matrix(self.rows),            // x
            vector(n),                    // w
            vector(n),                    // b
            vector(self.rows),            // slots
            matrix(self.state.len() / n), // state
            matrix(self.rows),            // y
        ];
        Ok(LaunchConfig {
            grid: [(self.rows * n / 32) as u32, 1, 1],
            pdl,
            syms: bind_syms(kernel, &shapes)?,
            scalars: vec![],
        })
    }
}

/// The kernel's six tensors on a device, in parameter order.
pub struct Buffers<B> {
    pub x: B,
    pub w: B,
    pub b: B,
    pub slots: B,
    pub state: B,
    pub y: B,
}

impl<B> Buffers<B> {
    pub fn upload<D: Device<Buffer = B>>(dev: &D, p: &Problem) -> Result<Self, RuntimeError> {
        Ok(Buffers {
            x: dev.upload(&f32_bytes(&p.x))?,
            w: dev.upload(&f32_bytes(&p.w))?,
            b: dev.upload(&f32_bytes(&p.b))?,
            slots: dev.upload(
                &p.slots
                    .iter()
                    .flat_map(|v| v.to_le_bytes())
                    .collect::<Vec<_>>(),
            )?,
            state: dev.upload(&f32_bytes(&p.state))?,
            y: dev.upload(&vec![0; p.x.len() * 4])?,
        })
    }

    /// The arguments of a launch, in the kernel's order.
    pub fn args(&self) -> [&B; 6] {
        [&self.x, &self.w, &self.b, &self.slots, &self.state, &self.y]
    }
}

/// Run one step of `kernel` on `dev`; returns `(state, y)`.
pub fn run<D: Device>(
    dev: &D,
    kernel: &Kernel,
    p: &Problem,
) -> Result<(Vec<f32>, Vec<f32>), RuntimeError> {
    let module = dev.load(kernel)?;
    let bufs = Buffers::upload(dev, p)?;
    dev.launch(&module, &p.launch_config(kernel, false)?, &bufs.args())?;
    dev.synchronize()?;
    Ok((
        bytes_f32(&dev.download(&bufs.state)?),
        bytes_f32(&dev.download(&bufs.y)?),
    ))
}

/// The largest absolute difference between a result and the reference.
pub fn max_error(got: &[f32], want: &[f64]) -> f64 {
    assert_eq!(got.len(), want.len());
    got.iter()
        .zip(want)
        .map(|(&g, &w)| (g as f64 - w).abs())
        .fold(0.0, f64::max)
}

pub fn f32_bytes(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

pub fn bytes_f32(v: &[u8]) -> Vec<f32> {
    v.chunks_exact(4)
        .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect()
}
