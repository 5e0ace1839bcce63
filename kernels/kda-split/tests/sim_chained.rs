//! Spec §3.6: "two chained verify steps must equal one T = 1 token stream",
//! kernel against kernel on the simulator.
//!
//! Four requests, one per pair (accepted count of the step before A, accepted
//! count of A) in {1, 2}²; each owns slots `s0 = 1 + 2b`, `s1 = 2 + 2b` and
//! four token rows of one generated case. Verify step A (T = 2) runs rows 0, 1;
//! step B (T = 2, `accepted` = A's accepted count a) runs rows 2, 3 on A's
//! results. The T = 1 stream runs, per request, the tokens that were kept:
//! rows `0..a`, then 2, 3 (a request whose stream is over is padding), through
//! the slot A reads, starting from the three conv taps A reads. Then:
//!
//! * outputs: A's first a tokens and both of B's equal the stream's tokens
//!   within 1 bf16 ulp;
//! * state: every page A and B store equals the stream's state after the same
//!   token within 1e-6 relative (Frobenius, per slot);
//! * conv state: after A and after B, the columns the next step would read
//!   hold the stream's last three inputs, bit for bit.
//!
//! Why these tolerances: both launches run the same f32 operations per token
//! in the same order (same gate mode, same schedule, raw gates exact on grid
//! inputs), and the state is stored as f32 between T = 1 launches, exactly what
//! the T = 2 kernel keeps in registers, so the results are expected to be
//! bit-identical and the test prints how many are. It does not demand that:
//! the spec lets the kernel evaluate σ differently when T > 1 (batched
//! `sigmoids`, §5), which may move β, γ or a decay by an f32 ulp or two. That
//! changes the state by ~1e-7 relative per token (hence 1e-6 for up to four
//! tokens, a hundred times tighter than the 1e-4 the reference comparison
//! allows and far below any semantic bug, which shows as 1e-3 or worse), and
//! can move an output across a bf16 rounding boundary (hence 1 ulp; a wrong
//! token, tap or slot moves outputs by many ulps). The conv state is copies of
//! bf16 inputs, so it must match exactly.

use half::bf16;
use kda_runtime::SimDevice;
use kda_split::compare::{rel_error, ulp_distance};
use kda_split::generator::OUTPUT_SENTINEL;
use kda_split::run::run;
use kda_split::{
    Actual, GateInputs, GenOptions, HostData, HostTensor, KdaArgs, KdaConfig, RawGateOrder,
    compare, generate, reference,
};

const D: usize = 128;
const HEADS: u32 = 2;
/// Per request: (accepted count of the step before A, accepted count of A).
const ACCEPTED: [(i32, i32); 4] = [(1, 1), (1, 2), (2, 1), (2, 2)];
const REQUESTS: usize = ACCEPTED.len();
/// Token rows per request in the generated case: A's two, then B's two.
const ROWS: usize = 4;

const OUTPUT_ULPS: u32 = 1;
const STATE_REL: f64 = 1e-6;

fn slot_pair(b: usize) -> [i32; 2] {
    [1 + 2 * b as i32, 2 + 2 * b as i32]
}

/// Rows `rows` of a row-major 2-D tensor, same dtype.
fn select_rows(t: &HostTensor, rows: &[usize]) -> HostTensor {
    let width = t.shape()[1];
    let data: HostData = match t.to_contiguous().data() {
        HostData::Bf16(v) => HostData::Bf16(rows_of(v, rows, width)),
        HostData::F32(v) => HostData::F32(rows_of(v, rows, width)),
        HostData::I32(v) => HostData::I32(rows_of(v, rows, width)),
    };
    HostTensor::new(data, vec![rows.len(), width]).unwrap()
}

fn rows_of<T: Copy>(v: &[T], rows: &[usize], width: usize) -> Vec<T> {
    rows.iter()
        .flat_map(|&r| v[r * width..(r + 1) * width].iter().copied())
        .collect()
}

/// Conv state `[S, 3*dim, width]` whose slot s, column j is `column(s, ch, j)`.
fn conv_tensor(
    slots: usize,
    channels: usize,
    width: usize,
    column: impl Fn(usize, usize, usize) -> bf16,
) -> HostTensor {
    let mut v = Vec::with_capacity(slots * channels * width);
    for s in 0..slots {
        for ch in 0..channels {
            for j in 0..width {
                v.push(column(s, ch, j));
            }
        }
    }
    HostTensor::new(v, vec![slots, channels, width]).unwrap()
}

fn bf16_at(t: &HostTensor, index: &[usize]) -> bf16 {
    bf16::from_f64(t.get(index)) // exact: the values are bf16
}

/// `base` with its activation rows replaced by `rows`, a fresh output and the
/// given slot table.
fn step_args(
    base: &KdaArgs,
    rows: &[usize],
    slots: HostTensor,
    accepted: Option<HostTensor>,
) -> KdaArgs {
    let dim = base.output.shape()[1];
    KdaArgs {
        x: select_rows(&base.x, rows),
        raw_gate: select_rows(&base.raw_gate, rows),
        beta: select_rows(&base.beta, rows),
        gate: select_rows(&base.gate, rows),
        output: HostTensor::new(
            vec![bf16::from_f32(OUTPUT_SENTINEL); rows.len() * dim],
            vec![rows.len(), dim],
        )
        .unwrap(),
        slots,
        accepted,
        ..base.clone()
    }
}

/// `base` (all token rows) with the caches as the launch of `args` left them.
fn after(base: &KdaArgs, args: &KdaArgs, actual: &Actual) -> KdaArgs {
    KdaArgs {
        state: HostTensor::new(actual.state.clone(), args.state.shape().to_vec()).unwrap(),
        conv_state: HostTensor::new(actual.conv_state.clone(), args.conv_state.shape().to_vec())
            .unwrap(),
        ..base.clone()
    }
}

/// Worst mismatch seen, for the printout.
#[derive(Default)]
struct Tally {
    outputs: usize,
    outputs_identical: usize,
    max_ulps: u32,
    pages: usize,
    pages_identical: usize,
    max_state_rel: f64,
    conv_columns: usize,
}

impl Tally {
    fn output(&mut self, what: &str, verify: &[bf16], stream: &[bf16]) {
        assert_eq!(verify.len(), stream.len());
        for (v, s) in verify.iter().zip(stream) {
            let ulps = ulp_distance(*v, *s);
            assert!(
                ulps <= OUTPUT_ULPS,
                "{what}: {v} vs {s} ({ulps} bf16 ulp apart)"
            );
            self.outputs += 1;
            self.outputs_identical += usize::from(v.to_bits() == s.to_bits());
            self.max_ulps = self.max_ulps.max(ulps);
        }
    }

    fn state(&mut self, what: &str, verify: &[f32], stream: &[f32]) {
        let v: Vec<f64> = verify.iter().map(|&x| f64::from(x)).collect();
        let s: Vec<f64> = stream.iter().map(|&x| f64::from(x)).collect();
        let rel = rel_error(&v, &s);
        assert!(rel <= STATE_REL, "{what}: relative error {rel:.3e}");
        self.pages += 1;
        self.pages_identical += usize::from(verify == stream);
        self.max_state_rel = self.max_state_rel.max(rel);
    }
}

fn chain(gate_mode: u32, schedule: &[u32], seed: u64) {
    let one = KdaConfig::new(HEADS, REQUESTS as u32, gate_mode, true, schedule, 1).unwrap();
    let two = KdaConfig::new(HEADS, REQUESTS as u32, gate_mode, true, schedule, 2).unwrap();
    let label = format!("gate mode {gate_mode}, schedule {schedule:?}");
    let base = generate(
        &GenOptions::new(HEADS, REQUESTS, ROWS as u32)
            .seed(seed)
            .padding(0.0)
            .holes(0.0)
            .gate_inputs(GateInputs::Grid),
    );
    let dim = one.dim();
    let (num_slots, channels) = (base.state.shape()[0], 3 * dim);
    let page = HEADS as usize * D * D;
    let page_of = |state: &[f32], slot: i32| state[slot as usize * page..][..page].to_vec();
    let i32s = |v: Vec<i32>, shape: Vec<usize>| HostTensor::new(v, shape).unwrap();
    let dev = SimDevice::new();

    // Verify step A: rows 0, 1 of each request; conv width T + 2 = 4.
    let table: Vec<i32> = (0..REQUESTS).flat_map(slot_pair).collect();
    let slots = i32s(table, vec![REQUESTS, 2]);
    let rows_a: Vec<usize> = (0..REQUESTS)
        .flat_map(|b| [b * ROWS, b * ROWS + 1])
        .collect();
    let mut args_a = step_args(
        &base,
        &rows_a,
        slots.clone(),
        Some(i32s(ACCEPTED.iter().map(|a| a.0).collect(), vec![REQUESTS])),
    );
    args_a.conv_state = conv_tensor(num_slots, channels, 4, |s, ch, j| {
        bf16_at(&base.conv_state, &[s, ch, j])
    });
    let out_a = run(&dev, &two, &args_a).unwrap_or_else(|e| panic!("{label}: step A: {e}"));
    // The chain must start from a correct step, or matching proves little.
    let expected = reference(&two, &args_a, RawGateOrder::Exact).unwrap();
    let report = compare(&two, &args_a, &out_a, &expected);
    assert!(report.passed(), "{label}: step A vs reference:\n{report}");

    // Verify step B: rows 2, 3; A accepted ACCEPTED[b].1 of its tokens.
    let rows_b: Vec<usize> = (0..REQUESTS)
        .flat_map(|b| [b * ROWS + 2, b * ROWS + 3])
        .collect();
    let args_b = step_args(
        &after(&base, &args_a, &out_a),
        &rows_b,
        slots,
        Some(i32s(ACCEPTED.iter().map(|a| a.1).collect(), vec![REQUESTS])),
    );
    let out_b = run(&dev, &two, &args_b).unwrap_or_else(|e| panic!("{label}: step B: {e}"));

    // The T = 1 stream, through the slot A reads; conv width 3 holding the
    // taps A reads (columns accepted-1 ..= accepted+1 of A's conv slot).
    let read: Vec<i32> = (0..REQUESTS)
        .map(|b| slot_pair(b)[ACCEPTED[b].0 as usize - 1])
        .collect();
    let kept: Vec<Vec<usize>> = (0..REQUESTS)
        .map(|b| {
            let a = ACCEPTED[b].1 as usize;
            (0..a).chain([2, 3]).map(|t| b * ROWS + t).collect()
        })
        .collect();
    let mut stream = KdaArgs {
        conv_state: conv_tensor(num_slots, channels, 3, |s, ch, j| {
            match read.iter().position(|&r| r as usize == s) {
                Some(b) => {
                    let offset = ACCEPTED[b].0 as usize - 1;
                    bf16_at(
                        &args_a.conv_state,
                        &[slot_pair(b)[0] as usize, ch, offset + j],
                    )
                }
                None => bf16_at(&base.conv_state, &[s, ch, j]),
            }
        }),
        ..base.clone()
    };
    let longest = kept.iter().map(Vec::len).max().unwrap();
    let mut steps: Vec<Actual> = Vec::new();
    for k in 0..longest {
        let active = |b: usize| k < kept[b].len();
        let rows: Vec<usize> = (0..REQUESTS)
            .map(|b| kept[b][k.min(kept[b].len() - 1)])
            .collect();
        let slots: Vec<i32> = (0..REQUESTS)
            .map(|b| if active(b) { read[b] } else { -1 })
            .collect();
        let args = step_args(&stream, &rows, i32s(slots, vec![REQUESTS]), None);
        let out =
            run(&dev, &one, &args).unwrap_or_else(|e| panic!("{label}: stream token {k}: {e}"));
        stream = after(&base, &args, &out);
        steps.push(out);
    }

    let mut tally = Tally::default();
    let row = |out: &[bf16], r: usize| out[r * dim..(r + 1) * dim].to_vec();
    for (b, &(_, accepted)) in ACCEPTED.iter().enumerate() {
        let accepted = accepted as usize;
        let [s0, _] = slot_pair(b);
        // Step A's kept tokens, then both of step B's.
        let tokens = (0..accepted)
            .map(|t| ("A", &out_a, t, t))
            .chain((0..2).map(|t| ("B", &out_b, t, accepted + t)));
        for (step, out, t, k) in tokens {
            let what = format!("{label}: request {b}, step {step} token {t} (stream token {k})");
            tally.output(
                &format!("{what} output"),
                &row(&out.output, b * 2 + t),
                &row(&steps[k].output, b),
            );
            tally.state(
                &format!("{what} state"),
                &page_of(&out.state, slot_pair(b)[t]),
                &page_of(&steps[k].state, read[b]),
            );
        }
        // Conv: after A, columns accepted-1 ..= accepted+1 are what the next
        // step reads; after B (if it accepts both), columns 1..=3.
        for (step, out, first, k) in [
            ("A", &out_a, accepted - 1, accepted - 1),
            ("B", &out_b, 1, accepted + 1),
        ] {
            for ch in 0..channels {
                for j in 0..3 {
                    let verify = out.conv_state[(s0 as usize * channels + ch) * 4 + first + j];
                    let stream = steps[k].conv_state[(read[b] as usize * channels + ch) * 3 + j];
                    assert_eq!(
                        verify.to_bits(),
                        stream.to_bits(),
                        "{label}: request {b}, conv after step {step}, channel {ch}, tap {j}"
                    );
                }
            }
            tally.conv_columns += 3 * channels;
        }
    }
    println!(
        "{label}: {} of {} outputs bit-identical (max {} ulp), {} of {} state pages bit-identical (max rel {:.2e}), {} conv entries identical",
        tally.outputs_identical,
        tally.outputs,
        tally.max_ulps,
        tally.pages_identical,
        tally.pages,
        tally.max_state_rel,
        tally.conv_columns
    );
}

#[test]
fn two_verify_steps_equal_a_single_token_stream_default_schedule() {
    chain(0, &[0, 0, 0], 31);
}

#[test]
fn two_verify_steps_equal_a_single_token_stream_early_cluster_2() {
    // Early loads, 8 lanes per row, 2 CTAs per head, four MMA chains.
    chain(1, &[1, 8, 0, 2, 0], 32);
}
