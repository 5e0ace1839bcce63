//! Choosing a point's schedule from what was measured there (the search's
//! finalists, a bench file's rows, or a table's record for `--reselect`).

use serde_json::{Map, Value, json};

use super::text;
use crate::bench::workload::Point;
use crate::config::KdaConfig;
use crate::tuned::{Measured, RawSchedule, TunedPoint, TunedTable};

/// Timing kinds, best first: full timings rank before the search's.
fn timing_rank(timing: &str) -> u8 {
    u8::from(timing == "search")
}

/// The note of a point listing the schedules skipped as unusable (they spill).
pub const EXCLUDED_NOTE: &str = "excluded_spilling";

/// The table's entry for `point` from what was measured there: `measured`
/// in any order (sorted here, full timings first, each schedule once),
/// `seed` the seed defaults' explicit schedule. The fastest schedule
/// `usable` accepts (full timings first) wins unless it beats the seed's by
/// less than `min_gain` and the seed's defaults are usable. `usable` is asked
/// only as far down the ranking as needed; the schedules it rejects on the
/// way are listed in the note [`EXCLUDED_NOTE`]. `None`: nothing usable was
/// measured.
pub fn tuned_point(
    point: &Point,
    seed: RawSchedule,
    mut measured: Vec<Measured>,
    min_gain: f64,
    mut notes: Map<String, Value>,
    usable: &mut dyn FnMut(&RawSchedule) -> bool,
) -> Option<TunedPoint> {
    measured.sort_by(|a, b| {
        timing_rank(&a.timing)
            .cmp(&timing_rank(&b.timing))
            .then(a.us_per_step.total_cmp(&b.us_per_step))
    });
    let mut once: Vec<Measured> = Vec::new();
    for m in measured {
        if !once.iter().any(|o| o.schedule == m.schedule) {
            once.push(m);
        }
    }
    let mut excluded: Vec<RawSchedule> = Vec::new();
    let mut best = None;
    for m in &once {
        if usable(&m.schedule) {
            best = Some(m.clone());
            break;
        }
        excluded.push(m.schedule);
    }
    let seed_us = once
        .iter()
        .find(|m| m.schedule == seed)
        .map(|m| m.us_per_step);
    let chosen = best.map(|best| match seed_us {
        Some(s) if best.us_per_step > s * (1.0 - min_gain) && best.schedule != seed => {
            let seed_usable = !excluded.contains(&seed) && {
                let ok = usable(&seed);
                if !ok {
                    excluded.push(seed);
                }
                ok
            };
            if seed_usable {
                Measured {
                    schedule: seed,
                    us_per_step: s,
                    timing: best.timing.clone(),
                }
            } else {
                best
            }
        }
        _ => best,
    });
    notes.remove(EXCLUDED_NOTE);
    if !excluded.is_empty() {
        notes.insert(EXCLUDED_NOTE.into(), json!(excluded));
    }
    let chosen = chosen?;
    Some(TunedPoint {
        heads: point.heads,
        batch: point.batch,
        tokens: point.tokens,
        schedule: chosen.schedule,
        us_per_step: chosen.us_per_step,
        seed_us_per_step: seed_us,
        measured: once,
        notes,
    })
}

/// The seed defaults' explicit schedule at `point` (gate mode 0, bias on).
pub fn seed_schedule(point: &Point) -> Option<RawSchedule> {
    KdaConfig::new(point.heads, point.batch, 0, true, &[0, 0, 0], point.tokens)
        .ok()
        .map(|c| c.resolved_schedule().raw())
}

/// `table` with every point chosen again by [`tuned_point`] from the
/// schedules it measured there, with `min_gain` and `usable` (of a point and
/// a schedule); the metadata stays but for `min_gain`. A point that measured
/// nothing stays as it is; one where nothing measured is usable is left out.
pub fn reselect(
    table: &TunedTable,
    min_gain: f64,
    usable: &mut dyn FnMut(&Point, &RawSchedule) -> bool,
) -> TunedTable {
    let mut meta = table.meta.clone();
    meta.insert("min_gain".into(), json!(min_gain));
    let points = table
        .points
        .iter()
        .filter_map(|p| {
            let point = Point {
                heads: p.heads,
                batch: p.batch,
                tokens: p.tokens,
            };
            if p.measured.is_empty() {
                println!("  {point}: no measurements, kept as it is");
                return Some(p.clone());
            }
            let seed = seed_schedule(&point).unwrap_or(RawSchedule([u32::MAX; 7]));
            let t = tuned_point(
                &point,
                seed,
                p.measured.clone(),
                min_gain,
                p.notes.clone(),
                &mut |s| usable(&point, s),
            );
            match &t {
                None => println!("  {point}: nothing measured is usable, left out"),
                Some(t) if t.schedule != p.schedule => println!(
                    "  {point}: {} {:.3} µs/step (was {} {:.3})",
                    text(&t.schedule),
                    t.us_per_step,
                    text(&p.schedule),
                    p.us_per_step
                ),
                Some(_) => {}
            }
            t
        })
        .collect();
    TunedTable { meta, points }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(heads: u32, batch: u32, tokens: u32) -> Point {
        Point {
            heads,
            batch,
            tokens,
        }
    }

    fn rs(s: [u32; 5]) -> RawSchedule {
        s.into()
    }

    fn m(schedule: RawSchedule, us_per_step: f64, timing: &str) -> Measured {
        Measured {
            schedule,
            us_per_step,
            timing: timing.into(),
        }
    }

    #[test]
    fn the_seed_stays_unless_the_best_gains_enough() {
        let seed = rs([0, 16, 0, 4, 0]);
        let measured = vec![
            m(rs([1, 8, 0, 2, 0]), 9.0, "search"),
            m(seed, 10.0, "full"),
            m(rs([3, 16, 0, 2, 0]), 9.5, "full"),
            m(rs([3, 16, 0, 2, 0]), 9.4, "search"),
        ];
        let all = &mut |_: &RawSchedule| true;
        let t = tuned_point(&p(12, 64, 1), seed, measured.clone(), 0.01, Map::new(), all).unwrap();
        // Full timings decide; the search's 9.0 does not.
        assert_eq!((t.schedule, t.us_per_step), (rs([3, 16, 0, 2, 0]), 9.5));
        assert_eq!(t.seed_us_per_step, Some(10.0));
        assert_eq!(t.measured.len(), 3, "each schedule once, full first");
        assert_eq!(t.measured[2].timing, "search");
        assert!(!t.notes.contains_key(EXCLUDED_NOTE));
        // A 5 % gain is under a 6 % threshold: the seed's defaults stay.
        let t = tuned_point(&p(12, 64, 1), seed, measured, 0.06, Map::new(), all).unwrap();
        assert_eq!((t.schedule, t.us_per_step), (seed, 10.0));
        assert!(tuned_point(&p(1, 1, 1), seed, vec![], 0.0, Map::new(), all).is_none());
    }

    #[test]
    fn unusable_schedules_are_not_chosen() {
        let seed = rs([0, 16, 0, 4, 0]);
        let (fast, next, slow) = (
            rs([1, 16, 0, 4, 0]),
            rs([1, 32, 0, 4, 0]),
            rs([1, 8, 0, 4, 0]),
        );
        let measured = vec![
            m(seed, 10.0, "full"),
            m(next, 8.1, "full"),
            m(fast, 8.0, "full"),
            m(slow, 8.5, "full"),
            m(rs([1, 4, 0, 2, 0]), 7.0, "search"),
        ];
        // The fastest spills: the next is chosen, and nothing below it is asked.
        let mut asked = Vec::new();
        let mut usable = |s: &RawSchedule| {
            asked.push(*s);
            *s != fast
        };
        let t = tuned_point(
            &p(32, 8, 4),
            seed,
            measured.clone(),
            0.01,
            Map::new(),
            &mut usable,
        )
        .unwrap();
        assert_eq!((t.schedule, t.us_per_step), (next, 8.1));
        assert_eq!(asked, [fast, next]);
        assert_eq!(t.notes[EXCLUDED_NOTE], json!([fast]));
        assert_eq!(t.measured.len(), 5, "every measurement kept");
        assert_eq!(t.seed_us_per_step, Some(10.0));
        // The seed's defaults would stay (min gain 25 %) but spill: the
        // fastest usable is chosen, and the seed listed as excluded.
        let t = tuned_point(
            &p(32, 8, 4),
            seed,
            measured.clone(),
            0.25,
            Map::new(),
            &mut |s| *s != seed,
        )
        .unwrap();
        assert_eq!(t.schedule, fast);
        assert_eq!(t.notes[EXCLUDED_NOTE], json!([seed]));
        // Usable, they stay.
        let t = tuned_point(
            &p(32, 8, 4),
            seed,
            measured.clone(),
            0.25,
            Map::new(),
            &mut |s| *s != fast,
        )
        .unwrap();
        assert_eq!((t.schedule, t.us_per_step), (seed, 10.0));
        assert_eq!(t.notes[EXCLUDED_NOTE], json!([fast]));
        // A stale note goes when nothing is excluded; nothing usable: no point.
        let mut notes = Map::new();
        notes.insert(EXCLUDED_NOTE.into(), json!([fast]));
        let t = tuned_point(
            &p(32, 8, 4),
            seed,
            measured.clone(),
            0.01,
            notes,
            &mut |_| true,
        );
        assert!(!t.unwrap().notes.contains_key(EXCLUDED_NOTE));
        assert!(
            tuned_point(&p(32, 8, 4), seed, measured, 0.01, Map::new(), &mut |_| {
                false
            })
            .is_none()
        );
    }

    #[test]
    fn reselect_chooses_again_from_the_measurements() {
        let m = |s: RawSchedule, us: f64| Measured {
            schedule: s,
            us_per_step: us,
            timing: "full".into(),
        };
        let point = p(32, 8, 4);
        let seed = seed_schedule(&point).unwrap();
        let (fast, next) = (rs([1, 16, 0, 4, 0]), rs([1, 32, 0, 4, 0]));
        let mut notes = Map::new();
        notes.insert("candidates".into(), json!(22));
        let mut meta = Map::new();
        meta.insert("device".into(), json!("X"));
        meta.insert("min_gain".into(), json!(0.01));
        let old = TunedTable {
            meta,
            points: vec![TunedPoint {
                heads: 32,
                batch: 8,
                tokens: 4,
                schedule: fast,
                us_per_step: 8.0,
                seed_us_per_step: Some(10.0),
                measured: vec![m(fast, 8.0), m(next, 8.1), m(seed, 10.0)],
                notes,
            }],
        };
        let same = reselect(&old, 0.01, &mut |_, _| true);
        assert_eq!(same.points, old.points);
        let t = reselect(&old, 0.02, &mut |_, s| *s != fast);
        assert_eq!(t.meta["device"], "X");
        assert_eq!(t.meta["min_gain"], json!(0.02));
        let q = &t.points[0];
        assert_eq!((q.schedule, q.us_per_step), (next, 8.1));
        assert_eq!(q.measured, old.points[0].measured);
        assert_eq!(q.notes["candidates"], 22);
        assert_eq!(q.notes[EXCLUDED_NOTE], json!([fast]));
        assert_eq!(TunedTable::parse(&t.to_json_string().unwrap()).unwrap(), t);
    }
}
