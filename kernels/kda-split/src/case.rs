//! Case files (spec §10): one launch, its inputs and optionally its expected
//! results, as `.safetensors`, so any tool can produce cases and any runner can
//! check them.
//!
//! Writing stores each argument's logical (row-major) contents under its kernel
//! name, scalars as 0-d F32, and `__metadata__` with `format`, `arg_order` and
//! `meta_json`. Reading accepts any conforming file (hand-written headers, any
//! tensor order, header padding, BF16 or F32 wherever the kernel converts) and
//! reports what is wrong by tensor name: truncation and header damage are
//! diagnosed here before the safetensors crate parses the file, then dtypes,
//! names and shapes are checked against the metadata. The file layer
//! (diagnosis, dtype checks, atomic writes) is [`kda_host::case`].

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use kda_host::case::{self as file, FileError, NamedTensor, TensorFile};
use kda_host::generator::case_limit;
use safetensors::tensor::SafeTensorError;
use serde_json::{Map, Value, json};
use thiserror::Error;

use crate::args::{Arg, DType, HostData, HostTensor, KdaArgs};
use crate::config::{ConfigError, KdaConfig};
use crate::generator::{GenError, GenOptions, generate};
use crate::reference::{Expected, RawGateOrder, reference};
use crate::validate::{ArgError, validate_layout};

/// `__metadata__.format` of this version.
pub const FORMAT: &str = "kda_split_case/1";

/// Tensor names of the expected results.
pub const EXPECTED_OUTPUT: &str = "expected.output";
pub const EXPECTED_OUTPUT_F32: &str = "expected.output_f32";
pub const EXPECTED_STATE: &str = "expected.state";
pub const EXPECTED_CONV_STATE: &str = "expected.conv_state";
const EXPECTED: [&str; 4] = [
    EXPECTED_OUTPUT,
    EXPECTED_OUTPUT_F32,
    EXPECTED_STATE,
    EXPECTED_CONV_STATE,
];

/// The `meta_json` object. Keys beyond the required ones are kept in `extra`.
#[derive(Clone, Debug, PartialEq)]
pub struct CaseMeta {
    pub heads: u32,
    /// Requests B (not rows).
    pub batch: u32,
    pub tokens: u32,
    pub has_bias: bool,
    pub seed: u64,
    pub num_slots: usize,
    pub extra: Map<String, Value>,
}

impl CaseMeta {
    /// The launch configuration of this case for a gate mode and schedule.
    pub fn config(&self, gate_mode: u32, schedule: &[u32]) -> Result<KdaConfig, ConfigError> {
        KdaConfig::new(
            self.heads,
            self.batch,
            gate_mode,
            self.has_bias,
            schedule,
            self.tokens,
        )
    }

    fn to_json(&self) -> Value {
        let mut map = self.extra.clone();
        for (key, value) in [
            ("heads", json!(self.heads)),
            ("batch", json!(self.batch)),
            ("tokens", json!(self.tokens)),
            ("has_bias", json!(self.has_bias)),
            ("seed", json!(self.seed)),
            ("num_slots", json!(self.num_slots)),
        ] {
            map.insert(key.to_string(), value);
        }
        Value::Object(map)
    }

    fn from_json(text: &str) -> Result<Self, CaseError> {
        let meta = |reason: String| CaseError::Metadata { reason };
        let Value::Object(mut map) = serde_json::from_str(text)
            .map_err(|e| meta(format!("meta_json is not valid JSON: {e}")))?
        else {
            return Err(meta("meta_json must be a JSON object".into()));
        };
        let mut int = |key: &str| -> Result<u64, CaseError> {
            match map.remove(key) {
                Some(value) => value.as_u64().ok_or_else(|| {
                    meta(format!(
                        "meta_json.{key} must be a non-negative integer; got {value}"
                    ))
                }),
                None => Err(meta(format!("meta_json lacks `{key}`"))),
            }
        };
        let small = |key: &str, value: u64| {
            u32::try_from(value)
                .map_err(|_| meta(format!("meta_json.{key} = {value} is too large")))
        };
        let heads = small("heads", int("heads")?)?;
        let batch = small("batch", int("batch")?)?;
        let tokens = small("tokens", int("tokens")?)?;
        let seed = int("seed")?;
        let num_slots = int("num_slots")? as usize;
        // Python writers may store the flag as true/false or 0/1.
        let has_bias = match map.remove("has_bias") {
            Some(Value::Bool(b)) => b,
            Some(Value::Number(n)) if n.as_u64() == Some(0) => false,
            Some(Value::Number(n)) if n.as_u64() == Some(1) => true,
            Some(other) => {
                return Err(meta(format!(
                    "meta_json.has_bias must be a boolean; got {other}"
                )));
            }
            None => return Err(meta("meta_json lacks `has_bias`".into())),
        };
        Ok(Self {
            heads,
            batch,
            tokens,
            has_bias,
            seed,
            num_slots,
            extra: map,
        })
    }
}

/// One kernel invocation with its inputs and, optionally, expected results.
#[derive(Clone, Debug, PartialEq)]
pub struct Case {
    pub meta: CaseMeta,
    pub args: KdaArgs,
    pub expected: Option<Expected>,
}

/// Why a case file cannot be read or written.
#[derive(Debug, Error)]
pub enum CaseError {
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("file is truncated: {part} needs {needed} bytes but the file has {len}")]
    Truncated {
        part: String,
        needed: usize,
        len: usize,
    },
    #[error("bad header: {reason}")]
    Header { reason: String },
    #[error("bad metadata: {reason}")]
    Metadata { reason: String },
    #[error("missing tensor `{name}`")]
    MissingTensor { name: String },
    #[error("unexpected tensor `{name}`; a case holds the kernel arguments and expected.*")]
    UnexpectedTensor { name: String },
    #[error("tensor `{name}` has dtype {found}; expected {allowed}")]
    Dtype {
        name: String,
        found: String,
        allowed: String,
    },
    #[error("tensor `{name}` has shape {found:?}; expected {expected}")]
    Shape {
        name: String,
        found: Vec<usize>,
        expected: String,
    },
    #[error("arguments do not fit meta_json: {}", join(.0))]
    Args(Vec<ArgError>),
    #[error("invalid safetensors data: {0}")]
    Safetensors(#[from] SafeTensorError),
    /// The file changed while it was read (issue 32 item 8): an input
    /// change, not a kernel mismatch.
    #[error("{0}")]
    Changed(String),
    /// The file, or the case asked for, is larger than a case may be here.
    #[error("{0}")]
    TooLarge(String),
    /// An output path that cannot take the file.
    #[error("{0}")]
    Output(String),
    /// The generator's options are impossible or too large.
    #[error(transparent)]
    Generate(#[from] GenError),
}

impl From<FileError> for CaseError {
    fn from(e: FileError) -> Self {
        match e {
            FileError::Io { path, source } => Self::Io { path, source },
            FileError::Truncated { part, needed, len } => Self::Truncated { part, needed, len },
            FileError::Header { reason } => Self::Header { reason },
            FileError::Dtype {
                name,
                found,
                allowed,
            } => Self::Dtype {
                name,
                found,
                allowed,
            },
            FileError::Safetensors(e) => Self::Safetensors(e),
            e @ FileError::TooLarge { .. } => Self::TooLarge(e.to_string()),
            e @ FileError::Output { .. } => Self::Output(e.to_string()),
            e @ (FileError::Changed { .. } | FileError::Checksum { .. }) => {
                Self::Changed(e.to_string())
            }
        }
    }
}

fn join(errors: &[ArgError]) -> String {
    errors
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join("; ")
}

impl Case {
    /// Generates a case and its expected results (f64 reference, raw gates in
    /// `order`), recording the seed and generator choices in `meta_json`.
    /// Fails, before allocating, if the case would exceed [`case_limit`]
    /// ([`GenOptions::check`]).
    pub fn generate(options: &GenOptions, order: RawGateOrder) -> Result<Self, CaseError> {
        options.check(&case_limit(), true)?;
        let args = generate(options);
        let mut extra = Map::new();
        extra.insert(
            "gate_inputs".into(),
            json!(format!("{:?}", options.gate_inputs).to_lowercase()),
        );
        extra.insert(
            "dt_bias".into(),
            json!(format!("{:?}", options.dt_bias).to_lowercase()),
        );
        extra.insert(
            "raw_gate_order".into(),
            json!(format!("{order:?}").to_lowercase()),
        );
        let meta = CaseMeta {
            heads: options.heads,
            batch: u32::try_from(options.requests).map_err(|_| CaseError::Metadata {
                reason: format!("{} requests do not fit meta_json.batch", options.requests),
            })?,
            tokens: options.tokens,
            has_bias: options.has_bias,
            seed: options.seed,
            num_slots: options.resolved_num_slots(),
            extra,
        };
        let config = meta
            .config(0, &[0, 0, 0])
            .map_err(|e| CaseError::Metadata {
                reason: e.to_string(),
            })?;
        let expected = reference(&config, &args, order).map_err(CaseError::Args)?;
        Ok(Self {
            meta,
            args,
            expected: Some(expected),
        })
    }

    /// Reads and checks the case file at `path`. A file larger than
    /// [`case_limit`] is refused before it is read.
    pub fn read(path: &Path) -> Result<Self, CaseError> {
        Self::from_bytes(&file::read_limited(path, &case_limit())?)
    }

    /// Writes the case to `path` atomically: readers see the old file or the
    /// whole new one.
    pub fn write(&self, path: &Path) -> Result<(), CaseError> {
        Ok(file::write_atomic(path, &self.to_bytes()?)?)
    }

    /// The case file's bytes.
    pub fn to_bytes(&self) -> Result<Vec<u8>, CaseError> {
        let arg_order = Arg::for_tokens(self.meta.tokens);
        let mut tensors = Vec::new();
        for &arg in arg_order {
            if let Some(value) = self.args.scalar(arg) {
                tensors.push(NamedTensor::scalar(arg.name(), value));
            } else if let Some(t) = self.args.tensor(arg) {
                tensors.push(NamedTensor::of(arg.name(), t));
            }
        }
        if let Some(e) = &self.expected {
            let a = &self.args;
            tensors.extend([
                NamedTensor::bf16(EXPECTED_OUTPUT, a.output.shape(), &e.output),
                NamedTensor::f32(EXPECTED_OUTPUT_F32, a.output.shape(), &e.output_f32),
                NamedTensor::f32(EXPECTED_STATE, a.state.shape(), &e.state),
                NamedTensor::bf16(EXPECTED_CONV_STATE, a.conv_state.shape(), &e.conv_state),
            ]);
        }
        let names: Vec<&str> = arg_order.iter().map(|a| a.name()).collect();
        let metadata = HashMap::from([
            ("format".to_string(), FORMAT.to_string()),
            ("arg_order".to_string(), json!(names).to_string()),
            ("meta_json".to_string(), self.meta.to_json().to_string()),
        ]);
        Ok(file::serialize(&tensors, metadata)?)
    }

    /// Parses and checks a case file's bytes.
    pub fn from_bytes(bytes: &[u8]) -> Result<Self, CaseError> {
        let file = TensorFile::parse(bytes)?;
        let meta = read_metadata(file.metadata())?;

        for name in file.names() {
            if Arg::from_name(name).is_none() && !EXPECTED.contains(&name) {
                return Err(CaseError::UnexpectedTensor { name: name.into() });
            }
        }
        let tensor = |name: &str, allowed: &[DType]| -> Result<Option<HostTensor>, CaseError> {
            Ok(file.tensor(name, allowed)?)
        };
        let arg = |a: Arg| -> Result<HostTensor, CaseError> {
            tensor(a.name(), a.dtypes())?.ok_or_else(|| CaseError::MissingTensor {
                name: a.name().into(),
            })
        };
        let scalar = |a: Arg| -> Result<f32, CaseError> {
            // Spec: 0-d; shape [1] from other writers is accepted too.
            let t = tensor(a.name(), &[DType::F32])?.ok_or_else(|| CaseError::MissingTensor {
                name: a.name().into(),
            })?;
            match t.data() {
                HostData::F32(v) if v.len() == 1 && t.shape().len() <= 1 => Ok(v[0]),
                _ => Err(CaseError::Shape {
                    name: a.name().into(),
                    found: t.shape().to_vec(),
                    expected: "[] (a 0-d scalar)".into(),
                }),
            }
        };
        let args = KdaArgs {
            x: arg(Arg::X)?,
            weights: arg(Arg::Weights)?,
            bias: arg(Arg::Bias)?,
            conv_state: arg(Arg::ConvState)?,
            raw_gate: arg(Arg::RawGate)?,
            beta: arg(Arg::Beta)?,
            a_log: arg(Arg::ALog)?,
            dt_bias: arg(Arg::DtBias)?,
            slots: arg(Arg::Slots)?,
            state: arg(Arg::State)?,
            output: arg(Arg::Output)?,
            gate: arg(Arg::Gate)?,
            norm_weight: arg(Arg::NormWeight)?,
            lower_bound: scalar(Arg::LowerBound)?,
            scale: scalar(Arg::Scale)?,
            eps: scalar(Arg::Eps)?,
            f_b_weight: arg(Arg::FBWeight)?,
            accepted: match meta.tokens {
                1 => tensor(Arg::Accepted.name(), Arg::Accepted.dtypes())?,
                _ => Some(arg(Arg::Accepted)?),
            },
        };
        let config = meta
            .config(0, &[0, 0, 0])
            .map_err(|e| CaseError::Metadata {
                reason: e.to_string(),
            })?;
        let errors = validate_layout(&config, &args);
        if !errors.is_empty() {
            return Err(CaseError::Args(errors));
        }
        let consistent = |key: &str, meta: usize, actual: usize, what: &str| {
            if meta == actual {
                Ok(())
            } else {
                Err(CaseError::Metadata {
                    reason: format!("meta_json.{key} = {meta} but {what} is {actual}"),
                })
            }
        };
        consistent(
            "batch",
            meta.batch as usize,
            args.requests(),
            "slots.shape[0]",
        )?;
        consistent(
            "num_slots",
            meta.num_slots,
            args.state.shape()[0],
            "state.shape[0]",
        )?;

        let present = EXPECTED.iter().filter(|n| file.names().contains(n)).count();
        let expected = if present == 0 {
            None
        } else {
            let get = |name: &str, dtype: DType, shape: &[usize]| -> Result<HostData, CaseError> {
                let t = tensor(name, &[dtype])?
                    .ok_or_else(|| CaseError::MissingTensor { name: name.into() })?;
                if t.shape() != shape {
                    return Err(CaseError::Shape {
                        name: name.into(),
                        found: t.shape().to_vec(),
                        expected: format!("{shape:?}"),
                    });
                }
                Ok(t.data().clone())
            };
            let (
                HostData::Bf16(output),
                HostData::F32(output_f32),
                HostData::F32(state),
                HostData::Bf16(conv_state),
            ) = (
                get(EXPECTED_OUTPUT, DType::Bf16, args.output.shape())?,
                get(EXPECTED_OUTPUT_F32, DType::F32, args.output.shape())?,
                get(EXPECTED_STATE, DType::F32, args.state.shape())?,
                get(EXPECTED_CONV_STATE, DType::Bf16, args.conv_state.shape())?,
            )
            else {
                unreachable!("dtypes were checked by `tensor`")
            };
            Some(Expected {
                output,
                output_f32,
                state,
                conv_state,
            })
        };
        // Last: a hand-edited file gets the error naming what is wrong.
        file.verify_checksum()?;
        Ok(Self {
            meta,
            args,
            expected,
        })
    }
}

fn read_metadata(metadata: &HashMap<String, String>) -> Result<CaseMeta, CaseError> {
    let meta = |reason: String| CaseError::Metadata { reason };
    match metadata.get("format") {
        Some(format) if format == FORMAT => {}
        Some(other) => return Err(meta(format!("format is `{other}`; expected `{FORMAT}`"))),
        None => return Err(meta(format!("__metadata__ lacks `format` (`{FORMAT}`)"))),
    }
    let text = metadata
        .get("meta_json")
        .ok_or_else(|| meta("__metadata__ lacks `meta_json`".into()))?;
    let case_meta = CaseMeta::from_json(text)?;
    // arg_order is informative (the names already say which tensor is which),
    // but if present it must be the kernel order.
    if let Some(order) = metadata.get("arg_order") {
        let expected: Vec<&str> = Arg::for_tokens(case_meta.tokens)
            .iter()
            .map(|a| a.name())
            .collect();
        let found: Vec<String> = serde_json::from_str(order)
            .map_err(|e| meta(format!("arg_order is not a JSON list of names: {e}")))?;
        if found != expected {
            return Err(meta(format!(
                "arg_order {found:?} is not the kernel order {expected:?}"
            )));
        }
    }
    Ok(case_meta)
}
