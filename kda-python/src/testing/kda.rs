//! KdaSplit's test-only functions: `_kda_case`, `_kda_compare`.

use kda_split::{Arg, ConvLayout, GenOptions, RawGateOrder};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};

use super::{Item, actual_dict, actual_from, case_list, run_on};
use crate::classes::KdaSplit;
use crate::engine::Family;

fn options(
    k: &KdaSplit,
    requests: usize,
    seed: u64,
    padding: f64,
    holes: f64,
    conv_sd: bool,
    weights_f32: bool,
) -> GenOptions {
    let f = &k.engine().family;
    GenOptions::new(f.heads, requests, f.tokens)
        .seed(seed)
        .has_bias(f.has_bias)
        .padding(padding)
        .holes(holes)
        .conv_layout(if conv_sd {
            ConvLayout::Sd
        } else {
            ConvLayout::Ds
        })
        .weights_f32(weights_f32)
}

/// A generated KdaSplit case for `k`'s configuration: `(arguments, rust)`,
/// the arguments in positional order as `(name, "tensor", {dtype, shape,
/// strides, storage})` or `(name, "scalar", value)`, and what
/// `kda_split::run` writes (row-major bytes) on the simulator or, with
/// `device="cuda"`, on GPU 0 (uploaded copies), or `None` with `run=False`.
#[pyfunction]
#[pyo3(signature = (k, requests, seed = 0, padding = 0.25, holes = 0.25, conv_sd = false, weights_f32 = false, run = true, device = "sim"))]
fn _kda_case<'py>(
    py: Python<'py>,
    k: &KdaSplit,
    requests: usize,
    seed: u64,
    padding: f64,
    holes: f64,
    conv_sd: bool,
    weights_f32: bool,
    run: bool,
    device: &str,
) -> PyResult<(Bound<'py, PyList>, Option<Bound<'py, PyDict>>)> {
    let args = kda_split::generate(&options(
        k,
        requests,
        seed,
        padding,
        holes,
        conv_sd,
        weights_f32,
    ));
    let list = case_list(py, &k.engine().family.params(), |name| {
        let arg = Arg::from_name(name)?;
        match args.scalar(arg) {
            Some(v) => Some(Item::Scalar(v)),
            None => args.tensor(arg).map(Item::Tensor),
        }
    })?;
    if !run {
        return Ok((list, None));
    }
    let cfg = k
        .engine()
        .family
        .config(requests.max(1) as u32)
        .map_err(PyValueError::new_err)?;
    let actual = run_on(
        device,
        |d| kda_split::run::run(d, &cfg, &args),
        |d| kda_split::run::run(d, &cfg, &args),
    )?;
    Ok((list, Some(actual_dict(py, &actual)?)))
}

/// Compare a result (row-major bytes of output, state, conv_state) of the
/// case `_kda_case(k, requests, seed, ...)` with the float64 reference and
/// the spec's tolerances: `(passed, report)`.
#[pyfunction]
#[pyo3(signature = (k, requests, output, state, conv_state, seed = 0, padding = 0.25, holes = 0.25, conv_sd = false, weights_f32 = false))]
fn _kda_compare(
    k: &KdaSplit,
    requests: usize,
    output: &[u8],
    state: &[u8],
    conv_state: &[u8],
    seed: u64,
    padding: f64,
    holes: f64,
    conv_sd: bool,
    weights_f32: bool,
) -> PyResult<(bool, String)> {
    let args = kda_split::generate(&options(
        k,
        requests,
        seed,
        padding,
        holes,
        conv_sd,
        weights_f32,
    ));
    let cfg = k
        .engine()
        .family
        .config(requests.max(1) as u32)
        .map_err(PyValueError::new_err)?;
    let order = if cfg.gate_mode == kda_split::GateMode::Fma {
        RawGateOrder::Mode2
    } else {
        RawGateOrder::Exact
    };
    let expected = kda_split::reference(&cfg, &args, order)
        .map_err(|e| PyValueError::new_err(format!("the case is not a valid launch: {e:?}")))?;
    let counts = [
        args.output.numel(),
        args.state.numel(),
        args.conv_state.numel(),
    ];
    let actual = actual_from(output, state, conv_state, counts)?;
    let report = kda_split::compare(&cfg, &args, &actual, &expected);
    Ok((report.passed(), report.to_string()))
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(_kda_case, m)?)?;
    m.add_function(wrap_pyfunction!(_kda_compare, m)?)?;
    Ok(())
}
