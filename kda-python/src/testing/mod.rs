//! Test-only functions (underscore names, not part of the API), one set per
//! kernel family: a case of the crate's seeded generator as raw storage the
//! Python tests turn into arrays, the result of the crate's Rust run path
//! on it, and the comparison of a result with the float64 reference. They
//! let the pytest suite check the bindings' in-place path against the
//! crate's own path bit for bit.

mod gdn;
mod kda;
mod mamba2;

use half::bf16;
use kda_host::{Actual, HostData, HostTensor};
use kda_runtime::{CudaDevice, SimDevice};
use pyo3::exceptions::{PyRuntimeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyList};

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
    params: &[(&'static str, bool)],
    item: impl Fn(&str) -> Option<Item<'a>>,
) -> PyResult<Bound<'py, PyList>> {
    let list = PyList::empty(py);
    for &(name, _) in params {
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
fn run_on<E: std::fmt::Display>(
    device: &str,
    sim: impl FnOnce(&SimDevice) -> Result<Actual, E>,
    cuda: impl FnOnce(&CudaDevice) -> Result<Actual, E>,
) -> PyResult<Actual> {
    let failed = |e: E| PyRuntimeError::new_err(e.to_string());
    match device {
        "sim" => sim(&SimDevice::new()).map_err(failed),
        "cuda" => {
            let g = crate::gpu::gpu(0).map_err(|e| PyRuntimeError::new_err(e.to_string()))?;
            cuda(&g.dev).map_err(failed)
        }
        other => Err(PyValueError::new_err(format!(
            "device: \"sim\" or \"cuda\"; got {other:?}"
        ))),
    }
}

/// The spec's tolerances: relative Frobenius errors allowed for the bf16
/// output and the f32 state.
#[pyfunction]
fn _tolerances() -> (f64, f64) {
    (kda_host::OUTPUT_LIMIT, kda_host::STATE_LIMIT)
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    kda::register(m)?;
    gdn::register(m)?;
    mamba2::register(m)?;
    m.add_function(wrap_pyfunction!(_tolerances, m)?)?;
    Ok(())
}
