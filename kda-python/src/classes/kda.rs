//! `kda.KdaSplit`.

use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;

use super::py_bool;
use crate::engine::{Engine, Family};
use crate::families::kda::{Kda, ScheduleChoice};

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

family_class! {
    /// KdaSplit, the fused KDA decode / spec-verify step (spec `KDA.md`).
    KdaSplit(Kda),
    call_doc = "Launch in place on the positional arguments of spec §1.1.",
    ptx_doc = "The PTX of the kernel last launched, or (with `requests`) of the one\n\
        for contiguous tensors of that many requests.",
    {
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

        #[getter]
        fn heads(&self) -> u32 {
            self.engine.family.heads
        }

        #[getter]
        fn tokens(&self) -> u32 {
            self.engine.family.tokens
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
}
