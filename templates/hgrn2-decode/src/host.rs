//! The host program: seeded inputs, the float64 reference (crate doc, "The
//! math"), one launch through the typed `hgrn2_decode::Tensors` on any
//! [`Device`] (the GPU or the CPU simulator), and the check.

use half::bf16;
use kda::runtime::{Device, DeviceTensor, Launch, RuntimeError};
use kda_host::{Draw, bf16_rne, rel_error};

use crate::kernel::{Config, hgrn2_decode};

/// Largest relative (Frobenius) errors accepted: `o` (bf16 output), state.
pub const LIMITS: (f64, f64) = (1e-2, 1e-5);

/// One launch's inputs, row-major in the crate doc's shapes.
pub struct Problem {
    pub cfg: Config,
    pub batch: usize,
    pub heads: usize,
    pub q: Vec<bf16>,
    pub f: Vec<bf16>,
    pub v: Vec<bf16>,
    pub state: Vec<f32>,
    /// `[H, K]`; zeros, and not passed to the kernel, without `cfg.lower_bound`.
    pub lower_bound: Vec<f32>,
    pub scale: f32,
}

fn normal<T>(d: &mut Draw, n: usize, mean: f64, std: f64, to: fn(f64) -> T) -> Vec<T> {
    (0..n).map(|_| to(d.normal(mean, std))).collect()
}

fn wide<T: Copy + Into<f64>>(x: &[T]) -> Vec<f64> {
    x.iter().map(|&x| x.into()).collect()
}

impl Problem {
    /// Deterministic inputs for `seed`; `scale = K^-0.5`.
    pub fn new(cfg: Config, batch: usize, heads: usize, seed: u64) -> Problem {
        let ([t, k, v], mut d) = (cfg.dims(), Draw::new(seed));
        let (rows, on) = (batch * t * heads, cfg.lower_bound as u8 as f32);
        Problem {
            q: normal(&mut d, rows * k, 0.0, 1.0, bf16_rne),
            f: normal(&mut d, rows * k, 1.0, 2.0, bf16_rne), // mostly slow decays
            v: normal(&mut d, rows * v, 0.0, 1.0, bf16_rne),
            state: normal(&mut d, batch * heads * k * v, 0.0, 0.5, |x| x as f32),
            lower_bound: (0..heads * k)
                .map(|_| d.uniform(0.0, 0.9) as f32 * on)
                .collect(),
            scale: (k as f32).powf(-0.5),
            cfg,
            batch,
            heads,
        }
    }

    /// `(o, state)` after the launch, in float64 (`x`: the `(b, t, h)` row).
    pub fn reference(&self) -> (Vec<f64>, Vec<f64>) {
        let ([t_n, k, vd], heads, lb) = (self.cfg.dims(), self.heads, wide(&self.lower_bound));
        let (q, f, v) = (wide(&self.q), wide(&self.f), wide(&self.v));
        let (mut state, mut o) = (wide(&self.state), vec![0.0; v.len()]);
        for (b, h) in (0..self.batch).flat_map(|b| (0..heads).map(move |h| (b, h))) {
            let s = &mut state[(b * heads + h) * k * vd..][..k * vd];
            for x in (0..t_n).map(|t| (b * t_n + t) * heads + h) {
                for i in 0..k {
                    let a = lb[h * k + i] + (1.0 - lb[h * k + i]) / (1.0 + (-f[x * k + i]).exp());
                    for j in 0..vd {
                        s[i * vd + j] = a * s[i * vd + j] + (1.0 - a) * v[x * vd + j];
                    }
                }
                for j in 0..vd {
                    let dot: f64 = (0..k).map(|i| q[x * k + i] * s[i * vd + j]).sum();
                    o[x * vd + j] = self.scale as f64 * dot;
                }
            }
        }
        (o, state)
    }

    /// One launch on `dev`; returns `(o, state)`.
    pub fn run<D: Device>(&self, dev: &D) -> Result<(Vec<bf16>, Vec<f32>), RuntimeError> {
        let ([t, k, v], b, h) = (self.cfg.dims(), self.batch, self.heads);
        let module = dev.load(&hgrn2_decode(&self.cfg))?;
        let tensors = hgrn2_decode::Tensors {
            q: DeviceTensor::upload(dev, &self.q, [b, t, h, k])?,
            f: DeviceTensor::upload(dev, &self.f, [b, t, h, k])?,
            v: DeviceTensor::upload(dev, &self.v, [b, t, h, v])?,
            state: DeviceTensor::upload(dev, &self.state, [b, h, k, v])?,
            o: DeviceTensor::zeros(dev, [b, t, h, v])?,
            lower_bound: (self.cfg.lower_bound)
                .then(|| DeviceTensor::upload(dev, &self.lower_bound, [h, k]))
                .transpose()?,
        };
        let grid = Launch::grid(self.cfg.grid(b, h));
        tensors.args(self.scale).launch(dev, &module, grid)?;
        Ok((tensors.o.to_vec(dev)?, tensors.state.to_vec(dev)?))
    }

    /// Relative errors `(o, state)` of a launch on `dev` against [`Problem::reference`].
    pub fn check<D: Device>(&self, dev: &D) -> Result<(f64, f64), RuntimeError> {
        let ((o, state), (want_o, want_state)) = (self.run(dev)?, self.reference());
        let o_err = rel_error(&wide(&o), &want_o);
        Ok((o_err, rel_error(&wide(&state), &want_state)))
    }
}

/// `cargo run --release`: two shapes on GPU 0 (else the simulator), checked.
pub fn main() -> Result<(), Box<dyn std::error::Error>> {
    let chosen = kda_host::gpu_or_sim(0)?;
    println!("device: {}", chosen.describe());
    for (k, v, t, lb, batch, heads) in [(128, 128, 1, false, 4, 4), (64, 128, 3, true, 2, 3)] {
        let p = Problem::new(Config::new(k, v, t, lb)?, batch, heads, 7);
        let (o_err, s_err) = p.check(&chosen.device)?;
        let shape = format!("K {k} V {v} T {t} lower bound {lb} B {batch} H {heads}");
        println!("{shape}: relative error o {o_err:.1e}, state {s_err:.1e}");
        if !(o_err < LIMITS.0 && s_err < LIMITS.1) {
            return Err(format!("{shape}: errors above {LIMITS:?}").into());
        }
    }
    Ok(())
}
