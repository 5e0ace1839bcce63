//! Float64 reference of the KdaSplit semantics (spec §2–§3).
//!
//! Everything is computed in f64 from the exactly widened inputs; the only
//! roundings are the spec's rounding points (§5): the raw gate to bf16, the
//! output to bf16 and the stored state to f32. The reference is order-free, so
//! schedule knobs do not matter, except that gate mode 2's f32 F_B order can be
//! emulated bit for bit (§8.14) to get the kernel's exact raw gates from
//! Gaussian inputs. The results type, the slot resolution and the
//! activations are the shared ones of [`kda_host::reference`] (re-exported
//! here).

use half::bf16;
pub use kda_host::reference::{Expected, Request, resolve_slots, sigmoid, silu, softplus};
use kda_host::round::bf16_rne;

use crate::args::KdaArgs;
use crate::config::{HEAD_DIM, KdaConfig};
use crate::validate::{ArgError, validate};

const D: usize = HEAD_DIM;

/// Hard-wired epsilon inside the L2 norms of q and k (independent of `eps`).
const L2_EPS: f64 = 1e-6;

/// How the raw gate's F_B dot product is summed before its bf16 rounding.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum RawGateOrder {
    /// The exact dot product (f64), rounded once: what every mode computes
    /// unless f32 accumulation crosses a bf16 midpoint (spec §5).
    #[default]
    Exact,
    /// Gate mode 2's f32 order: 16 chains of 8 FMAs over k = 8i..8i+7, then a
    /// butterfly (shifts 3, 2, 1, 0). Bit-exact with the kernel in mode 2.
    Mode2,
}

/// Resolves request `b` of a launch with `tokens` tokens. `args` must be valid
/// (see [`validate`]); slot values are then known to be in range.
pub fn resolve(tokens: u32, args: &KdaArgs, b: usize) -> Request {
    resolve_slots(tokens, &args.slots, args.accepted.as_ref(), b)
}

/// The f64 reference of one call. Fails with the contract violations if `args`
/// are not a valid launch for `config`.
pub fn reference(
    config: &KdaConfig,
    args: &KdaArgs,
    order: RawGateOrder,
) -> Result<Expected, Vec<ArgError>> {
    let errors = validate(config, args);
    if !errors.is_empty() {
        return Err(errors);
    }
    let (heads, dim, t) = (config.heads as usize, config.dim(), config.tokens as usize);
    let rows = args.rows();
    let mut expected = Expected::initial(rows * dim, &args.state, &args.conv_state);
    for b in 0..args.requests() {
        let Request::Active {
            offset,
            read,
            conv,
            writes,
        } = resolve(config.tokens, args, b)
        else {
            continue; // padding rows stay zero
        };
        for head in 0..heads {
            let step = Step {
                config,
                args,
                b,
                head,
                offset,
                conv,
            };
            step.rewrite_conv(&mut expected.conv_state);
            let inputs: Vec<TokenInputs> = (0..t).map(|u| step.token_inputs(u, order)).collect();
            // S[v][k] = state[read, head, v, k], read before any write.
            let mut s: Vec<[f64; D]> = (0..D)
                .map(|v| std::array::from_fn(|k| args.state.get(&[read, head, v, k])))
                .collect();
            for (u, input) in inputs.iter().enumerate() {
                let o = delta_rule(&mut s, input);
                if let Some(w) = writes[u] {
                    let page = (w * heads + head) * D * D;
                    for (v, row) in s.iter().enumerate() {
                        for (k, &value) in row.iter().enumerate() {
                            expected.state[page + v * D + k] = value as f32;
                        }
                    }
                }
                let y = gated_rms_norm(&o, input, args);
                let base = (b * t + u) * dim + head * D;
                for v in 0..D {
                    expected.output_f32[base + v] = y[v] as f32;
                    expected.output[base + v] = bf16_rne(y[v]);
                }
            }
        }
    }
    Ok(expected)
}

/// Per-token operands of the delta rule and the norm (spec §3.1–§3.3).
struct TokenInputs {
    q: [f64; D],
    k: [f64; D],
    v: [f64; D],
    beta: f64,
    /// Output gate σ(gate).
    gamma: [f64; D],
    decay: [f64; D],
}

/// One (request, head) pair of an active request.
struct Step<'a> {
    config: &'a KdaConfig,
    args: &'a KdaArgs,
    b: usize,
    head: usize,
    offset: usize,
    conv: usize,
}

impl Step<'_> {
    fn channel(&self, section: usize, c: usize) -> usize {
        section * self.config.dim() + self.head * D + c
    }

    /// `seq[ch]` of §3.1: three conv taps from `offset`, then the T inputs.
    fn sequence(&self, ch: usize) -> Vec<f64> {
        let t = self.config.tokens as usize;
        let taps = (0..3).map(|j| self.args.conv_state.get(&[self.conv, ch, self.offset + j]));
        let inputs = (0..t).map(|u| self.args.x.get(&[self.b * t + u, ch]));
        taps.chain(inputs).collect()
    }

    /// §3.6: columns `0..T+2` (T = 1: `0..3`) become `seq[1..]`, i.e.
    /// `[C[o+1], C[o+2], x_0, ..., x_{T-1}]`. Copies of bf16 values: exact.
    fn rewrite_conv(&self, conv_state: &mut [bf16]) {
        let shape = self.args.conv_state.shape();
        let width = shape[2];
        for section in 0..3 {
            for c in 0..D {
                let ch = self.channel(section, c);
                let seq = self.sequence(ch);
                let page = (self.conv * shape[1] + ch) * width;
                for (j, &value) in seq[1..].iter().enumerate() {
                    conv_state[page + j] = bf16::from_f64(value);
                }
            }
        }
    }

    /// Causal conv + SiLU of token `u` for every channel of `section` (§3.1).
    fn conv_silu(&self, section: usize, u: usize) -> [f64; D] {
        let args = self.args;
        std::array::from_fn(|c| {
            let ch = self.channel(section, c);
            let seq = self.sequence(ch);
            let lane = self.head * D + c;
            let bias = if self.config.has_bias {
                args.bias.get(&[ch])
            } else {
                0.0
            };
            let pre = bias
                + (0..4)
                    .map(|i| args.weights.get(&[section, i, lane]) * seq[u + i])
                    .sum::<f64>();
            pre * sigmoid(pre)
        })
    }

    fn token_inputs(&self, u: usize, order: RawGateOrder) -> TokenInputs {
        let args = self.args;
        let row = self.b * self.config.tokens as usize + u;
        let [q, k, v] = [0, 1, 2].map(|s| self.conv_silu(s, u));
        let norm = |x: &[f64; D]| (x.iter().map(|a| a * a).sum::<f64>() + L2_EPS).sqrt();
        let (q_norm, k_norm) = (norm(&q), norm(&k));
        let scale = f64::from(args.scale);
        let f_a: Vec<f64> = (0..D).map(|j| args.raw_gate.get(&[row, j])).collect();
        let a = args.a_log.get(&[self.head]).exp();
        let lower_bound = f64::from(args.lower_bound);
        TokenInputs {
            q: q.map(|x| x * scale / q_norm),
            k: k.map(|x| x / k_norm),
            v,
            beta: sigmoid(args.beta.get(&[row, self.head])),
            gamma: std::array::from_fn(|j| sigmoid(args.gate.get(&[row, self.head * D + j]))),
            decay: std::array::from_fn(|key| {
                let feature = self.head * D + key;
                let f_b: Vec<f64> = (0..D).map(|j| args.f_b_weight.get(&[feature, j])).collect();
                let raw = raw_gate(order, &f_a, &f_b);
                let arg = a * (raw + args.dt_bias.get(&[feature]));
                (lower_bound * sigmoid(arg)).exp()
            }),
        }
    }
}

/// `bf16(Σ_j f_a[j] · f_b[j])` in the given summation order, widened back.
/// Inputs are bf16 values (exact in f64 and f32).
pub fn raw_gate(order: RawGateOrder, f_a: &[f64], f_b: &[f64]) -> f64 {
    debug_assert_eq!((f_a.len(), f_b.len()), (D, D));
    match order {
        // Products of bf16 values are exact in f64, and the f64 sum's error is
        // far below the 0.02-ulp window where a bf16 rounding could flip.
        RawGateOrder::Exact => bf16_rne(f_a.iter().zip(f_b).map(|(a, b)| a * b).sum()).to_f64(),
        RawGateOrder::Mode2 => {
            let mut partial: [f32; 16] = std::array::from_fn(|i| {
                (8 * i..8 * i + 8).fold(0f32, |acc, j| (f_a[j] as f32).mul_add(f_b[j] as f32, acc))
            });
            for shift in (0..4).rev() {
                for i in 0..1 << shift {
                    partial[i] += partial[i | 1 << shift];
                }
            }
            bf16::from_f32(partial[0]).to_f64()
        }
    }
}

/// One token of §3.4 on `s` in place; returns `o_t`.
fn delta_rule(s: &mut [[f64; D]], input: &TokenInputs) -> [f64; D] {
    std::array::from_fn(|v| {
        let row = &mut s[v];
        for (x, d) in row.iter_mut().zip(&input.decay) {
            *x *= d;
        }
        let u: f64 = row.iter().zip(&input.k).map(|(x, k)| x * k).sum();
        let delta = (input.v[v] - u) * input.beta;
        for (x, k) in row.iter_mut().zip(&input.k) {
            *x += delta * k;
        }
        row.iter().zip(&input.q).map(|(x, q)| x * q).sum()
    })
}

/// §3.5: `o · rstd · norm_weight · σ(gate)`, `o` unrounded.
fn gated_rms_norm(o: &[f64; D], input: &TokenInputs, args: &KdaArgs) -> [f64; D] {
    let mean = o.iter().map(|x| x * x).sum::<f64>() / D as f64;
    let rstd = 1.0 / (mean + f64::from(args.eps)).sqrt();
    std::array::from_fn(|v| o[v] * rstd * args.norm_weight.get(&[v]) * input.gamma[v])
}
