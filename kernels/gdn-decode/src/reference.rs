//! Float64 reference of the GDN decode step (crate doc §2, §3).
//!
//! Everything is computed in f64 from the exactly widened inputs; the only
//! roundings are the rounding points of crate doc §5: the output to bf16
//! (RNE, [`kda_host::bf16_rne`]) and the stored state to f32. Slot
//! resolution is KdaSplit's, shared ([`kda_host::resolve_slots`]).

use half::bf16;
use kda_host::{Expected, Request, bf16_rne, resolve_slots};

use crate::args::GdnArgs;
use crate::config::GdnConfig;
use crate::validate::{ArgError, validate};

/// Hard-wired epsilon inside the L2 norms of q and k (independent of `eps`).
pub const L2_EPS: f64 = 1e-6;

/// How request `b` uses the slot table (crate doc §2, = KdaSplit §2). `args`
/// must be valid (see [`validate`]).
pub fn resolve(config: &GdnConfig, args: &GdnArgs, b: usize) -> Request {
    resolve_slots(config.tokens, &args.slots, args.accepted.as_ref(), b)
}

/// The f64 reference of one launch: the whole output (`[R, value_dim]`,
/// padding rows zero), the whole state and conv state after the launch.
/// Fails with every contract violation if `args` are not a valid launch.
pub fn reference(config: &GdnConfig, args: &GdnArgs) -> Result<Expected, Vec<ArgError>> {
    let errors = validate(config, args);
    if !errors.is_empty() {
        return Err(errors);
    }
    let (hv, dv, t) = (config.hv(), config.dv(), config.tokens as usize);
    let value_dim = config.value_dim();
    let rows = args.rows();
    let mut expected = Expected::initial(rows * value_dim, &args.state, &args.conv_state);
    for b in 0..args.requests() {
        let Request::Active {
            offset,
            read,
            conv,
            writes,
        } = resolve(config, args, b)
        else {
            continue; // padding rows stay zero; nothing is written
        };
        let request = ActiveRequest {
            config,
            args,
            b,
            offset,
            conv,
        };
        let act = request.conv_silu();
        request.rewrite_conv(&mut expected.conv_state);
        for h in 0..hv {
            let tokens: Vec<TokenInputs> = (0..t).map(|u| request.token(&act[u], u, h)).collect();
            let mut s = request.read_state(read, h);
            for (u, token) in tokens.iter().enumerate() {
                let o = delta_rule(&mut s, token);
                if let Some(w) = writes[u] {
                    let page = (w * hv + h) * s.len() * s[0].len();
                    for (i, &value) in s.iter().flatten().enumerate() {
                        expected.state[page + i] = value as f32;
                    }
                }
                let y = gated_rms_norm(&o, token, args);
                let base = (b * t + u) * value_dim + h * dv;
                for (v, &y) in y.iter().enumerate() {
                    expected.output_f32[base + v] = y as f32;
                    expected.output[base + v] = bf16_rne(y);
                }
            }
        }
    }
    Ok(expected)
}

/// Per-token operands of one v-head (crate doc §3.1–§3.2).
struct TokenInputs {
    /// q̂ = q · scale / ‖q‖ (L2 with [`L2_EPS`]).
    q: Vec<f64>,
    /// k̂ = k / ‖k‖.
    k: Vec<f64>,
    v: Vec<f64>,
    /// σ(beta).
    beta: f64,
    /// exp(g), g = -exp(a_log) · softplus(a + dt_bias).
    decay: f64,
    /// silu(z) over the head's DV values.
    gate: Vec<f64>,
}

/// An active request of a valid launch.
struct ActiveRequest<'a> {
    config: &'a GdnConfig,
    args: &'a GdnArgs,
    b: usize,
    offset: usize,
    conv: usize,
}

impl ActiveRequest<'_> {
    fn row(&self, u: usize) -> usize {
        self.b * self.config.tokens as usize + u
    }

    /// `seq[ch]` of §3.1: three conv taps from `offset`, then the T inputs,
    /// all read before any write.
    fn sequence(&self, ch: usize) -> Vec<f64> {
        let t = self.config.tokens as usize;
        let taps = (0..3).map(|j| self.args.conv_state.get(&[self.conv, ch, self.offset + j]));
        let inputs = (0..t).map(|u| self.args.x.get(&[self.row(u), ch]));
        taps.chain(inputs).collect()
    }

    /// §3.1 for every channel: `act[u][ch] = silu(bias + Σ_i w[ch, i] seq[u + i])`.
    fn conv_silu(&self) -> Vec<Vec<f64>> {
        let (t, conv_dim) = (self.config.tokens as usize, self.config.conv_dim());
        let mut act = vec![vec![0.0; conv_dim]; t];
        for ch in 0..conv_dim {
            let seq = self.sequence(ch);
            let bias = self.args.conv_bias.as_ref().map_or(0.0, |b| b.get(&[ch]));
            let w: Vec<f64> = (0..4)
                .map(|i| self.args.conv_weight.get(&[ch, i]))
                .collect();
            for (u, row) in act.iter_mut().enumerate() {
                let pre = bias + (0..4).map(|i| w[i] * seq[u + i]).sum::<f64>();
                row[ch] = silu(pre);
            }
        }
        act
    }

    /// §3.5: columns `0..3` (T = 1) or `0..T+2` (T > 1) become `seq[1..]`,
    /// i.e. `[C[o+1], C[o+2], x_0, ..., x_{T-1}]`. Copies of bf16: exact.
    fn rewrite_conv(&self, conv_state: &mut [bf16]) {
        let shape = self.args.conv_state.shape();
        let (channels, width) = (shape[1], shape[2]);
        for ch in 0..channels {
            let page = (self.conv * channels + ch) * width;
            for (j, &value) in self.sequence(ch)[1..].iter().enumerate() {
                conv_state[page + j] = bf16::from_f64(value);
            }
        }
    }

    /// §3.2 for token `u` and v-head `h` (q and k from k-head `h / G`).
    fn token(&self, act: &[f64], u: usize, h: usize) -> TokenInputs {
        let (c, args) = (self.config, self.args);
        let (dk, dv) = (c.dk(), c.dv());
        let j = c.k_head(h);
        let row = self.row(u);
        let q: Vec<f64> = (0..dk).map(|i| act[c.q_channel(j, i)]).collect();
        let k: Vec<f64> = (0..dk).map(|i| act[c.k_channel(j, i)]).collect();
        let norm = |x: &[f64]| (x.iter().map(|a| a * a).sum::<f64>() + L2_EPS).sqrt();
        let (q_norm, k_norm) = (norm(&q), norm(&k));
        let scale = f64::from(args.scale);
        let g =
            -args.a_log.get(&[h]).exp() * softplus(args.a.get(&[row, h]) + args.dt_bias.get(&[h]));
        TokenInputs {
            q: q.iter().map(|x| x * scale / q_norm).collect(),
            k: k.iter().map(|x| x / k_norm).collect(),
            v: (0..dv).map(|v| act[c.v_channel(h, v)]).collect(),
            beta: sigmoid(args.beta.get(&[row, h])),
            decay: g.exp(),
            gate: (0..dv)
                .map(|v| silu(args.z.get(&[row, h * dv + v])))
                .collect(),
        }
    }

    /// `S[v][k] = state[read, h, v, k]`, read before any write.
    fn read_state(&self, read: usize, h: usize) -> Vec<Vec<f64>> {
        let (dk, dv) = (self.config.dk(), self.config.dv());
        (0..dv)
            .map(|v| {
                (0..dk)
                    .map(|k| self.args.state.get(&[read, h, v, k]))
                    .collect()
            })
            .collect()
    }
}

/// One token of §3.3 on `s` (`[DV][DK]`) in place; returns `o_t`.
fn delta_rule(s: &mut [Vec<f64>], x: &TokenInputs) -> Vec<f64> {
    s.iter_mut()
        .enumerate()
        .map(|(v, row)| {
            for e in row.iter_mut() {
                *e *= x.decay;
            }
            let u: f64 = row.iter().zip(&x.k).map(|(e, k)| e * k).sum();
            let delta = (x.v[v] - u) * x.beta;
            for (e, k) in row.iter_mut().zip(&x.k) {
                *e += delta * k;
            }
            row.iter().zip(&x.q).map(|(e, q)| e * q).sum()
        })
        .collect()
}

/// §3.4: `((o · rstd) · norm_weight) · silu(z)`, `o` unrounded.
fn gated_rms_norm(o: &[f64], x: &TokenInputs, args: &GdnArgs) -> Vec<f64> {
    let mean = o.iter().map(|e| e * e).sum::<f64>() / o.len() as f64;
    let rstd = 1.0 / (mean + f64::from(args.eps)).sqrt();
    o.iter()
        .enumerate()
        .map(|(v, &e)| e * rstd * args.norm_weight.get(&[v]) * x.gate[v])
        .collect()
}

pub use kda_host::reference::{sigmoid, silu, softplus};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn softplus_is_stable_and_matches_the_definition() {
        for z in [-3.0, -0.5, 0.0, 0.5, 3.0, 19.0] {
            let direct = (1.0 + f64::exp(z)).ln();
            assert!((softplus(z) - direct).abs() <= 1e-13 * direct, "{z}");
        }
        assert!((softplus(-30.0) / f64::exp(-30.0) - 1.0).abs() < 1e-12);
        assert_eq!(softplus(800.0), 800.0);
        assert!(softplus(-800.0) >= 0.0);
        // The kernels' threshold-20 shortcut differs by less than 2.1e-9.
        assert!((softplus(20.0) - 20.0) < 2.1e-9);
    }
}
