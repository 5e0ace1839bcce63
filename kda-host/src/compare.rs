//! Checks a decode kernel's results (an output, a slotted f32 state and a bf16
//! conv state) against its reference's `expected.*`, with the tolerances the
//! kernels share (KdaSplit spec §5 and §10):
//!
//! * `output`: relative Frobenius error of the bf16 output against the
//!   unrounded reference `expected.output_f32`, limit 1e-2. bf16 rounding alone
//!   gives about 3e-3; a wrong head, token or gate shows up as O(1).
//! * `output_f32` (only if the runner exposes the pre-rounding value, e.g. a
//!   simulator): limit [`STATE_LIMIT`], for the same reasons as the state.
//! * `state` over the written (slot, head) pages: limit [`STATE_LIMIT`].
//! * every other state page and the whole conv state: bit-exact.
//! * padding rows: exactly zero.

use std::fmt;

use half::bf16;

use crate::generator::OUTPUT_SENTINEL;
use crate::reference::{Expected, Request};

/// Relative Frobenius error allowed for the bf16 output.
pub const OUTPUT_LIMIT: f64 = 1e-2;

/// Relative Frobenius error allowed for the f32 state (and an f32 output).
/// The kernel's f32 arithmetic with approximate `rsqrt`/`ex2` (rel. ~2^-22)
/// costs about 1e-5 per token (spec §5); with T <= 8 tokens even a linear
/// build-up stays below 8e-5, and the bugs this must catch (a wrong decay
/// column, a dropped β, a transposed page) are 1e-3 or worse. It assumes
/// bit-identical raw gates: grid-snapped gate inputs, or `RawGateOrder::Mode2`
/// expectations for gate mode 2. A raw gate that flips by one bf16 ulp moves
/// one key column's decay by several percent, about 1e-3 of that page.
pub const STATE_LIMIT: f64 = 1e-4;

/// What a run produced, each a row-major copy of the whole tensor.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Actual {
    /// The bf16 output.
    pub output: Vec<bf16>,
    /// The output before bf16 rounding, if the runner can expose it.
    pub output_f32: Option<Vec<f32>>,
    /// The f32 state cache, every slot.
    pub state: Vec<f32>,
    /// The bf16 conv-state cache, every slot.
    pub conv_state: Vec<bf16>,
}

impl Actual {
    /// A run that produced exactly `expected` (output_f32 included).
    pub fn exact(expected: &Expected) -> Self {
        Self {
            output: expected.output.clone(),
            output_f32: Some(expected.output_f32.clone()),
            state: expected.state.clone(),
            conv_state: expected.conv_state.clone(),
        }
    }
}

/// The quantity a check measures.
#[derive(Clone, Debug, PartialEq)]
pub enum Measure {
    /// `||actual - expected|| / ||expected||` (absolute if `expected` is zero).
    RelError {
        /// The measured error.
        value: f64,
        /// The largest error that passes.
        limit: f64,
    },
    /// Elements whose bits differ, of `total`; must be zero.
    Mismatches {
        /// Elements that differ.
        count: usize,
        /// Elements compared.
        total: usize,
    },
    /// The check could not run (e.g. lengths differ, invalid arguments).
    Unusable,
}

/// One named verdict of a [`Report`].
#[derive(Clone, Debug, PartialEq)]
pub struct Check {
    /// What was checked (`output`, `state (written)`, ...).
    pub name: &'static str,
    /// What was measured.
    pub measure: Measure,
    /// The measure is within its limit.
    pub passed: bool,
    /// Extra facts for the reader (ulp distance, unwritten elements, ...).
    pub note: String,
}

impl Check {
    fn rel_error(name: &'static str, value: f64, limit: f64, note: String) -> Self {
        Self {
            name,
            measure: Measure::RelError { value, limit },
            passed: value <= limit, // NaN fails
            note,
        }
    }

    fn mismatches(name: &'static str, count: usize, total: usize, note: String) -> Self {
        Self {
            name,
            measure: Measure::Mismatches { count, total },
            passed: count == 0,
            note,
        }
    }

    fn unusable(name: &'static str, note: String) -> Self {
        Self {
            name,
            measure: Measure::Unusable,
            passed: false,
            note,
        }
    }
}

impl fmt::Display for Check {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let verdict = if self.passed { "ok  " } else { "FAIL" };
        let measure = match &self.measure {
            Measure::RelError { value, limit } => {
                format!("rel err {value:.2e} (limit {limit:.0e})")
            }
            Measure::Mismatches { count, total } => {
                format!("{count} of {total} differ (must be 0)")
            }
            Measure::Unusable => "not checked".to_string(),
        };
        write!(f, "{verdict} {:<20} {measure:<34}", self.name)?;
        if !self.note.is_empty() {
            write!(f, " {}", self.note)?;
        }
        Ok(())
    }
}

/// Per-tensor verdicts of one run.
#[derive(Clone, Debug, PartialEq)]
pub struct Report {
    /// The checks, in the order they ran.
    pub checks: Vec<Check>,
}

impl Report {
    /// Every check passed.
    pub fn passed(&self) -> bool {
        self.checks.iter().all(|c| c.passed)
    }

    /// The check called `name`, if it ran.
    pub fn check(&self, name: &str) -> Option<&Check> {
        self.checks.iter().find(|c| c.name == name)
    }

    /// Names of the failed checks, in order.
    pub fn failed(&self) -> Vec<&'static str> {
        self.checks
            .iter()
            .filter(|c| !c.passed)
            .map(|c| c.name)
            .collect()
    }
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for check in &self.checks {
            writeln!(f, "{check}")?;
        }
        let failed = self.checks.iter().filter(|c| !c.passed).count();
        match failed {
            0 => write!(f, "all {} checks passed", self.checks.len()),
            n => write!(f, "{n} of {} checks failed", self.checks.len()),
        }
    }
}

/// The comparison of a launch whose contract violations are `errors`: a
/// single failed `arguments` check if there are any, else
/// [`compare_footprint`] with the launch's `footprint`.
pub fn compare_valid<E: fmt::Display>(
    errors: &[E],
    footprint: impl FnOnce() -> Footprint,
    actual: &Actual,
    expected: &Expected,
) -> Report {
    if !errors.is_empty() {
        let note = errors
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
            .join("; ");
        return Report {
            checks: vec![Check::unusable("arguments", note)],
        };
    }
    compare_footprint(&footprint(), actual, expected)
}

/// The output rows of padding requests and the state slots active requests
/// write (in request order), for [`Footprint`]: request `b` owns rows
/// `b·T .. b·T + T`.
pub fn slot_footprint(
    tokens: u32,
    requests: impl IntoIterator<Item = Request>,
) -> (Vec<usize>, Vec<usize>) {
    let t = tokens as usize;
    let mut padding_rows = Vec::new();
    let mut written_slots = Vec::new();
    for (b, request) in requests.into_iter().enumerate() {
        match request {
            Request::Padding => padding_rows.extend(b * t..(b + 1) * t),
            Request::Active { writes, .. } => written_slots.extend(writes.into_iter().flatten()),
        }
    }
    (padding_rows, written_slots)
}

/// What a comparison needs to know about a launch beyond the tensors: which
/// output rows are padding and which state slots it may write. Any decode
/// kernel whose results are an output, a slotted f32 state and a bf16 conv
/// state (KdaSplit, GDN, Mamba-2) is compared through this.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Footprint {
    /// Elements of the launch's `output`, `state` and `conv_state`: `expected`
    /// must have these lengths (its output and output_f32 both `output_len`).
    pub output_len: usize,
    /// Elements of the launch's `state`.
    pub state_len: usize,
    /// Elements of the launch's `conv_state`.
    pub conv_state_len: usize,
    /// Output elements per activation row.
    pub row_len: usize,
    /// Output rows that must be exactly zero (rows of padding requests).
    pub padding_rows: Vec<usize>,
    /// Heads per state slot (for the report only).
    pub heads: usize,
    /// f32 elements per state slot; the state holds `len / state_page` slots.
    pub state_page: usize,
    /// State slots the launch may write (repeats allowed).
    pub written_slots: Vec<usize>,
}

/// The checks of every kernel's `compare` for any launch described by `footprint`:
///
/// * `output`: relative Frobenius error of the bf16 output against
///   `expected.output_f32`, limit [`OUTPUT_LIMIT`], and no element may still
///   hold the sentinel; `output padding rows`: exactly zero;
/// * `output_f32` (if the runner exposes it): limit [`STATE_LIMIT`];
/// * `state (written)`: the written slots' pages, limit [`STATE_LIMIT`];
///   `state (unwritten)`: every other page bit-exact;
/// * `conv_state`: bit-exact everywhere.
///
/// `expected` must have the launch's lengths (else only those mismatches are
/// reported), and `actual` must have `expected`'s.
pub fn compare_footprint(footprint: &Footprint, actual: &Actual, expected: &Expected) -> Report {
    // `expected` must describe the launch before slots can index it.
    let sizes = [
        (
            "expected.output",
            expected.output.len(),
            footprint.output_len,
        ),
        (
            "expected.output_f32",
            expected.output_f32.len(),
            footprint.output_len,
        ),
        ("expected.state", expected.state.len(), footprint.state_len),
        (
            "expected.conv_state",
            expected.conv_state.len(),
            footprint.conv_state_len,
        ),
    ];
    let mismatched: Vec<Check> = sizes
        .into_iter()
        .filter_map(|(name, found, want)| length_mismatch(name, found, want))
        .collect();
    if !mismatched.is_empty() {
        return Report { checks: mismatched };
    }
    let (dim, heads) = (footprint.row_len, footprint.heads);
    let mut checks = Vec::new();

    // Output.
    if let Some(bad) = length_mismatch("output", actual.output.len(), expected.output_f32.len()) {
        checks.push(bad);
    } else {
        let widened: Vec<f64> = actual.output.iter().map(|v| v.to_f64()).collect();
        let reference: Vec<f64> = expected.output_f32.iter().map(|&v| f64::from(v)).collect();
        let sentinel = bf16::from_f32(OUTPUT_SENTINEL);
        let unwritten = actual.output.iter().filter(|&&v| v == sentinel).count();
        let ulps = actual
            .output
            .iter()
            .zip(&expected.output)
            .map(|(a, e)| ulp_distance(*a, *e))
            .max()
            .unwrap_or(0);
        let mut check = Check::rel_error(
            "output",
            rel_error(&widened, &reference),
            OUTPUT_LIMIT,
            format!("max {ulps} bf16 ulp from expected.output, {unwritten} unwritten"),
        );
        check.passed &= unwritten == 0;
        checks.push(check);

        let (mut count, mut total) = (0, 0);
        for &row in &footprint.padding_rows {
            for v in actual.output.get(row * dim..(row + 1) * dim).unwrap_or(&[]) {
                total += 1;
                count += usize::from(v.to_bits() != 0);
            }
        }
        checks.push(Check::mismatches(
            "output padding rows",
            count,
            total,
            String::new(),
        ));
    }
    if let Some(output_f32) = &actual.output_f32 {
        if let Some(bad) =
            length_mismatch("output_f32", output_f32.len(), expected.output_f32.len())
        {
            checks.push(bad);
        } else {
            let a: Vec<f64> = output_f32.iter().map(|&v| f64::from(v)).collect();
            let e: Vec<f64> = expected.output_f32.iter().map(|&v| f64::from(v)).collect();
            checks.push(Check::rel_error(
                "output_f32",
                rel_error(&a, &e),
                STATE_LIMIT,
                String::new(),
            ));
        }
    }

    // State: written pages within tolerance, all others bit-exact.
    if let Some(bad) = length_mismatch("state", actual.state.len(), expected.state.len()) {
        checks.push(bad);
    } else {
        let page = footprint.state_page.max(1);
        let num_slots = expected.state.len() / page;
        let mut written = vec![false; num_slots];
        for &w in &footprint.written_slots {
            if let Some(slot) = written.get_mut(w) {
                *slot = true;
            }
        }
        let (mut a, mut e) = (Vec::new(), Vec::new());
        let (mut count, mut total) = (0, 0);
        for (slot, &is_written) in written.iter().enumerate() {
            let range = slot * page..(slot + 1) * page;
            let (actual, expected) = (&actual.state[range.clone()], &expected.state[range]);
            if is_written {
                a.extend(actual.iter().map(|&v| f64::from(v)));
                e.extend(expected.iter().map(|&v| f64::from(v)));
            } else {
                total += page;
                count += actual
                    .iter()
                    .zip(expected)
                    .filter(|(a, e)| a.to_bits() != e.to_bits())
                    .count();
            }
        }
        let slots = written.iter().filter(|&&w| w).count();
        checks.push(Check::rel_error(
            "state (written)",
            rel_error(&a, &e),
            STATE_LIMIT,
            format!("{slots} slots x {heads} heads"),
        ));
        checks.push(Check::mismatches(
            "state (unwritten)",
            count,
            total,
            format!("{} slots", num_slots - slots),
        ));
    }

    // Conv state: copies only, so bit-exact everywhere.
    if let Some(bad) = length_mismatch(
        "conv_state",
        actual.conv_state.len(),
        expected.conv_state.len(),
    ) {
        checks.push(bad);
    } else {
        let count = actual
            .conv_state
            .iter()
            .zip(&expected.conv_state)
            .filter(|(a, e)| a.to_bits() != e.to_bits())
            .count();
        checks.push(Check::mismatches(
            "conv_state",
            count,
            expected.conv_state.len(),
            String::new(),
        ));
    }
    Report { checks }
}

fn length_mismatch(name: &'static str, actual: usize, expected: usize) -> Option<Check> {
    (actual != expected)
        .then(|| Check::unusable(name, format!("{actual} elements, expected {expected}")))
}

/// `||a - e|| / ||e||`, or `||a - e||` when `e` is all zero.
///
/// ```
/// use kda_host::compare::rel_error;
///
/// assert_eq!(rel_error(&[1.0, 2.0], &[1.0, 2.0]), 0.0);
/// assert_eq!(rel_error(&[0.0, 0.0], &[3.0, 4.0]), 1.0);
/// assert_eq!(rel_error(&[3.0, 4.0], &[0.0, 0.0]), 5.0); // absolute against zeros
/// ```
pub fn rel_error(a: &[f64], e: &[f64]) -> f64 {
    let diff: f64 = a.iter().zip(e).map(|(a, e)| (a - e) * (a - e)).sum();
    let norm: f64 = e.iter().map(|e| e * e).sum();
    if norm == 0.0 {
        diff.sqrt()
    } else {
        (diff / norm).sqrt()
    }
}

/// The largest absolute difference between float32 results and a float64
/// reference: NaN if any difference is NaN, infinite if the lengths differ,
/// so a poisoned or short result never passes a `< tolerance` check.
///
/// ```
/// use kda_host::compare::max_abs_error;
///
/// assert_eq!(max_abs_error(&[1.0, 2.5], &[1.0, 2.0]), 0.5);
/// assert!(max_abs_error(&[f32::NAN], &[0.0]).is_nan());
/// assert_eq!(max_abs_error(&[1.0], &[1.0, 2.0]), f64::INFINITY);
/// ```
pub fn max_abs_error(got: &[f32], want: &[f64]) -> f64 {
    if got.len() != want.len() {
        return f64::INFINITY;
    }
    let mut worst = 0.0f64;
    for (&g, &w) in got.iter().zip(want) {
        let d = (g as f64 - w).abs();
        if d.is_nan() {
            return f64::NAN;
        }
        worst = worst.max(d);
    }
    worst
}

/// Distance in bf16 steps (0 for +0 vs -0; NaN counts as far away).
///
/// ```
/// use half::bf16;
/// use kda_host::compare::ulp_distance;
///
/// let one = bf16::from_f32(1.0);
/// assert_eq!(ulp_distance(one, bf16::from_bits(one.to_bits() + 2)), 2);
/// assert_eq!(ulp_distance(bf16::ZERO, bf16::NEG_ZERO), 0);
/// ```
pub fn ulp_distance(a: bf16, b: bf16) -> u32 {
    if a.is_nan() || b.is_nan() {
        return u32::from(u16::MAX);
    }
    // Map the sign-magnitude bits onto a monotone integer line.
    let line = |x: bf16| {
        let bits = i32::from(x.to_bits());
        if bits & 0x8000 != 0 {
            -(bits & 0x7fff)
        } else {
            bits
        }
    };
    line(a).abs_diff(line(b))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ulp_distance_crosses_zero() {
        let one = bf16::from_f32(1.0);
        let next = bf16::from_bits(one.to_bits() + 1);
        assert_eq!(ulp_distance(one, next), 1);
        assert_eq!(ulp_distance(bf16::ZERO, bf16::NEG_ZERO), 0);
        assert_eq!(ulp_distance(bf16::from_bits(1), bf16::from_bits(0x8001)), 2);
    }

    #[test]
    fn rel_error_of_zero_reference_is_absolute() {
        assert_eq!(rel_error(&[3.0, 4.0], &[0.0, 0.0]), 5.0);
        assert_eq!(rel_error(&[1.0, 1.0], &[1.0, 1.0]), 0.0);
        assert!(rel_error(&[f64::NAN], &[1.0]).is_nan());
    }
}
