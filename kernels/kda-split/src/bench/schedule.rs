//! Schedules as the command line spells them: `auto`, a name (`seed`,
//! `default`, `e1`, ...) or raw entries
//! `early,lanes,occupancy[,cluster[,evict[,bulk_store[,balance]]]]`.
//! One parser ([`Candidate`]'s `FromStr`) serves every command's
//! `--schedule`: the demo, `run`, `ptx`, `info`, `bench` and `autotune`.

use std::str::FromStr;

use thiserror::Error;

use super::workload::Point;
use crate::config::{ConfigError, KdaConfig};
use crate::tuned::{RawSchedule, TunedTable};

/// A schedule to try: a label and the raw `(early, lanes, occupancy[,
/// cluster[, evict[, bulk_store[, balance]]]])` of `KdaConfig::new`. `auto` (label `auto`, no
/// entries) stands for the tuned table's schedule until resolved at a point
/// ([`Candidate::at`]) or for a configuration ([`Candidate::config`]).
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Candidate {
    pub label: String,
    /// Absent in a bench file's option list means no entries (`auto`).
    #[serde(default)]
    pub raw: Vec<u32>,
}

/// Why a `--schedule` value is not a schedule.
#[derive(Clone, Debug, Error, PartialEq, Eq)]
pub enum ScheduleError {
    #[error(
        "`{entry}` is not a non-negative integer (expected auto, seed, one of {names} or \
         early,lanes,occupancy[,cluster[,evict[,bulk_store[,balance]]]])",
        names = NAMED.join(", ")
    )]
    Entry { entry: String },
    /// The constructor's own rule, caught before any configuration is built.
    #[error(transparent)]
    Length(ConfigError),
}

/// The named schedules besides `auto` and `seed`.
pub const NAMED: [&str; 8] = [
    "e1",
    "e1-l8",
    "e1-l16",
    "e2",
    "e2-c2",
    "e2-c4",
    "e2-c2-evict",
    "e3-c2",
];

/// The named schedules (`None`: not a name).
pub fn named(label: &str) -> Option<Candidate> {
    let raw: &[u32] = match label {
        "auto" => return Some(Candidate::auto()),
        "seed" | "default" => return Some(Candidate::seed()),
        "e1" => &[1, 0, 0],
        "e1-l8" => &[1, 8, 0],
        "e1-l16" => &[1, 16, 0],
        "e2" => &[2, 0, 0],
        "e2-c2" => &[2, 0, 0, 2],
        "e2-c4" => &[2, 0, 0, 4],
        "e2-c2-evict" => &[2, 0, 0, 2, 1],
        "e3-c2" => &[3, 0, 0, 2],
        _ => return None,
    };
    Some(Candidate::new(label, raw))
}

/// The bench's sweep without `--schedule` (`auto` first: it is always
/// measured under its own name).
pub fn default_schedules(quick: bool) -> Vec<Candidate> {
    let names: &[&str] = if quick { &["e1", "e2-c2"] } else { &NAMED };
    let mut all = vec![Candidate::auto(), Candidate::seed()];
    all.extend(names.iter().filter_map(|n| named(n)));
    all
}

impl FromStr for Candidate {
    type Err = ScheduleError;

    /// A name, or 3 to 7 comma-separated entries (labelled `[text]`, or
    /// `seed` for `0,0,0`).
    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let text = text.trim();
        if let Some(c) = named(text) {
            return Ok(c);
        }
        let raw = text
            .split(',')
            .map(|entry| {
                entry
                    .trim()
                    .parse::<u32>()
                    .map_err(|_| ScheduleError::Entry {
                        entry: entry.to_string(),
                    })
            })
            .collect::<Result<Vec<_>, _>>()?;
        if !(3..=7).contains(&raw.len()) {
            return Err(ScheduleError::Length(ConfigError::ScheduleLength {
                len: raw.len(),
            }));
        }
        let label = if raw == [0, 0, 0] {
            "seed".to_string()
        } else {
            format!("[{text}]")
        };
        Ok(Candidate { label, raw })
    }
}

impl Candidate {
    pub fn new(label: &str, raw: &[u32]) -> Candidate {
        Candidate {
            label: label.to_string(),
            raw: raw.to_vec(),
        }
    }

    /// `auto`: the tuned table's schedule, resolved per point by [`Candidate::at`].
    pub fn auto() -> Candidate {
        Candidate::new("auto", &[])
    }

    /// `seed`: the seed's defaults, `0,0,0`.
    pub fn seed() -> Candidate {
        Candidate::new("seed", &[0, 0, 0])
    }

    /// Whether this is `auto`, not yet resolved.
    pub fn is_auto(&self) -> bool {
        self.label == "auto" && self.raw.is_empty()
    }

    /// This schedule at `point`: `auto` becomes the tuned table's schedule
    /// there (gate mode 0, `KdaConfig::tuned`), anything else stays as it is.
    pub fn at(&self, point: &Point) -> Candidate {
        if !self.is_auto() {
            return self.clone();
        }
        let raw = KdaConfig::tuned(point.heads, point.batch, 0, true, point.tokens)
            .map_or(RawSchedule::default(), |c| c.schedule.raw());
        Candidate::new("auto", raw.entries())
    }

    /// The configuration `new` makes of this schedule (the constructor with
    /// everything else fixed): of its entries, or for `auto` of the seed's
    /// defaults, then tuned (as `KdaConfig::tuned`).
    pub fn config(
        &self,
        new: impl Fn(&[u32]) -> Result<KdaConfig, ConfigError>,
    ) -> Result<KdaConfig, ConfigError> {
        if self.is_auto() {
            Ok(TunedTable::builtin().lookup(&new(&[0, 0, 0])?).config)
        } else {
            new(&self.raw)
        }
    }

    /// `auto`, or the entries joined by commas.
    pub fn text(&self) -> String {
        if self.is_auto() {
            return "auto".into();
        }
        self.raw
            .iter()
            .map(u32::to_string)
            .collect::<Vec<_>>()
            .join(",")
    }

    /// For `auto`: where `cfg`'s schedule came from, as one line.
    pub fn note(&self, cfg: &KdaConfig) -> Option<String> {
        if !self.is_auto() {
            return None;
        }
        let table = TunedTable::builtin();
        let seed = KdaConfig {
            schedule: Default::default(),
            ..*cfg
        };
        let (gpu, date) = (
            table.meta_str("gpu").unwrap_or("?"),
            table.meta_str("date").unwrap_or("?"),
        );
        let Some(p) = table.lookup(&seed).point else {
            return Some(
                "schedule auto: no tuned schedule fits this configuration; the seed's defaults"
                    .into(),
            );
        };
        let us = |x: Option<f64>| x.map_or("not measured".into(), |x| format!("{x:.2} µs/step"));
        let own = cfg.resolved_schedule().raw();
        let seed_us = us(p.seed_us_per_step);
        Some(if own == p.schedule {
            format!(
                "schedule auto: tuned at {} on {gpu} ({date}): {}, the seed's defaults {seed_us}",
                p.name(),
                us(Some(p.us_per_step))
            )
        } else {
            let measured = p.measured.iter().find(|m| m.schedule == own);
            format!(
                "schedule auto: the fastest schedule of {} ({gpu}, {date}) that fits this \
                 configuration: {} there (its tuned [{}] does not fit), the seed's defaults {seed_us}",
                p.name(),
                us(measured.map(|m| m.us_per_step)),
                p.schedule.flag()
            )
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<Candidate, ScheduleError> {
        text.parse()
    }

    #[test]
    fn names_raw_lists_and_errors() {
        assert_eq!(parse("auto").unwrap(), Candidate::auto());
        for seed in ["seed", "default", "0,0,0", " 0, 0,0 "] {
            assert_eq!(parse(seed).unwrap(), Candidate::seed(), "{seed}");
        }
        assert_eq!(
            parse("e2-c2").unwrap(),
            Candidate::new("e2-c2", &[2, 0, 0, 2])
        );
        assert_eq!(
            parse("1,8,0").unwrap(),
            Candidate::new("[1,8,0]", &[1, 8, 0])
        );
        assert_eq!(parse("3,16,0,2,1").unwrap().text(), "3,16,0,2,1");
        assert_eq!(parse("auto").unwrap().text(), "auto");
        assert_eq!(parse("seed").unwrap().text(), "0,0,0");
        let e = parse("0,x,0").unwrap_err();
        assert!(
            e.to_string().contains("`x` is not a non-negative integer"),
            "{e}"
        );
        assert!(parse("bogus").is_err());
        let e = parse("1,2").unwrap_err();
        assert_eq!(
            e,
            ScheduleError::Length(ConfigError::ScheduleLength { len: 2 })
        );
        assert!(
            e.to_string().contains("schedule needs 3 to 7 entries"),
            "{e}"
        );
        assert!(parse("1,2,3,4,5,6,7,8").is_err());
        // The sixth entry: bulk_store (T > 1); the seventh: balance.
        assert_eq!(
            parse("0,16,0,4,0,1").unwrap(),
            Candidate::new("[0,16,0,4,0,1]", &[0, 16, 0, 4, 0, 1])
        );
        assert_eq!(
            parse("1,16,0,4,0,0,1").unwrap(),
            Candidate::new("[1,16,0,4,0,0,1]", &[1, 16, 0, 4, 0, 0, 1])
        );
    }

    #[test]
    fn every_named_schedule_is_valid_somewhere() {
        let point = Point {
            heads: 12,
            batch: 128,
            tokens: 1,
        };
        for c in default_schedules(false) {
            assert!(
                KdaConfig::new(12, 128, 0, true, &c.at(&point).raw, 1).is_ok(),
                "{}",
                c.label
            );
        }
        assert_eq!(default_schedules(false).len(), 10);
        assert_eq!(default_schedules(true).len(), 4);
    }

    #[test]
    fn auto_is_the_tuned_schedule_of_each_point() {
        let auto = named("auto").unwrap();
        assert!(auto.raw.is_empty());
        for (heads, batch, tokens) in [(12, 64, 1), (12, 8, 4), (6, 3, 2), (32, 512, 1)] {
            let point = Point {
                heads,
                batch,
                tokens,
            };
            let at = auto.at(&point);
            assert_eq!(at.label, "auto");
            let tuned = KdaConfig::tuned(heads, batch, 0, true, tokens).unwrap();
            assert_eq!(at.raw, tuned.schedule.raw().entries());
            assert!(KdaConfig::new(heads, batch, 0, true, &at.raw, tokens).is_ok());
        }
        // Anything else stays as it is.
        let e1 = named("e1").unwrap();
        assert_eq!(
            e1.at(&Point {
                heads: 12,
                batch: 1,
                tokens: 1
            }),
            e1
        );
    }
}
