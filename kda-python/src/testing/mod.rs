//! Test-only functions (underscore names, not part of the API), the same
//! for every kernel family (the instance passed says which): `_case`, a
//! case of the crate's seeded generator as raw storage the Python tests
//! turn into arrays, with the result of the crate's Rust run path on it;
//! `_compare`, the comparison of a result with the float64 reference;
//! `_compilations`, the kernels built in this process. They let the pytest
//! suite check the bindings' in-place path against the crate's own path
//! bit for bit.

mod gdn;
mod kda;
mod mamba2;

use half::bf16;
use kda_host::{Actual, Expected, HostData, HostTensor, KernelArgs, Report};
use kda_runtime::{Device, SimDevice};
use pyo3::exceptions::{PyRuntimeError, PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyList};

use crate::classes::{GdnDecode, KdaSplit, Mamba2Decode};
use kda_bind::Engine;
use kda_host::kernel::{CallArgs, HostKernel};

/// What the test functions need of a kernel beside its [`HostKernel`]
/// side: the crate's generator, run path, reference and comparison.
trait Generated: HostKernel {
    /// The crate's argument struct.
    type Args: KernelArgs;
    /// Whether the generator makes write holes (`holes`).
    const HOLES: bool;
    /// Whether the generator adds spare conv and slot columns (`extra`).
    const EXTRA: bool;
    fn generate(&self, g: &Gen) -> Self::Args;
    /// A generated case as a call's arguments.
    fn call_args(&self, args: &Self::Args) -> CallArgs;
    /// The argument `name` of a generated case.
    fn item<'a>(args: &'a Self::Args, name: &str) -> Option<Item<'a>>;
    /// The crate's Rust run path.
    fn run<D: Device>(dev: &D, cfg: &Self::Config, args: &Self::Args) -> Result<Actual, String>;
    fn reference(cfg: &Self::Config, args: &Self::Args) -> Result<Expected, String>;
    fn compare(
        cfg: &Self::Config,
        args: &Self::Args,
        actual: &Actual,
        expected: &Expected,
    ) -> Report;
}

/// The generator's options, as the test functions take them.
struct Gen {
    requests: usize,
    seed: u64,
    padding: f64,
    /// Left out: the generator's default where it makes holes.
    holes: Option<f64>,
    conv_sd: bool,
    weights_f32: bool,
    extra: bool,
}

impl Gen {
    /// The options of `_case` / `_compare` (keywords), the rest at their
    /// defaults; an unknown keyword is a `TypeError`.
    fn from_options(requests: usize, options: Option<&Bound<'_, PyDict>>) -> PyResult<Gen> {
        let mut g = Gen {
            requests,
            seed: 0,
            padding: 0.25,
            holes: None,
            conv_sd: false,
            weights_f32: false,
            extra: false,
        };
        for (key, value) in options.into_iter().flatten() {
            let key: String = key.extract()?;
            let bad = |_| PyTypeError::new_err(format!("{key}: wrong type"));
            match key.as_str() {
                "seed" => g.seed = value.extract().map_err(bad)?,
                "padding" => g.padding = value.extract().map_err(bad)?,
                "holes" => g.holes = value.extract().map_err(bad)?,
                "conv_sd" => g.conv_sd = value.extract().map_err(bad)?,
                "weights_f32" => g.weights_f32 = value.extract().map_err(bad)?,
                "extra" => g.extra = value.extract().map_err(bad)?,
                _ => {
                    return Err(PyTypeError::new_err(format!(
                        "unexpected keyword argument {key:?}"
                    )));
                }
            }
        }
        Ok(g)
    }

    /// The options with `holes` resolved for family `F`; options its
    /// generator lacks, and probabilities outside [0, 1], refused.
    fn of<F: Generated>(&self, class: &str) -> PyResult<Gen> {
        if self.holes.is_some() && !F::HOLES {
            return Err(PyValueError::new_err(format!(
                "holes: {class}'s generator makes no write holes"
            )));
        }
        if self.extra && !F::EXTRA {
            return Err(PyValueError::new_err(format!(
                "extra: {class}'s generator adds no spare columns"
            )));
        }
        let holes = self.holes.unwrap_or(if F::HOLES { 0.25 } else { 0.0 });
        for (name, p) in [("padding", self.padding), ("holes", holes)] {
            if !(0.0..=1.0).contains(&p) {
                return Err(PyValueError::new_err(format!(
                    "{name}: a probability in [0, 1]; got {p}"
                )));
            }
        }
        Ok(Gen {
            holes: Some(holes),
            ..*self
        })
    }

    /// The resolved `holes` (see [`Gen::of`]).
    fn holes(&self) -> f64 {
        self.holes.unwrap_or(0.0)
    }
}

/// The crate's conv layout enum's value for `conv_sd`.
fn conv_layout<L>(g: &Gen, sd: L, ds: L) -> L {
    if g.conv_sd { sd } else { ds }
}

/// The kernel's configuration for a generated case.
fn config<F: Generated>(engine: &Engine<F>, args: &F::Args) -> PyResult<F::Config> {
    let k = &engine.kernel;
    k.config(&k.call_args(args)).map_err(PyValueError::new_err)
}

/// The case's arguments (see `case_list`) and, with `run`, what the
/// crate's run path writes on `device`.
fn case<'py, F: Generated>(
    py: Python<'py>,
    engine: &Engine<F>,
    g: &Gen,
    run: bool,
    device: &str,
) -> PyResult<(Bound<'py, PyList>, Option<Bound<'py, PyDict>>)> {
    let g = &g.of::<F>(engine.kernel.name())?;
    let args = engine.kernel.generate(g);
    let list = case_list(py, &engine.param_names(), |name| F::item(&args, name))?;
    if !run {
        return Ok((list, None));
    }
    let cfg = config(engine, &args)?;
    let actual = run_on::<F>(device, &cfg, &args)?;
    Ok((list, Some(actual_dict(py, &actual)?)))
}

/// `(passed, report)` of a result against the f64 reference of its case.
fn compare<F: Generated>(
    engine: &Engine<F>,
    g: &Gen,
    written: [&[u8]; 3],
) -> PyResult<(bool, String)> {
    let g = &g.of::<F>(engine.kernel.name())?;
    let args = engine.kernel.generate(g);
    let cfg = config(engine, &args)?;
    let expected = F::reference(&cfg, &args)
        .map_err(|e| PyValueError::new_err(format!("the case is not a valid launch: {e}")))?;
    let named = args.named_tensors();
    let counts = args.written().map(|i| named[i].1.numel());
    let [output, state, conv_state] = written;
    let actual = actual_from(output, state, conv_state, counts)?;
    let report = F::compare(&cfg, &args, &actual, &expected);
    Ok((report.passed(), report.to_string()))
}

/// `$body` with `$engine` the engine of `$k`, whichever class it is.
macro_rules! with_engine {
    ($k:expr, |$engine:ident| $body:expr) => {
        if let Ok(c) = $k.cast::<KdaSplit>() {
            let $engine = c.get().engine();
            $body
        } else if let Ok(c) = $k.cast::<GdnDecode>() {
            let $engine = c.get().engine();
            $body
        } else if let Ok(c) = $k.cast::<Mamba2Decode>() {
            let $engine = c.get().engine();
            $body
        } else {
            Err(PyTypeError::new_err(
                "k: a KdaSplit, GdnDecode or Mamba2Decode",
            ))
        }
    };
}

/// A generated case for `k`'s configuration: `(arguments, rust)`, the
/// arguments in positional order as `(name, "tensor", {dtype, shape,
/// strides, storage})` or `(name, "scalar", value)`, and what the crate's
/// run path (`kda_split::run`, `gdn_decode::run::run_with` with `k`'s
/// lanes, `mamba2_decode::run::run`) writes (row-major bytes) on the
/// simulator or, with `device="cuda"`, on GPU 0 (uploaded copies), or
/// `None` with `run=False`. The generator's options (keywords, see
/// [`Gen::from_options`]): `seed=0`, `padding=0.25`, `holes=0.25`
/// (KdaSplit, GdnDecode), `conv_sd=False`, `weights_f32=False`,
/// `extra=False` (GdnDecode: a spare conv and slot column, Mamba2Decode: a
/// spare conv column).
#[pyfunction]
#[pyo3(signature = (k, requests, run = true, device = "sim", **options))]
fn _case<'py>(
    k: &Bound<'py, PyAny>,
    requests: usize,
    run: bool,
    device: &str,
    options: Option<&Bound<'py, PyDict>>,
) -> PyResult<(Bound<'py, PyList>, Option<Bound<'py, PyDict>>)> {
    let g = Gen::from_options(requests, options)?;
    with_engine!(k, |e| case(k.py(), e, &g, run, device))
}

/// Compare a result (row-major bytes of output, state, conv_state) of the
/// case `_case(k, requests, **options)` with the float64 reference and the
/// crate's tolerances: `(passed, report)`.
#[pyfunction]
#[pyo3(signature = (k, requests, output, state, conv_state, **options))]
fn _compare(
    k: &Bound<'_, PyAny>,
    requests: usize,
    output: &[u8],
    state: &[u8],
    conv_state: &[u8],
    options: Option<&Bound<'_, PyDict>>,
) -> PyResult<(bool, String)> {
    let g = Gen::from_options(requests, options)?;
    with_engine!(k, |e| compare(e, &g, [output, state, conv_state]))
}

/// Kernels built and loaded in this process so far, by every instance.
#[pyfunction]
fn _compilations() -> usize {
    kda_bind::compiled()
}

fn storage(t: &HostTensor) -> Vec<u8> {
    match t.data() {
        HostData::Bf16(v) => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
        HostData::F32(v) => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
        HostData::I32(v) => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
    }
}

/// One positional argument of a generated case.
enum Item<'a> {
    Tensor(&'a HostTensor),
    Scalar(f32),
}

/// The arguments in positional order as `(name, "tensor", {dtype, shape,
/// strides, storage})` or `(name, "scalar", value)`; `item` gives each
/// parameter's value by name.
fn case_list<'py, 'a>(
    py: Python<'py>,
    params: &[&'static str],
    item: impl Fn(&str) -> Option<Item<'a>>,
) -> PyResult<Bound<'py, PyList>> {
    let list = PyList::empty(py);
    for &name in params {
        match item(name) {
            Some(Item::Scalar(v)) => list.append((name, "scalar", v))?,
            Some(Item::Tensor(t)) => {
                let d = PyDict::new(py);
                d.set_item("dtype", t.dtype().name())?;
                d.set_item("shape", t.shape().to_vec())?;
                d.set_item("strides", t.strides().to_vec())?;
                d.set_item("storage", PyBytes::new(py, &storage(t)))?;
                list.append((name, "tensor", d))?;
            }
            None => return Err(PyRuntimeError::new_err(format!("{name} missing"))),
        }
    }
    Ok(list)
}

fn bf16_bytes(v: &[bf16]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

/// What a run wrote, as row-major bytes under `output`, `state`, `conv_state`.
fn actual_dict<'py>(py: Python<'py>, a: &Actual) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("output", PyBytes::new(py, &bf16_bytes(&a.output)))?;
    let state: Vec<u8> = a.state.iter().flat_map(|x| x.to_le_bytes()).collect();
    d.set_item("state", PyBytes::new(py, &state))?;
    d.set_item("conv_state", PyBytes::new(py, &bf16_bytes(&a.conv_state)))?;
    Ok(d)
}

/// A result given as row-major bytes, checked against the element counts
/// `[output, state, conv_state]` of its case.
fn actual_from(
    output: &[u8],
    state: &[u8],
    conv_state: &[u8],
    counts: [usize; 3],
) -> PyResult<Actual> {
    let bf = |b: &[u8]| {
        b.chunks_exact(2)
            .map(|c| bf16::from_le_bytes([c[0], c[1]]))
            .collect::<Vec<_>>()
    };
    let actual = Actual {
        output: bf(output),
        output_f32: None,
        state: state
            .chunks_exact(4)
            .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
            .collect(),
        conv_state: bf(conv_state),
    };
    let got = [
        actual.output.len(),
        actual.state.len(),
        actual.conv_state.len(),
    ];
    if got != counts {
        return Err(PyValueError::new_err(format!(
            "expected {counts:?} elements of output, state, conv_state; got {got:?}"
        )));
    }
    Ok(actual)
}

/// The crate's run on the simulator (`device="sim"`) or on GPU 0
/// (`"cuda"`, uploaded copies).
fn run_on<F: Generated>(device: &str, cfg: &F::Config, args: &F::Args) -> PyResult<Actual> {
    match device {
        "sim" => F::run(&SimDevice::new(), cfg, args),
        "cuda" => {
            let g = kda_bind::gpu::gpu(0).map_err(|e| PyRuntimeError::new_err(e.to_string()))?;
            F::run(&g.dev, cfg, args)
        }
        other => {
            return Err(PyValueError::new_err(format!(
                "device: \"sim\" or \"cuda\"; got {other:?}"
            )));
        }
    }
    .map_err(PyRuntimeError::new_err)
}

/// The spec's tolerances: relative Frobenius errors allowed for the bf16
/// output and the f32 state.
#[pyfunction]
fn _tolerances() -> (f64, f64) {
    (kda_host::OUTPUT_LIMIT, kda_host::STATE_LIMIT)
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(_case, m)?)?;
    m.add_function(wrap_pyfunction!(_compare, m)?)?;
    m.add_function(wrap_pyfunction!(_compilations, m)?)?;
    m.add_function(wrap_pyfunction!(_tolerances, m)?)?;
    Ok(())
}
