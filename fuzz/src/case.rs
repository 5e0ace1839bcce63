//! Target `case`: KdaSplit case files (`kda_split::Case::from_bytes`). Seeds
//! are generated cases of one request (T = 1, T = 3 with every layout
//! option, T = 8 without expectations) plus the checked-in corpus; mutants
//! are byte edits ([`crate::mutate::bytes`]) or edits of the safetensors
//! header's JSON (shapes, dtypes, data offsets, names, `meta_json` fields)
//! re-serialised with a fresh length prefix. An input that parses is also
//! validated against the caller contract, run through the f64 reference and
//! the comparison, and written back out, which must parse again.

use rand::Rng;
use rand_chacha::ChaCha8Rng;
use serde_json::{Map, Value, json};

use kda_split::compare::Actual;
use kda_split::generator::{ConvLayout, DtBias, GateInputs, GenOptions};
use kda_split::{Case, RawGateOrder, compare, reference, validate};

use crate::driver::Target;
use crate::mutate;

/// The case-file target.
pub struct CaseTarget;

/// The generated seeds: one request each, a few configurations.
pub fn seed_cases() -> Vec<Case> {
    let t1 = GenOptions::new(1, 1, 1).seed(1);
    let t3 = GenOptions::new(1, 1, 3)
        .seed(2)
        .has_bias(false)
        .conv_layout(ConvLayout::Sd)
        .weights_f32(true)
        .conv_extra(1)
        .slot_extra(1)
        .gate_inputs(GateInputs::Gaussian)
        .dt_bias(DtBias::Fla);
    let t8 = GenOptions::new(1, 1, 8).seed(3).padding(0.0).num_slots(9);
    let mut cases = Vec::new();
    for (options, expected) in [(t1, true), (t3, true), (t8, false)] {
        // The seeds are fixed, small and valid: generation cannot fail.
        let Ok(mut case) = Case::generate(&options, RawGateOrder::Exact) else {
            continue;
        };
        if !expected {
            case.expected = None;
        }
        cases.push(case);
    }
    cases
}

impl Target for CaseTarget {
    fn name(&self) -> &'static str {
        "case"
    }

    fn seeds(&self) -> Vec<Vec<u8>> {
        let written: Vec<Vec<u8>> = seed_cases()
            .iter()
            .filter_map(|c| c.to_bytes().ok())
            .collect();
        // The first seed keeps the tensors' checksum (its check is fuzzed
        // too); the others drop it, or nearly every data edit would stop at
        // the checksum instead of reaching the contract check, the
        // reference and the comparison.
        written
            .iter()
            .enumerate()
            .map(|(i, bytes)| match i {
                0 => bytes.clone(),
                _ => without_checksum(bytes).unwrap_or_else(|| bytes.clone()),
            })
            .collect()
    }

    fn mutate(&self, rng: &mut ChaCha8Rng, input: &[u8]) -> Vec<u8> {
        let mut out = if rng.random_bool(0.6) {
            header_edit(rng, input).unwrap_or_else(|| input.to_vec())
        } else {
            input.to_vec()
        };
        if rng.random_bool(0.4) {
            mutate::bytes(rng, &mut out);
        }
        out
    }

    fn check(&self, input: &[u8]) -> bool {
        let Ok(case) = Case::from_bytes(input) else {
            return false;
        };
        let Ok(config) = case.meta.config(0, &[0, 0, 0]) else {
            panic!("Case::from_bytes accepted a configuration KdaConfig::new rejects");
        };
        if validate(&config, &case.args).is_empty()
            && let Ok(expected) = reference(&config, &case.args, RawGateOrder::Exact)
        {
            let _ = compare(&config, &case.args, &Actual::exact(&expected), &expected);
        }
        if let Some(expected) = &case.expected {
            // Holding its own expectations, a case compares against them.
            let _ = compare(&config, &case.args, &Actual::exact(expected), expected);
        }
        let bytes = case
            .to_bytes()
            .unwrap_or_else(|e| panic!("a parsed case does not serialise: {e}"));
        if let Err(e) = Case::from_bytes(&bytes) {
            panic!("a parsed case, written back, does not parse: {e}");
        }
        true
    }
}

/// The header JSON and the bytes after it, if `input` has a parseable one.
fn split(input: &[u8]) -> Option<(Map<String, Value>, &[u8])> {
    let n = usize::try_from(u64::from_le_bytes(*input.first_chunk::<8>()?)).ok()?;
    let header = input.get(8..8usize.checked_add(n)?)?;
    let Value::Object(map) = serde_json::from_slice(header).ok()? else {
        return None;
    };
    Some((map, &input[8 + n..]))
}

/// `input` without `__metadata__.kda_checksum` (as another writer would
/// make it), if it has a parseable header.
fn without_checksum(input: &[u8]) -> Option<Vec<u8>> {
    let (mut map, body) = split(input)?;
    map.get_mut("__metadata__")?
        .as_object_mut()?
        .remove("kda_checksum"); // kda_host::case::CHECKSUM_KEY
    let mut header = Value::Object(map).to_string().into_bytes();
    // The tensors' alignment: the data stays 8-byte aligned.
    header.resize(header.len().next_multiple_of(8), b' ');
    let mut out = Vec::with_capacity(8 + header.len() + body.len());
    out.extend_from_slice(&(header.len() as u64).to_le_bytes());
    out.extend_from_slice(&header);
    out.extend_from_slice(body);
    Some(out)
}

/// Numbers on the edges of every size check.
fn edge_number(rng: &mut ChaCha8Rng) -> Value {
    match rng.random_range(0..12) {
        0 => json!(0),
        1 => json!(1),
        2 => json!(2),
        3 => json!(8),
        4 => json!(9),
        5 => json!(128),
        6 => json!(u32::MAX),
        7 => json!(1u64 << 32),
        8 => json!(u64::MAX),
        9 => json!(-1),
        10 => json!(1.5),
        _ => json!(rng.random_range(0..1_000_000u64)),
    }
}

fn edge_value(rng: &mut ChaCha8Rng) -> Value {
    match rng.random_range(0..6) {
        0 => Value::Null,
        1 => json!(true),
        2 => json!("x"),
        3 => json!([]),
        4 => json!({}),
        _ => edge_number(rng),
    }
}

const DTYPES: [&str; 10] = [
    "BF16", "F32", "I32", "F16", "F64", "I64", "U8", "BOOL", "F8_E4M3", "?",
];
const NAMES: [&str; 8] = [
    "x",
    "state",
    "slots",
    "accepted",
    "conv_state",
    "expected.state",
    "expected.output",
    "extra",
];

/// One edit of the header's JSON, re-serialised with a fresh length prefix
/// (sometimes padded, as other writers do).
fn header_edit(rng: &mut ChaCha8Rng, input: &[u8]) -> Option<Vec<u8>> {
    let (mut map, body) = split(input)?;
    let tensors: Vec<String> = map
        .keys()
        .filter(|k| *k != "__metadata__")
        .cloned()
        .collect();
    match rng.random_range(0..10) {
        0..=5 if !tensors.is_empty() => {
            let name = &tensors[rng.random_range(0..tensors.len())];
            let entry = map.get_mut(name)?.as_object_mut()?;
            match rng.random_range(0..8) {
                0 | 1 => {
                    let shape = entry.get_mut("shape")?.as_array_mut()?;
                    if shape.is_empty() || rng.random_bool(0.2) {
                        shape.push(edge_number(rng));
                    } else {
                        let i = rng.random_range(0..shape.len());
                        shape[i] = edge_number(rng);
                    }
                }
                2 => {
                    let shape = entry.get_mut("shape")?.as_array_mut()?;
                    if !shape.is_empty() {
                        let i = rng.random_range(0..shape.len());
                        shape.remove(i);
                    }
                }
                3 => {
                    entry.insert(
                        "dtype".into(),
                        json!(DTYPES[rng.random_range(0..DTYPES.len())]),
                    );
                }
                4 | 5 => {
                    let offsets = entry.get_mut("data_offsets")?.as_array_mut()?;
                    if offsets.len() == 2 {
                        let i = rng.random_range(0..2);
                        offsets[i] = if rng.random_bool(0.5) {
                            edge_number(rng)
                        } else {
                            let v = offsets[i].as_u64()?;
                            json!(v.wrapping_add(rng.random_range(0..3)).wrapping_sub(1))
                        };
                    }
                }
                6 => {
                    map.remove(name);
                }
                _ => {
                    let value = map.remove(name)?;
                    map.insert(NAMES[rng.random_range(0..NAMES.len())].into(), value);
                }
            }
        }
        _ => {
            let metadata = map.get_mut("__metadata__")?.as_object_mut()?;
            match rng.random_range(0..4) {
                0 | 1 => {
                    let text = metadata.get("meta_json")?.as_str()?;
                    let Value::Object(mut meta) = serde_json::from_str(text).ok()? else {
                        return None;
                    };
                    const KEYS: [&str; 6] =
                        ["heads", "batch", "tokens", "num_slots", "seed", "has_bias"];
                    let key = KEYS[rng.random_range(0..KEYS.len())];
                    if rng.random_bool(0.1) {
                        meta.remove(key);
                    } else {
                        meta.insert(key.into(), edge_value(rng));
                    }
                    metadata.insert("meta_json".into(), json!(Value::Object(meta).to_string()));
                }
                2 => {
                    let key = ["format", "arg_order", "meta_json"][rng.random_range(0..3)];
                    if rng.random_bool(0.5) {
                        metadata.remove(key);
                    } else {
                        metadata.insert(key.into(), json!("[\"x\"]"));
                    }
                }
                _ => {
                    metadata.insert("extra".into(), edge_value(rng));
                }
            }
        }
    }
    let mut header = Value::Object(map).to_string().into_bytes();
    if rng.random_bool(0.2) {
        header.resize(header.len() + rng.random_range(1..16), b' ');
    }
    let mut out = Vec::with_capacity(8 + header.len() + body.len());
    out.extend_from_slice(&(header.len() as u64).to_le_bytes());
    out.extend_from_slice(&header);
    out.extend_from_slice(body);
    Some(out)
}
