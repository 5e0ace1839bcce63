//! `kda.GdnDecode`.

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyTuple};

use super::{call, info_of, params_of, ptx_of, py_bool};
use crate::engine::Engine;
use crate::families::gdn::Gdn;

/// The gated delta net (Qwen3-Next GDN) decode / spec-verify step (crate
/// `gdn_decode`).
#[pyclass(name = "GdnDecode", module = "kda._kda", frozen)]
pub struct GdnDecode {
    engine: Engine<Gdn>,
}

#[pymethods]
impl GdnDecode {
    #[new]
    #[pyo3(signature = (num_k_heads, num_v_heads, tokens = 1, has_bias = false, lanes = 16))]
    fn new(
        num_k_heads: u32,
        num_v_heads: u32,
        tokens: u32,
        has_bias: bool,
        lanes: u32,
    ) -> PyResult<Self> {
        let family = Gdn::new(num_k_heads, num_v_heads, tokens, has_bias, lanes)
            .map_err(PyValueError::new_err)?;
        Ok(GdnDecode {
            engine: Engine::new(family),
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
    fn num_k_heads(&self) -> u32 {
        self.engine.family.launch.cfg.num_k_heads
    }

    #[getter]
    fn num_v_heads(&self) -> u32 {
        self.engine.family.launch.cfg.num_v_heads
    }

    #[getter]
    fn tokens(&self) -> u32 {
        self.engine.family.launch.cfg.tokens
    }

    /// The positional parameter names, in order.
    #[getter]
    fn params(&self) -> Vec<&'static str> {
        params_of(&self.engine)
    }

    fn __repr__(&self) -> String {
        let l = &self.engine.family.launch;
        format!(
            "GdnDecode(num_k_heads={}, num_v_heads={}, tokens={}, has_bias={}, lanes={})",
            l.cfg.num_k_heads,
            l.cfg.num_v_heads,
            l.cfg.tokens,
            py_bool(l.cfg.has_bias),
            l.schedule.lanes
        )
    }
}

impl GdnDecode {
    pub fn engine(&self) -> &Engine<Gdn> {
        &self.engine
    }
}
