//! The host program: seeded inputs, the float64 reference (crate doc, "The
//! math"), one launch through the typed `hgrn2_decode::Tensors` on any
//! [`Device`] (the GPU or the CPU simulator), and the check.

use half::bf16;
use kda::runtime::{Device, DeviceTensor, Launch, RuntimeError};
use kda_host::{Draw, bf16_rne, rel_error};

use crate::kernel::{Config, hgrn2_decode};

/// Largest relative (Frobenius) error accepted on `o` (bf16 output) and the state.
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
    /// `[H, K]` where `cfg.lower_bound`.
    pub lower_bound: Option<Vec<f32>>,
    pub scale: f32,
}

fn normal_bf16(d: &mut Draw, n: usize, mean: f64, std: f64) -> Vec<bf16> {
    (0..n).map(|_| bf16_rne(d.normal(mean, std))).collect()
}

impl Problem {
    /// Deterministic inputs for `seed`; `scale = K^-0.5`.
    pub fn new(cfg: Config, batch: usize, heads: usize, seed: u64) -> Problem {
        let (t, k, v) = (
            cfg.tokens as usize,
            cfg.key_dim as usize,
            cfg.value_dim as usize,
        );
        let rows = batch * t * heads;
        let mut d = Draw::new(seed);
        Problem {
            q: normal_bf16(&mut d, rows * k, 0.0, 1.0),
            f: normal_bf16(&mut d, rows * k, 1.0, 2.0), // mostly slow decays
            v: normal_bf16(&mut d, rows * v, 0.0, 1.0),
            state: (0..batch * heads * k * v)
                .map(|_| d.normal(0.0, 0.5) as f32)
                .collect(),
            lower_bound: cfg
                .lower_bound
                .then(|| (0..heads * k).map(|_| d.uniform(0.0, 0.9) as f32).collect()),
            scale: (k as f32).powf(-0.5),
            cfg,
            batch,
            heads,
        }
    }

    /// `(o, state)` after the launch, in float64.
    pub fn reference(&self) -> (Vec<f64>, Vec<f64>) {
        let (t_n, kd, vd) = (
            self.cfg.tokens as usize,
            self.cfg.key_dim as usize,
            self.cfg.value_dim as usize,
        );
        let mut state: Vec<f64> = self.state.iter().map(|&x| x as f64).collect();
        let mut o = vec![0.0; self.batch * t_n * self.heads * vd];
        for b in 0..self.batch {
            for h in 0..self.heads {
                let s = &mut state[(b * self.heads + h) * kd * vd..][..kd * vd];
                for t in 0..t_n {
                    let x = (b * t_n + t) * self.heads + h; // the (b, t, h) row
                    for i in 0..kd {
                        let lb = self
                            .lower_bound
                            .as_ref()
                            .map_or(0.0, |l| l[h * kd + i] as f64);
                        let a = lb + (1.0 - lb) / (1.0 + (-self.f[x * kd + i].to_f64()).exp());
                        for j in 0..vd {
                            s[i * vd + j] =
                                a * s[i * vd + j] + (1.0 - a) * self.v[x * vd + j].to_f64();
                        }
                    }
                    for j in 0..vd {
                        let dot: f64 = (0..kd)
                            .map(|i| self.q[x * kd + i].to_f64() * s[i * vd + j])
                            .sum();
                        o[x * vd + j] = self.scale as f64 * dot;
                    }
                }
            }
        }
        (o, state)
    }

    /// One launch on `dev`; returns `(o, state)`.
    pub fn run<D: Device>(&self, dev: &D) -> Result<(Vec<bf16>, Vec<f32>), RuntimeError> {
        let (b, h) = (self.batch, self.heads);
        let (t, k, v) = (
            self.cfg.tokens as usize,
            self.cfg.key_dim as usize,
            self.cfg.value_dim as usize,
        );
        let module = dev.load(&hgrn2_decode(&self.cfg))?;
        let lower_bound = self
            .lower_bound
            .as_ref()
            .map(|l| DeviceTensor::upload(dev, l, [h, k]));
        let tensors = hgrn2_decode::Tensors {
            q: DeviceTensor::upload(dev, &self.q, [b, t, h, k])?,
            f: DeviceTensor::upload(dev, &self.f, [b, t, h, k])?,
            v: DeviceTensor::upload(dev, &self.v, [b, t, h, v])?,
            state: DeviceTensor::upload(dev, &self.state, [b, h, k, v])?,
            o: DeviceTensor::zeros(dev, [b, t, h, v])?,
            lower_bound: lower_bound.transpose()?,
        };
        tensors
            .args(self.scale)
            .launch(dev, &module, Launch::grid(self.cfg.grid(b, h)))?;
        Ok((tensors.o.to_vec(dev)?, tensors.state.to_vec(dev)?))
    }

    /// Relative errors `(o, state)` of a launch on `dev` against [`Problem::reference`].
    pub fn check<D: Device>(&self, dev: &D) -> Result<(f64, f64), RuntimeError> {
        let (o, state) = self.run(dev)?;
        let (want_o, want_state) = self.reference();
        let o: Vec<f64> = o.iter().map(|x| x.to_f64()).collect();
        let state: Vec<f64> = state.iter().map(|&x| x as f64).collect();
        Ok((rel_error(&o, &want_o), rel_error(&state, &want_state)))
    }
}

/// `cargo run --release`: a few shapes on GPU 0 (else the simulator), checked.
pub fn main() -> Result<(), Box<dyn std::error::Error>> {
    let chosen = kda_host::gpu_or_sim(0)?;
    println!("device: {}", chosen.describe());
    for (k, v, t, lb, batch, heads) in [(128, 128, 1, false, 4, 4), (64, 128, 3, true, 2, 3)] {
        let p = Problem::new(Config::new(k, v, t, lb)?, batch, heads, 7);
        let (o_err, s_err) = p.check(&chosen.device)?;
        println!(
            "K {k} V {v} T {t} lower bound {lb} B {batch} H {heads}: o {o_err:.1e}, state {s_err:.1e}"
        );
        if !(o_err < LIMITS.0 && s_err < LIMITS.1) {
            return Err(format!("K {k} V {v} T {t}: errors above {LIMITS:?}").into());
        }
    }
    Ok(())
}
