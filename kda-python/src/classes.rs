//! The Python classes: a constructor mirroring the kernel's configuration,
//! `__call__` (launch in place), `ptx()`, `info()`.

use kda_ir::pipeline::{self, Options};
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyTuple};

use crate::engine::{Engine, Family};
use crate::families::kda::{Kda, ScheduleChoice};

/// The stream handle of `stream` (None: the current stream of the array
/// library, see `kda/_stream.py`) for device `ordinal`.
fn resolve_stream(
    py: Python<'_>,
    stream: Option<&Bound<'_, PyAny>>,
    ordinal: usize,
) -> PyResult<u64> {
    let helpers = py.import("kda._stream")?;
    let handle = match stream {
        None => helpers.call_method1("current", (ordinal,))?,
        Some(s) => helpers.call_method1("handle", (s,))?,
    };
    handle.extract()
}

/// `.ptx()` and `.info()` of a family: the kernel last launched, or the
/// contiguous one of `requests` requests.
fn kernel_of<F: Family>(engine: &Engine<F>, requests: Option<u32>) -> PyResult<kda_ir::Kernel> {
    match (requests, engine.last()) {
        (None, Some(entry)) => Ok(entry.kernel.clone()),
        (requests, _) => {
            let cfg = engine
                .family
                .config(requests.unwrap_or(1))
                .map_err(PyValueError::new_err)?;
            F::contiguous_kernel(&cfg).map_err(PyValueError::new_err)
        }
    }
}

fn ptx_of<F: Family>(engine: &Engine<F>, requests: Option<u32>) -> PyResult<String> {
    let kernel = kernel_of(engine, requests)?;
    pipeline::compile(&kernel, &Options::default())
        .map(|c| c.ptx)
        .map_err(|e| PyValueError::new_err(format!("compiling: {e}")))
}

fn info_of<'py, F: Family>(
    py: Python<'py>,
    engine: &Engine<F>,
    requests: Option<u32>,
) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    let launched = requests.is_none() && engine.last().is_some();
    let cfg = engine
        .family
        .config(requests.unwrap_or(1))
        .map_err(PyValueError::new_err)?;
    let kernel = kernel_of(engine, requests)?;
    let compiled = pipeline::compile(&kernel, &Options::default())
        .map_err(|e| PyValueError::new_err(format!("compiling: {e}")))?;
    d.set_item("kernel", kernel.name.clone())?;
    d.set_item(
        "source",
        if launched {
            "last launch"
        } else {
            "contiguous tensors"
        },
    )?;
    if !launched {
        for (k, v) in F::describe(&cfg) {
            d.set_item(k, v)?;
        }
    }
    d.set_item("block", kernel.launch.block)?;
    d.set_item("cluster_dim", kernel.launch.cluster)?;
    d.set_item("ptx_lines", compiled.ptx.lines().count())?;
    d.set_item("dynamic_shared_bytes", compiled.layout.bytes)?;
    d.set_item("cached_kernels", engine.cached())?;
    // The driver's figures once loaded on a GPU; ptxas's where it is installed.
    if let Some(r) = engine
        .last()
        .and_then(|e| e.resources())
        .filter(|_| launched)
    {
        d.set_item("registers", r.registers)?;
        d.set_item("static_shared_bytes", r.static_smem_bytes)?;
        d.set_item("local_bytes", r.local_bytes)?;
        d.set_item("resources_from", "driver")?;
    } else if kda_ir::ptxas::find().is_some() {
        match kda_ir::ptxas::assemble(&compiled.ptx) {
            Ok(r) => {
                d.set_item("registers", r.registers)?;
                d.set_item("spill_stores", r.spill_stores)?;
                d.set_item("spill_loads", r.spill_loads)?;
                d.set_item("stack_frame", r.stack_frame)?;
                d.set_item("static_shared_bytes", r.shared_bytes)?;
                d.set_item("resources_from", "ptxas")?;
            }
            Err(e) => d.set_item("ptxas_error", e.to_string())?,
        }
    } else {
        d.set_item(
            "resources_from",
            "none (no GPU launch yet and no ptxas on PATH or in .tools/)",
        )?;
    }
    Ok(d)
}

fn call<F: Family>(
    engine: &Engine<F>,
    args: &Bound<'_, PyTuple>,
    stream: Option<&Bound<'_, PyAny>>,
    check_slots: Option<bool>,
) -> PyResult<()> {
    let py = args.py();
    let items: Vec<Bound<'_, PyAny>> = args.iter().collect();
    engine.call(
        &items,
        |ordinal| resolve_stream(py, stream, ordinal),
        check_slots,
    )
}

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
        self.engine
            .family
            .params()
            .into_iter()
            .map(|(n, _)| n)
            .collect()
    }

    fn __repr__(&self) -> String {
        let f = &self.engine.family;
        format!(
            "KdaSplit(heads={}, tokens={}, gate_mode={}, has_bias={}, schedule={})",
            f.heads,
            f.tokens,
            f.gate_mode,
            if f.has_bias { "True" } else { "False" },
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

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<KdaSplit>()?;
    Ok(())
}
