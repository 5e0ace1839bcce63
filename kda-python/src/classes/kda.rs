//! `kda.KdaSplit`.

use kda_bind::pyo3::exceptions::{PyTypeError, PyValueError};
use kda_bind::pyo3::prelude::*;
use kda_split::{KdaSplitKernel, ScheduleChoice};

use super::py_bool;

fn schedule_choice(schedule: &Bound<'_, PyAny>) -> PyResult<ScheduleChoice> {
    if let Ok(s) = schedule.extract::<String>() {
        return if s == "auto" {
            Ok(ScheduleChoice::Auto)
        } else {
            Err(PyValueError::new_err(format!(
                "schedule: expected \"auto\" or [early, lanes, occupancy[, cluster[, evict[, bulk_store[, balance]]]]]; got {s:?}"
            )))
        };
    }
    schedule
        .extract::<Vec<u32>>()
        .map(ScheduleChoice::Explicit)
        .map_err(|_| {
            PyTypeError::new_err(
                "schedule: expected \"auto\" or a sequence of 3 to 7 non-negative ints",
            )
        })
}

kda_bind::expose! {
    /// KdaSplit, the fused Kimi Delta Attention decode / spec-verify step
    /// (spec `KDA.md`): launch in place on the positional arguments of spec
    /// §1.1.
    KdaSplit(KdaSplitKernel), size = requests, check = check_slots, module = "kda._kda", {
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
            Self::wrap(KdaSplitKernel::new(heads, tokens, gate_mode, has_bias, schedule))
        }

        #[getter]
        fn heads(&self) -> u32 {
            self.engine.kernel.heads()
        }

        #[getter]
        fn tokens(&self) -> u32 {
            self.engine.kernel.tokens()
        }

        fn __repr__(&self) -> String {
            let k = &self.engine.kernel;
            format!(
                "KdaSplit(heads={}, tokens={}, gate_mode={}, has_bias={}, schedule={})",
                k.heads(),
                k.tokens(),
                k.gate_mode(),
                py_bool(k.has_bias()),
                match k.schedule() {
                    ScheduleChoice::Auto => "'auto'".to_string(),
                    ScheduleChoice::Explicit(s) => format!("{s:?}"),
                }
            )
        }
    }
}
