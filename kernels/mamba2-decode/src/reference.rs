//! Float64 reference of the Mamba-2 decode step (crate doc §2, §3).
//!
//! Everything is computed in f64 from the exactly widened inputs; the only
//! roundings are the rounding points of crate doc §5: the output to bf16
//! (RNE, [`kda_host::bf16_rne`]) and the stored state to f32.

use half::bf16;
use kda_host::{Expected, bf16_rne};

use crate::args::Mamba2Args;
use crate::config::Mamba2Config;
use crate::validate::{ArgError, validate};

/// The slot request `b` reads and writes, or `None` if it is padding
/// (`slots[b] <= 0`). `args` must be valid (see [`validate`]).
pub fn resolve(args: &Mamba2Args, b: usize) -> Option<usize> {
    let slot = args.slots.get_i32(&[b]).expect("slots is I32");
    usize::try_from(slot).ok().filter(|&s| s > 0)
}

/// The f64 reference of one launch: the whole output (`[B, d_inner]`,
/// padding rows zero), the whole state and conv state after the launch.
/// Fails with every contract violation if `args` are not a valid launch.
pub fn reference(config: &Mamba2Config, args: &Mamba2Args) -> Result<Expected, Vec<ArgError>> {
    let errors = validate(config, args);
    if !errors.is_empty() {
        return Err(errors);
    }
    let (h_count, p, n) = (config.h(), config.p(), config.n());
    let d_inner = config.d_inner();
    let b_count = args.requests();
    let mut expected = Expected::initial(b_count * d_inner, &args.state, &args.conv_state);
    let width = args.conv_state.shape()[2];
    for b in 0..b_count {
        let Some(slot) = resolve(args, b) else {
            continue; // padding: zero output, nothing written
        };
        // §3.1: conv + SiLU of every channel, then the conv-state rewrite.
        let act: Vec<f64> = (0..config.conv_dim())
            .map(|ch| {
                let seq = sequence(args, slot, b, ch);
                let bias = args.conv_bias.as_ref().map_or(0.0, |t| t.get(&[ch]));
                let pre = bias
                    + (0..4)
                        .map(|i| args.conv_weight.get(&[ch, i]) * seq[i])
                        .sum::<f64>();
                let page = (slot * config.conv_dim() + ch) * width;
                for (j, &value) in seq[1..].iter().enumerate() {
                    expected.conv_state[page + j] = bf16::from_f64(value);
                }
                silu(pre)
            })
            .collect();
        // §3.2–§3.3 per head.
        for h in 0..h_count {
            let g = config.group(h);
            let x: Vec<f64> = (0..p).map(|i| act[config.x_channel(h, i)]).collect();
            let bb: Vec<f64> = (0..n).map(|i| act[config.b_channel(g, i)]).collect();
            let cc: Vec<f64> = (0..n).map(|i| act[config.c_channel(g, i)]).collect();
            let dt = softplus(args.dt.get(&[b, h]) + args.dt_bias.get(&[h]));
            let da = (dt * args.a.get(&[h])).exp();
            let skip = args.d.as_ref().map_or(0.0, |d| d.get(&[h]));
            let page = (slot * h_count + h) * p * n;
            for (i, &xi) in x.iter().enumerate() {
                let mut y = 0.0;
                for (k, (&bk, &ck)) in bb.iter().zip(&cc).enumerate() {
                    let s = args.state.get(&[slot, h, i, k]) * da + dt * bk * xi;
                    expected.state[page + i * n + k] = s as f32;
                    y += s * ck;
                }
                y += skip * xi;
                if let Some(z) = &args.z {
                    y *= silu(z.get(&[b, config.x_channel(h, i)]));
                }
                let out = b * d_inner + config.x_channel(h, i);
                expected.output_f32[out] = y as f32;
                expected.output[out] = bf16_rne(y);
            }
        }
    }
    Ok(expected)
}

/// `[C[ch, 0], C[ch, 1], C[ch, 2], xbc[b, ch]]`, read before any write.
fn sequence(args: &Mamba2Args, slot: usize, b: usize, ch: usize) -> [f64; 4] {
    let tap = |j: usize| args.conv_state.get(&[slot, ch, j]);
    [tap(0), tap(1), tap(2), args.xbc.get(&[b, ch])]
}

pub use kda_host::reference::{sigmoid, silu, softplus};
