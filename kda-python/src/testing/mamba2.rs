//! Mamba2Decode's test-only functions: `_mamba2_case`, `_mamba2_compare`.

use mamba2_decode::{Arg, ConvLayout, GenOptions, Mamba2Args};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};

use super::{Item, actual_dict, actual_from, case_list, run_on};
use crate::classes::Mamba2Decode;

/// The crate's generated launch; `extra` adds a spare conv column.
fn generate(
    k: &Mamba2Decode,
    requests: usize,
    seed: u64,
    padding: f64,
    conv_sd: bool,
    weights_f32: bool,
    extra: bool,
) -> PyResult<Mamba2Args> {
    if !(0.0..=1.0).contains(&padding) {
        return Err(PyValueError::new_err(format!(
            "padding: a probability in [0, 1]; got {padding}"
        )));
    }
    let options = GenOptions::new(requests)
        .seed(seed)
        .padding(padding)
        .conv_layout(if conv_sd {
            ConvLayout::Sd
        } else {
            ConvLayout::Ds
        })
        .weights_f32(weights_f32)
        .conv_extra(extra as usize);
    Ok(mamba2_decode::generate(&k.engine().family.cfg, &options))
}

/// A generated Mamba-2 case for `k`'s configuration: `(arguments, rust)` as
/// `_kda_case` gives them, `rust` from `mamba2_decode::run::run` on the
/// simulator or GPU 0, or `None` with `run=False`.
#[pyfunction]
#[pyo3(signature = (k, requests, seed = 0, padding = 0.25, conv_sd = false, weights_f32 = false, extra = false, run = true, device = "sim"))]
fn _mamba2_case<'py>(
    py: Python<'py>,
    k: &Mamba2Decode,
    requests: usize,
    seed: u64,
    padding: f64,
    conv_sd: bool,
    weights_f32: bool,
    extra: bool,
    run: bool,
    device: &str,
) -> PyResult<(Bound<'py, PyList>, Option<Bound<'py, PyDict>>)> {
    let args = generate(k, requests, seed, padding, conv_sd, weights_f32, extra)?;
    let params: Vec<_> = Arg::for_config(&k.engine().family.cfg)
        .iter()
        .map(|a| (a.name(), false))
        .collect();
    let list = case_list(py, &params, |name| {
        args.tensor(Arg::from_name(name)?).map(Item::Tensor)
    })?;
    if !run {
        return Ok((list, None));
    }
    let cfg = k.engine().family.cfg;
    let actual = run_on(
        device,
        |d| mamba2_decode::run::run(d, &cfg, &args),
        |d| mamba2_decode::run::run(d, &cfg, &args),
    )?;
    Ok((list, Some(actual_dict(py, &actual)?)))
}

/// Compare a result (row-major bytes of output, state, conv_state) of the
/// case `_mamba2_case(k, requests, seed, ...)` with the float64 reference
/// and the crate's tolerances: `(passed, report)`.
#[pyfunction]
#[pyo3(signature = (k, requests, output, state, conv_state, seed = 0, padding = 0.25, conv_sd = false, weights_f32 = false, extra = false))]
fn _mamba2_compare(
    k: &Mamba2Decode,
    requests: usize,
    output: &[u8],
    state: &[u8],
    conv_state: &[u8],
    seed: u64,
    padding: f64,
    conv_sd: bool,
    weights_f32: bool,
    extra: bool,
) -> PyResult<(bool, String)> {
    let args = generate(k, requests, seed, padding, conv_sd, weights_f32, extra)?;
    let cfg = k.engine().family.cfg;
    let expected = mamba2_decode::reference(&cfg, &args)
        .map_err(|e| PyValueError::new_err(format!("the case is not a valid launch: {e:?}")))?;
    let counts = [
        args.output.numel(),
        args.state.numel(),
        args.conv_state.numel(),
    ];
    let actual = actual_from(output, state, conv_state, counts)?;
    let report = mamba2_decode::compare(&cfg, &args, &actual, &expected);
    Ok((report.passed(), report.to_string()))
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(_mamba2_case, m)?)?;
    m.add_function(wrap_pyfunction!(_mamba2_compare, m)?)?;
    Ok(())
}
