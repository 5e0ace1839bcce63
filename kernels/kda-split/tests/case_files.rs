//! Case files (spec §10): round trips, files from other writers, and the
//! errors for damaged ones.

use half::bf16;
use kda_split::case::FORMAT;
use kda_split::{
    Arg, ArgError, Case, CaseError, ConvLayout, GenOptions, KdaConfig, RawGateOrder, compare,
    reference,
};

fn sample(tokens: u32) -> Case {
    let options = GenOptions::new(2, 3, tokens).seed(17).weights_f32(true);
    Case::generate(&options, RawGateOrder::Exact).unwrap()
}

#[test]
fn round_trip_through_a_file() {
    for tokens in [1, 4] {
        let case = sample(tokens);
        let path = std::env::temp_dir().join(format!(
            "kda-split-case-{}-{tokens}.safetensors",
            std::process::id()
        ));
        case.write(&path).unwrap();
        let back = Case::read(&path).unwrap();
        std::fs::remove_file(&path).unwrap();
        assert_eq!(back, case);
        assert_eq!(back.meta.extra["gate_inputs"], "grid");
    }
}

#[test]
fn strided_arguments_are_stored_by_their_logical_contents() {
    let options = GenOptions::new(1, 2, 2).conv_layout(ConvLayout::Sd).seed(3);
    let case = Case::generate(&options, RawGateOrder::Exact).unwrap();
    let back = Case::from_bytes(&case.to_bytes().unwrap()).unwrap();
    assert_eq!(back.args.conv_state.values(), case.args.conv_state.values());
    assert_eq!(back.expected, case.expected);
}

#[test]
fn metadata_follows_the_spec() {
    let bytes = sample(2).to_bytes().unwrap();
    let n = u64::from_le_bytes(bytes[..8].try_into().unwrap()) as usize;
    let header: serde_json::Value = serde_json::from_slice(&bytes[8..8 + n]).unwrap();
    let meta = &header["__metadata__"];
    assert_eq!(meta["format"], FORMAT);
    let order: Vec<String> = serde_json::from_str(meta["arg_order"].as_str().unwrap()).unwrap();
    assert_eq!(order.len(), 18);
    assert_eq!((order[0].as_str(), order[17].as_str()), ("x", "accepted"));
    let meta_json: serde_json::Value =
        serde_json::from_str(meta["meta_json"].as_str().unwrap()).unwrap();
    for key in ["heads", "batch", "tokens", "has_bias", "seed", "num_slots"] {
        assert!(meta_json.get(key).is_some(), "{key}");
    }
    assert_eq!(header["scale"]["shape"], serde_json::json!([]));
    assert_eq!(header["weights"]["dtype"], "F32");
    assert_eq!(header["expected.state"]["dtype"], "F32");
}

#[test]
fn truncated_files_name_what_was_cut() {
    let bytes = sample(1).to_bytes().unwrap();
    let n = u64::from_le_bytes(bytes[..8].try_into().unwrap()) as usize;
    let cases = [
        (
            5,
            "file is truncated: the 8-byte header length needs 8 bytes but the file has 5"
                .to_string(),
        ),
        (
            100,
            format!(
                "file is truncated: the {n}-byte header needs {} bytes but the file has 100",
                n + 8
            ),
        ),
    ];
    for (len, message) in cases {
        assert_eq!(
            Case::from_bytes(&bytes[..len]).unwrap_err().to_string(),
            message
        );
    }
    let err = Case::from_bytes(&bytes[..bytes.len() - 10]).unwrap_err();
    let CaseError::Truncated { part, needed, len } = &err else {
        panic!("{err}")
    };
    assert!(part.starts_with("tensor `"), "{err}");
    assert_eq!((*needed, *len), (bytes.len(), bytes.len() - 10));
}

#[test]
fn corrupt_header_json_is_a_header_error() {
    let mut bytes = sample(1).to_bytes().unwrap();
    let at = bytes.windows(7).position(|w| w == b"\"dtype\"").unwrap();
    bytes[at] = b'}';
    let err = Case::from_bytes(&bytes).unwrap_err();
    assert!(matches!(err, CaseError::Header { .. }), "{err}");
    assert!(
        err.to_string().starts_with("bad header: invalid JSON"),
        "{err}"
    );
}

/// Writes a safetensors file by hand: `entries` in the given order (no
/// sorting, no alignment), the header padded with spaces.
fn handmade(entries: &[(&str, &str, &[usize], Vec<u8>)], metadata: &str) -> Vec<u8> {
    let mut header = format!("{{\"__metadata__\":{metadata}");
    let mut data = Vec::new();
    for (name, dtype, shape, bytes) in entries {
        let shape: Vec<String> = shape.iter().map(ToString::to_string).collect();
        header += &format!(
            ",\"{name}\":{{\"dtype\":\"{dtype}\",\"shape\":[{}],\"data_offsets\":[{},{}]}}",
            shape.join(","),
            data.len(),
            data.len() + bytes.len()
        );
        data.extend_from_slice(bytes);
    }
    header += "}   ";
    let mut file = (header.len() as u64).to_le_bytes().to_vec();
    file.extend_from_slice(header.as_bytes());
    file.extend(data);
    file
}

fn f32s(values: impl IntoIterator<Item = f32>) -> Vec<u8> {
    values.into_iter().flat_map(f32::to_le_bytes).collect()
}

fn bf16s(values: impl IntoIterator<Item = f32>) -> Vec<u8> {
    values
        .into_iter()
        .flat_map(|v| bf16::from_f32(v).to_le_bytes())
        .collect()
}

fn i32s(values: impl IntoIterator<Item = i32>) -> Vec<u8> {
    values.into_iter().flat_map(i32::to_le_bytes).collect()
}

const META: &str = r#"{"format":"kda_split_case/1","meta_json":"{\"heads\":1,\"batch\":2,\"tokens\":1,\"has_bias\":0,\"seed\":7,\"num_slots\":3,\"writer\":\"hand\"}"}"#;

/// A one-head, two-request, T = 1 case as another tool might write it: odd
/// tensor order, F32 weights and norm weight, no `arg_order`, 0-d scalars.
fn handmade_entries() -> Vec<(&'static str, &'static str, Vec<usize>, Vec<u8>)> {
    let ramp = |n: usize, scale: f32| (0..n).map(move |i| ((i % 17) as f32 - 8.0) * scale);
    vec![
        ("scale", "F32", vec![], f32s([0.125])),
        (
            "f_b_weight",
            "BF16",
            vec![128, 128],
            bf16s(ramp(128 * 128, 1.0 / 512.0)),
        ),
        ("eps", "F32", vec![], f32s([1e-5])),
        ("x", "BF16", vec![2, 384], bf16s(ramp(768, 0.25))),
        (
            "weights",
            "F32",
            vec![3, 4, 128],
            f32s(ramp(1536, 1.0 / 16.0)),
        ),
        ("bias", "BF16", vec![384], bf16s(ramp(384, 0.0))),
        (
            "conv_state",
            "BF16",
            vec![3, 384, 3],
            bf16s(ramp(3 * 384 * 3, 0.5)),
        ),
        (
            "raw_gate",
            "BF16",
            vec![2, 128],
            bf16s(ramp(256, 1.0 / 64.0)),
        ),
        ("beta", "BF16", vec![2, 1], bf16s([0.5, -0.5])),
        ("a_log", "F32", vec![1], f32s([0.25])),
        ("dt_bias", "F32", vec![128], f32s(ramp(128, 0.125))),
        ("slots", "I32", vec![2], i32s([2, -1])),
        (
            "state",
            "F32",
            vec![3, 1, 128, 128],
            f32s(ramp(3 * 128 * 128, 0.01)),
        ),
        ("output", "BF16", vec![2, 128], bf16s(vec![-768.0; 256])),
        ("gate", "BF16", vec![2, 128], bf16s(ramp(256, 0.25))),
        ("norm_weight", "F32", vec![128], f32s(vec![1.0; 128])),
        ("lower_bound", "F32", vec![], f32s([-5.0])),
    ]
}

fn build(entries: &[(&'static str, &'static str, Vec<usize>, Vec<u8>)], metadata: &str) -> Vec<u8> {
    let borrowed: Vec<_> = entries
        .iter()
        .map(|(n, d, s, b)| (*n, *d, s.as_slice(), b.clone()))
        .collect();
    handmade(&borrowed, metadata)
}

#[test]
fn a_hand_written_file_is_accepted() {
    let case = Case::from_bytes(&build(&handmade_entries(), META)).unwrap();
    assert_eq!(
        (case.meta.heads, case.meta.batch, case.meta.tokens),
        (1, 2, 1)
    );
    assert!(!case.meta.has_bias);
    assert_eq!(case.meta.extra["writer"], "hand");
    assert_eq!(case.args.weights.dtype(), kda_split::DType::F32);
    assert_eq!(
        (case.args.scale, case.args.eps, case.args.lower_bound),
        (0.125, 1e-5, -5.0)
    );
    assert_eq!(case.args.slots.get_i32(&[0]), Some(2));
    assert_eq!(case.args.x.get(&[1, 383]), ((767 % 17) as f64 - 8.0) * 0.25);
    assert!(case.expected.is_none());

    // It runs through the reference and compares cleanly with itself.
    let config = KdaConfig::new(1, 2, 0, false, &[0, 0, 0], 1).unwrap();
    let e = reference(&config, &case.args, RawGateOrder::Exact).unwrap();
    assert!(e.output[..128].iter().any(|v| v.to_f32() != 0.0));
    assert!(
        e.output[128..].iter().all(|v| v.to_bits() == 0),
        "request 1 is padding"
    );
    let actual = kda_split::Actual {
        output: e.output.clone(),
        output_f32: None,
        state: e.state.clone(),
        conv_state: e.conv_state.clone(),
    };
    assert!(compare(&config, &case.args, &actual, &e).passed());
}

fn with(name: &str, dtype: &'static str, shape: Vec<usize>, bytes: Vec<u8>) -> Vec<u8> {
    let mut entries = handmade_entries();
    let entry = entries.iter_mut().find(|e| e.0 == name).unwrap();
    (entry.1, entry.2, entry.3) = (dtype, shape, bytes);
    build(&entries, META)
}

#[test]
fn wrong_dtypes_name_the_tensor() {
    let err = Case::from_bytes(&with(
        "state",
        "BF16",
        vec![3, 1, 128, 128],
        bf16s(vec![0.0; 3 * 128 * 128]),
    ))
    .unwrap_err();
    assert_eq!(
        err.to_string(),
        "tensor `state` has dtype BF16; expected F32"
    );
    let err = Case::from_bytes(&with("x", "F16", vec![2, 384], vec![0; 2 * 768])).unwrap_err();
    assert_eq!(err.to_string(), "tensor `x` has dtype F16; expected BF16");
    let err = Case::from_bytes(&with("slots", "F32", vec![2], f32s([2.0, -1.0]))).unwrap_err();
    assert_eq!(
        err.to_string(),
        "tensor `slots` has dtype F32; expected I32"
    );
}

#[test]
fn wrong_shapes_name_the_argument() {
    let err = Case::from_bytes(&with("a_log", "F32", vec![2], f32s([0.0, 0.0]))).unwrap_err();
    let CaseError::Args(errors) = &err else {
        panic!("{err}")
    };
    assert!(
        matches!(errors[..], [ArgError::Shape { arg: Arg::ALog, .. }]),
        "{err}"
    );
    assert_eq!(
        err.to_string(),
        "arguments do not fit meta_json: a_log: shape [2] does not match [1]"
    );

    let err = Case::from_bytes(&with("scale", "F32", vec![2], f32s([0.0, 0.0]))).unwrap_err();
    assert_eq!(
        err.to_string(),
        "tensor `scale` has shape [2]; expected [] (a 0-d scalar)"
    );

    let mut entries = handmade_entries();
    entries.push((
        "expected.output",
        "BF16",
        vec![2, 128],
        bf16s(vec![0.0; 256]),
    ));
    entries.push((
        "expected.output_f32",
        "F32",
        vec![2, 128],
        f32s(vec![0.0; 256]),
    ));
    entries.push((
        "expected.state",
        "F32",
        vec![3, 128, 128],
        f32s(vec![0.0; 3 * 128 * 128]),
    ));
    entries.push((
        "expected.conv_state",
        "BF16",
        vec![3, 384, 3],
        bf16s(vec![0.0; 3 * 384 * 3]),
    ));
    let err = Case::from_bytes(&build(&entries, META)).unwrap_err();
    assert_eq!(
        err.to_string(),
        "tensor `expected.state` has shape [3, 128, 128]; expected [3, 1, 128, 128]"
    );
}

#[test]
fn missing_and_unknown_tensors() {
    let mut entries = handmade_entries();
    entries.retain(|e| e.0 != "gate");
    let err = Case::from_bytes(&build(&entries, META)).unwrap_err();
    assert_eq!(err.to_string(), "missing tensor `gate`");

    let mut entries = handmade_entries();
    entries.push((
        "expected.output",
        "BF16",
        vec![2, 128],
        bf16s(vec![0.0; 256]),
    ));
    let err = Case::from_bytes(&build(&entries, META)).unwrap_err();
    assert_eq!(err.to_string(), "missing tensor `expected.output_f32`");

    let mut entries = handmade_entries();
    entries.push(("expected.stat", "F32", vec![1], f32s([0.0])));
    let err = Case::from_bytes(&build(&entries, META)).unwrap_err();
    assert!(
        matches!(err, CaseError::UnexpectedTensor { ref name } if name == "expected.stat"),
        "{err}"
    );
}

#[test]
fn metadata_errors() {
    let entries = handmade_entries();
    let err = Case::from_bytes(&build(&entries, r#"{"format":"other/2"}"#)).unwrap_err();
    assert_eq!(
        err.to_string(),
        "bad metadata: format is `other/2`; expected `kda_split_case/1`"
    );
    let no_heads = r#"{"format":"kda_split_case/1","meta_json":"{\"batch\":2,\"tokens\":1,\"has_bias\":false,\"seed\":7,\"num_slots\":3}"}"#;
    let err = Case::from_bytes(&build(&entries, no_heads)).unwrap_err();
    assert_eq!(err.to_string(), "bad metadata: meta_json lacks `heads`");
    let wrong_slots = META.replace(r#"\"num_slots\":3"#, r#"\"num_slots\":4"#);
    let err = Case::from_bytes(&build(&entries, &wrong_slots)).unwrap_err();
    assert_eq!(
        err.to_string(),
        "bad metadata: meta_json.num_slots = 4 but state.shape[0] is 3"
    );
    let bad_order = META.replace(r#"{"format""#, r#"{"arg_order":"[\"x\"]","format""#);
    let err = Case::from_bytes(&build(&entries, &bad_order)).unwrap_err();
    assert!(
        err.to_string()
            .starts_with("bad metadata: arg_order [\"x\"] is not the kernel order"),
        "{err}"
    );
}

#[test]
fn multi_token_cases_need_accepted() {
    let case = sample(3);
    let mut bytes_case = case.clone();
    bytes_case.args.accepted = None;
    // Written without `accepted`, a T = 3 file is rejected on reading.
    let err = Case::from_bytes(&bytes_case.to_bytes().unwrap()).unwrap_err();
    assert_eq!(err.to_string(), "missing tensor `accepted`");
}

#[test]
fn damaged_files_never_panic() {
    use rand::{Rng, SeedableRng};
    let options = GenOptions::new(1, 1, 2).num_slots(3).seed(1);
    let bytes = Case::generate(&options, RawGateOrder::Exact)
        .unwrap()
        .to_bytes()
        .unwrap();
    let n = u64::from_le_bytes(bytes[..8].try_into().unwrap()) as usize;
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(0);
    let mut rejected = 0;
    for _ in 0..300 {
        let mut damaged = bytes.clone();
        // Overwrite a few header bytes with JSON-ish characters (digits,
        // brackets, quotes) so the damage often still parses.
        for _ in 0..rng.random_range(1..4) {
            let at = rng.random_range(8..8 + n);
            damaged[at] = b"0123456789[]{},:\" x"[rng.random_range(0..19)];
        }
        if rng.random_bool(0.2) {
            damaged.truncate(rng.random_range(0..damaged.len()));
        }
        rejected += usize::from(Case::from_bytes(&damaged).is_err());
    }
    assert!(rejected > 200, "{rejected}");
}
