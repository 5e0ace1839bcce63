//! Test-only functions (underscore names, not part of the API): a case of
//! the crate's seeded generator as raw storage the Python tests turn into
//! arrays, the result of the Rust run path on it, and the comparison of a
//! result with the float64 reference. They let the pytest suite check the
//! bindings' in-place path against the crate's own path bit for bit.

use half::bf16;
use kda_host::{Actual, HostData, HostTensor};
use kda_runtime::SimDevice;
use kda_split::{ConvLayout, GenOptions, KdaArgs, RawGateOrder};
use pyo3::exceptions::{PyRuntimeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyList};

use crate::classes::KdaSplit;
use crate::engine::Family;

fn storage(t: &HostTensor) -> Vec<u8> {
    match t.data() {
        HostData::Bf16(v) => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
        HostData::F32(v) => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
        HostData::I32(v) => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
    }
}

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

fn case_list<'py>(py: Python<'py>, k: &KdaSplit, args: &KdaArgs) -> PyResult<Bound<'py, PyList>> {
    let list = PyList::empty(py);
    for (name, is_scalar) in k.engine().family.params() {
        let arg = kda_split::Arg::from_name(name)
            .ok_or_else(|| PyRuntimeError::new_err(format!("unknown argument {name}")))?;
        if is_scalar {
            list.append((name, "scalar", args.scalar(arg).unwrap_or(0.0)))?;
            continue;
        }
        let t = args
            .tensor(arg)
            .ok_or_else(|| PyRuntimeError::new_err(format!("{name} missing")))?;
        let d = PyDict::new(py);
        d.set_item("dtype", t.dtype().name())?;
        d.set_item("shape", t.shape().to_vec())?;
        d.set_item("strides", t.strides().to_vec())?;
        d.set_item("storage", PyBytes::new(py, &storage(t)))?;
        list.append((name, "tensor", d))?;
    }
    Ok(list)
}

fn actual_dict<'py>(py: Python<'py>, a: &Actual) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    let bf = |v: &[bf16]| v.iter().flat_map(|x| x.to_le_bytes()).collect::<Vec<u8>>();
    d.set_item("output", PyBytes::new(py, &bf(&a.output)))?;
    d.set_item(
        "state",
        PyBytes::new(
            py,
            &a.state
                .iter()
                .flat_map(|x| x.to_le_bytes())
                .collect::<Vec<u8>>(),
        ),
    )?;
    d.set_item("conv_state", PyBytes::new(py, &bf(&a.conv_state)))?;
    Ok(d)
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
    let list = case_list(py, k, &args)?;
    if !run {
        return Ok((list, None));
    }
    let cfg = k
        .engine()
        .family
        .config(requests.max(1) as u32)
        .map_err(PyValueError::new_err)?;
    let failed = |e: kda_split::run::RunError| PyRuntimeError::new_err(e.to_string());
    let actual = match device {
        "sim" => kda_split::run::run(&SimDevice::new(), &cfg, &args).map_err(failed)?,
        "cuda" => {
            let g = crate::gpu::gpu(0).map_err(|e| PyRuntimeError::new_err(e.to_string()))?;
            kda_split::run::run(&g.dev, &cfg, &args).map_err(failed)?
        }
        other => {
            return Err(PyValueError::new_err(format!(
                "device: \"sim\" or \"cuda\"; got {other:?}"
            )));
        }
    };
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
    let n = [
        args.output.numel(),
        args.state.numel(),
        args.conv_state.numel(),
    ];
    if [
        actual.output.len(),
        actual.state.len(),
        actual.conv_state.len(),
    ] != n
    {
        return Err(PyValueError::new_err(format!(
            "expected {n:?} elements of output, state, conv_state"
        )));
    }
    let report = kda_split::compare(&cfg, &args, &actual, &expected);
    Ok((report.passed(), report.to_string()))
}

/// The spec's tolerances: relative Frobenius errors allowed for the bf16
/// output and the f32 state.
#[pyfunction]
fn _tolerances() -> (f64, f64) {
    (kda_host::OUTPUT_LIMIT, kda_host::STATE_LIMIT)
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(_kda_case, m)?)?;
    m.add_function(wrap_pyfunction!(_kda_compare, m)?)?;
    m.add_function(wrap_pyfunction!(_tolerances, m)?)?;
    Ok(())
}
