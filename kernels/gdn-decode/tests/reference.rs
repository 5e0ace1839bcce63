//! The f64 reference against hand-computed formulas and the cache semantics
//! of the crate doc (§2, §3): chained verify steps, padding, write holes and
//! grouped heads.

use gdn_decode::reference::{sigmoid, silu, softplus};
use gdn_decode::{
    Actual, GdnArgs, GdnConfig, GenOptions, Request, compare, generate, reference, resolve,
};
use half::bf16;
use kda_host::ConvLayout;
use kda_host::OUTPUT_SENTINEL;
use kda_host::testing::{
    assert_request_rows, assert_slots_written, bf16s, close, conv_width, gather_channels,
    rel_error_f32, select_rows, tensor,
};
use kda_host::{Measure, STATE_LIMIT};

const D: usize = 128;

/// One k-head, one v-head, one request, T = 1, slot 1 of 2. The conv passes
/// the current input through, q and k live on channel 0, and the state has
/// column 0 = 0.01 v and every other column 0.1.
fn tiny() -> (GdnConfig, GdnArgs) {
    let config = GdnConfig::new(1, 1, 1, false).unwrap();
    let conv_dim = 3 * D;
    let mut x = vec![0.0; conv_dim];
    x[0] = 1.0; // q channel 0
    x[D] = 2.0; // k channel 0
    for v in 0..D {
        x[2 * D + v] = (v as f64 - 64.0) / 32.0;
    }
    let mut conv_weight = vec![0f32; conv_dim * 4];
    for ch in 0..conv_dim {
        conv_weight[ch * 4 + 3] = 1.0;
    }
    let conv: Vec<f64> = (0..2 * conv_dim * 3)
        .map(|i| (i % 7) as f64 - 3.0)
        .collect();
    let mut state = vec![0f32; 2 * D * D];
    for v in 0..D {
        for k in 0..D {
            state[D * D + v * D + k] = if k == 0 { 0.01 * v as f32 } else { 0.1 };
        }
    }
    let args = GdnArgs {
        x: tensor(bf16s(x), vec![1, conv_dim]),
        conv_weight: tensor(conv_weight, vec![conv_dim, 4]),
        conv_bias: None,
        conv_state: tensor(bf16s(conv), vec![2, conv_dim, 3]),
        a: tensor(vec![bf16::ZERO], vec![1, 1]),
        beta: tensor(vec![bf16::ZERO], vec![1, 1]),
        a_log: tensor(vec![0f32], vec![1]),
        dt_bias: tensor(vec![0.5f32], vec![1]),
        slots: tensor(vec![1i32], vec![1]),
        state: tensor(state, vec![2, 1, D, D]),
        output: tensor(vec![bf16::from_f32(OUTPUT_SENTINEL); D], vec![1, D]),
        z: tensor(vec![bf16::ONE; D], vec![1, D]),
        norm_weight: tensor(vec![bf16::ONE; D], vec![D]),
        scale: 0.125,
        eps: 1e-5,
        accepted: None,
    };
    (config, args)
}

#[test]
fn single_token_matches_the_spec_formulas() {
    let (config, args) = tiny();
    let e = reference(&config, &args).unwrap();

    let q0 = silu(1.0) * 0.125 / (silu(1.0).powi(2) + 1e-6).sqrt();
    let k0 = silu(2.0) / (silu(2.0).powi(2) + 1e-6).sqrt();
    let decay = (-softplus(0.5)).exp(); // -exp(0) * softplus(0 + 0.5)
    assert!(close(decay, 1.0 / (1.0 + 0.5f64.exp()), 1e-15));
    let beta = sigmoid(0.0);
    let mut o = [0.0; D];
    for v in 0..D {
        let s0 = f64::from(0.01 * v as f32) * decay;
        let delta = (silu((v as f64 - 64.0) / 32.0) - s0 * k0) * beta;
        let s0_new = s0 + delta * k0;
        o[v] = s0_new * q0;
        // Column 0 takes the delta; the others only decay.
        let page = D * D + v * D;
        assert!(close(f64::from(e.state[page]), s0_new, 1e-6), "v {v}");
        for k in [1, 77, 127] {
            assert!(close(
                f64::from(e.state[page + k]),
                f64::from(0.1f32) * decay,
                1e-6
            ));
        }
    }
    let rstd = 1.0 / (o.iter().map(|x| x * x).sum::<f64>() / D as f64 + f64::from(1e-5f32)).sqrt();
    for v in 0..D {
        let y = o[v] * rstd * silu(1.0);
        assert!(close(f64::from(e.output_f32[v]), y, 1e-6), "v {v}");
        assert!((e.output[v].to_f64() - y).abs() <= y.abs() * 2f64.powi(-8));
    }
    // Slot 0 untouched; conv slot 1 becomes [C1, C2, x0].
    let before: Vec<f32> = args.state.values().iter().map(|&v| v as f32).collect();
    assert_eq!(&e.state[..D * D], &before[..D * D]);
    let conv = args.conv_state.values();
    for ch in 0..3 * D {
        let base = (3 * D + ch) * 3;
        assert_eq!(e.conv_state[base].to_f64(), conv[base + 1]);
        assert_eq!(e.conv_state[base + 1].to_f64(), conv[base + 2]);
        assert_eq!(e.conv_state[base + 2].to_f64(), args.x.get(&[0, ch]));
        assert_eq!(e.conv_state[ch * 3].to_f64(), conv[ch * 3]);
    }
}

#[test]
fn bias_and_the_oldest_conv_tap_enter_the_conv() {
    // Weights on tap 0 only: the conv reads C[o + 0] (the oldest input), so
    // changing tap 2 of the conv state changes nothing, changing tap 0 does.
    let (config, mut args) = tiny();
    let conv_dim = 3 * D;
    let mut w = vec![0f32; conv_dim * 4];
    for ch in 0..conv_dim {
        w[ch * 4] = 1.0;
    }
    args.conv_weight = tensor(w, vec![conv_dim, 4]);
    let run = |config: &GdnConfig, args: &GdnArgs| reference(config, args).unwrap().output_f32;
    let plain = run(&config, &args);
    let with_bias = GdnConfig {
        has_bias: true,
        ..config
    };
    let mut biased = args.clone();
    biased.conv_bias = Some(tensor(vec![0.25f32; conv_dim], vec![conv_dim]));
    assert_ne!(run(&with_bias, &biased), plain);
    let with_tap = |tap: usize| {
        let mut changed = args.clone();
        let mut conv = changed.conv_state.values();
        conv[3 * D * 3 + D * 3 + tap] += 1.0; // slot 1, k channel 0
        changed.conv_state = tensor(bf16s(conv), vec![2, conv_dim, 3]);
        changed
    };
    assert_eq!(run(&config, &with_tap(2)), plain);
    assert_ne!(run(&config, &with_tap(0)), plain);
}

/// The launch of `base` restricted to token rows `rows` of its single request.
fn with_rows(base: &GdnArgs, rows: &[usize], slots: Vec<i32>, accepted: Option<i32>) -> GdnArgs {
    let width = base.output.shape()[1];
    let mut args = base.clone();
    args.x = select_rows(&base.x, rows);
    args.a = select_rows(&base.a, rows);
    args.beta = select_rows(&base.beta, rows);
    args.z = select_rows(&base.z, rows);
    args.output = tensor(
        vec![bf16::from_f32(OUTPUT_SENTINEL); rows.len() * width],
        vec![rows.len(), width],
    );
    args.slots = match accepted {
        None => tensor(slots, vec![1]),
        Some(_) => {
            let n = slots.len();
            tensor(slots, vec![1, n])
        }
    };
    args.accepted = accepted.map(|a| tensor(vec![a], vec![1]));
    args
}

#[test]
fn two_chained_verify_steps_equal_a_single_token_stream() {
    // Four token rows of one request, two v-heads sharing one k-head.
    let verify = GdnConfig::new(1, 2, 2, true).unwrap();
    let one = GdnConfig::new(1, 2, 1, true).unwrap();
    let four = GdnConfig::new(1, 2, 4, true).unwrap();
    let base = generate(&four, &GenOptions::new(1).padding(0.0).seed(21));
    let (s0, s1) = (1, 2);

    // Single-token stream over the given rows through slot s0, conv width 3.
    let stream = |rows: &[usize]| {
        let mut args = with_rows(&base, &[0], vec![s0], None);
        args.conv_state = conv_width(&base.conv_state, 3);
        let mut outputs = Vec::new();
        for &row in rows {
            let mut step = GdnArgs {
                state: args.state.clone(),
                conv_state: args.conv_state.clone(),
                ..with_rows(&base, &[row], vec![s0], None)
            };
            let e = reference(&one, &step).unwrap();
            outputs.extend_from_slice(&e.output_f32);
            step.apply(&e);
            args = step;
        }
        (outputs, args)
    };

    for accepted in [1, 2] {
        // Step 1: tokens 0, 1 (no previous step: taps at columns 0..2).
        let mut step1 = with_rows(&base, &[0, 1], vec![s0, s1], Some(1));
        step1.conv_state = conv_width(&base.conv_state, 4);
        let e1 = reference(&verify, &step1).unwrap();
        step1.apply(&e1);
        // Step 2: `accepted` of step 1's tokens were accepted; rows 2, 3 follow.
        let mut step2 = GdnArgs {
            state: step1.state.clone(),
            conv_state: step1.conv_state.clone(),
            ..with_rows(&base, &[2, 3], vec![s0, s1], Some(accepted))
        };
        let e2 = reference(&verify, &step2).unwrap();
        step2.apply(&e2);

        let kept: Vec<usize> = (0..accepted as usize).chain([2, 3]).collect();
        let (outputs, last) = stream(&kept);
        let dim = 2 * D;
        let chained: Vec<f32> = e1.output_f32[..accepted as usize * dim]
            .iter()
            .chain(&e2.output_f32)
            .copied()
            .collect();
        // f64 throughout; the stream only adds f32 roundings of the state.
        let err = rel_error_f32(&chained, &outputs);
        assert!(err < 1e-6, "accepted {accepted}: {err}");
        // The stream's state is in s0; the verify step's last token wrote s1.
        let page = 2 * D * D;
        let stream_state: Vec<f32> = last.state.values()
            [s0 as usize * page..(s0 as usize + 1) * page]
            .iter()
            .map(|&v| v as f32)
            .collect();
        let verify_state = &e2.state[s1 as usize * page..(s1 as usize + 1) * page];
        assert!(rel_error_f32(verify_state, &stream_state) < 1e-6);
        // Conv: a next step accepting both tokens reads columns 1..3, which
        // must hold the stream's last three inputs.
        let (channels, stream_conv) = (4 * D, last.conv_state.values());
        for ch in 0..channels {
            for j in 0..3 {
                let v = e2.conv_state[(s0 as usize * channels + ch) * 4 + 1 + j].to_f64();
                assert_eq!(v, stream_conv[(s0 as usize * channels + ch) * 3 + j]);
            }
        }
    }
}

#[test]
fn padding_requests_write_zero_outputs_and_nothing_else() {
    for tokens in [1, 3] {
        let config = GdnConfig::new(1, 2, tokens, true).unwrap();
        let args = generate(&config, &GenOptions::new(6).padding(0.5).seed(4));
        let e = reference(&config, &args).unwrap();
        let (dim, t) = (2 * D, tokens as usize);
        let slots = args.state.shape()[0];
        let mut written = vec![false; slots];
        let mut conv_written = vec![false; slots];
        let mut padding = 0;
        for b in 0..6 {
            let rows = &e.output[b * t * dim..(b + 1) * t * dim];
            let request = resolve(&config, &args, b);
            assert_request_rows(rows, request == Request::Padding);
            if let Request::Active { conv, writes, .. } = request {
                conv_written[conv] = true;
                for w in writes.into_iter().flatten() {
                    written[w] = true;
                }
            } else {
                padding += 1;
            }
        }
        assert!((1..6).contains(&padding), "seed gives a mix: {padding}");
        let conv = Some(&conv_written[..]);
        assert_slots_written(&e, &args.state, &args.conv_state, &written, conv);
    }
}

#[test]
fn write_holes_compute_outputs_but_store_nothing() {
    let config = GdnConfig::new(1, 1, 4, false).unwrap();
    let args = generate(&config, &GenOptions::new(8).padding(0.0).holes(1.0).seed(9));
    let e = reference(&config, &args).unwrap();
    let mut holes = 0;
    let mut stored = Vec::new();
    for b in 0..8 {
        let Request::Active { writes, .. } = resolve(&config, &args, b) else {
            panic!("no padding requested")
        };
        for (t, w) in writes.iter().enumerate() {
            let row = &e.output_f32[(b * 4 + t) * D..(b * 4 + t + 1) * D];
            assert!(row.iter().any(|&v| v != 0.0));
            match w {
                Some(w) => stored.push(*w),
                None => holes += 1,
            }
        }
    }
    assert!(holes > 0);
    let written: Vec<bool> = (0..args.state.shape()[0])
        .map(|slot| stored.contains(&slot))
        .collect();
    assert_slots_written(&e, &args.state, &args.conv_state, &written, None);
}

#[test]
fn grouped_v_heads_read_k_head_h_over_g() {
    // HK = 2, HV = 4 (G = 2) against HK = HV = 4 with k-head j' carrying the
    // q/k channels of grouped k-head j' / 2: identical results.
    let grouped = GdnConfig::new(2, 4, 2, true).unwrap();
    let flat = GdnConfig::new(4, 4, 2, true).unwrap();
    let args = generate(&grouped, &GenOptions::new(3).padding(0.0).seed(13));
    let map: Vec<usize> = (0..flat.conv_dim())
        .map(|ch| match ch / flat.key_dim() {
            0 => grouped.q_channel((ch / D) / 2, ch % D),
            1 => grouped.k_channel(((ch - flat.key_dim()) / D) / 2, ch % D),
            _ => ch - 2 * flat.key_dim() + 2 * grouped.key_dim(),
        })
        .collect();
    let expanded = GdnArgs {
        x: gather_channels(&args.x, 1, &map),
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
    let conv = gather_channels(
        &tensor(e.conv_state.clone(), args.conv_state.shape().to_vec()),
        1,
        &map,
    );
    assert_eq!(
        conv.values(),
        tensor(f.conv_state, expanded.conv_state.shape().to_vec()).values()
    );

    // Changing k-head 1's q input changes exactly v-heads 2 and 3.
    let mut changed = args.clone();
    let mut x = changed.x.values();
    for row in 0..6 {
        x[row * grouped.conv_dim() + grouped.q_channel(1, 5)] += 1.0;
    }
    changed.x = tensor(bf16s(x), args.x.shape().to_vec());
    let c = reference(&grouped, &changed).unwrap();
    for row in 0..6 {
        for h in 0..4 {
            let range = row * 4 * D + h * D..row * 4 * D + (h + 1) * D;
            let same = c.output_f32[range.clone()] == e.output_f32[range];
            assert_eq!(same, h < 2, "row {row}, v-head {h}");
        }
    }
}

#[test]
fn strided_views_read_like_contiguous_ones() {
    let config = GdnConfig::new(1, 2, 3, true).unwrap();
    let options = GenOptions::new(4).seed(17).conv_extra(2).slot_extra(1);
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
    let config = GdnConfig::new(1, 2, 2, true).unwrap();
    let args = generate(&config, &GenOptions::new(4).seed(8));
    let e = reference(&config, &args).unwrap();
    let actual = Actual::exact(&e);
    let report = compare(&config, &args, &actual, &e);
    assert!(report.passed(), "{report}");
    match report.check("output").unwrap().measure {
        Measure::RelError { value, .. } => assert!(value > 1e-4 && value < 1e-2, "{value}"),
        ref other => panic!("{other:?}"),
    }

    // An unwritten output element of an active request, a flipped conv bit
    // and a changed element in slot 0 (the null block, never written).
    let mut bad = actual.clone();
    let active = (0..4)
        .find(|&b| resolve(&config, &args, b) != Request::Padding)
        .unwrap();
    bad.output[active * 2 * 2 * D] = bf16::from_f32(OUTPUT_SENTINEL);
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

    // Invalid arguments are reported, not compared.
    let mut invalid = args.clone();
    invalid.accepted = None;
    let report = compare(&config, &invalid, &drift, &e);
    assert_eq!(report.checks.len(), 1);
    assert_eq!(report.checks[0].note, "accepted: required when tokens > 1");
}
