//! `kda.Mamba2Decode`.

use mamba2_decode::Mamba2Config;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyTuple};

use super::{call, info_of, params_of, ptx_of, py_bool};
use crate::engine::Engine;
use crate::families::mamba2::Mamba2;

/// The Mamba-2 decode step (crate `mamba2_decode`).
#[pyclass(name = "Mamba2Decode", module = "kda._kda", frozen)]
pub struct Mamba2Decode {
    engine: Engine<Mamba2>,
}

#[pymethods]
impl Mamba2Decode {
    #[new]
    #[pyo3(signature = (heads, n_groups = 1, head_dim = 64, d_state = 128, has_z = true, has_d = true, has_conv_bias = true))]
    fn new(
        heads: u32,
        n_groups: u32,
        head_dim: u32,
        d_state: u32,
        has_z: bool,
        has_d: bool,
        has_conv_bias: bool,
    ) -> PyResult<Self> {
        let cfg = Mamba2Config {
            heads,
            n_groups,
            head_dim,
            d_state,
            has_z,
            has_d,
            has_conv_bias,
        }
        .validated()
        .map_err(|e| PyValueError::new_err(format!("Mamba2Decode: {e}")))?;
        Ok(Mamba2Decode {
            engine: Engine::new(Mamba2 { cfg }),
        })
    }

    /// Launch in place on the positional arguments of the crate doc's §1.
    #[pyo3(signature = (*args, stream = None, check_slots = None))]
    fn __call__(
        &self,
        args: &Bound<'_, PyTuple>,
        stream: Option<&Bound<'_, PyAny>>,
        check_slots: Option<bool>,
    ) -> PyResult<()> {
        call(&self.engine, args, stream, check_slots)
    }

    /// The PTX of the kernel last launched, or (with `requests`, or before
    /// any launch) of the one for contiguous tensors. The kernel does not
    /// depend on the batch size.
    #[pyo3(signature = (requests = None))]
    fn ptx(&self, requests: Option<u32>) -> PyResult<String> {
        ptx_of(&self.engine, requests)
    }

    /// Configuration and resource report of the same kernel as `ptx()`.
    #[pyo3(signature = (requests = None))]
    fn info<'py>(&self, py: Python<'py>, requests: Option<u32>) -> PyResult<Bound<'py, PyDict>> {
        info_of(py, &self.engine, requests)
    }

    #[getter]
    fn heads(&self) -> u32 {
        self.engine.family.cfg.heads
    }

    #[getter]
    fn n_groups(&self) -> u32 {
        self.engine.family.cfg.n_groups
    }

    /// The positional parameter names, in order.
    #[getter]
    fn params(&self) -> Vec<&'static str> {
        params_of(&self.engine)
    }

    fn __repr__(&self) -> String {
        let c = &self.engine.family.cfg;
        format!(
            "Mamba2Decode(heads={}, n_groups={}, head_dim={}, d_state={}, has_z={}, has_d={}, has_conv_bias={})",
            c.heads,
            c.n_groups,
            c.head_dim,
            c.d_state,
            py_bool(c.has_z),
            py_bool(c.has_d),
            py_bool(c.has_conv_bias)
        )
    }
}

impl Mamba2Decode {
    pub fn engine(&self) -> &Engine<Mamba2> {
        &self.engine
    }
}
