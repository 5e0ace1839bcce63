//! Sanity checks of the f64 reference against the spec's formulas and its
//! cache semantics (spec §2, §3).

use half::bf16;
use kda_split::compare::{Measure, STATE_LIMIT};
use kda_split::generator::OUTPUT_SENTINEL;
use kda_split::reference::raw_gate;
use kda_split::reference::{sigmoid, silu};
use kda_split::testing::{
    assert_request_rows, assert_slots_written, bf16s, close, conv_width, rel_error_f32, select_rows,
};
use kda_split::{
    Actual, GateInputs, GenOptions, HostData, HostTensor, KdaArgs, KdaConfig, RawGateOrder,
    Request, compare, generate, reference, resolve,
};

const D: usize = 128;

fn config(heads: u32, batch: u32, has_bias: bool, tokens: u32) -> KdaConfig {
    KdaConfig::new(heads, batch, 0, has_bias, &[0, 0, 0], tokens).unwrap()
}

/// One head, one request, T = 1, slot 1 of 2. Conv weights pick the current
/// input only, q and k live on channel 0, the raw gate is 0, and the state has
/// column 0 = 0.01 v and every other column 0.1.
fn tiny() -> KdaArgs {
    let dim = D;
    let mut x = vec![0.0; 3 * dim];
    x[0] = 1.0; // q channel 0
    x[dim] = 2.0; // k channel 0
    for v in 0..D {
        x[2 * dim + v] = (v as f64 - 64.0) / 32.0;
    }
    let mut weights = vec![0.0; 3 * 4 * dim];
    for s in 0..3 {
        for c in 0..dim {
            weights[(s * 4 + 3) * dim + c] = 1.0;
        }
    }
    let conv: Vec<f64> = (0..2 * 3 * dim * 3).map(|i| (i % 7) as f64 - 3.0).collect();
    let mut state = vec![0f32; 2 * D * D];
    for v in 0..D {
        for k in 0..D {
            state[D * D + v * D + k] = if k == 0 { 0.01 * v as f32 } else { 0.1 };
        }
    }
    let t = |data: HostData, shape: Vec<usize>| HostTensor::new(data, shape).unwrap();
    KdaArgs {
        x: t(HostData::Bf16(bf16s(x)), vec![1, 3 * dim]),
        weights: t(
            HostData::F32(weights.iter().map(|&w| w as f32).collect()),
            vec![3, 4, dim],
        ),
        bias: t(HostData::F32(vec![7.0; 3 * dim]), vec![3 * dim]), // ignored: no bias
        conv_state: t(HostData::Bf16(bf16s(conv)), vec![2, 3 * dim, 3]),
        raw_gate: t(HostData::Bf16(vec![bf16::ZERO; D]), vec![1, D]),
        beta: t(HostData::Bf16(vec![bf16::ZERO]), vec![1, 1]),
        a_log: t(HostData::F32(vec![0.0]), vec![1]),
        dt_bias: t(HostData::F32(vec![0.5; D]), vec![D]),
        slots: t(HostData::I32(vec![1]), vec![1]),
        state: t(HostData::F32(state), vec![2, 1, D, D]),
        output: t(
            HostData::Bf16(vec![bf16::from_f32(OUTPUT_SENTINEL); D]),
            vec![1, D],
        ),
        gate: t(HostData::Bf16(vec![bf16::ZERO; D]), vec![1, D]),
        norm_weight: t(HostData::Bf16(vec![bf16::ONE; D]), vec![D]),
        lower_bound: -5.0,
        scale: 0.125,
        eps: 1e-5,
        f_b_weight: t(
            HostData::Bf16(bf16s((0..D * D).map(|i| (i % 5) as f64))),
            vec![D, D],
        ),
        accepted: None,
    }
}

#[test]
fn single_token_matches_the_spec_formulas() {
    let args = tiny();
    let e = reference(&config(1, 1, false, 1), &args, RawGateOrder::Exact).unwrap();

    let q0 = silu(1.0) * 0.125 / (silu(1.0).powi(2) + 1e-6).sqrt();
    let k0 = silu(2.0) / (silu(2.0).powi(2) + 1e-6).sqrt();
    let decay = (-5.0 * sigmoid(0.5)).exp(); // exp(0)·(0 + 0.5)
    let beta = 0.5;
    let mut o = [0.0; D];
    for v in 0..D {
        let s0 = f64::from(0.01 * v as f32) * decay;
        let value = silu((v as f64 - 64.0) / 32.0);
        let delta = (value - s0 * k0) * beta;
        let s0_new = s0 + delta * k0;
        o[v] = s0_new * q0;
        // Column 0 of the stored state; other columns only decay.
        let page = D * D + v * D;
        assert!(close(f64::from(e.state[page]), s0_new, 1e-6), "v {v}");
        assert!(close(
            f64::from(e.state[page + 1]),
            0.1f32 as f64 * decay,
            1e-6
        ));
    }
    let rstd = 1.0 / (o.iter().map(|x| x * x).sum::<f64>() / D as f64 + 1e-5f32 as f64).sqrt();
    for v in 0..D {
        let y = o[v] * rstd * 0.5;
        assert!(close(f64::from(e.output_f32[v]), y, 1e-6), "v {v}");
        assert!((e.output[v].to_f64() - y).abs() <= y.abs() * 2f64.powi(-8));
    }
    // Slot 0 untouched; conv slot 1 becomes [C1, C2, x0]; slot 0 untouched.
    assert_eq!(
        &e.state[..D * D],
        &args
            .state
            .values()
            .iter()
            .map(|&v| v as f32)
            .collect::<Vec<_>>()[..D * D]
    );
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
    let mut args = tiny();
    let mut w = vec![0f32; 3 * 4 * D];
    for s in 0..3 {
        for c in 0..D {
            w[s * 4 * D + c] = 1.0;
        }
    }
    args.weights = HostTensor::new(w, vec![3, 4, D]).unwrap();
    let run = |args: &KdaArgs, has_bias| {
        reference(&config(1, 1, has_bias, 1), args, RawGateOrder::Exact)
            .unwrap()
            .output_f32
    };
    let plain = run(&args, false);
    assert_ne!(run(&args, true), plain);
    let with_tap = |tap: usize| {
        let mut changed = args.clone();
        let mut conv = changed.conv_state.values();
        conv[3 * D * 3 + tap] += 1.0; // slot 1, q channel 0
        changed.conv_state = HostTensor::new(bf16s(conv), vec![2, 3 * D, 3]).unwrap();
        changed
    };
    assert_eq!(run(&with_tap(2), false), plain);
    assert_ne!(run(&with_tap(0), false), plain);
}

/// The launch of `base` restricted to token rows `rows` of its single request.
fn with_rows(base: &KdaArgs, rows: &[usize], slots: HostTensor, accepted: Option<i32>) -> KdaArgs {
    let n = rows.len();
    let mut args = base.clone();
    args.x = select_rows(&base.x, rows);
    args.raw_gate = select_rows(&base.raw_gate, rows);
    args.beta = select_rows(&base.beta, rows);
    args.gate = select_rows(&base.gate, rows);
    args.output = HostTensor::new(
        vec![bf16::from_f32(OUTPUT_SENTINEL); n * base.output.shape()[1]],
        vec![n, base.output.shape()[1]],
    )
    .unwrap();
    args.slots = slots;
    args.accepted = accepted.map(|a| HostTensor::new(vec![a], vec![1]).unwrap());
    args
}

#[test]
fn two_chained_verify_steps_equal_a_single_token_stream() {
    // Four token rows of one request; the state in slot 1 starts the stream.
    let base = generate(&GenOptions::new(2, 1, 4).padding(0.0).seed(21));
    let one = config(2, 1, true, 1);
    let two = config(2, 1, true, 2);
    let (s0, s1) = (1, 2);

    // Single-token stream over the given rows, through slot s0, conv width 3.
    let stream = |rows: &[usize]| {
        let mut args = with_rows(
            &base,
            &[0],
            HostTensor::new(vec![s0], vec![1]).unwrap(),
            None,
        );
        args.conv_state = conv_width(&base.conv_state, 3);
        let mut outputs = Vec::new();
        for &row in rows {
            let step = with_rows(&base, &[row], args.slots.clone(), None);
            let mut step = KdaArgs {
                state: args.state.clone(),
                conv_state: args.conv_state.clone(),
                ..step
            };
            let e = reference(&one, &step, RawGateOrder::Exact).unwrap();
            outputs.extend_from_slice(&e.output_f32);
            e.apply(&mut step);
            args = step;
        }
        (outputs, args)
    };

    for accepted in [1, 2] {
        // Step 1: tokens 0, 1 (no previous step: taps at columns 0..2).
        let slots = HostTensor::new(vec![s0, s1], vec![1, 2]).unwrap();
        let mut step1 = with_rows(&base, &[0, 1], slots.clone(), Some(1));
        step1.conv_state = conv_width(&base.conv_state, 4);
        let e1 = reference(&two, &step1, RawGateOrder::Exact).unwrap();
        e1.apply(&mut step1);
        // Step 2: `accepted` of step 1's tokens were accepted; rows 2, 3 follow.
        let step2 = with_rows(&base, &[2, 3], slots, Some(accepted));
        let mut step2 = KdaArgs {
            state: step1.state.clone(),
            conv_state: step1.conv_state.clone(),
            ..step2
        };
        let e2 = reference(&two, &step2, RawGateOrder::Exact).unwrap();
        e2.apply(&mut step2);

        let kept: Vec<usize> = (0..accepted as usize).chain([2, 3]).collect();
        let (outputs, last) = stream(&kept);
        let dim = 2 * D;
        let verify: Vec<f32> = e1.output_f32[..accepted as usize * dim]
            .iter()
            .chain(&e2.output_f32)
            .copied()
            .collect();
        // f64 throughout; the stream only adds f32 roundings of the state
        // between tokens.
        assert!(
            rel_error_f32(&verify, &outputs) < 1e-6,
            "accepted {accepted}: {}",
            rel_error_f32(&verify, &outputs)
        );
        // The stream's state is in s0; the verify step's last token wrote s1.
        let page = 2 * D * D;
        let stream_state = &last.state.values()[s0 as usize * page..(s0 as usize + 1) * page];
        let stream_state: Vec<f32> = stream_state.iter().map(|&v| v as f32).collect();
        let verify_state = &e2.state[s1 as usize * page..(s1 as usize + 1) * page];
        assert!(rel_error_f32(verify_state, &stream_state) < 1e-6);
        // Conv: a next step accepting both tokens reads columns 1..3, which
        // must hold the stream's last three inputs.
        let (channels, stream_conv) = (6 * D, last.conv_state.values());
        for ch in 0..channels {
            for j in 0..3 {
                let verify = e2.conv_state[(s0 as usize * channels + ch) * 4 + 1 + j].to_f64();
                assert_eq!(verify, stream_conv[(s0 as usize * channels + ch) * 3 + j]);
            }
        }
    }
}

#[test]
fn padding_requests_write_zero_outputs_and_nothing_else() {
    for tokens in [1, 3] {
        let args = generate(&GenOptions::new(2, 6, tokens).padding(0.5).seed(4));
        let c = config(2, 6, true, tokens);
        let e = reference(&c, &args, RawGateOrder::Exact).unwrap();
        let dim = 2 * D;
        let t = tokens as usize;
        let mut written = vec![false; args.state.shape()[0]];
        let mut conv_written = vec![false; args.state.shape()[0]];
        let mut padding = 0;
        for b in 0..6 {
            let rows = &e.output[b * t * dim..(b + 1) * t * dim];
            let request = resolve(tokens, &args, b);
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
    let args = generate(&GenOptions::new(1, 8, 4).padding(0.0).holes(1.0).seed(9));
    let e = reference(&config(1, 8, true, 4), &args, RawGateOrder::Exact).unwrap();
    let mut holes = 0;
    let mut stored = Vec::new();
    for b in 0..8 {
        let Request::Active { writes, .. } = resolve(4, &args, b) else {
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
fn mode_2_order_is_exact_on_grid_inputs_and_rarely_flips_otherwise() {
    for (inputs, max_flips) in [(GateInputs::Grid, 0), (GateInputs::Gaussian, 8)] {
        let args = generate(&GenOptions::new(4, 16, 1).gate_inputs(inputs).seed(2));
        let f_b = args.f_b_weight.values();
        let f_a = args.raw_gate.values();
        let mut flips = 0;
        for row in 0..16 {
            for feature in 0..4 * D {
                let a = &f_a[row * D..(row + 1) * D];
                let b = &f_b[feature * D..(feature + 1) * D];
                let exact = raw_gate(RawGateOrder::Exact, a, b);
                let mode2 = raw_gate(RawGateOrder::Mode2, a, b);
                if exact != mode2 {
                    flips += 1;
                    // A flip is one bf16 ulp.
                    assert!((exact - mode2).abs() <= exact.abs().max(mode2.abs()) * 2f64.powi(-7));
                }
            }
        }
        assert!(flips <= max_flips, "{inputs:?}: {flips} flips");
    }
}

#[test]
fn compare_accepts_the_reference_and_catches_damage() {
    let args = generate(&GenOptions::new(2, 4, 2).seed(8));
    let c = config(2, 4, true, 2);
    let e = reference(&c, &args, RawGateOrder::Exact).unwrap();
    let actual = Actual::exact(&e);
    let report = compare(&c, &args, &actual, &e);
    assert!(report.passed(), "{report}");
    match report.check("output").unwrap().measure {
        Measure::RelError { value, .. } => assert!(value > 1e-4 && value < 1e-2, "{value}"),
        ref other => panic!("{other:?}"),
    }

    // An unwritten output element of an active request, a flipped conv bit
    // and a changed element in slot 0 (the null block, never written).
    let mut bad = actual.clone();
    let active = (0..4)
        .find(|&b| resolve(2, &args, b) != Request::Padding)
        .unwrap();
    bad.output[active * 2 * 2 * D] = bf16::from_f32(OUTPUT_SENTINEL);
    bad.conv_state[0] = bf16::from_bits(bad.conv_state[0].to_bits() ^ 1);
    bad.state[0] += 1e-3;
    let report = compare(&c, &args, &bad, &e);
    assert!(!report.passed());
    let failed = report.failed();
    assert_eq!(
        failed,
        ["output", "state (unwritten)", "conv_state"],
        "{report}"
    );
    assert!(
        report.to_string().contains("3 of 6 checks failed"),
        "{report}"
    );

    let mut drift = actual;
    for v in &mut drift.state {
        *v *= 1.0 + 2.0 * STATE_LIMIT as f32;
    }
    let report = compare(&c, &args, &drift, &e);
    let failed = report.failed();
    assert!(failed.contains(&"state (written)"), "{report}");
}
