//! `gen-case` and `run --case` on the simulator: round trips, `--out`, and
//! damaged, mismatched or contract-breaking case files (a clear error naming
//! the tensor, a non-zero exit code, never a panic).

mod cli_support;

use std::collections::HashMap;

use cli_support::{Out, TempFile, kda_split};
use half::bf16;
use kda_split::case::{EXPECTED_CONV_STATE, EXPECTED_STATE};
use kda_split::generator::OUTPUT_SENTINEL;
use kda_split::{Case, HostData, HostTensor};
use safetensors::SafeTensors;
use safetensors::tensor::TensorView;

/// `gen-case -o FILE args...`, which must succeed.
fn gen_case(name: &str, args: &[&str]) -> TempFile {
    let file = TempFile::new(name);
    let mut all = vec!["gen-case", "-o", file.path()];
    all.extend_from_slice(args);
    let out = kda_split(&all).expect_ok();
    assert!(out.stdout.starts_with("wrote "), "{out}");
    file
}

/// `run --device sim --case FILE args...`.
fn run_case(file: &TempFile, args: &[&str]) -> Out {
    let mut all = vec!["run", "--device", "sim", "--case", file.path()];
    all.extend_from_slice(args);
    kda_split(&all)
}

fn no_panic(out: &Out) {
    assert!(!out.stderr.contains("panicked"), "{out}");
}

#[test]
fn gen_case_then_run_passes() {
    let variants: [(&str, &[&str], &[&str]); 4] = [
        ("t1", &[], &[]),
        (
            "t3-sd-f32",
            &[
                "--tokens",
                "3",
                "--conv-layout",
                "sd",
                "--weights-f32",
                "--slot-extra",
                "1",
                "--conv-extra",
                "1",
                "--no-bias",
                "--seed",
                "9",
            ],
            &["--gate-mode", "1", "--schedule", "1,8,0,2"],
        ),
        // Gaussian gate inputs checked against gate mode 2's exact order; the
        // gate mode follows meta_json.raw_gate_order.
        (
            "mode2",
            &[
                "--gate-inputs",
                "gaussian",
                "--raw-gate-order",
                "mode2",
                "--batch",
                "3",
            ],
            &[],
        ),
        (
            "staged",
            &[
                "--heads",
                "1",
                "--batch",
                "2",
                "--padding",
                "0",
                "--dt-bias",
                "fla",
            ],
            &["--schedule", "3,8,1,2,1"],
        ),
    ];
    for (name, gen_args, run_args) in variants {
        let file = gen_case(name, gen_args);
        let out = run_case(&file, run_args).expect_ok();
        assert!(out.stdout.contains("all 5 checks passed"), "{name}\n{out}");
        assert!(out.stdout.contains("CPU simulator (--device sim)"), "{out}");
        if name == "mode2" {
            assert!(out.stdout.contains("gate mode 2"), "{out}");
        }
    }
}

#[test]
fn a_case_without_expectations_is_checked_against_the_reference() {
    let file = gen_case("inputs-only", &["--tokens", "2", "--no-expected"]);
    let case = Case::read(&file.0).unwrap();
    assert!(case.expected.is_none());
    let out = run_case(&file, &[]).expect_ok();
    assert!(
        out.stdout.contains("f64 reference (none in the file)"),
        "{out}"
    );
    assert!(out.stdout.contains("all 5 checks passed"), "{out}");
}

#[test]
fn out_writes_the_arguments_after_the_call_next_to_the_expectations() {
    let file = gen_case("for-out", &["--tokens", "2", "--seed", "4"]);
    let results = TempFile::new("results");
    run_case(&file, &["--out", results.path()]).expect_ok();
    let before = Case::read(&file.0).unwrap();
    let after = Case::read(&results.0).unwrap();
    // Inputs unchanged, expectations carried over.
    assert_eq!(after.args.x, before.args.x);
    assert_eq!(after.args.slots, before.args.slots);
    assert_eq!(after.expected, before.expected);
    let expected = after.expected.as_ref().unwrap();
    // Results: every output written, caches as the reference says.
    let HostData::Bf16(output) = after.args.output.data() else {
        panic!("output is bf16")
    };
    assert!(!output.contains(&bf16::from_f32(OUTPUT_SENTINEL)));
    let HostData::Bf16(conv) = after.args.conv_state.data() else {
        panic!("conv_state is bf16")
    };
    assert_eq!(conv, &expected.conv_state);
    assert_ne!(after.args.state, before.args.state);
    let results_of = &after.meta.extra["results_of"];
    assert_eq!(results_of["passed"], true);
    assert_eq!(results_of["gate_mode"], 0);
    // Running a results file again would check a second call against the
    // first call's expectations: refused.
    let out = run_case(&results, &[]).expect_code(3);
    assert!(
        out.stderr.contains("holds the results of an earlier run"),
        "{out}"
    );
}

#[test]
fn a_mismatch_exits_1_and_names_the_failed_checks() {
    let file = gen_case("for-mismatch", &["--seed", "6"]);
    let mut case = Case::read(&file.0).unwrap();
    let expected = case.expected.as_mut().unwrap();
    // One conv-state element and one element of a slot nobody writes.
    expected.conv_state[0] = bf16::from_f32(expected.conv_state[0].to_f32() + 1.0);
    let page = 2 * 128 * 128;
    let untouched = (1..case.meta.num_slots)
        .find(|&s| {
            let HostData::I32(slots) = case.args.slots.data() else {
                unreachable!()
            };
            !slots.contains(&(s as i32))
        })
        .expect("the generator leaves unused slots");
    expected.state[untouched * page] += 1.0;
    case.write(&file.0).unwrap();
    let out = run_case(&file, &[]).expect_code(1);
    assert!(out.stdout.contains("FAIL conv_state"), "{out}");
    assert!(out.stdout.contains("FAIL state (unwritten)"), "{out}");
    assert!(out.stdout.contains("ok   output "), "{out}");
    assert!(
        out.stderr
            .contains("results do not match: state (unwritten), conv_state"),
        "{out}"
    );
}

/// Rewrites `file` without `drop` and with `replace` swapped in.
fn rewrite(file: &TempFile, drop: &str, replace: Option<(&str, TensorView<'_>)>) {
    let bytes = std::fs::read(&file.0).unwrap();
    let (_, metadata) = SafeTensors::read_metadata(&bytes).unwrap();
    let metadata: HashMap<String, String> = metadata.metadata().clone().unwrap();
    let st = SafeTensors::deserialize(&bytes).unwrap();
    let mut views: Vec<(String, TensorView<'_>)> = st
        .tensors()
        .into_iter()
        .filter(|(name, _)| name != drop && Some(name.as_str()) != replace.as_ref().map(|r| r.0))
        .collect();
    if let Some((name, view)) = replace {
        views.push((name.to_string(), view));
    }
    let out = safetensors::serialize(views, Some(metadata)).unwrap();
    std::fs::write(&file.0, out).unwrap();
}

#[test]
fn a_truncated_file_names_the_cut_tensor() {
    let file = gen_case("truncated", &[]);
    let len = std::fs::metadata(&file.0).unwrap().len() as usize;
    for keep in [len - 100, len / 2] {
        let bytes = std::fs::read(&file.0).unwrap();
        std::fs::write(&file.0, &bytes[..keep]).unwrap();
        let out = run_case(&file, &[]).expect_code(3);
        no_panic(&out);
        assert!(out.stderr.contains("file is truncated: tensor `"), "{out}");
        assert!(out.stderr.contains(file.path()), "{out}");
    }
    std::fs::write(&file.0, b"\x10\0\0").unwrap();
    let out = run_case(&file, &[]).expect_code(3);
    assert!(
        out.stderr
            .contains("file is truncated: the 8-byte header length needs 8 bytes"),
        "{out}"
    );
}

#[test]
fn a_wrong_dtype_names_the_tensor() {
    let file = gen_case("dtype", &[]);
    // `x` as F32 (same values): the kernel loads bf16 vectors.
    let case = Case::read(&file.0).unwrap();
    let values: Vec<f32> = case.args.x.values().iter().map(|&v| v as f32).collect();
    let bytes: Vec<u8> = values.iter().flat_map(|v| v.to_le_bytes()).collect();
    let view = TensorView::new(
        safetensors::Dtype::F32,
        case.args.x.shape().to_vec(),
        &bytes,
    )
    .unwrap();
    rewrite(&file, "", Some(("x", view)));
    let out = run_case(&file, &[]).expect_code(3);
    no_panic(&out);
    assert!(
        out.stderr
            .contains("tensor `x` has dtype F32; expected BF16"),
        "{out}"
    );
    // An expectation of the wrong dtype is named too.
    let file = gen_case("dtype-expected", &[]);
    let case = Case::read(&file.0).unwrap();
    let state = &case.expected.as_ref().unwrap().state;
    let halves: Vec<u8> = state
        .iter()
        .flat_map(|&v| bf16::from_f32(v).to_le_bytes())
        .collect();
    let view = TensorView::new(
        safetensors::Dtype::BF16,
        case.args.state.shape().to_vec(),
        &halves,
    )
    .unwrap();
    rewrite(&file, "", Some((EXPECTED_STATE, view)));
    let out = run_case(&file, &[]).expect_code(3);
    assert!(
        out.stderr
            .contains("tensor `expected.state` has dtype BF16; expected F32"),
        "{out}"
    );
}

#[test]
fn a_missing_tensor_is_named() {
    for missing in ["beta", "lower_bound", EXPECTED_CONV_STATE] {
        let file = gen_case(&format!("missing-{missing}"), &[]);
        rewrite(&file, missing, None);
        let out = run_case(&file, &[]).expect_code(3);
        no_panic(&out);
        assert!(
            out.stderr.contains(&format!("missing tensor `{missing}`")),
            "{out}"
        );
    }
    // T > 1 needs `accepted`.
    let file = gen_case("missing-accepted", &["--tokens", "2"]);
    rewrite(&file, "accepted", None);
    let out = run_case(&file, &[]).expect_code(3);
    assert!(out.stderr.contains("missing tensor `accepted`"), "{out}");
}

#[test]
fn a_mismatched_shape_or_header_is_named() {
    // `gate` one column short: named by the argument check.
    let file = gen_case("shape", &[]);
    let mut case = Case::read(&file.0).unwrap();
    let [rows, cols] = case.args.gate.shape().try_into().unwrap();
    let values: Vec<bf16> = vec![bf16::ZERO; rows * (cols - 1)];
    case.args.gate = HostTensor::new(values, vec![rows, cols - 1]).unwrap();
    std::fs::write(&file.0, case.to_bytes().unwrap()).unwrap();
    let out = run_case(&file, &[]).expect_code(3);
    no_panic(&out);
    assert!(out.stderr.contains("gate: shape ["), "{out}");
    // A header that is not JSON.
    let mut bytes = std::fs::read(&file.0).unwrap();
    bytes[8] = b'!';
    std::fs::write(&file.0, bytes).unwrap();
    let out = run_case(&file, &[]).expect_code(3);
    assert!(out.stderr.contains("bad header: invalid JSON"), "{out}");
    // Not a file at all.
    let out = kda_split(&["run", "--case", "/nonexistent/case.safetensors"]).expect_code(3);
    assert!(
        out.stderr.contains("/nonexistent/case.safetensors"),
        "{out}"
    );
}

#[test]
fn contract_violations_and_bad_configurations_are_refused() {
    // accepted = 0 breaks spec §4.2: exit 3, named.
    let file = gen_case("accepted", &["--tokens", "2"]);
    let mut case = Case::read(&file.0).unwrap();
    let n = case.args.requests();
    let mut accepted = vec![1i32; n];
    accepted[0] = 0;
    case.args.accepted = Some(HostTensor::new(accepted, vec![n]).unwrap());
    case.write(&file.0).unwrap();
    let out = run_case(&file, &[]).expect_code(3);
    assert!(
        out.stderr.contains("accepted[0] = 0 is outside 1..=2"),
        "{out}"
    );
    // The constructor's constraints: exit 2.
    let file = gen_case("config", &["--tokens", "2"]);
    let out = run_case(&file, &["--gate-mode", "2"]).expect_code(2);
    assert!(
        out.stderr
            .contains("invalid configuration: tokens > 1 rules out early >= 2, gate mode 2"),
        "{out}"
    );
    let out = kda_split(&["gen-case", "-o", file.path(), "--padding", "2"]).expect_code(2);
    assert!(out.stderr.contains("--padding is a probability"), "{out}");
    let out = kda_split(&["gen-case", "-o", file.path(), "--num-slots", "4"]).expect_code(2);
    assert!(out.stderr.contains("--num-slots 4 is too small"), "{out}");
}
