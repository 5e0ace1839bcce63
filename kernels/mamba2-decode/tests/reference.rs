//! The f64 reference against hand-computed and direct formulas (crate doc §3),
//! the D and z options, the group mapping, the conv update and padding.

use half::bf16;
use kda_host::OUTPUT_SENTINEL;
use kda_host::testing::{
    assert_request_rows, assert_slots_written, bf16s, close, gather_channels, tensor,
};
use kda_host::{ConvLayout, HostTensor};
use kda_host::{STATE_LIMIT, rel_error};
use mamba2_decode::reference::{silu, softplus};
use mamba2_decode::{
    Actual, GenOptions, Mamba2Args, Mamba2Config, compare, generate, reference, resolve,
};

/// Conv weights that pass the current input through (tap 3 = 1), as F32.
fn pass_through(channels: usize) -> HostTensor {
    let w: Vec<f32> = (0..channels * 4)
        .map(|i| if i % 4 == 3 { 1.0 } else { 0.0 })
        .collect();
    tensor(w, vec![channels, 4])
}

#[test]
fn hand_computed_single_head() {
    // H = 1, P = N = 16, G = 1, no conv bias, no z. x = silu(1), B = silu(2),
    // C = silu(1), state 0.5, dt + dt_bias = 0 -> Δ = ln 2, A = -1 -> dA = 1/2.
    let config = Mamba2Config {
        head_dim: 16,
        d_state: 16,
        has_z: false,
        has_conv_bias: false,
        ..Mamba2Config::default()
    }
    .validated()
    .unwrap();
    let conv_dim = config.conv_dim(); // 16 + 2 * 16
    let xbc: Vec<f64> = (0..conv_dim)
        .map(|ch| match ch {
            0..16 => 1.0,
            16..32 => 2.0,
            _ => 1.0,
        })
        .collect();
    let args = Mamba2Args {
        xbc: tensor(bf16s(xbc.clone()), vec![1, conv_dim]),
        conv_weight: pass_through(conv_dim),
        conv_bias: None,
        conv_state: tensor(
            bf16s((0..2 * conv_dim * 3).map(|i| (i % 5) as f64)),
            vec![2, conv_dim, 3],
        ),
        dt: tensor(vec![bf16::from_f32(0.25)], vec![1, 1]),
        dt_bias: tensor(vec![-0.25f32], vec![1]),
        a: tensor(vec![-1f32], vec![1]),
        d: Some(tensor(vec![1f32], vec![1])),
        z: None,
        slots: tensor(vec![1i32], vec![1]),
        state: tensor(vec![0.5f32; 2 * 16 * 16], vec![2, 1, 16, 16]),
        output: tensor(vec![bf16::from_f32(OUTPUT_SENTINEL); 16], vec![1, 16]),
    };
    let e = reference(&config, &args).unwrap();
    let delta = 2f64.ln();
    assert!(close(softplus(0.0), delta, 1e-15));
    let s = 0.5 * 0.5 + delta * silu(2.0) * silu(1.0);
    let y = 16.0 * s * silu(1.0) + silu(1.0);
    for i in 0..16 * 16 {
        assert!(close(f64::from(e.state[256 + i]), s, 1e-7), "{i}");
        assert_eq!(e.state[i], 0.5, "slot 0 untouched");
    }
    for p in 0..16 {
        assert!(close(f64::from(e.output_f32[p]), y, 1e-7), "{p}");
        assert_eq!(e.output[p], kda_host::bf16_rne(y));
    }
    // Conv slot 1: [C1, C2, xbc].
    let conv = args.conv_state.values();
    for ch in 0..conv_dim {
        let base = (conv_dim + ch) * 3;
        assert_eq!(e.conv_state[base].to_f64(), conv[base + 1]);
        assert_eq!(e.conv_state[base + 1].to_f64(), conv[base + 2]);
        assert_eq!(e.conv_state[base + 2].to_f64(), xbc[ch]);
    }
}

/// A generated launch whose conv passes the current input through, so x, B
/// and C are `silu(xbc)`.
fn direct_case(config: &Mamba2Config, seed: u64) -> Mamba2Args {
    let config = Mamba2Config {
        has_conv_bias: false,
        ..*config
    };
    let mut args = generate(&config, &GenOptions::new(3).padding(0.0).seed(seed));
    args.conv_weight = pass_through(config.conv_dim());
    args
}

#[test]
fn state_update_and_output_match_the_direct_formula() {
    let config = Mamba2Config {
        heads: 4,
        n_groups: 2,
        has_conv_bias: false,
        ..Mamba2Config::default()
    }
    .validated()
    .unwrap();
    let args = direct_case(&config, 3);
    let e = reference(&config, &args).unwrap();
    let (h_count, p_count, n_count) = (4, 64, 128);
    let act = |b: usize, ch: usize| silu(args.xbc.get(&[b, ch]));
    for b in 0..3 {
        let slot = resolve(&args, b).unwrap();
        for h in 0..h_count {
            let g = h / 2;
            let dt = softplus(args.dt.get(&[b, h]) + args.dt_bias.get(&[h]));
            let da = (dt * args.a.get(&[h])).exp();
            for p in 0..p_count {
                let x = act(b, h * p_count + p);
                let mut y = 0.0;
                for n in 0..n_count {
                    let bn = act(b, 256 + g * n_count + n);
                    let cn = act(b, 256 + 2 * n_count + g * n_count + n);
                    let s = args.state.get(&[slot, h, p, n]) * da + dt * bn * x;
                    let got = e.state[((slot * h_count + h) * p_count + p) * n_count + n];
                    assert!(close(f64::from(got), s, 1e-7), "b {b} h {h} p {p} n {n}");
                    y += s * cn;
                }
                y += args.d.as_ref().unwrap().get(&[h]) * x;
                y *= silu(args.z.as_ref().unwrap().get(&[b, h * p_count + p]));
                let got = e.output_f32[b * 256 + h * p_count + p];
                assert!(close(f64::from(got), y, 1e-6), "b {b} h {h} p {p}");
            }
        }
    }
}

#[test]
fn d_adds_the_skip_and_z_gates_the_output() {
    let base = Mamba2Config {
        heads: 2,
        has_conv_bias: false,
        ..Mamba2Config::default()
    };
    let full = direct_case(&base, 6);
    let run = |has_d: bool, has_z: bool| {
        let config = Mamba2Config {
            has_d,
            has_z,
            ..base
        };
        let args = Mamba2Args {
            d: full.d.clone().filter(|_| has_d),
            z: full.z.clone().filter(|_| has_z),
            ..full.clone()
        };
        reference(&config, &args).unwrap()
    };
    let (bare, with_d, with_z, both) = (
        run(false, false),
        run(true, false),
        run(false, true),
        run(true, true),
    );
    // The state does not depend on D or z.
    for e in [&with_d, &with_z, &both] {
        assert_eq!(e.state, bare.state);
        assert_eq!(e.conv_state, bare.conv_state);
    }
    for b in 0..3 {
        for h in 0..2 {
            for p in 0..64 {
                let i = b * 128 + h * 64 + p;
                let x = silu(full.xbc.get(&[b, h * 64 + p]));
                let gate = silu(full.z.as_ref().unwrap().get(&[b, h * 64 + p]));
                let skip = full.d.as_ref().unwrap().get(&[h]) * x;
                let y = f64::from(bare.output_f32[i]);
                // f32 storage of each output: relative 2^-24 of the terms.
                let near =
                    |got: f32, want: f64, scale: f64| (f64::from(got) - want).abs() <= 1e-6 * scale;
                let scale = y.abs() + skip.abs();
                assert!(near(with_d.output_f32[i], y + skip, scale), "{i}");
                assert!(
                    near(with_z.output_f32[i], y * gate, scale * gate.abs()),
                    "{i}"
                );
                assert!(
                    near(both.output_f32[i], (y + skip) * gate, scale * gate.abs()),
                    "{i}"
                );
            }
        }
    }
}

#[test]
fn head_h_uses_group_h_over_heads_per_group() {
    // H = 4, G = 2 against G = 4 with group h carrying grouped group h / 2's B
    // and C: identical results.
    let grouped = Mamba2Config::new(4, 2).unwrap();
    let flat = Mamba2Config::new(4, 4).unwrap();
    let args = generate(&grouped, &GenOptions::new(3).padding(0.0).seed(13));
    let n = flat.n();
    let map: Vec<usize> = (0..flat.conv_dim())
        .map(|ch| {
            if ch < flat.d_inner() {
                ch
            } else if ch < flat.c_channel(0, 0) {
                let g = (ch - flat.b_channel(0, 0)) / n;
                grouped.b_channel(g / 2, ch % n)
            } else {
                let g = (ch - flat.c_channel(0, 0)) / n;
                grouped.c_channel(g / 2, ch % n)
            }
        })
        .collect();
    let expanded = Mamba2Args {
        xbc: gather_channels(&args.xbc, 1, &map),
        conv_weight: gather_channels(&args.conv_weight, 0, &map),
        conv_bias: args.conv_bias.as_ref().map(|b| gather_channels(b, 0, &map)),
        conv_state: gather_channels(&args.conv_state, 1, &map),
        ..args.clone()
    };
    let e = reference(&grouped, &args).unwrap();
    let f = reference(&flat, &expanded).unwrap();
    assert_eq!(e.output_f32, f.output_f32);
    assert_eq!(e.output, f.output);
    assert_eq!(e.state, f.state);

    // Changing group 1's C input changes exactly the outputs of heads 2, 3
    // (and no state); changing its B input changes their states.
    for (channel, changes_state) in [
        (grouped.c_channel(1, 9), false),
        (grouped.b_channel(1, 9), true),
    ] {
        let mut changed = args.clone();
        let mut xbc = changed.xbc.values();
        for b in 0..3 {
            xbc[b * grouped.conv_dim() + channel] += 1.0;
        }
        changed.xbc = tensor(bf16s(xbc), args.xbc.shape().to_vec());
        let c = reference(&grouped, &changed).unwrap();
        for b in 0..3 {
            let slot = resolve(&args, b).unwrap();
            for h in 0..4 {
                let out = b * 256 + h * 64..b * 256 + (h + 1) * 64;
                assert_eq!(c.output_f32[out.clone()] == e.output_f32[out], h < 2);
                let page = (slot * 4 + h) * 64 * 128..(slot * 4 + h + 1) * 64 * 128;
                let same = c.state[page.clone()] == e.state[page];
                assert_eq!(same, h < 2 || !changes_state, "b {b} h {h}");
            }
        }
    }
}

#[test]
fn conv_update_reads_the_oldest_tap_first_and_shifts_by_one() {
    let config = Mamba2Config {
        heads: 1,
        has_conv_bias: false,
        ..Mamba2Config::default()
    }
    .validated()
    .unwrap();
    let mut args = generate(
        &config,
        &GenOptions::new(2).padding(0.0).conv_extra(2).seed(2),
    );
    let conv_dim = config.conv_dim();
    // Tap 0 only: changing conv column 2 changes nothing, column 0 does.
    let w: Vec<f32> = (0..conv_dim * 4)
        .map(|i| if i % 4 == 0 { 1.0 } else { 0.0 })
        .collect();
    args.conv_weight = tensor(w, vec![conv_dim, 4]);
    let slot = resolve(&args, 0).unwrap();
    let plain = reference(&config, &args).unwrap().output_f32;
    let with_tap = |tap: usize| {
        let mut changed = args.clone();
        let mut conv = changed.conv_state.values();
        conv[(slot * conv_dim + 3) * 5 + tap] += 1.0;
        changed.conv_state = tensor(bf16s(conv), vec![args.conv_state.shape()[0], conv_dim, 5]);
        reference(&config, &changed).unwrap().output_f32
    };
    assert_eq!(with_tap(2), plain);
    assert_ne!(with_tap(0), plain);

    // Two steps: the buffer holds [C2, x_1, x_2]; extra columns untouched.
    let before = args.conv_state.values();
    let first = args.xbc.values();
    let e = reference(&config, &args).unwrap();
    args.apply(&e);
    args.xbc = tensor(
        bf16s(first.iter().map(|v| v + 0.5)),
        args.xbc.shape().to_vec(),
    );
    let e = reference(&config, &args).unwrap();
    for ch in 0..conv_dim {
        let base = (slot * conv_dim + ch) * 5;
        let got: Vec<f64> = (0..5).map(|j| e.conv_state[base + j].to_f64()).collect();
        let x1 = first[ch];
        let x2 = bf16::from_f64(x1 + 0.5).to_f64();
        assert_eq!(
            got,
            [before[base + 2], x1, x2, before[base + 3], before[base + 4]]
        );
    }
}

#[test]
fn padding_writes_zero_outputs_and_nothing_else() {
    let config = Mamba2Config::new(2, 1).unwrap();
    let args = generate(&config, &GenOptions::new(8).padding(0.5).seed(4));
    let e = reference(&config, &args).unwrap();
    let d_inner = config.d_inner();
    let slots = args.state.shape()[0];
    let mut active = vec![false; slots];
    let mut padding = 0;
    for b in 0..8 {
        let row = &e.output[b * d_inner..(b + 1) * d_inner];
        let slot = resolve(&args, b);
        assert_request_rows(row, slot.is_none());
        match slot {
            None => padding += 1,
            Some(slot) => active[slot] = true,
        }
    }
    assert!((1..8).contains(&padding), "seed gives a mix: {padding}");
    let conv = Some(&active[..]);
    assert_slots_written(&e, &args.state, &args.conv_state, &active, conv);
}

#[test]
fn strided_views_read_like_contiguous_ones() {
    let config = Mamba2Config::new(2, 2).unwrap();
    let options = GenOptions::new(4).seed(17).conv_extra(1).weights_f32(true);
    let sd = generate(&config, &options.clone().conv_layout(ConvLayout::Sd));
    let mut ds = sd.clone();
    ds.conv_state = sd.conv_state.to_contiguous();
    assert_ne!(sd.conv_state.strides(), ds.conv_state.strides());
    assert_eq!(
        reference(&config, &sd).unwrap(),
        reference(&config, &ds).unwrap()
    );
}

#[test]
fn compare_accepts_the_reference_and_catches_damage() {
    let config = Mamba2Config::new(2, 1).unwrap();
    let args = generate(&config, &GenOptions::new(4).seed(8));
    let e = reference(&config, &args).unwrap();
    let actual = Actual::exact(&e);
    let report = compare(&config, &args, &actual, &e);
    assert!(report.passed(), "{report}");

    // An unwritten output element of an active request, a flipped conv bit
    // and a changed element in slot 0 (the null block, never written).
    let mut bad = actual.clone();
    let active = (0..4).find(|&b| resolve(&args, b).is_some()).unwrap();
    bad.output[active * 128] = bf16::from_f32(OUTPUT_SENTINEL);
    bad.conv_state[0] = bf16::from_bits(bad.conv_state[0].to_bits() ^ 1);
    bad.state[0] += 1e-3;
    let report = compare(&config, &args, &bad, &e);
    let failed = report.failed();
    assert_eq!(
        failed,
        ["output", "state (unwritten)", "conv_state"],
        "{report}"
    );

    let mut drift = actual;
    for v in &mut drift.state {
        *v *= 1.0 + 2.0 * STATE_LIMIT as f32;
    }
    let report = compare(&config, &args, &drift, &e);
    assert!(!report.check("state (written)").unwrap().passed, "{report}");
    let a: Vec<f64> = drift.state.iter().map(|&v| f64::from(v)).collect();
    let b: Vec<f64> = e.state.iter().map(|&v| f64::from(v)).collect();
    assert!(rel_error(&a, &b) > STATE_LIMIT);
}
