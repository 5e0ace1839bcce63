//! GdnDecode's test-only functions: `_gdn_case`, `_gdn_compare`.

use gdn_decode::{Arg, ConvLayout, GdnArgs, GenOptions};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};

use super::{Item, actual_dict, actual_from, case_list, run_on};
use crate::classes::GdnDecode;
use crate::engine::Family;

/// The crate's generated launch; `variant` adds what the crate's test
/// matrix varies besides the config: a spare conv column and slot column.
fn generate(
    k: &GdnDecode,
    requests: usize,
    seed: u64,
    padding: f64,
    holes: f64,
    conv_sd: bool,
    weights_f32: bool,
    extra: bool,
) -> PyResult<GdnArgs> {
    for (name, p) in [("padding", padding), ("holes", holes)] {
        if !(0.0..=1.0).contains(&p) {
            return Err(PyValueError::new_err(format!(
                "{name}: a probability in [0, 1]; got {p}"
            )));
        }
    }
    let options = GenOptions::new(requests)
        .seed(seed)
        .padding(padding)
        .holes(holes)
        .conv_layout(if conv_sd {
            ConvLayout::Sd
        } else {
            ConvLayout::Ds
        })
        .weights_f32(weights_f32)
        .conv_extra(extra as usize)
        .slot_extra(extra as usize);
    Ok(gdn_decode::generate(
        &k.engine().family.launch.cfg,
        &options,
    ))
}

/// A generated GDN case for `k`'s configuration: `(arguments, rust)` as
/// `_kda_case` gives them, `rust` from `gdn_decode::run::run_with` (with
/// `k`'s lanes) on the simulator or GPU 0, or `None` with `run=False`.
#[pyfunction]
#[pyo3(signature = (k, requests, seed = 0, padding = 0.25, holes = 0.25, conv_sd = false, weights_f32 = false, extra = false, run = true, device = "sim"))]
fn _gdn_case<'py>(
    py: Python<'py>,
    k: &GdnDecode,
    requests: usize,
    seed: u64,
    padding: f64,
    holes: f64,
    conv_sd: bool,
    weights_f32: bool,
    extra: bool,
    run: bool,
    device: &str,
) -> PyResult<(Bound<'py, PyList>, Option<Bound<'py, PyDict>>)> {
    let args = generate(
        k,
        requests,
        seed,
        padding,
        holes,
        conv_sd,
        weights_f32,
        extra,
    )?;
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
    let l = k.engine().family.launch;
    let actual = run_on(
        device,
        |d| gdn_decode::run::run_with(d, &l.cfg, &args, &l.schedule),
        |d| gdn_decode::run::run_with(d, &l.cfg, &args, &l.schedule),
    )?;
    Ok((list, Some(actual_dict(py, &actual)?)))
}

/// Compare a result (row-major bytes of output, state, conv_state) of the
/// case `_gdn_case(k, requests, seed, ...)` with the float64 reference and
/// the crate's tolerances: `(passed, report)`.
#[pyfunction]
#[pyo3(signature = (k, requests, output, state, conv_state, seed = 0, padding = 0.25, holes = 0.25, conv_sd = false, weights_f32 = false, extra = false))]
fn _gdn_compare(
    k: &GdnDecode,
    requests: usize,
    output: &[u8],
    state: &[u8],
    conv_state: &[u8],
    seed: u64,
    padding: f64,
    holes: f64,
    conv_sd: bool,
    weights_f32: bool,
    extra: bool,
) -> PyResult<(bool, String)> {
    let args = generate(
        k,
        requests,
        seed,
        padding,
        holes,
        conv_sd,
        weights_f32,
        extra,
    )?;
    let cfg = k
        .engine()
        .family
        .config(1)
        .map_err(PyValueError::new_err)?
        .cfg;
    let expected = gdn_decode::reference(&cfg, &args)
        .map_err(|e| PyValueError::new_err(format!("the case is not a valid launch: {e:?}")))?;
    let counts = [
        args.output.numel(),
        args.state.numel(),
        args.conv_state.numel(),
    ];
    let actual = actual_from(output, state, conv_state, counts)?;
    let report = gdn_decode::compare(&cfg, &args, &actual, &expected);
    Ok((report.passed(), report.to_string()))
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(_gdn_case, m)?)?;
    m.add_function(wrap_pyfunction!(_gdn_compare, m)?)?;
    Ok(())
}
