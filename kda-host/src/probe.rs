//! Reads the buffer a kernel compiled with CTA timeline probes fills, and
//! turns it into a timeline summary ([`analyse`], [`ProbeReport::render`]).
//!
//! With probes on, every warp of every CTA writes one record of
//! `R = 5 + S` u64 words (`S` probe sites, `W` warps per CTA); CTA `c`
//! (linear id `ctaid.x + nctaid.x · (ctaid.y + nctaid.y · ctaid.z)`), warp
//! `w` starts at word `(c · W + w) · R`:
//!
//! | word    | value                                                     |
//! |---------|-----------------------------------------------------------|
//! | 0       | `smid \| 1 << 63` (0: never written)                      |
//! | 1, 2    | `%globaltimer` (ns), `%clock64` (cycles) at entry         |
//! | 3, 4    | `%globaltimer`, `%clock64` at exit                        |
//! | `5 + s` | `%clock64` when lane 0 last passed site `s`, 0 if never   |
//!
//! `%clock64` counts one SM's cycles, so clocks are only compared within an
//! SM; the global timer is shared but may tick coarsely (32 ns, 1 µs), so it
//! only serves the launch span and the clock rate: Σ clock lifetimes ÷
//! Σ timer lifetimes over the CTAs the timer saw last a positive time. Every
//! other duration is taken in clock cycles and converted with that rate.
//! Percentiles are nearest-rank on the sorted values.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use serde::{Deserialize, Serialize};
use thiserror::Error;

/// Words of a record before its sites (header, entry timer / clock, exit
/// timer / clock): the backend's layout, `kda_ir::ptx::HEADER_WORDS`.
pub use kda_ir::ptx::HEADER_WORDS;

/// Bit 63 of word 0: the record was written.
const WRITTEN: u64 = 1 << 63;

/// One probe site: the point right after a wait, as the compiler names it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ProbeSite {
    /// The wait, e.g. `mbarrier.wait decay_full`.
    pub what: String,
    /// Where the kernel's source issues it, `file:line:column`.
    pub loc: String,
}

/// The shape of a probe buffer: what the compiler and the launch fix.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ProbeLayout {
    /// CTAs in the grid.
    pub ctas: u64,
    /// Warps per CTA (block threads / 32).
    pub warps: u32,
    /// The probe sites, in site order (record word `5 + s` is site `s`).
    pub sites: Vec<ProbeSite>,
}

impl From<&kda_ir::ptx::ProbeSite> for ProbeSite {
    fn from(s: &kda_ir::ptx::ProbeSite) -> ProbeSite {
        ProbeSite {
            what: s.what.clone(),
            loc: s.loc.to_string(),
        }
    }
}

impl ProbeLayout {
    /// The layout of a launch of `ctas` CTAs of `block` threads of a kernel
    /// whose backend emitted `sites`.
    pub fn of(sites: &[kda_ir::ptx::ProbeSite], ctas: u64, block: u32) -> ProbeLayout {
        ProbeLayout {
            ctas,
            warps: block.div_ceil(32),
            sites: sites.iter().map(ProbeSite::from).collect(),
        }
    }

    /// Words of one warp's record, `5 + S`.
    pub fn record_words(&self) -> Result<usize, ProbeError> {
        HEADER_WORDS
            .checked_add(self.sites.len())
            .ok_or_else(|| self.too_large())
    }

    /// Words of the whole buffer, `ctas · warps · (5 + S)`, for the caller
    /// to allocate (and clear to zero) before the launch.
    pub fn words(&self) -> Result<usize, ProbeError> {
        let ctas = usize::try_from(self.ctas).map_err(|_| self.too_large())?;
        let warps = usize::try_from(self.warps).map_err(|_| self.too_large())?;
        ctas.checked_mul(warps)
            .and_then(|n| n.checked_mul(self.record_words().ok()?))
            .ok_or_else(|| self.too_large())
    }

    fn too_large(&self) -> ProbeError {
        ProbeError::TooLarge {
            ctas: self.ctas,
            warps: self.warps,
            sites: self.sites.len(),
        }
    }
}

/// Why a probe buffer cannot be analysed.
#[derive(Clone, Debug, Error, PartialEq, Eq)]
pub enum ProbeError {
    /// The buffer's word count overflows `usize`.
    #[error("{ctas} CTAs x {warps} warps x (5 + {sites}) words do not fit in memory")]
    TooLarge {
        /// CTAs of the layout.
        ctas: u64,
        /// Warps per CTA.
        warps: u32,
        /// Probe sites.
        sites: usize,
    },
    /// The buffer does not have the layout's length.
    #[error("the probe buffer has {found} words but the layout needs {expected}")]
    Length {
        /// `layout.words()`.
        expected: usize,
        /// The buffer's length.
        found: usize,
    },
    /// No warp wrote its record.
    #[error("no warp wrote its probe record (were probes compiled in, and did the kernel run?)")]
    NothingWritten,
    /// Word 0 is neither 0 nor marked written: the layout does not match
    /// the kernel, or the buffer was not cleared.
    #[error(
        "CTA {cta} warp {warp}: word 0 is {word:#x}, neither 0 nor marked written (bit 63); does the layout match the kernel, and was the buffer zeroed?"
    )]
    BadHeader {
        /// The CTA's linear id.
        cta: u64,
        /// The warp within the CTA.
        warp: u32,
        /// The word found.
        word: u64,
    },
    /// A warp's exit precedes its entry.
    #[error("CTA {cta} warp {warp}: exit {counter} {exit} precedes entry {counter} {entry}")]
    ExitBeforeEntry {
        /// The CTA's linear id.
        cta: u64,
        /// The warp within the CTA.
        warp: u32,
        /// `clock` or `timer`.
        counter: &'static str,
        /// The entry value.
        entry: u64,
        /// The exit value.
        exit: u64,
    },
    /// Two warps of one CTA report different SMs.
    #[error("CTA {cta}: warp {warp} reports SM {sm} but warp {first_warp} SM {first_sm}")]
    SplitCta {
        /// The CTA's linear id.
        cta: u64,
        /// The first written warp.
        first_warp: u32,
        /// Its SM.
        first_sm: u64,
        /// The warp that disagrees.
        warp: u32,
        /// Its SM.
        sm: u64,
    },
    /// No CTA lasted a positive number of timer ticks.
    #[error(
        "the global timer is too coarse for this launch: no CTA lasted a positive timer time, so the SM clock rate is unknown"
    )]
    CoarseTimer,
    /// The clocks did not advance while the timer did.
    #[error("the SM clocks did not advance over {ns} ns of global timer")]
    StoppedClock {
        /// Timer ns summed over the CTAs used for the rate.
        ns: u128,
    },
}

/// Nearest-rank percentiles of a set of durations, in µs.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Quantiles {
    /// 10th percentile.
    pub p10_us: f64,
    /// Median (the lower middle value for an even count).
    pub median_us: f64,
    /// 90th percentile.
    pub p90_us: f64,
    /// Largest.
    pub max_us: f64,
    /// Values.
    pub count: usize,
}

/// One SM's residency, measured in its own clock over its span.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct SmResidency {
    /// The SM id.
    pub sm: u64,
    /// CTAs that ran on it.
    pub ctas: usize,
    /// First CTA entry to last CTA exit, µs.
    pub span_us: f64,
    /// Time-weighted mean of resident CTAs over the span (0 for an empty span).
    pub mean: f64,
    /// Most CTAs resident at once (an exit and an entry at one cycle do
    /// not overlap).
    pub max: u64,
}

/// How many CTAs each SM held over time, and how fast a freed slot refilled.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Residency {
    /// Mean resident CTAs per SM, the per-SM means weighted by span.
    pub mean: f64,
    /// Most CTAs resident on any SM.
    pub max: u64,
    /// Fraction of Σ SM spans during which an SM held fewer than `max`.
    pub below_max: f64,
    /// The expected CTAs per SM, if given.
    pub expected: Option<u32>,
    /// `mean / expected` in percent (none without a positive expectation).
    pub of_expected_pct: Option<f64>,
    /// For each CTA exit followed by an entry on its SM: exit to the entry
    /// that refilled its slot (exits in time order, each matched to the
    /// first entry at or after it that no earlier exit took).
    pub refill: Option<Quantiles>,
    /// Per SM, by SM id.
    pub per_sm: Vec<SmResidency>,
}

/// When the warps passing one site passed it.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct SiteStats {
    /// The site index (record word `5 + index`).
    pub index: usize,
    /// The wait, as the layout names it.
    pub what: String,
    /// Its source location.
    pub loc: String,
    /// Warps within a CTA that recorded it, e.g. `w0-3,w5` (empty if none).
    pub warps: String,
    /// Offset from each recording warp's entry clock; none if no warp did.
    pub offset: Option<Quantiles>,
    /// Records whose clock for this site lies outside the warp's own
    /// lifetime: left by an earlier launch into the same buffer (a branch
    /// the last launch's warp did not take), not counted in `offset`.
    pub stale: usize,
}

/// The analysis of one probe buffer ([`analyse`]).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ProbeReport {
    /// CTAs in the grid.
    pub ctas: u64,
    /// CTAs with at least one written record.
    pub ctas_recorded: u64,
    /// Warps per CTA.
    pub warps_per_cta: u32,
    /// Warp records missing from the recorded CTAs.
    pub warps_missing: u64,
    /// SMs that ran a recorded CTA.
    pub sms: usize,
    /// Last exit minus first entry on the global timer, µs.
    pub span_us: f64,
    /// SM clock rate derived from the timers, GHz (cycles per ns).
    pub clock_ghz: f64,
    /// CTA lifetimes (first warp entry to last warp exit).
    pub lifetime: Quantiles,
    /// CTAs resident per SM.
    pub residency: Residency,
    /// Per site, in site order (`render` orders them by median offset).
    pub sites: Vec<SiteStats>,
}

/// One recorded CTA: its SM, first entry and last exit over its warps.
struct Cta {
    sm: u64,
    first_warp: u32,
    clock: (u64, u64),
    timer: (u64, u64),
}

/// Nearest-rank `pct` percentile of `sorted` (rank `⌈pct·n/100⌉`, at least 1).
fn percentile<T: Copy>(sorted: &[T], pct: usize) -> Option<T> {
    let rank = pct.checked_mul(sorted.len())?.div_ceil(100).max(1);
    sorted.get(rank.min(sorted.len()).checked_sub(1)?).copied()
}

/// Sorts `cycles` and takes its percentiles in µs at `ghz` cycles per ns.
fn quantiles(mut cycles: Vec<u64>, ghz: f64) -> Option<Quantiles> {
    cycles.sort_unstable();
    let us = |pct| percentile(&cycles, pct).map(|c| c as f64 / ghz / 1e3);
    Some(Quantiles {
        p10_us: us(10)?,
        median_us: us(50)?,
        p90_us: us(90)?,
        max_us: us(100)?,
        count: cycles.len(),
    })
}

/// `w0-3,w5` for warps {0, 1, 2, 3, 5}.
fn warp_ranges(warps: &BTreeSet<u32>) -> String {
    let mut runs: Vec<(u32, u32)> = Vec::new();
    for &w in warps {
        match runs.last_mut() {
            Some((_, end)) if end.checked_add(1) == Some(w) => *end = w,
            _ => runs.push((w, w)),
        }
    }
    let run = |&(a, b): &(u32, u32)| match a == b {
        true => format!("w{a}"),
        false => format!("w{a}-{b}"),
    };
    runs.iter().map(run).collect::<Vec<_>>().join(",")
}

/// Analyses a downloaded probe buffer of `layout`; `expect_ctas_per_sm`
/// (e.g. from the occupancy calculator) adds the residency as a percentage
/// of it. CTAs without any written record are counted as missing, not an
/// error; a CTA's entry and exit are its earliest entry and latest exit over
/// its written warps.
///
/// Fails on a buffer that is not `layout.words()` long, one where nothing
/// was written or a header lacks the written bit, a warp whose exit precedes
/// its entry (clock or timer) or which passed a site before entering, a CTA
/// whose warps report different SMs, and a launch too short for the timer
/// to give the clock rate.
pub fn analyse(
    layout: &ProbeLayout,
    words: &[u64],
    expect_ctas_per_sm: Option<u32>,
) -> Result<ProbeReport, ProbeError> {
    let expected = layout.words()?;
    if words.len() != expected {
        return Err(ProbeError::Length {
            expected,
            found: words.len(),
        });
    }
    let record = layout.record_words()?;
    let warps = layout.warps as usize; // nonzero whenever a record exists
    let nsites = layout.sites.len();
    let mut ctas: Vec<Option<Cta>> = Vec::new();
    let mut offsets: Vec<Vec<u64>> = vec![Vec::new(); nsites];
    let mut site_warps: Vec<BTreeSet<u32>> = vec![BTreeSet::new(); nsites];
    let mut stale = vec![0usize; nsites];
    let mut warps_written = 0u64;
    for (i, rec) in words.chunks_exact(record).enumerate() {
        let (c, warp) = (i / warps, (i % warps) as u32);
        let cta = c as u64;
        if warp == 0 {
            ctas.push(None);
        }
        match rec[0] {
            0 => continue,
            word if word & WRITTEN == 0 => return Err(ProbeError::BadHeader { cta, warp, word }),
            _ => {}
        }
        let sm = rec[0] & !WRITTEN;
        let timer = (rec[1], rec[3]);
        let clock = (rec[2], rec[4]);
        for (counter, (entry, exit)) in [("clock", clock), ("timer", timer)] {
            if exit < entry {
                let e = ProbeError::ExitBeforeEntry {
                    cta,
                    warp,
                    counter,
                    entry,
                    exit,
                };
                return Err(e);
            }
        }
        for (site, &at) in rec[HEADER_WORDS..].iter().enumerate() {
            if at == 0 {
                continue;
            }
            // Outside this warp's lifetime: an earlier launch's write (every
            // step writes the same buffer) that this launch did not
            // overwrite, e.g. a branch this step's CTA skipped.
            if at < clock.0 || at > clock.1 {
                stale[site] += 1;
                continue;
            }
            offsets[site].push(at - clock.0);
            site_warps[site].insert(warp);
        }
        warps_written += 1;
        match &mut ctas[c] {
            slot @ None => {
                *slot = Some(Cta {
                    sm,
                    first_warp: warp,
                    clock,
                    timer,
                });
            }
            Some(cta_rec) if cta_rec.sm != sm => {
                return Err(ProbeError::SplitCta {
                    cta,
                    first_warp: cta_rec.first_warp,
                    first_sm: cta_rec.sm,
                    warp,
                    sm,
                });
            }
            Some(t) => {
                t.clock = (t.clock.0.min(clock.0), t.clock.1.max(clock.1));
                t.timer = (t.timer.0.min(timer.0), t.timer.1.max(timer.1));
            }
        }
    }
    let ctas: Vec<Cta> = ctas.into_iter().flatten().collect();
    if ctas.is_empty() {
        return Err(ProbeError::NothingWritten);
    }

    let (mut cycles, mut ns) = (0u128, 0u128);
    for t in ctas.iter().filter(|t| t.timer.1 > t.timer.0) {
        cycles += u128::from(t.clock.1 - t.clock.0);
        ns += u128::from(t.timer.1 - t.timer.0);
    }
    if ns == 0 {
        return Err(ProbeError::CoarseTimer);
    }
    if cycles == 0 {
        return Err(ProbeError::StoppedClock { ns });
    }
    let ghz = cycles as f64 / ns as f64;

    let first = ctas.iter().map(|t| t.timer.0).min().unwrap_or(0);
    let last = ctas.iter().map(|t| t.timer.1).max().unwrap_or(0);
    let lifetimes = ctas.iter().map(|t| t.clock.1 - t.clock.0).collect();
    let lifetime = quantiles(lifetimes, ghz).ok_or(ProbeError::NothingWritten)?;
    let residency = residency(&ctas, ghz, expect_ctas_per_sm);

    let sites = layout
        .sites
        .iter()
        .enumerate()
        .map(|(index, site)| SiteStats {
            index,
            what: site.what.clone(),
            loc: site.loc.clone(),
            warps: warp_ranges(&site_warps[index]),
            offset: quantiles(std::mem::take(&mut offsets[index]), ghz),
            stale: stale[index],
        });
    let ctas_recorded = ctas.len() as u64;
    Ok(ProbeReport {
        ctas: layout.ctas,
        ctas_recorded,
        warps_per_cta: layout.warps,
        warps_missing: ctas_recorded * u64::from(layout.warps) - warps_written,
        sms: residency.per_sm.len(),
        span_us: (last - first) as f64 / 1e3,
        clock_ghz: ghz,
        lifetime,
        residency,
        sites: sites.collect(),
    })
}

/// Residency per SM by a sweep over its entries (+1) and exits (−1), exits
/// first at equal clocks, in the SM's own clock. A CTA that lasted zero
/// cycles holds a slot for no time and is left out of the sweep.
fn residency(ctas: &[Cta], ghz: f64, expected: Option<u32>) -> Residency {
    let mut by_sm: BTreeMap<u64, Vec<(u64, u64)>> = BTreeMap::new();
    for t in ctas {
        by_sm.entry(t.sm).or_default().push(t.clock);
    }
    let mut per_sm = Vec::new();
    let mut at_level: Vec<Vec<u128>> = Vec::new(); // per SM: cycles spent with k resident
    let mut gaps = Vec::new();
    for (&sm, spans) in &by_sm {
        let mut events: Vec<(u64, i8)> = spans
            .iter()
            .filter(|&&(a, b)| b > a)
            .flat_map(|&(a, b)| [(a, 1), (b, -1)])
            .collect();
        events.sort_unstable();
        let start = spans.iter().map(|s| s.0).min().unwrap_or(0);
        let end = spans.iter().map(|s| s.1).max().unwrap_or(0);
        let (mut level, mut prev, mut max) = (0usize, start, 0usize);
        let mut time = vec![0u128; spans.len() + 1];
        for (t, delta) in events {
            time[level] += u128::from(t - prev);
            prev = t;
            level = if delta > 0 {
                level + 1
            } else {
                level.saturating_sub(1)
            };
            max = max.max(level);
        }
        let weighted: u128 = time.iter().enumerate().map(|(k, &c)| k as u128 * c).sum();
        let span = end - start;
        per_sm.push(SmResidency {
            sm,
            ctas: spans.len(),
            span_us: span as f64 / ghz / 1e3,
            mean: if span == 0 {
                0.0
            } else {
                weighted as f64 / span as f64
            },
            max: max as u64, // usize fits u64
        });
        at_level.push(time);

        // Exits in time order, each refilled by the first entry at or
        // after it that no earlier exit took (an entry fills one slot).
        let mut entries: Vec<(u64, usize)> =
            spans.iter().enumerate().map(|(i, s)| (s.0, i)).collect();
        entries.sort_unstable();
        let mut exits: Vec<(u64, usize)> =
            spans.iter().enumerate().map(|(i, s)| (s.1, i)).collect();
        exits.sort_unstable();
        let mut next = 0;
        for (exit, i) in exits {
            next = next.max(entries.partition_point(|&(e, _)| e < exit));
            // A CTA of zero cycles does not refill its own slot.
            if entries.get(next).is_some_and(|&(_, j)| j == i) {
                next += 1;
            }
            let Some(&(entry, _)) = entries.get(next) else {
                break;
            };
            gaps.push(entry - exit);
            next += 1;
        }
    }
    let max = per_sm.iter().map(|s| s.max).max().unwrap_or(0);
    let total: u128 = at_level.iter().flatten().sum();
    let weighted: u128 = at_level
        .iter()
        .flat_map(|t| t.iter().enumerate().map(|(k, &c)| k as u128 * c))
        .sum();
    let below: u128 = at_level
        .iter()
        .flat_map(|t| t.iter().take(usize::try_from(max).unwrap_or(usize::MAX)))
        .sum();
    let ratio = |a: u128| {
        if total == 0 {
            0.0
        } else {
            a as f64 / total as f64
        }
    };
    let mean = ratio(weighted);
    Residency {
        mean,
        max,
        below_max: ratio(below),
        expected,
        of_expected_pct: expected
            .filter(|&e| e > 0)
            .map(|e| mean / f64::from(e) * 100.0),
        refill: quantiles(gaps, ghz),
        per_sm,
    }
}

/// µs with about three significant digits: `0.91`, `57.9`, `120`.
fn us(v: f64) -> String {
    match v {
        v if v >= 100.0 => format!("{v:.0}"),
        v if v >= 10.0 => format!("{v:.1}"),
        v => format!("{v:.2}"),
    }
}

impl ProbeReport {
    /// A compact text report for a terminal (the [`Display`](fmt::Display)
    /// form): the launch, CTA lifetimes, residency and refills, then the
    /// sites by median offset (ties by index; sites no warp passed last).
    pub fn render(&self) -> String {
        self.to_string()
    }
}

impl fmt::Display for ProbeReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (n, recorded) = (self.ctas, self.ctas_recorded);
        write!(f, "launch: {n} CTAs ({recorded} recorded")?;
        if n > recorded {
            write!(f, ", {} missing", n - recorded)?;
        }
        if self.warps_missing > 0 {
            write!(f, ", {} warp records missing", self.warps_missing)?;
        }
        let (sms, span) = (self.sms, us(self.span_us));
        let ghz = self.clock_ghz;
        writeln!(
            f,
            ") on {sms} SMs over {span} µs; SM clock {ghz:.3} GHz (from the timers)"
        )?;
        let l = &self.lifetime;
        let (p10, med, p90, max) = (us(l.p10_us), us(l.median_us), us(l.p90_us), us(l.max_us));
        writeln!(
            f,
            "CTA lifetime: p10 {p10} µs, median {med} µs, p90 {p90} µs, max {max} µs"
        )?;

        let r = &self.residency;
        let (mean, max) = (r.mean, r.max);
        write!(
            f,
            "residency: {mean:.2} CTAs per SM resident on average (max {max}"
        )?;
        if let (Some(e), Some(pct)) = (r.expected, r.of_expected_pct) {
            write!(f, "; {pct:.1} % of the {e} expected")?;
        }
        let below = r.below_max * 100.0;
        writeln!(f, "); fewer than {max} resident {below:.1} % of the time")?;
        match &r.refill {
            Some(g) => writeln!(
                f,
                "refills: a freed slot stays empty {} µs (median), {} µs (p90) over {} refills",
                us(g.median_us),
                us(g.p90_us),
                g.count
            )?,
            None => writeln!(f, "refills: no freed slot was refilled")?,
        }
        if self.sites.is_empty() {
            return Ok(());
        }

        let mut order: Vec<&SiteStats> = self.sites.iter().collect();
        let key = |t: &SiteStats| t.offset.map_or(f64::INFINITY, |q| q.median_us);
        order.sort_by(|a, b| key(a).total_cmp(&key(b)).then(a.index.cmp(&b.index)));
        let w = order.iter().map(|t| t.warps.len()).fold(5, usize::max);
        writeln!(f, "sites (µs from the warp's entry to its last pass):")?;
        let head = ("median", "p10", "p90", "passed", "warps");
        writeln!(
            f,
            "  {:>7}  {:>7}  {:>7}  {:>6}  {:<w$}  site",
            head.0, head.1, head.2, head.3, head.4
        )?;
        for t in order {
            let (med, p10, p90, n) = match &t.offset {
                Some(q) => (us(q.median_us), us(q.p10_us), us(q.p90_us), q.count),
                None => ("-".into(), "-".into(), "-".into(), 0),
            };
            let warps = if t.warps.is_empty() { "-" } else { &t.warps };
            write!(
                f,
                "  {med:>7}  {p10:>7}  {p90:>7}  {n:>6}  {warps:<w$}  {}",
                t.what
            )?;
            match t.loc.rsplit(['/', '\\']).next() {
                Some(file) if !file.is_empty() => write!(f, "  ({file})")?,
                _ => {}
            }
            let never = if t.offset.is_none() {
                "  never passed"
            } else {
                ""
            };
            match t.stale {
                0 => writeln!(f, "{never}")?,
                n => writeln!(
                    f,
                    "{never}  ({n} stale records of earlier launches left out)"
                )?,
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Timer base (ns) and per-SM clock bases: clock = base + 2 · ns, a
    /// 2 GHz clock that no two SMs share.
    const T0: u64 = 1_000_000_000;
    fn clock(sm: u64, ns: u64) -> u64 {
        1_000_000 + 6_000_000 * sm + 2 * ns
    }

    /// A synthetic probe buffer and a writer for its records.
    struct Buf {
        layout: ProbeLayout,
        words: Vec<u64>,
    }

    impl Buf {
        fn new(ctas: u64, warps: u32, sites: &[&str]) -> Self {
            let sites = sites
                .iter()
                .map(|w| ProbeSite {
                    what: w.to_string(),
                    loc: format!("src/kernel.rs:{}:5", w.len()),
                })
                .collect();
            let layout = ProbeLayout { ctas, warps, sites };
            let words = vec![0; layout.words().unwrap()];
            Buf { layout, words }
        }

        fn rec(&mut self, cta: usize, warp: usize) -> &mut [u64] {
            let r = self.layout.record_words().unwrap();
            let at = (cta * self.layout.warps as usize + warp) * r;
            &mut self.words[at..at + r]
        }

        /// Warp `warp` of `cta` on `sm`, from `ns.0` to `ns.1` (timer ns
        /// after T0), passing `sites` (index, cycles after its entry).
        fn warp(
            &mut self,
            cta: usize,
            warp: usize,
            sm: u64,
            ns: (u64, u64),
            sites: &[(usize, u64)],
        ) {
            let entry = clock(sm, ns.0);
            let rec = self.rec(cta, warp);
            rec[..5].copy_from_slice(&[sm | WRITTEN, T0 + ns.0, entry, T0 + ns.1, clock(sm, ns.1)]);
            for &(s, offset) in sites {
                rec[5 + s] = entry + offset;
            }
        }

        fn analyse(&self) -> Result<ProbeReport, ProbeError> {
            analyse(&self.layout, &self.words, Some(2))
        }
    }

    /// CTAs (SM, entry ns, exit ns). SM 0 runs 0..2 one at a time (gaps
    /// 100, 400 ns); SM 5 runs 3 and 4 from 1000, and 5 enters at 5000 as
    /// 3 exits (gap 0). CTA 6 of the 7 never ran.
    const CTAS: [(u64, u64, u64); 6] = [
        (0, 0, 2000),
        (0, 2100, 5000),
        (0, 5400, 9000),
        (5, 1000, 5000),
        (5, 1000, 8000),
        (5, 5000, 7000),
    ];

    /// 2 warps per CTA: warp 0 enters first and leaves 10 ns early, warp 1
    /// enters 5 ns late; site 0 (warp 0 only) at 200 · (c + 1) cycles, site
    /// 1 at 100 (warp 0) and 300 (warp 1) cycles, site 2 never.
    fn launch() -> Buf {
        let mut b = Buf::new(
            7,
            2,
            &["mbarrier.wait full", "bar.sync 1", "griddepcontrol.wait"],
        );
        for (c, &(sm, a, z)) in CTAS.iter().enumerate() {
            b.warp(
                c,
                0,
                sm,
                (a, z - 10),
                &[(0, 200 * (c as u64 + 1)), (1, 100)],
            );
            b.warp(c, 1, sm, (a + 5, z), &[(1, 300)]);
        }
        b
    }

    fn close(a: f64, b: f64) {
        assert!((a - b).abs() < 1e-9, "{a} != {b}");
    }

    fn quantiles_are(
        q: Option<Quantiles>,
        p10: f64,
        median: f64,
        p90: f64,
        max: f64,
        count: usize,
    ) {
        let q = q.expect("quantiles");
        for (got, want) in [
            (q.p10_us, p10),
            (q.median_us, median),
            (q.p90_us, p90),
            (q.max_us, max),
        ] {
            close(got, want);
        }
        assert_eq!(q.count, count);
    }

    #[test]
    fn launch_lifetimes_and_clock() {
        let r = launch().analyse().unwrap();
        assert_eq!(
            (r.ctas, r.ctas_recorded, r.warps_missing, r.sms),
            (7, 6, 0, 2)
        );
        close(r.clock_ghz, 2.0);
        close(r.span_us, 9.0); // 0 .. 9000 ns
        // Lifetimes 2000 2000 2900 3600 4000 7000 ns: ranks 1, 3, 6, 6.
        quantiles_are(Some(r.lifetime), 2.0, 2.9, 7.0, 7.0, 6);
    }

    #[test]
    fn residency_and_refills() {
        let r = launch().analyse().unwrap().residency;
        // SM 0: 8500 of 9000 ns with one CTA, max 1. SM 5: [1000, 5000) 2,
        // at 5000 one exits as one enters (still 2, not 3), [5000, 7000) 2,
        // [7000, 8000) 1: 13000 / 7000, max 2.
        let sm: Vec<_> = r.per_sm.iter().map(|s| (s.sm, s.ctas, s.max)).collect();
        assert_eq!(sm, [(0, 3, 1), (5, 3, 2)]);
        close(r.per_sm[0].mean, 8500.0 / 9000.0);
        close(r.per_sm[1].mean, 13000.0 / 7000.0);
        close(r.per_sm[1].span_us, 7.0);
        // (8500 + 13000) / (9000 + 7000); below 2: all of SM 0, 1000 ns of SM 5.
        assert_eq!((r.max, r.expected), (2, Some(2)));
        close(r.mean, 21500.0 / 16000.0);
        close(r.below_max, 10000.0 / 16000.0);
        close(r.of_expected_pct.unwrap(), 21500.0 / 16000.0 / 2.0 * 100.0);
        // Gaps 0, 100, 400 ns: ranks 1, 2, 3.
        quantiles_are(r.refill, 0.0, 0.1, 0.4, 0.4, 3);
    }

    #[test]
    fn site_offsets() {
        let r = launch().analyse().unwrap();
        let s = &r.sites;
        assert_eq!(
            (
                s[0].warps.as_str(),
                s[1].warps.as_str(),
                s[2].warps.as_str()
            ),
            ("w0", "w0-1", "")
        );
        // Site 0: 200 .. 1200 cycles (0.1 .. 0.6 µs), ranks 1, 3, 6.
        quantiles_are(s[0].offset, 0.1, 0.3, 0.6, 0.6, 6);
        // Site 1: six 100s then six 300s: ranks 2, 6, 11.
        quantiles_are(s[1].offset, 0.05, 0.05, 0.15, 0.15, 12);
        assert_eq!(s[2].offset, None);
        assert!(s.iter().all(|t| t.stale == 0));
    }

    #[test]
    fn clocks_outside_the_lifetime_are_stale_not_offsets() {
        // Site 2 (never passed) holds an earlier launch's clock in one warp
        // (before its entry) and a clock past its exit in another: both
        // left out and counted, the other sites unchanged.
        let mut b = launch();
        let (entry, exit) = (b.rec(5, 1)[2], b.rec(3, 0)[4]);
        b.rec(5, 1)[7] = entry - 1;
        b.rec(3, 0)[7] = exit + 1;
        let r = b.analyse().unwrap();
        assert_eq!((r.sites[2].offset, r.sites[2].stale), (None, 2));
        quantiles_are(r.sites[0].offset, 0.1, 0.3, 0.6, 0.6, 6);
        assert!(
            r.render()
                .contains("never passed  (2 stale records of earlier launches left out)")
        );
    }

    #[test]
    fn render_and_json() {
        let text = launch().analyse().unwrap().render();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(
            lines[..4],
            [
                "launch: 7 CTAs (6 recorded, 1 missing) on 2 SMs over 9.00 µs; SM clock 2.000 GHz (from the timers)",
                "CTA lifetime: p10 2.00 µs, median 2.90 µs, p90 7.00 µs, max 7.00 µs",
                "residency: 1.34 CTAs per SM resident on average (max 2; 67.2 % of the 2 expected); \
                 fewer than 2 resident 62.5 % of the time",
                "refills: a freed slot stays empty 0.10 µs (median), 0.40 µs (p90) over 3 refills",
            ]
        );
        assert_eq!(lines.len(), 9, "{text}");
        // A wait in a loop records its last pass, not its first.
        assert_eq!(
            lines[4],
            "sites (µs from the warp's entry to its last pass):"
        );
        assert_eq!(
            lines[6],
            "     0.05     0.05     0.15      12  w0-1   bar.sync 1  (kernel.rs:10:5)"
        );
        assert!(
            lines[7].contains("0.30     0.10     0.60       6  w0     mbarrier.wait full"),
            "{text}"
        );
        assert!(
            lines[8].ends_with("griddepcontrol.wait  (kernel.rs:19:5)  never passed"),
            "{text}"
        );

        let json = serde_json::to_value(launch().analyse().unwrap()).unwrap();
        assert_eq!(json["residency"]["max"], 2);
        assert_eq!(json["sites"][1]["warps"], "w0-1");
    }

    #[test]
    fn a_coarse_timer_tick_drops_a_cta_from_the_rate() {
        // CTA 0's warps see one timer value: its 4000 cycles must not count.
        let mut b = launch();
        for w in 0..2 {
            let rec = b.rec(0, w);
            (rec[1], rec[3]) = (T0 + 7, T0 + 7);
        }
        close(b.analyse().unwrap().clock_ghz, 2.0);
    }

    #[test]
    fn a_cta_of_zero_cycles_holds_no_slot() {
        // CTA 6 enters and exits SM 0 at 2050 ns, between CTAs 0 and 1.
        let mut b = launch();
        b.warp(6, 0, 0, (2050, 2050), &[]);
        b.warp(6, 1, 0, (2050, 2050), &[]);
        let r = b.analyse().unwrap();
        let sm0 = &r.residency.per_sm[0];
        assert_eq!((sm0.ctas, sm0.max, r.ctas_recorded), (4, 1, 7));
        close(sm0.mean, 8500.0 / 9000.0);
        close(r.clock_ghz, 2.0);
        // Gaps 0 (SM 5), 50 (0 → 6), 50 (6 → 1), 400 (1 → 2): ranks 1, 2, 4.
        quantiles_are(r.residency.refill, 0.0, 0.05, 0.4, 0.4, 4);
        quantiles_are(Some(r.lifetime), 0.0, 2.9, 7.0, 7.0, 7);
    }

    #[test]
    fn an_entry_refills_one_freed_slot() {
        // SM 0 holds CTAs 0 and 1 from 0 ns; they exit at 100 and 110 ns,
        // CTAs 2 and 3 enter at 120 and 125 ns: two slots refilled, one
        // after 20 ns (100 → 120), the other after 15 ns (110 → 125), not
        // both by the entry at 120 (20 and 10 ns).
        let mut b = Buf::new(4, 1, &[]);
        for (c, ns) in [
            (0, (0, 100)),
            (1, (0, 110)),
            (2, (120, 300)),
            (3, (125, 300)),
        ] {
            b.warp(c, 0, 0, ns, &[]);
        }
        let r = b.analyse().unwrap().residency;
        quantiles_are(r.refill, 0.015, 0.015, 0.02, 0.02, 2);
    }

    #[test]
    fn partial_ctas_and_helpers() {
        let mut b = launch();
        b.rec(3, 1).fill(0); // CTA 3 keeps warp 0: exit 4990 ns
        let r = b.analyse().unwrap();
        assert_eq!((r.ctas_recorded, r.warps_missing), (6, 1));
        assert!(
            r.render()
                .starts_with("launch: 7 CTAs (6 recorded, 1 missing, 1 warp records missing)")
        );

        let v: Vec<u32> = (1..=10).collect();
        let p: Vec<_> = [0, 10, 50, 90, 100]
            .iter()
            .map(|&q| percentile(&v, q))
            .collect();
        assert_eq!(p, [Some(1), Some(1), Some(5), Some(9), Some(10)]);
        assert_eq!(percentile::<u32>(&[], 50), None);
        assert_eq!(warp_ranges(&[0, 1, 2, 3, 5, 7, 8].into()), "w0-3,w5,w7-8");
        assert_eq!(launch().layout.words(), Ok(7 * 2 * 8));
        let huge = ProbeLayout {
            ctas: u64::MAX,
            warps: u32::MAX,
            sites: vec![],
        };
        assert!(matches!(huge.words(), Err(ProbeError::TooLarge { .. })));
    }

    #[test]
    fn bad_buffers_are_errors() {
        let b = launch();
        let mut long = b.words.clone();
        long.push(0);
        assert_eq!(
            analyse(&b.layout, &long, None),
            Err(ProbeError::Length {
                expected: 112,
                found: 113
            })
        );
        let zeros = vec![0; 112];
        assert_eq!(
            analyse(&b.layout, &zeros, None),
            Err(ProbeError::NothingWritten)
        );

        let broken = |f: &dyn Fn(&mut Buf)| {
            let mut b = launch();
            f(&mut b);
            b.analyse().unwrap_err()
        };
        let e = broken(&|b| b.rec(2, 1)[4] = b.rec(2, 1)[2] - 1);
        assert!(
            matches!(
                e,
                ProbeError::ExitBeforeEntry {
                    cta: 2,
                    warp: 1,
                    counter: "clock",
                    ..
                }
            ),
            "{e}"
        );
        let e = broken(&|b| b.rec(4, 0)[3] = T0);
        assert!(
            matches!(
                e,
                ProbeError::ExitBeforeEntry {
                    cta: 4,
                    warp: 0,
                    counter: "timer",
                    ..
                }
            ),
            "{e}"
        );
        let e = broken(&|b| b.rec(4, 1)[0] = WRITTEN);
        assert_eq!(
            e,
            ProbeError::SplitCta {
                cta: 4,
                first_warp: 0,
                first_sm: 5,
                warp: 1,
                sm: 0
            }
        );
        assert_eq!(e.to_string(), "CTA 4: warp 1 reports SM 0 but warp 0 SM 5");
        let e = broken(&|b| b.rec(1, 0)[0] = 7);
        assert_eq!(
            e,
            ProbeError::BadHeader {
                cta: 1,
                warp: 0,
                word: 7
            }
        );
        let e = broken(&|b| {
            for c in 0..6 {
                for w in 0..2 {
                    b.rec(c, w)[1] = T0;
                    b.rec(c, w)[3] = T0;
                }
            }
        });
        assert_eq!(e, ProbeError::CoarseTimer);
    }
}
