//! Helpers for the tests of every kernel with these host tensors and cache
//! semantics (KdaSplit, GDN, Mamba-2): building tensors, relative closeness,
//! channel gathers, slot-footprint assertions, the ptxas spill check, and a
//! configuration matrix run once per device ([`run_matrix`]) whose verdicts
//! are collected in [`Verdicts`].

use std::fmt;

use half::bf16;
use kda_runtime::Device;

use crate::compare::{Actual, Report, rel_error, ulp_distance};
use crate::generator::OUTPUT_SENTINEL;
use crate::reference::Expected;
use crate::tensor::{DType, HostData, HostTensor};

/// Values rounded to bf16 (RNE).
pub fn bf16s(values: impl IntoIterator<Item = f64>) -> Vec<bf16> {
    values.into_iter().map(bf16::from_f64).collect()
}

/// A row-major tensor; panics if `data` does not fill `shape`.
pub fn tensor(data: impl Into<HostData>, shape: Vec<usize>) -> HostTensor {
    HostTensor::new(data, shape).unwrap_or_else(|e| panic!("{e}"))
}

/// `|a - b| <= rel · |b|` (with `|b|` at least 1e-30).
pub fn close(a: f64, b: f64, rel: f64) -> bool {
    (a - b).abs() <= rel * b.abs().max(1e-30)
}

/// `t` (bf16 or f32) with its dimension `dim` gathered through `map` (new
/// channel -> old channel), row-major.
pub fn gather_channels(t: &HostTensor, dim: usize, map: &[usize]) -> HostTensor {
    let t = t.to_contiguous();
    let shape = t.shape().to_vec();
    let (outer, old, inner) = (
        shape[..dim].iter().product::<usize>(),
        shape[dim],
        shape[dim + 1..].iter().product::<usize>(),
    );
    let values = t.values();
    let mut out = Vec::with_capacity(outer * map.len() * inner);
    for o in 0..outer {
        for &ch in map {
            let start = (o * old + ch) * inner;
            out.extend_from_slice(&values[start..start + inner]);
        }
    }
    let mut new_shape = shape;
    new_shape[dim] = map.len();
    match t.dtype() {
        DType::Bf16 => tensor(bf16s(out), new_shape),
        DType::F32 => tensor(out.iter().map(|&v| v as f32).collect::<Vec<_>>(), new_shape),
        DType::I32 => unreachable!("no channel dimension"),
    }
}

/// Asserts the rows of one request in `output`: all exactly zero for a
/// padding request, none left at [`OUTPUT_SENTINEL`] for an active one.
pub fn assert_request_rows(rows: &[bf16], padding: bool) {
    if padding {
        assert!(
            rows.iter().all(|v| v.to_bits() == 0),
            "padding rows not zero"
        );
    } else {
        assert!(
            rows.iter()
                .all(|v| v.to_f64() != f64::from(OUTPUT_SENTINEL)),
            "active rows not written"
        );
    }
}

/// Asserts that exactly the state slots marked in `state_written` (and, if
/// given, the conv slots marked in `conv_written`) differ in `expected` from
/// the launch's `state` and `conv_state` before the run.
pub fn assert_slots_written(
    expected: &Expected,
    state: &HostTensor,
    conv_state: &HostTensor,
    state_written: &[bool],
    conv_written: Option<&[bool]>,
) {
    let page = state.numel() / state.shape()[0];
    let before = state.values();
    for (slot, &written) in state_written.iter().enumerate() {
        let pages = slot * page..(slot + 1) * page;
        let same = expected.state[pages.clone()]
            .iter()
            .zip(&before[pages])
            .all(|(a, b)| f64::from(*a) == *b);
        assert_eq!(same, !written, "slot {slot}");
    }
    let Some(conv_written) = conv_written else {
        return;
    };
    let page = conv_state.numel() / conv_state.shape()[0];
    let before = conv_state.values();
    for (slot, &written) in conv_written.iter().enumerate() {
        let pages = slot * page..(slot + 1) * page;
        let same = expected.conv_state[pages.clone()]
            .iter()
            .zip(&before[pages])
            .all(|(a, b)| a.to_f64() == *b);
        assert_eq!(same, !written, "conv slot {slot}");
    }
}

/// Rows `rows` of a 2-D tensor, row-major, same dtype.
pub fn select_rows(t: &HostTensor, rows: &[usize]) -> HostTensor {
    let width = t.shape()[1];
    let values = t.to_contiguous().values();
    let picked = rows
        .iter()
        .flat_map(|&r| values[r * width..(r + 1) * width].iter().copied());
    let shape = vec![rows.len(), width];
    match t.dtype() {
        DType::Bf16 => tensor(bf16s(picked), shape),
        DType::F32 => tensor(picked.map(|v| v as f32).collect::<Vec<_>>(), shape),
        DType::I32 => tensor(picked.map(|v| v as i32).collect::<Vec<_>>(), shape),
    }
}

/// A bf16 conv buffer of `width` columns whose first columns are `base`'s
/// (the rest zero).
pub fn conv_width(base: &HostTensor, width: usize) -> HostTensor {
    let (slots, channels, old) = (base.shape()[0], base.shape()[1], base.shape()[2]);
    let values = base.to_contiguous().values();
    let mut out = vec![0.0; slots * channels * width];
    for i in 0..slots * channels {
        for j in 0..old.min(width) {
            out[i * width + j] = values[i * old + j];
        }
    }
    tensor(bf16s(out), vec![slots, channels, width])
}

/// [`rel_error`] of two f32 slices.
pub fn rel_error_f32(a: &[f32], b: &[f32]) -> f64 {
    let a: Vec<f64> = a.iter().map(|&v| f64::from(v)).collect();
    let b: Vec<f64> = b.iter().map(|&v| f64::from(v)).collect();
    rel_error(&a, &b)
}

/// Compiles `kernel` and assembles its PTX with `ptxas -arch=sm_90a`,
/// printing registers, spills, stack and shared memory after `label`; true
/// when nothing spills (with `KDA_SKIP_PTXAS` set: once it compiles).
pub fn assembles_without_spills(label: &str, kernel: &kda_ir::Kernel) -> bool {
    use kda_ir::pipeline::{Options, compile};
    use kda_ir::ptxas::{PtxasError, check_no_spills};
    let compiled = compile(kernel, &Options::default()).unwrap_or_else(|e| panic!("{label}: {e}"));
    match check_no_spills(&compiled.ptx) {
        Ok(None) => true,
        Ok(Some(report)) => {
            println!(
                "{label}: {} registers, 0 B spill stores, 0 B spill loads, {} B stack, {} B smem",
                report.registers, report.stack_frame, compiled.layout.bytes
            );
            true
        }
        Err(e @ PtxasError::Spills(_)) => {
            println!("{label} SPILLS: {e}");
            false
        }
        Err(e) => {
            panic!("{label}: {e}\n(run `bash scripts/provision-ptxas.sh` to install ptxas)")
        }
    }
}

/// Asserts what a kernel's `balance` schedule knob promises: the traced
/// `kernel` asks for the load-balancing cluster scheduling policy exactly
/// where `balance` is on and its clusters have more than one CTA (else the
/// default), it compiles through the whole pipeline (verifier included),
/// and its PTX names the policy exactly then.
pub fn assert_balance_policy(label: &str, kernel: &kda_ir::Kernel, balance: bool) {
    use kda_ir::ClusterPolicy;
    use kda_ir::pipeline::{Options, compile};
    let want = ClusterPolicy::load_balancing_if(balance, kernel.launch.cluster);
    assert_eq!(
        want == ClusterPolicy::LoadBalancing,
        balance && kernel.launch.cluster > 1,
        "{label}"
    );
    assert_eq!(kernel.launch.cluster_policy, want, "{label}");
    let ptx = compile(kernel, &Options::default())
        .unwrap_or_else(|e| panic!("{label}: {e}"))
        .ptx;
    assert_eq!(
        ptx.contains("// cluster scheduling policy: balance"),
        want == ClusterPolicy::LoadBalancing,
        "{label}"
    );
}

/// How two runs of one launch agree (a GPU run and the simulator's).
#[derive(Clone, Debug, PartialEq)]
pub struct Agreement {
    /// Output elements that differ.
    pub outputs_differing: usize,
    /// Largest output difference in bf16 ulps.
    pub max_ulp: u32,
    /// Largest `|a - b|` over the state.
    pub state_max_diff: f32,
    /// The conv states are bit-identical.
    pub conv_identical: bool,
}

impl Agreement {
    /// How `a` and `b` agree.
    pub fn of(a: &Actual, b: &Actual) -> Agreement {
        let outputs = a.output.iter().zip(&b.output);
        Agreement {
            outputs_differing: outputs.clone().filter(|(x, y)| x != y).count(),
            max_ulp: outputs
                .map(|(x, y)| ulp_distance(*x, *y))
                .max()
                .unwrap_or(0),
            state_max_diff: a
                .state
                .iter()
                .zip(&b.state)
                .map(|(x, y)| (x - y).abs())
                .fold(0f32, f32::max),
            conv_identical: a.conv_state == b.conv_state,
        }
    }
}

impl fmt::Display for Agreement {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} outputs differ (max {} bf16 ulp), state max |diff| {:.2e}, conv state {}",
            self.outputs_differing,
            self.max_ulp,
            self.state_max_diff,
            if self.conv_identical {
                "identical"
            } else {
                "DIFFERS"
            }
        )
    }
}

/// The verdicts of a matrix test, one per configuration: each is printed
/// (`ok`, `FAIL` with the report, `ERR` with the error) and failures are
/// collected for [`Verdicts::assert_all_passed`].
#[derive(Debug, Default)]
pub struct Verdicts {
    failed: Vec<String>,
}

impl Verdicts {
    /// Records a run's `report` (`ok` also needs `extra_ok`), with `note`
    /// after the label.
    pub fn record(&mut self, label: &str, report: &Report, extra_ok: bool, note: &str) {
        let passed = report.passed() && extra_ok;
        println!("{} {label}{note}", if passed { "ok  " } else { "FAIL" });
        if !passed {
            println!("{report}");
            self.failed.push(label.to_string());
        }
    }

    /// Records a run that did not happen.
    pub fn error(&mut self, label: &str, error: impl fmt::Display) {
        println!("ERR  {label}: {error}");
        self.failed.push(label.to_string());
    }

    /// Labels of the configurations that failed or did not run, in order.
    pub fn failed(&self) -> &[String] {
        &self.failed
    }

    /// Panics listing the failed configurations, if any.
    pub fn assert_all_passed(&self) {
        assert!(self.failed.is_empty(), "failed: {:#?}", self.failed);
    }

    /// Records `verdict` under `label`.
    pub fn push(&mut self, label: &str, verdict: &Verdict) {
        self.record(label, &verdict.report, verdict.extra_ok, &verdict.note);
    }
}

/// The verdict of one configuration of a matrix: its comparison with the
/// reference, plus a condition of the test's own (e.g. the conv state agrees
/// bit for bit with the simulator's) and a note printed after the label.
#[derive(Clone, Debug, PartialEq)]
pub struct Verdict {
    /// The comparison with the reference.
    pub report: Report,
    /// A further condition the configuration must meet.
    pub extra_ok: bool,
    /// Printed after the label (e.g. the agreement with the simulator).
    pub note: String,
}

impl From<Report> for Verdict {
    fn from(report: Report) -> Self {
        Self {
            report,
            extra_ok: true,
            note: String::new(),
        }
    }
}

/// Runs every configuration of a matrix on `dev` and collects the verdicts,
/// so that a kernel's simulator and GPU tests share one loop: `run` checks
/// one point on the device (`Err`: the run did not happen, recorded as a
/// failure), `label` names it. Call [`Verdicts::assert_all_passed`] on the
/// result.
///
/// ```
/// use kda_host::testing::{Verdict, run_matrix};
/// use kda_host::{Check, Measure, Report};
/// use kda_runtime::SimDevice;
///
/// let report = |passed: bool| Report {
///     checks: vec![Check {
///         name: "output",
///         measure: Measure::Mismatches { count: usize::from(!passed), total: 1 },
///         passed,
///         note: String::new(),
///     }],
/// };
/// let verdicts = run_matrix(
///     &SimDevice::new(),
///     [1, 2, 3],
///     |n| format!("point {n}"),
///     |_dev, &n| match n {
///         3 => Err("no kernel"),
///         n => Ok::<Verdict, &str>(report(n == 1).into()),
///     },
/// );
/// assert_eq!(verdicts.failed(), ["point 2", "point 3"]);
/// ```
pub fn run_matrix<D: Device, P, E: fmt::Display>(
    dev: &D,
    points: impl IntoIterator<Item = P>,
    label: impl Fn(&P) -> String,
    mut run: impl FnMut(&D, &P) -> Result<Verdict, E>,
) -> Verdicts {
    let mut verdicts = Verdicts::default();
    for point in points {
        let label = label(&point);
        match run(dev, &point) {
            Ok(verdict) => verdicts.push(&label, &verdict),
            Err(e) => verdicts.error(&label, e),
        }
    }
    verdicts
}

/// A scratch folder unique to this process, `prefix` and `name` under the
/// system's temporary folder, emptied when made and removed on drop.
pub struct Scratch(pub std::path::PathBuf);

impl Scratch {
    /// The folder `<tmp>/<prefix>-<pid>-<name>`, made empty.
    pub fn new(prefix: &str, name: &str) -> Self {
        let dir = std::env::temp_dir().join(format!("{prefix}-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("a scratch folder under the temporary folder");
        Self(dir)
    }

    /// The path of `name` inside it.
    pub fn join(&self, name: &str) -> std::path::PathBuf {
        self.0.join(name)
    }

    /// The names of its entries, sorted.
    pub fn names(&self) -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(&self.0)
            .expect("the scratch folder")
            .map(|e| {
                e.expect("a scratch folder entry")
                    .file_name()
                    .to_string_lossy()
                    .into_owned()
            })
            .collect();
        names.sort();
        names
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}
