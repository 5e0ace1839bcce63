//! One kernel, one object: what every client (the Python binding layer,
//! host programs, benches) needs to know about a kernel beyond its
//! signature. The parameter list is the signature's (the descriptor
//! `#[cluster_kernel]` emits, [`kda_ir::desc::ParamDesc`]); shapes, dtypes,
//! strides and alignment are checked against the traced kernel's
//! declarations when a call binds to it ([`crate::run::specialize`]);
//! [`HostKernel`] adds only the kernel's own semantics: its configuration,
//! which build a call needs, its grid, and the checks its spec adds.

use std::fmt::{self, Debug, Display};
use std::hash::Hash;

use kda_ir::desc::ParamDesc;
use kda_ir::{Kernel, Scalar};
use kda_runtime::ScalarArg;

use crate::tensor::{DType, HostTensor};

/// One tensor argument of a call: its layout, and its elements where the
/// caller's memory is on the host (a GPU call's checks see layouts only,
/// except the tensors [`HostKernel::value_params`] names, read back).
#[derive(Clone, Debug)]
pub struct ArgTensor {
    /// Element type.
    pub dtype: DType,
    /// Extents, outermost first.
    pub shape: Vec<usize>,
    /// Element strides.
    pub strides: Vec<usize>,
    /// The elements, when they are on the host.
    pub data: Option<HostTensor>,
}

impl ArgTensor {
    /// The layout and elements of a host tensor.
    pub fn host(t: HostTensor) -> ArgTensor {
        ArgTensor {
            dtype: t.dtype(),
            shape: t.shape().to_vec(),
            strides: t.strides().to_vec(),
            data: Some(t),
        }
    }
}

/// The arguments of one call, by parameter name, in signature order
/// (absent `#[when]` parameters left out).
#[derive(Clone, Debug, Default)]
pub struct CallArgs {
    /// Tensor arguments.
    pub tensors: Vec<(&'static str, ArgTensor)>,
    /// Scalar arguments.
    pub scalars: Vec<(&'static str, ScalarArg)>,
}

impl CallArgs {
    /// The tensor passed as `name`.
    pub fn tensor(&self, name: &str) -> Option<&ArgTensor> {
        self.tensors
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, t)| t)
    }

    /// The elements of tensor `name`, where they are known.
    pub fn data(&self, name: &str) -> Option<&HostTensor> {
        self.tensor(name).and_then(|t| t.data.as_ref())
    }

    /// Extent `dim` of tensor `name` (0 where it is absent).
    pub fn extent(&self, name: &str, dim: usize) -> usize {
        self.tensor(name)
            .and_then(|t| t.shape.get(dim).copied())
            .unwrap_or(0)
    }

    /// The dtype of tensor `name`, as the IR names it.
    pub fn dtype(&self, name: &str) -> Option<Scalar> {
        self.tensor(name).map(|t| crate::run::scalar(t.dtype))
    }

    /// The scalar passed as `name`.
    pub fn scalar(&self, name: &str) -> Option<ScalarArg> {
        self.scalars
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, s)| *s)
    }

    /// The `f32` scalar passed as `name` (0 where absent or of another type).
    pub fn f32(&self, name: &str) -> f32 {
        match self.scalar(name) {
            Some(ScalarArg::F32(v)) => v,
            _ => 0.0,
        }
    }

    /// Tensor `name` as a host tensor: its elements where they are known,
    /// else zeros in its layout (a stand-in for checks that read layouts
    /// through a kernel crate's argument struct); an empty tensor where it
    /// is absent or its layout does not fit memory.
    pub fn host_or_zeros(&self, name: &str) -> HostTensor {
        let empty = || HostTensor::zeros(DType::F32, vec![0]);
        let Some(t) = self.tensor(name) else {
            return empty();
        };
        if let Some(d) = &t.data {
            return d.clone();
        }
        let span = t
            .shape
            .iter()
            .zip(&t.strides)
            .try_fold(1usize, |acc, (&n, &s)| {
                n.checked_sub(1)
                    .map_or(Some(0), |m| m.checked_mul(s))
                    .and_then(|o| acc.checked_add(o))
            });
        let span = if t.shape.contains(&0) { Some(0) } else { span };
        match span {
            // The stand-in is as large as the caller's tensor: bounded
            // by what the device already holds, and refused past 2^33.
            Some(n) if n <= 1 << 33 => HostTensor::strided(
                crate::tensor::HostData::zeros(t.dtype, n),
                t.shape.clone(),
                t.strides.clone(),
            )
            .unwrap_or_else(|_| empty()),
            _ => empty(),
        }
    }

    /// The tensors as `(name, host tensor)` pairs, for host-side code that
    /// has every element (`None` when one is a layout only).
    pub fn host_tensors(&self) -> Option<Vec<(&'static str, &HostTensor)>> {
        self.tensors
            .iter()
            .map(|(n, t)| t.data.as_ref().map(|d| (*n, d)))
            .collect()
    }
}

/// Whether an argument has the wrong type (Python's `TypeError`) or the
/// wrong value, shape or layout (`ValueError`).
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum ArgErrorKind {
    /// Wrong element or scalar type.
    Type,
    /// Wrong value, shape, stride, alignment or placement.
    Value,
}

/// A broken rule of a call, naming the argument in its message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ArgError {
    /// Type or value.
    pub kind: ArgErrorKind,
    /// What is wrong, starting with the argument's name.
    pub message: String,
}

impl ArgError {
    /// A value, shape or layout error.
    pub fn value(message: impl Into<String>) -> ArgError {
        ArgError {
            kind: ArgErrorKind::Value,
            message: message.into(),
        }
    }

    /// A type error.
    pub fn type_error(message: impl Into<String>) -> ArgError {
        ArgError {
            kind: ArgErrorKind::Type,
            message: message.into(),
        }
    }
}

impl Display for ArgError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

/// A kernel as its clients use it. Implemented once, in the kernel's crate;
/// the binding layer (`kda-bind`), host programs and benches read it.
///
/// The descriptor supplies the parameters; the traced kernel checks every
/// extent, stride, dtype and alignment at bind time, naming the parameter;
/// so an implementation states only what the signature cannot: the
/// configuration a call implies, the build, the grid, and the spec's own
/// rules (slot tables, ranges of scalars).
pub trait HostKernel: Send + Sync + 'static {
    /// What a build depends on besides the arguments' dtypes and strides
    /// (the cache key's configuration part).
    type Config: Clone + Eq + Hash + Debug + Send + Sync + 'static;

    /// The name in messages (the Python class name).
    fn name(&self) -> &'static str;

    /// This instance's parameters in signature order: the descriptor's
    /// `params(..)` for its configuration.
    fn params(&self) -> Vec<ParamDesc>;

    /// The configuration of a call (it may depend on shapes, e.g. a schedule
    /// chosen by batch size).
    fn config(&self, args: &CallArgs) -> Result<Self::Config, String>;

    /// The kernel of `cfg` for these arguments' dtypes (before it is
    /// specialised on their strides).
    fn build(cfg: &Self::Config, args: &CallArgs) -> Result<Kernel, String>;

    /// The launch grid of a call.
    fn grid(cfg: &Self::Config, args: &CallArgs) -> Result<[u32; 3], String>;

    /// Rules of the kernel's spec on shapes, dtypes and scalars (no tensor
    /// element is read): every violation, each naming its argument.
    fn check_layout(&self, _cfg: &Self::Config, _args: &CallArgs) -> Vec<ArgError> {
        Vec::new()
    }

    /// Tensors whose *values* the spec constrains (slot tables): a GPU call
    /// reads these back for [`HostKernel::check_values`] unless told not to.
    fn value_params(&self) -> &'static [&'static str] {
        &[]
    }

    /// Rules on values; `args` has the elements of at least
    /// [`HostKernel::value_params`].
    fn check_values(&self, _cfg: &Self::Config, _args: &CallArgs) -> Vec<ArgError> {
        Vec::new()
    }

    /// The configuration of a call of `size` (the kernel's batch-like
    /// extent, where it has one) and the arguments of a representative call
    /// of that configuration (contiguous tensors; they may be smaller than
    /// `size`), for `ptx()` and `info()` before any launch.
    fn example(&self, size: Option<u32>) -> Result<(Self::Config, CallArgs), String>;

    /// `(name, value)` pairs describing a configuration, for `info()`.
    fn describe(_cfg: &Self::Config) -> Vec<(&'static str, String)> {
        Vec::new()
    }

    /// The schedule space of a call of configuration `cfg`: configurations
    /// that compute the same function (within the kernel's tolerances) at
    /// different speeds, `cfg` first. The autotuner times each; the
    /// default space is `cfg` alone.
    fn schedules(&self, cfg: &Self::Config) -> Vec<Self::Config> {
        vec![cfg.clone()]
    }

    /// A configuration's schedule in words (the tuning table names the
    /// choice by it).
    fn schedule_label(cfg: &Self::Config) -> String {
        format!("{cfg:?}")
    }

    /// What a tuned choice is keyed by besides the device and the kernel:
    /// by default every tensor's dtype and shape and the instance's
    /// parameters, so a choice holds for calls of that shape.
    fn tune_key(&self, args: &CallArgs) -> String {
        let tensors: Vec<String> = args
            .tensors
            .iter()
            .map(|(n, t)| format!("{n}:{}{:?}", t.dtype.name(), t.shape))
            .collect();
        tensors.join(" ")
    }
}

/// The slot-table rules of a decode kernel's call (spec §4.2–4.4, shared by
/// KdaSplit, GDN and Mamba-2): `slots` (and `accepted` for T > 1) against
/// the slot counts of `state` and `conv_state`, as [`ArgError`]s.
pub fn slot_table_errors(tokens: u32, args: &CallArgs) -> Vec<ArgError> {
    let Some(slots) = args.data("slots") else {
        return Vec::new();
    };
    crate::validate::check_slot_table(
        tokens,
        slots,
        args.data("accepted"),
        args.extent("state", 0),
        args.extent("conv_state", 0),
    )
    .into_iter()
    .map(|e| ArgError::value(e.to_string()))
    .collect()
}

/// A kernel crate's contract errors as [`ArgError`]s, `is_type` telling
/// which are dtype errors.
pub fn arg_errors<E: Display>(errors: Vec<E>, is_type: impl Fn(&E) -> bool) -> Vec<ArgError> {
    errors
        .into_iter()
        .map(|e| ArgError {
            kind: if is_type(&e) {
                ArgErrorKind::Type
            } else {
                ArgErrorKind::Value
            },
            message: e.to_string(),
        })
        .collect()
}

/// A generated host argument struct as a call's arguments, in the order of
/// `params` (tensors from `named`, scalars from `scalars`).
pub fn call_args(
    params: &[ParamDesc],
    named: &[(&'static str, &HostTensor)],
    scalars: &[(&'static str, ScalarArg)],
) -> CallArgs {
    let mut args = CallArgs::default();
    for p in params {
        if p.is_scalar() {
            if let Some(&(n, s)) = scalars.iter().find(|(n, _)| *n == p.name) {
                args.scalars.push((n, s));
            }
        } else if let Some(&(n, t)) = named.iter().find(|(n, _)| *n == p.name) {
            args.tensors.push((n, ArgTensor::host(t.clone())));
        }
    }
    args
}

/// The arguments of a representative call of `kernel` (a traced kernel):
/// every tensor contiguous with its declared dtype, comptime extents as
/// built and each symbolic extent from `syms` (by name; 1 where not
/// given), every scalar `1`, named as `params` (the descriptor) names
/// them. What [`HostKernel::example`] can return for `ptx()` / `info()`
/// when no launch has happened yet.
pub fn example_args(
    kernel: &Kernel,
    params: &[ParamDesc],
    syms: &[(&str, usize)],
) -> Result<CallArgs, String> {
    use kda_ir::Dim;
    let name_of = |n: &str| {
        params
            .iter()
            .find(|p| p.name == n)
            .map(|p| p.name)
            .ok_or_else(|| format!("{n}: not a parameter of the descriptor"))
    };
    let mut args = CallArgs::default();
    for t in kernel.tensors.values() {
        let dtype = match t.dtype {
            Scalar::BF16 => DType::Bf16,
            Scalar::F32 => DType::F32,
            Scalar::I32 => DType::I32,
            other => return Err(format!("{}: no host dtype for {other:?}", t.name)),
        };
        let shape = t
            .shape
            .iter()
            .map(|d| match d {
                Dim::Const(n) => usize::try_from(*n).map_err(|_| format!("{}: extent {n}", t.name)),
                Dim::Sym(s) => {
                    let name = &kernel.syms[*s].name;
                    Ok(syms.iter().find(|(n, _)| n == name).map_or(1, |&(_, v)| v))
                }
            })
            .collect::<Result<Vec<_>, _>>()?;
        let strides = crate::tensor::contiguous_strides(&shape);
        args.tensors.push((
            name_of(&t.name)?,
            ArgTensor {
                dtype,
                shape,
                strides,
                data: None,
            },
        ));
    }
    for s in kernel.scalars.values() {
        let v = match s.ty {
            Scalar::F32 | Scalar::BF16 => ScalarArg::F32(1.0),
            Scalar::I32 => ScalarArg::I32(1),
            Scalar::U32 => ScalarArg::U32(1),
            Scalar::I64 => ScalarArg::I64(1),
            Scalar::U64 | Scalar::Bool => ScalarArg::U64(1),
        };
        args.scalars.push((name_of(&s.name)?, v));
    }
    Ok(args)
}

/// The number of requests of a call, the extent 0 of `slots`, as a grid
/// dimension: an error naming `slots` for none, or for more than a grid's
/// y or z dimension holds (65,535).
pub fn grid_requests(args: &CallArgs) -> Result<u32, String> {
    const MAX: usize = 65_535;
    match args.extent("slots", 0) {
        0 => Err("slots: a batch of 0 requests; pass at least one row".into()),
        b if b > MAX => Err(format!(
            "slots: {b} requests; one launch holds at most {MAX} (split the batch)"
        )),
        b => Ok(b as u32),
    }
}

/// A schedule space: `first`, then each of `rest` not already in it, in
/// order (what [`HostKernel::schedules`] returns).
pub fn schedule_space<C: PartialEq>(first: C, rest: impl IntoIterator<Item = C>) -> Vec<C> {
    let mut out = vec![first];
    for c in rest {
        if !out.contains(&c) {
            out.push(c);
        }
    }
    out
}
