//! Default schedules chosen by measurement: the table `kda-split autotune`
//! writes (`kernels/kda-split/tuned.json`, compiled in), and the lookup
//! behind `KdaConfig::tuned` and the CLI's `--schedule auto`.
//!
//! The table holds, per measured point (heads, batch, tokens), the chosen
//! schedule `[early, lanes, occupancy, cluster, evict[, bulk_store[, balance]]]` with
//! explicit lanes and cluster (so it means the same at any batch), its
//! µs/step, the seed defaults' µs/step, and every schedule measured there,
//! fastest first. A schedule carries the sixth and seventh entries only
//! where they are on ([`RawSchedule`]): tables from before them read as
//! they are, and are written back byte for byte.
//!
//! A lookup takes the nearest measured point: the same heads if measured,
//! else the nearest heads (log scale); among those, the points of the same
//! tokens if any, else the T = 1 points; among those, the nearest batch (log
//! scale; a tie goes to the larger). It then walks that point's preference
//! list (the chosen schedule, then every measured one, fastest first) and
//! takes the first schedule the configuration accepts: T > 1 rules out
//! early >= 2, and gate mode 2 needs early 0 and the default cluster (written
//! as 0). When none fits, or the table is empty, the seed's defaults (schedule
//! zeros) stand.

mod layout;

use std::sync::OnceLock;

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::{Map, Value};
use thiserror::Error;

use crate::config::{ConfigError, GateMode, KdaConfig, Schedule};

/// The checked-in table.
pub const TUNED_JSON: &str = include_str!("../tuned.json");

/// A schedule's raw entries `[early, lanes, occupancy, cluster, evict,
/// bulk_store, balance]` (zeros: the seed's defaults; the tuned table's
/// schedules have lanes and cluster explicit). Written (JSON, labels,
/// `{:?}`) with five entries where `bulk_store` and `balance` are 0, six
/// where only `bulk_store` is on, seven where `balance` is; read from five,
/// six or seven, so the tables and labels from before the sixth and seventh
/// entries mean and print what they did.
#[derive(Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct RawSchedule(pub [u32; 7]);

impl RawSchedule {
    /// The entries as written: five, six with `bulk_store` on, seven with
    /// `balance` on (what `KdaConfig::new` takes).
    pub fn entries(&self) -> &[u32] {
        let len = if self.0[6] != 0 {
            7
        } else if self.0[5] != 0 {
            6
        } else {
            5
        };
        &self.0[..len]
    }

    /// Entry 6: each token's state rows leave through shared memory as one
    /// bulk store ([`Schedule::bulk_store`]).
    pub fn bulk_store(&self) -> bool {
        self.0[5] != 0
    }

    /// Entry 7: the clusters' load-balancing scheduling policy
    /// ([`Schedule::balance`]).
    pub fn balance(&self) -> bool {
        self.0[6] != 0
    }

    /// The schedule with entry 7 off: its balance twin's code. The cluster
    /// scheduling policy is a launch attribute the runtime adds, so twins
    /// differing only in entry 7 compile to the same PTX but for a comment.
    pub fn without_balance(&self) -> RawSchedule {
        let mut raw = self.0;
        raw[6] = 0;
        RawSchedule(raw)
    }

    /// `early,lanes,occupancy,cluster,evict[,bulk_store[,balance]]`, as
    /// `--schedule` takes it.
    pub fn flag(&self) -> String {
        self.entries()
            .iter()
            .map(u32::to_string)
            .collect::<Vec<_>>()
            .join(",")
    }

    /// The entries `s` gives, the rest zero; `None` for other than 5 to 7.
    pub fn from_entries(s: &[u32]) -> Option<RawSchedule> {
        if !(5..=7).contains(&s.len()) {
            return None;
        }
        let mut raw = [0; 7];
        raw[..s.len()].copy_from_slice(s);
        Some(RawSchedule(raw))
    }
}

impl From<[u32; 5]> for RawSchedule {
    fn from(s: [u32; 5]) -> Self {
        RawSchedule([s[0], s[1], s[2], s[3], s[4], 0, 0])
    }
}

impl From<[u32; 6]> for RawSchedule {
    fn from(s: [u32; 6]) -> Self {
        RawSchedule([s[0], s[1], s[2], s[3], s[4], s[5], 0])
    }
}

impl From<[u32; 7]> for RawSchedule {
    fn from(s: [u32; 7]) -> Self {
        RawSchedule(s)
    }
}

/// `schedule == [e, l, o, c, v]` (or with six or seven entries; other
/// lengths do not compile).
macro_rules! eq_entries {
    ($($n:literal)*) => {$(
        impl PartialEq<[u32; $n]> for RawSchedule {
            fn eq(&self, other: &[u32; $n]) -> bool {
                *self == RawSchedule::from(*other)
            }
        }
    )*};
}
eq_entries!(5 6 7);

/// `[1, 16, 0, 8, 0]` (as the five-entry arrays printed before).
impl std::fmt::Debug for RawSchedule {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.entries().fmt(f)
    }
}

impl Serialize for RawSchedule {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.entries().serialize(s)
    }
}

impl<'de> Deserialize<'de> for RawSchedule {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let v = Vec::<u32>::deserialize(d)?;
        RawSchedule::from_entries(&v).ok_or_else(|| {
            serde::de::Error::invalid_length(
                v.len(),
                &"5 to 7 schedule entries (early, lanes, occupancy, cluster, evict[, bulk_store[, balance]])",
            )
        })
    }
}

/// One schedule measured at a point.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Measured {
    /// `[early, lanes, occupancy, cluster, evict[, bulk_store[, balance]]]`, lanes and
    /// cluster explicit.
    pub schedule: RawSchedule,
    #[serde(serialize_with = "round3")]
    pub us_per_step: f64,
    /// How it was timed: `full` (a finalist, the whole budget), `search` (the
    /// short timing of the search), `bench` (a `kda-split bench` run).
    #[serde(default = "full_timing")]
    pub timing: String,
}

/// One measured point of the table.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(try_from = "PointFile", into = "PointFile")]
pub struct TunedPoint {
    pub heads: u32,
    pub batch: u32,
    pub tokens: u32,
    /// The chosen schedule.
    pub schedule: RawSchedule,
    pub us_per_step: f64,
    /// The seed defaults' (schedule zeros) µs/step in the same run.
    pub seed_us_per_step: Option<f64>,
    /// Every schedule measured here, fastest first (full timings before
    /// search timings).
    pub measured: Vec<Measured>,
    /// Anything else the writer recorded (candidates tried, seconds, ...).
    pub notes: Map<String, Value>,
}

impl TunedPoint {
    /// The schedules to try, in order: the chosen one, then every measured one.
    pub fn preference(&self) -> impl Iterator<Item = RawSchedule> + '_ {
        std::iter::once(self.schedule).chain(self.measured.iter().map(|m| m.schedule))
    }

    /// `H12 B64 T1`.
    pub fn name(&self) -> String {
        format!("H{} B{} T{}", self.heads, self.batch, self.tokens)
    }
}

/// A point as the file holds it: the fields in the order written, the
/// speedup over the seed's defaults for the reader (recomputed on writing,
/// never read), the notes among the fields.
#[derive(Serialize, Deserialize)]
struct PointFile {
    heads: u32,
    batch: u32,
    tokens: u32,
    schedule: RawSchedule,
    #[serde(serialize_with = "round3")]
    us_per_step: f64,
    #[serde(default, serialize_with = "round3_opt")]
    seed_us_per_step: Option<f64>,
    #[serde(default, serialize_with = "round3_opt")]
    speedup: Option<f64>,
    #[serde(flatten)]
    notes: Map<String, Value>,
    #[serde(default)]
    measured: Vec<Measured>,
}

/// A point of no heads, requests or tokens.
#[derive(Debug, Error)]
#[error(
    "heads, batch and tokens must be positive; got heads {heads}, batch {batch}, tokens {tokens}"
)]
pub struct EmptyPoint {
    pub heads: u32,
    pub batch: u32,
    pub tokens: u32,
}

impl TryFrom<PointFile> for TunedPoint {
    type Error = EmptyPoint;

    fn try_from(p: PointFile) -> Result<Self, Self::Error> {
        if p.heads == 0 || p.batch == 0 || p.tokens == 0 {
            return Err(EmptyPoint {
                heads: p.heads,
                batch: p.batch,
                tokens: p.tokens,
            });
        }
        Ok(TunedPoint {
            heads: p.heads,
            batch: p.batch,
            tokens: p.tokens,
            schedule: p.schedule,
            us_per_step: p.us_per_step,
            seed_us_per_step: p.seed_us_per_step,
            measured: p.measured,
            notes: p.notes,
        })
    }
}

impl From<TunedPoint> for PointFile {
    fn from(p: TunedPoint) -> Self {
        PointFile {
            heads: p.heads,
            batch: p.batch,
            tokens: p.tokens,
            schedule: p.schedule,
            us_per_step: p.us_per_step,
            seed_us_per_step: p.seed_us_per_step,
            speedup: p.seed_us_per_step.map(|s| s / p.us_per_step),
            notes: p.notes,
            measured: p.measured,
        }
    }
}

/// The whole table.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct TunedTable {
    /// `source`, `device`, `gpu`, `driver`, `date`, ...: everything but the
    /// points (written first, in key order).
    #[serde(flatten)]
    pub meta: Map<String, Value>,
    pub points: Vec<TunedPoint>,
}

/// What `--schedule auto` resolved to, and why.
#[derive(Clone, Debug, PartialEq)]
pub struct Tuned {
    pub config: KdaConfig,
    /// The measured point whose schedule was taken; `None`: the seed's defaults.
    pub point: Option<TunedPoint>,
}

fn full_timing() -> String {
    "full".into()
}

/// `ln(a / b)`, the distance of the lookups.
fn log_distance(a: u32, b: u32) -> f64 {
    (a.max(1) as f64 / b.max(1) as f64).ln().abs()
}

/// The value of `values` nearest `want` in log scale (a tie goes to the larger).
fn nearest(values: impl Iterator<Item = u32>, want: u32) -> Option<u32> {
    values.min_by(|&a, &b| {
        log_distance(a, want)
            .total_cmp(&log_distance(b, want))
            .then(b.cmp(&a))
    })
}

/// Three decimals are plenty for µs (and keep the file readable).
fn round3<S: Serializer>(x: &f64, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_f64((x * 1000.0).round() / 1000.0)
}

fn round3_opt<S: Serializer>(x: &Option<f64>, s: S) -> Result<S::Ok, S::Error> {
    match x {
        Some(x) => round3(x, s),
        None => s.serialize_none(),
    }
}

impl TunedTable {
    /// Parse a table (the format [`TunedTable::to_json_string`] writes).
    pub fn parse(text: &str) -> Result<TunedTable, serde_json::Error> {
        serde_json::from_str(text)
    }

    /// The checked-in table (`tuned.json`). A table that does not parse
    /// counts as empty, so every lookup falls back to the seed's defaults (a
    /// unit test keeps the checked-in one parsing).
    pub fn builtin() -> &'static TunedTable {
        static TABLE: OnceLock<TunedTable> = OnceLock::new();
        TABLE.get_or_init(|| TunedTable::parse(TUNED_JSON).unwrap_or_default())
    }

    /// The table as JSON: the metadata, then one point after another with
    /// its measured schedules one a line (the `layout` module).
    pub fn to_json_string(&self) -> Result<String, serde_json::Error> {
        let mut out = Vec::new();
        let mut ser =
            serde_json::Serializer::with_formatter(&mut out, layout::TableLayout::default());
        self.serialize(&mut ser)?;
        out.push(b'\n');
        // The serializer writes only UTF-8.
        Ok(String::from_utf8_lossy(&out).into_owned())
    }

    /// A metadata string (`device`, `date`, `source`, ...).
    pub fn meta_str(&self, key: &str) -> Option<&str> {
        self.meta.get(key).and_then(Value::as_str)
    }

    /// The measured point a lookup of `(heads, batch, tokens)` uses (see the
    /// module doc), if the table has any.
    pub fn nearest_point(&self, heads: u32, batch: u32, tokens: u32) -> Option<&TunedPoint> {
        let h = nearest(self.points.iter().map(|p| p.heads), heads)?;
        let at_h = || self.points.iter().filter(move |p| p.heads == h);
        let t = if at_h().any(|p| p.tokens == tokens) {
            tokens
        } else if at_h().any(|p| p.tokens == 1) {
            1
        } else {
            nearest(at_h().map(|p| p.tokens), tokens)?
        };
        let pool = || at_h().filter(move |p| p.tokens == t);
        let b = nearest(pool().map(|p| p.batch), batch)?;
        pool().find(|p| p.batch == b)
    }

    /// The tuned configuration of the launch `seed` describes (built with
    /// the seed's default schedule): the first schedule of the nearest
    /// point's preference list that `KdaConfig::new` accepts for its gate
    /// mode and token count, else `seed` itself.
    pub fn lookup(&self, seed: &KdaConfig) -> Tuned {
        let seed = *seed;
        let (heads, batch, tokens) = (seed.heads, seed.batch, seed.tokens);
        let (gate_mode, has_bias) = (seed.gate_mode as u32, seed.has_bias);
        let Some(point) = self.nearest_point(heads, batch, tokens) else {
            return Tuned {
                config: seed,
                point: None,
            };
        };
        let fit = |s: RawSchedule| -> Option<KdaConfig> {
            let mut s = s;
            if seed.gate_mode == GateMode::Fma {
                // The seed asserts early 0 and a cluster left at its default.
                if s.0[0] != 0 || s.0[3] != seed.cluster() {
                    return None;
                }
                s.0[3] = 0;
            }
            KdaConfig::new(heads, batch, gate_mode, has_bias, s.entries(), tokens).ok()
        };
        match point.preference().find_map(fit) {
            Some(config) => Tuned {
                config,
                point: Some(point.clone()),
            },
            None => Tuned {
                config: seed,
                point: None,
            },
        }
    }

    /// [`TunedTable::lookup`] for gate mode 0 with bias: the schedule, or
    /// `None` where the seed's defaults stand.
    pub fn schedule(&self, heads: u32, batch: u32, tokens: u32) -> Option<RawSchedule> {
        let seed = KdaConfig::new(heads, batch, 0, true, &[0, 0, 0], tokens).ok()?;
        let tuned = self.lookup(&seed);
        tuned.point.map(|_| tuned.config.schedule.raw())
    }
}

/// The checked-in table's schedule for `(heads, batch, tokens)` (gate mode
/// 0; see the module doc for how the point is chosen), or `None` where the
/// seed's defaults stand.
pub fn tuned_schedule(heads: u32, batch: u32, tokens: u32) -> Option<RawSchedule> {
    TunedTable::builtin().schedule(heads, batch, tokens)
}

impl Schedule {
    /// `[early, lanes, occupancy, cluster, evict, bulk_store, balance]` as
    /// given (zeros: defaults).
    pub fn raw(&self) -> RawSchedule {
        RawSchedule([
            self.early as u32,
            self.lanes,
            self.occupancy,
            self.cluster,
            u32::from(self.evict),
            u32::from(self.bulk_store),
            u32::from(self.balance),
        ])
    }
}

impl KdaConfig {
    /// The schedule with the seed's defaults applied: lanes and cluster
    /// explicit (a raw zero resolves to what [`KdaConfig::lanes`] and
    /// [`KdaConfig::cluster`] give).
    pub fn resolved_schedule(&self) -> Schedule {
        Schedule {
            lanes: self.lanes(),
            cluster: self.cluster(),
            ..self.schedule
        }
    }

    /// `KdaConfig::new` with the schedule of the tuned table (the checked-in
    /// `tuned.json`) where one is valid for this gate mode and token count,
    /// else with the seed's defaults (schedule zeros).
    pub fn tuned(
        heads: u32,
        batch: u32,
        gate_mode: u32,
        has_bias: bool,
        tokens: u32,
    ) -> Result<KdaConfig, ConfigError> {
        let seed = KdaConfig::new(heads, batch, gate_mode, has_bias, &[0, 0, 0], tokens)?;
        Ok(TunedTable::builtin().lookup(&seed).config)
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    /// `t`'s lookup for a launch (bias on) of the seed's default schedule.
    fn at(t: &TunedTable, heads: u32, batch: u32, mode: u32, tokens: u32) -> Tuned {
        t.lookup(&KdaConfig::new(heads, batch, mode, true, &[0, 0, 0], tokens).unwrap())
    }

    fn point(heads: u32, batch: u32, tokens: u32, measured: &[([u32; 5], f64)]) -> TunedPoint {
        TunedPoint {
            heads,
            batch,
            tokens,
            schedule: measured[0].0.into(),
            us_per_step: measured[0].1,
            seed_us_per_step: Some(measured[measured.len() - 1].1),
            measured: measured
                .iter()
                .map(|&(schedule, us)| Measured {
                    schedule: schedule.into(),
                    us_per_step: us,
                    timing: "full".into(),
                })
                .collect(),
            notes: Map::new(),
        }
    }

    /// Heads 12 at batch 1, 64, 512 (T = 1) and batch 8 (T = 4); heads 32 at
    /// batch 128.
    fn table() -> TunedTable {
        TunedTable {
            meta: Map::new(),
            points: vec![
                point(12, 1, 1, &[([1, 16, 0, 8, 0], 2.5), ([0, 8, 0, 8, 0], 3.3)]),
                point(
                    12,
                    64,
                    1,
                    &[
                        ([3, 16, 0, 2, 0], 32.0),
                        ([2, 16, 0, 4, 1], 33.0),
                        ([1, 8, 0, 2, 0], 33.5),
                        ([0, 16, 0, 4, 0], 34.4),
                    ],
                ),
                point(
                    12,
                    512,
                    1,
                    &[([3, 16, 0, 2, 1], 222.0), ([0, 16, 0, 4, 0], 247.0)],
                ),
                point(
                    12,
                    8,
                    4,
                    &[([1, 8, 0, 4, 0], 14.9), ([0, 16, 0, 4, 0], 15.4)],
                ),
                point(
                    32,
                    128,
                    1,
                    &[([3, 16, 0, 2, 0], 150.0), ([0, 16, 0, 4, 0], 171.0)],
                ),
            ],
        }
    }

    #[test]
    fn the_checked_in_table_parses_and_every_schedule_is_valid_at_its_point() {
        let t = TunedTable::parse(TUNED_JSON).expect("tuned.json parses");
        assert!(!t.points.is_empty());
        assert!(t.meta_str("source").is_some() && t.meta_str("device").is_some());
        for p in &t.points {
            for s in p.preference() {
                KdaConfig::new(p.heads, p.batch, 0, true, s.entries(), p.tokens)
                    .unwrap_or_else(|e| panic!("{} {s:?}: {e}", p.name()));
            }
            // The chosen schedule is the one looked up at its own point.
            assert_eq!(
                TunedTable::builtin().schedule(p.heads, p.batch, p.tokens),
                Some(p.schedule),
                "{}",
                p.name()
            );
        }
        assert_eq!(TunedTable::builtin(), &t);
    }

    #[test]
    fn the_table_round_trips_through_its_json() {
        let mut t = table();
        t.meta.insert("source".into(), json!("a test"));
        t.points[0].notes.insert("candidates".into(), json!(61));
        let text = t.to_json_string().unwrap();
        assert_eq!(TunedTable::parse(&text).unwrap(), t, "{text}");
        assert!(
            text.contains(
                "\n        {\"schedule\": [1,16,0,8,0], \"us_per_step\": 2.5, \"timing\": \"full\"}"
            ),
            "{text}"
        );
        let empty = TunedTable::default().to_json_string().unwrap();
        assert_eq!(TunedTable::parse(&empty).unwrap(), TunedTable::default());
    }

    #[test]
    fn the_checked_in_table_is_written_back_byte_for_byte() {
        let t = TunedTable::parse(TUNED_JSON).unwrap();
        assert_eq!(t.to_json_string().unwrap(), TUNED_JSON);
        // No heads, requests or tokens: not a point.
        let zero = TUNED_JSON.replacen("\"heads\": 12,", "\"heads\": 0,", 1);
        let e = TunedTable::parse(&zero).unwrap_err();
        assert!(e.to_string().contains("must be positive"), "{e}");
    }

    #[test]
    fn a_schedule_has_five_entries_or_six_with_bulk_store_on_or_seven_with_balance_on() {
        let parse = |text: &str| serde_json::from_str::<RawSchedule>(text);
        let five = parse("[1,16,0,8,0]").unwrap();
        assert_eq!(five, RawSchedule([1, 16, 0, 8, 0, 0, 0]));
        assert!(!five.bulk_store() && five == [1, 16, 0, 8, 0]);
        // A sixth entry of 0 reads as five and is written as five.
        assert_eq!(parse("[1,16,0,8,0,0]").unwrap(), five);
        assert_eq!(serde_json::to_string(&five).unwrap(), "[1,16,0,8,0]");
        assert_eq!(
            (format!("{five:?}"), five.flag()),
            ("[1, 16, 0, 8, 0]".into(), "1,16,0,8,0".into())
        );
        let six = parse("[0,16,0,4,0,1]").unwrap();
        assert!(six.bulk_store() && six == [0, 16, 0, 4, 0, 1] && six != [0, 16, 0, 4, 0]);
        assert_eq!(serde_json::to_string(&six).unwrap(), "[0,16,0,4,0,1]");
        assert_eq!(
            (format!("{six:?}"), six.flag()),
            ("[0, 16, 0, 4, 0, 1]".into(), "0,16,0,4,0,1".into())
        );
        // Trailing zeros read as the shorter form and are written as it.
        assert_eq!(parse("[0,16,0,4,0,1,0]").unwrap(), six);
        assert_eq!(parse("[1,16,0,8,0,0,0]").unwrap(), five);
        let seven = parse("[1,16,0,4,0,0,1]").unwrap();
        assert!(seven.balance() && !seven.bulk_store() && seven == [1, 16, 0, 4, 0, 0, 1]);
        assert_eq!(serde_json::to_string(&seven).unwrap(), "[1,16,0,4,0,0,1]");
        assert_eq!(
            (format!("{seven:?}"), seven.flag()),
            ("[1, 16, 0, 4, 0, 0, 1]".into(), "1,16,0,4,0,0,1".into())
        );
        for bad in ["[1,16,0,8]", "[1,16,0,8,0,1,0,0]", "[]", "[1,16,0,8,-1]"] {
            assert!(parse(bad).is_err(), "{bad}");
        }
        let e = parse("[1,16,0,8]").unwrap_err().to_string();
        assert!(e.contains("5 to 7 schedule entries"), "{e}");
    }

    #[test]
    fn a_point_may_choose_and_measure_bulk_store() {
        let mut t = table();
        // H12 B8 T4 chooses its fastest, with bulk_store; the seed's
        // defaults last.
        t.points[3] = point(
            12,
            8,
            4,
            &[([1, 8, 0, 4, 0], 14.9), ([0, 16, 0, 4, 0], 15.4)],
        );
        t.points[3].schedule = [1, 8, 0, 4, 0, 1].into();
        t.points[3].measured.insert(
            0,
            Measured {
                schedule: [1, 8, 0, 4, 0, 1].into(),
                us_per_step: 14.5,
                timing: "full".into(),
            },
        );
        let text = t.to_json_string().unwrap();
        assert!(text.contains("\"schedule\": [1,8,0,4,0,1],"), "{text}");
        assert!(
            text.contains(
                "{\"schedule\": [1,8,0,4,0,1], \"us_per_step\": 14.5, \"timing\": \"full\"}"
            ),
            "{text}"
        );
        assert!(
            text.contains("{\"schedule\": [1,8,0,4,0], \"us_per_step\": 14.9"),
            "{text}"
        );
        assert_eq!(TunedTable::parse(&text).unwrap(), t);
        // T > 1 takes it; the bulk store is part of the configuration.
        let c = at(&t, 12, 8, 0, 4).config;
        assert!(c.bulk_store() && c.schedule.raw() == [1, 8, 0, 4, 0, 1]);
        assert_eq!(t.schedule(12, 64, 4), Some([1, 8, 0, 4, 0, 1].into()));
        // A lookup that lands on the point with T = 1 (heads 12 has T = 1
        // points; a table of the T = 4 point alone) cannot use it: the next
        // schedule of the list.
        let only = TunedTable {
            meta: Map::new(),
            points: vec![t.points[3].clone()],
        };
        assert_eq!(only.schedule(12, 8, 1), Some([1, 8, 0, 4, 0].into()));
        assert!(!at(&only, 12, 8, 0, 1).config.bulk_store());
    }

    #[test]
    fn same_heads_and_the_nearest_batch_in_log_scale() {
        let t = table();
        let at = |h, b, tk| {
            t.nearest_point(h, b, tk)
                .map(|p| (p.heads, p.batch, p.tokens))
        };
        assert_eq!(at(12, 1, 1), Some((12, 1, 1)));
        // 8 is nearer 1 than 64 in log scale (8x against 8x: a tie goes to
        // the larger batch); 7 is nearer 1.
        assert_eq!(at(12, 8, 1), Some((12, 64, 1)));
        assert_eq!(at(12, 7, 1), Some((12, 1, 1)));
        assert_eq!(at(12, 100, 1), Some((12, 64, 1)));
        assert_eq!(at(12, 200, 1), Some((12, 512, 1)));
        assert_eq!(at(12, 4096, 1), Some((12, 512, 1)));
        // Heads not measured: the nearest heads (log scale), 16 -> 12,
        // 24 -> 32 (and only batch 128 there).
        assert_eq!(at(16, 64, 1), Some((12, 64, 1)));
        assert_eq!(at(24, 1, 1), Some((32, 128, 1)));
        assert_eq!(at(1, 1, 1), Some((12, 1, 1)));
    }

    #[test]
    fn tokens_use_their_own_points_else_t1() {
        let t = table();
        // T = 4 is measured at heads 12: its point, whatever the batch.
        assert_eq!(t.schedule(12, 8, 4), Some([1, 8, 0, 4, 0].into()));
        assert_eq!(t.schedule(12, 512, 4), Some([1, 8, 0, 4, 0].into()));
        // T = 2 is not: the T = 1 point, filtered by the T > 1 constraints
        // (early < 2): batch 64's fastest staged schedules are skipped.
        assert_eq!(t.schedule(12, 64, 2), Some([1, 8, 0, 2, 0].into()));
        // Heads 32 has no T > 1 point and batch 128's list holds only early 3
        // and the seed's (explicit) defaults.
        assert_eq!(t.schedule(32, 128, 4), Some([0, 16, 0, 4, 0].into()));
        // Batch 512 lists nothing valid at T > 1 but the seed's.
        assert_eq!(t.schedule(12, 512, 3), Some([0, 16, 0, 4, 0].into()));
    }

    #[test]
    fn lookup_falls_back_to_the_seed_defaults() {
        let t = table();
        // Nothing in the list survives the T > 1 filter: the seed's zeros.
        let only_staged = TunedTable {
            meta: Map::new(),
            points: vec![point(12, 64, 1, &[([3, 16, 0, 2, 0], 32.0)])],
        };
        assert_eq!(only_staged.schedule(12, 64, 2), None);
        let tuned = at(&only_staged, 12, 64, 1, 2);
        assert_eq!(tuned.point, None);
        assert_eq!(
            tuned.config,
            KdaConfig::new(12, 64, 1, true, &[0, 0, 0], 2).unwrap()
        );
        // An empty table: the seed's defaults everywhere.
        assert_eq!(TunedTable::default().schedule(12, 64, 1), None);
        assert_eq!(at(&TunedTable::default(), 12, 64, 0, 1).point, None);
        // `KdaConfig::tuned`: the seed constructor's errors come through.
        assert_eq!(t.schedule(12, 64, 9), None);
        assert_eq!(
            KdaConfig::tuned(12, 64, 0, true, 9).unwrap_err(),
            ConfigError::Tokens { tokens: 9 }
        );
        assert_eq!(
            KdaConfig::tuned(12, 64, 3, true, 1).unwrap_err(),
            ConfigError::GateMode { mode: 3 }
        );
        assert_eq!(
            KdaConfig::tuned(0, 64, 0, true, 1).unwrap_err(),
            ConfigError::NoHeads
        );
        // Mode 2 at T > 1 is the seed's error, tuned or not.
        assert!(matches!(
            KdaConfig::tuned(12, 64, 2, true, 2).unwrap_err(),
            ConfigError::TokensSchedule { .. }
        ));
    }

    #[test]
    fn gate_mode_2_takes_early_0_at_the_default_cluster_written_as_0() {
        let t = table();
        // Batch 64 (default cluster 4): the seed's explicit [0,16,0,4,0] is
        // the first early-0 entry at cluster 4; written with cluster 0.
        let c = at(&t, 12, 64, 2, 1);
        assert_eq!(c.config.schedule.raw(), [0, 16, 0, 0, 0]);
        assert_eq!((c.config.cluster(), c.config.lanes()), (4, 16));
        assert!(c.point.is_some());
        // Batch 1 (default cluster 8): [0,8,0,8,0] -> [0,8,0,0,0].
        let c = at(&t, 12, 1, 2, 1);
        assert_eq!(c.config.schedule.raw(), [0, 8, 0, 0, 0]);
        // Modes 0 and 1 take the chosen schedule.
        let c = at(&t, 12, 64, 1, 1);
        assert_eq!(c.config.schedule.raw(), [3, 16, 0, 2, 0]);
        assert_eq!(c.config.gate_mode, GateMode::MmaChains);
    }

    #[test]
    fn the_resolved_schedule_makes_lanes_and_cluster_explicit() {
        let c = KdaConfig::new(12, 1, 0, true, &[2, 0, 0, 0, 1], 1).unwrap();
        assert_eq!(c.resolved_schedule().raw(), [2, 8, 0, 8, 1]);
        let c = KdaConfig::new(12, 64, 0, true, &[0, 0, 3], 1).unwrap();
        assert_eq!(c.resolved_schedule().raw(), [0, 16, 3, 4, 0]);
        assert_eq!(c.schedule.raw(), [0, 0, 3, 0, 0]);
    }

    #[test]
    fn kda_config_tuned_uses_the_checked_in_table() {
        for (heads, batch, mode, tokens) in [(12, 64, 0, 1), (6, 3, 1, 4), (32, 512, 2, 1)] {
            let c = KdaConfig::tuned(heads, batch, mode, true, tokens).unwrap();
            let t = at(TunedTable::builtin(), heads, batch, mode, tokens);
            assert_eq!(c, t.config);
            assert_eq!((c.heads, c.batch, c.tokens), (heads, batch, tokens));
            assert_eq!(c.gate_mode as u32, mode);
        }
        assert_eq!(
            KdaConfig::tuned(12, 64, 0, true, 0).unwrap_err(),
            ConfigError::Tokens { tokens: 0 }
        );
    }
}
