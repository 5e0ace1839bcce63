//! `kda.KdaSplit`.

use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyTuple};

use super::{call, info_of, params_of, ptx_of, py_bool};
use crate::engine::{Engine, Family};
use crate::families::kda::{Kda, ScheduleChoice};

/// KdaSplit, the fused KDA decode / spec-verify step (spec `KDA.md`).
#[pyclass(name = "KdaSplit", module = "kda._kda", frozen)]
pub struct KdaSplit {
    engine: Engine<Kda>,
}

fn schedule_choice(schedule: &Bound<'_, PyAny>) -> PyResult<ScheduleChoice> {
    if let Ok(s) = schedule.extract::<String>() {
        return if s == "auto" {
            Ok(ScheduleChoice::Auto)
        } else {
            Err(PyValueError::new_err(format!(
                "schedule: expected \"auto\" or [early, lanes, occupancy[, cluster[, evict]]]; got {s:?}"
            )))
        };
    }
    schedule
        .extract::<Vec<u32>>()
        .map(ScheduleChoice::Explicit)
        .map_err(|_| {
            PyTypeError::new_err(
                "schedule: expected \"auto\" or a sequence of 3 to 5 non-negative ints",
            )
        })
}

#[pymethods]
impl KdaSplit {
    #[new]
    #[pyo3(signature = (heads, tokens = 1, gate_mode = 0, has_bias = true, schedule = None))]
    fn new(
        heads: u32,
        tokens: u32,
        gate_mode: u32,
        has_bias: bool,
        schedule: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Self> {
        let schedule = match schedule {
            None => ScheduleChoice::Auto,
            Some(s) => schedule_choice(s)?,
        };
        let family = Kda {
            heads,
            tokens,
            gate_mode,
            has_bias,
            schedule,
        };
        // Reject what no batch size makes valid now, not at the first call.
        if let (Err(e), Err(_)) = (family.config(1), family.config(64)) {
            return Err(PyValueError::new_err(e));
        }
        Ok(KdaSplit {
            engine: Engine::new(family),
        })
    }

    /// Launch in place on the positional arguments of spec §1.1.
    #[pyo3(signature = (*args, stream = None, check_slots = None))]
    fn __call__(
        &self,
        args: &Bound<'_, PyTuple>,
        stream: Option<&Bound<'_, PyAny>>,
        check_slots: Option<bool>,
    ) -> PyResult<()> {
        call(&self.engine, args, stream, check_slots)
    }

    /// The PTX of the kernel last launched, or (with `requests`) of the one
    /// for contiguous tensors of that many requests.
    #[pyo3(signature = (requests = None))]
    fn ptx(&self, requests: Option<u32>) -> PyResult<String> {
        ptx_of(&self.engine, requests)
    }

    /// Configuration and resource report (registers, shared memory, spills
    /// where known) of the same kernel as `ptx()`.
    #[pyo3(signature = (requests = None))]
    fn info<'py>(&self, py: Python<'py>, requests: Option<u32>) -> PyResult<Bound<'py, PyDict>> {
        info_of(py, &self.engine, requests)
    }

    #[getter]
    fn heads(&self) -> u32 {
        self.engine.family.heads
    }

    #[getter]
    fn tokens(&self) -> u32 {
        self.engine.family.tokens
    }

    /// The positional parameter names, in order.
    #[getter]
    fn params(&self) -> Vec<&'static str> {
        params_of(&self.engine)
    }

    fn __repr__(&self) -> String {
        let f = &self.engine.family;
        format!(
            "KdaSplit(heads={}, tokens={}, gate_mode={}, has_bias={}, schedule={})",
            f.heads,
            f.tokens,
            f.gate_mode,
            py_bool(f.has_bias),
            match &f.schedule {
                ScheduleChoice::Auto => "'auto'".to_string(),
                ScheduleChoice::Explicit(s) => format!("{s:?}"),
            }
        )
    }
}

impl KdaSplit {
    pub fn engine(&self) -> &Engine<Kda> {
        &self.engine
    }
}
