//! What the search tries at a point: the seed's defaults, the bench's named
//! schedules, `--schedule` extras and the grid, less the pruned schedules
//! and those resolving to one already listed.

use crate::bench::report::{Candidate, Resolved};
use crate::bench::schedule::{NAMED, named};
use crate::bench::workload::Point;
use crate::config::KdaConfig;

use super::Options;

/// Why schedules are left out before timing (see the module doc).
pub const PRUNE_RULES: [&str; 2] = [
    "cluster 1 below early 3 (all 128 rows of a head in one CTA: 255 registers, mostly spilling)",
    "lanes < cluster (128/lanes row groups for 128/cluster rows: idle threads)",
];

/// The schedules searched at one point.
#[derive(Clone, Debug, Default)]
pub struct Space {
    /// The seed's defaults first (labelled `seed`), then the bench's named
    /// schedules and `--schedule` extras, then the grid; all distinct once
    /// resolved, with explicit lanes and cluster.
    pub candidates: Vec<Candidate>,
    /// Left out by [`PRUNE_RULES`].
    pub pruned: usize,
    /// Not a valid configuration at this point (`KdaConfig::new`).
    pub invalid: usize,
}

/// Which prune rule leaves `cfg` out, if any.
pub fn pruned_by(cfg: &KdaConfig) -> Option<&'static str> {
    let (early, lanes, cluster) = (cfg.schedule.early, cfg.lanes(), cfg.cluster());
    if cluster == 1 && early < 3 {
        Some(PRUNE_RULES[0])
    } else if lanes < cluster {
        Some(PRUNE_RULES[1])
    } else {
        None
    }
}

/// The grid of `opts` at `point`, unresolved and unpruned: every
/// combination of the entries' values, nested in the order early, lanes,
/// cluster, occupancy, evict, bulk_store, balance (the last varying
/// fastest), less those with an entry on where it does not exist.
fn grid(opts: &Options, point: &Point) -> Vec<[u32; 7]> {
    let on_off = |on: bool| if on { vec![0, 1] } else { vec![0] };
    // (schedule entry, its values), outermost first.
    let axes = [
        (0, vec![0, 1, 2, 3]),
        (1, opts.lanes()),
        (3, opts.cluster.clone()),
        (2, opts.occupancy.clone()),
        (4, on_off(opts.evict())),
        // Entry 6 (each token's state rows through shared memory, one bulk
        // store per token) exists at T > 1 only.
        (5, on_off(point.tokens > 1 && opts.bulk_store())),
        (6, on_off(opts.balance())),
    ];
    let product = axes.iter().fold(vec![[0; 7]], |outer, (entry, values)| {
        outer
            .iter()
            .flat_map(|s| {
                values.iter().map(move |&v| {
                    let mut s = *s;
                    s[*entry] = v;
                    s
                })
            })
            .collect()
    });
    // Evict exists where early >= 2; entry 7 (the clusters' load-balancing
    // scheduling policy) with clusters of more than one CTA only.
    product
        .into_iter()
        .filter(|s| (s[4] == 0 || s[0] >= 2) && (s[6] == 0 || s[3] > 1))
        .collect()
}

/// The space of `opts` at `point` (gate mode 0, bias on).
pub fn space(opts: &Options, point: &Point) -> Space {
    let mut out = Space::default();
    let mut seen: Vec<Resolved> = Vec::new();
    let mut push = |label: Option<&str>, raw: &[u32], prune: bool, out: &mut Space| {
        let cfg = match KdaConfig::new(point.heads, point.batch, 0, true, raw, point.tokens) {
            Ok(cfg) => cfg,
            Err(_) => {
                out.invalid += 1;
                return;
            }
        };
        let resolved = cfg.resolved_schedule();
        if seen.contains(&resolved) {
            return;
        }
        if prune && pruned_by(&cfg).is_some() {
            out.pruned += 1;
            return;
        }
        seen.push(resolved);
        let raw = resolved.raw();
        let label = label.map_or_else(|| format!("{raw:?}").replace(' ', ""), str::to_string);
        out.candidates.push(Candidate {
            label,
            raw: raw.entries().to_vec(),
        });
    };
    push(Some("seed"), &[0, 0, 0], false, &mut out);
    let extras = NAMED
        .iter()
        .filter(|n| opts.evict() || !n.ends_with("evict"))
        .filter_map(|n| named(n))
        .chain(opts.sweep.schedules.iter().map(|c| c.at(point)));
    for c in extras {
        push(None, &c.raw, false, &mut out);
    }
    for raw in grid(opts, point) {
        push(None, &raw, true, &mut out);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::super::options::tests::parse;
    use super::*;

    /// The grid's order is that of the seven nested loops it replaced
    /// (early, lanes, cluster, occupancy, evict, bulk_store, balance; checked
    /// equal, candidate by candidate, with the pruned and invalid counts,
    /// over 8 option sets at 9 points): the schedules resolving to one
    /// already listed, and so the labels and the timing order, depend on it.
    #[test]
    fn the_grid_nests_its_entries_in_order() {
        let o = parse(&[]);
        let g = grid(&o, &Point::new(12, 64, 1));
        // Per early, 4 lanes x (cluster 1, and 2, 4, 8 with balance off and
        // on), twice at early 2 and 3 (evict).
        assert_eq!(g.len(), 2 * 28 + 2 * 56);
        assert_eq!(
            g[..4],
            [
                [0, 4, 0, 1, 0, 0, 0],
                [0, 4, 0, 2, 0, 0, 0],
                [0, 4, 0, 2, 0, 0, 1],
                [0, 4, 0, 4, 0, 0, 0]
            ]
        );
        assert_eq!(g[g.len() - 1], [3, 32, 0, 8, 1, 0, 1]);
        // Each list in the order given; the last entry varies fastest.
        let o = parse(&[
            "--lanes",
            "32,4",
            "--cluster",
            "8,1,2",
            "--occupancy",
            "0,2",
        ]);
        let g = grid(&o, &Point::new(12, 8, 4));
        let at = |list: &[u32], v: u32| list.iter().position(|&x| x == v).unwrap();
        let keys: Vec<[usize; 7]> = g
            .iter()
            .map(|s| {
                [
                    s[0] as usize,
                    at(&o.lanes(), s[1]),
                    at(&o.cluster, s[3]),
                    at(&o.occupancy, s[2]),
                    s[4] as usize,
                    s[5] as usize,
                    s[6] as usize,
                ]
            })
            .collect();
        assert!(keys.is_sorted_by(|a, b| a < b));
        // Per early, 2 lanes x 2 occupancies x bulk_store off and on x
        // (cluster 1, and 2 and 8 with balance off and on); evict at early 2, 3.
        assert_eq!(g.len(), 2 * 40 + 2 * 80);
        assert_eq!(g[0], [0, 32, 0, 8, 0, 0, 0]);
        assert_eq!(g[1], [0, 32, 0, 8, 0, 0, 1]);
        assert_eq!(g[2], [0, 32, 0, 8, 0, 1, 0]);
        // The space's grid part in that order (after the seed and the named).
        let s = space(&parse(&[]), &Point::new(12, 8, 4));
        let labels: Vec<&str> = s.candidates[3..9]
            .iter()
            .map(|c| c.label.as_str())
            .collect();
        assert_eq!(
            labels,
            [
                "[0,4,0,2,0]",
                "[0,4,0,2,0,0,1]",
                "[0,4,0,2,0,1]",
                "[0,4,0,2,0,1,1]",
                "[0,4,0,4,0]",
                "[0,4,0,4,0,0,1]"
            ]
        );
    }

    #[test]
    fn the_space_is_valid_distinct_and_pruned() {
        let o = parse(&[]);
        let s = space(&o, &Point::new(12, 64, 1));
        assert_eq!(s.candidates[0].label, "seed");
        assert_eq!(s.candidates[0].raw, [0, 16, 0, 4, 0]);
        let mut seen = Vec::new();
        for c in &s.candidates {
            let cfg = KdaConfig::new(12, 64, 0, true, &c.raw, 1).unwrap();
            assert!(
                pruned_by(&cfg).is_none() || c.label == "seed",
                "{}",
                c.label
            );
            assert!(!seen.contains(&c.raw), "{} twice", c.label);
            seen.push(c.raw.clone());
        }
        // early 0/1: 16 lanes x cluster pairs less 4 at cluster 1 and lanes
        // 4 at cluster 8: 11 each; early 2: 11 x evict; early 3: clusters 1
        // and 2 x 4 lanes x evict. Each with a cluster above 1 twice, balance
        // off and on: all of early 0..2, and early 3's 8 at cluster 2.
        assert_eq!(s.candidates.len(), 2 * (11 + 11 + 22) + 16 + 8);
        assert!(s.pruned > 0);
        assert!(seen.contains(&vec![3, 16, 0, 2, 0]) && seen.contains(&vec![2, 32, 0, 8, 1]));
        assert!(seen.contains(&vec![3, 16, 0, 2, 0, 0, 1]));
        assert!(!seen.contains(&vec![3, 16, 0, 1, 0, 0, 1]));
        // Five entries, or seven with balance on (and a cluster above 1).
        assert!(s.candidates.iter().all(|c| c.raw.len() == 5
            || (c.raw.len() == 7 && c.raw[6] == 1 && c.raw[3] > 1 && c.raw[5] == 0)));
        // T > 1: early 0 and 1 only, each with bulk_store off and on (the
        // latter labelled with its sixth entry), and balance off and on.
        let s = space(&o, &Point::new(12, 8, 4));
        assert_eq!(s.candidates.len(), 2 * (22 + 22));
        assert!(s.candidates.iter().all(|c| c.raw[0] < 2));
        let bulk: Vec<_> = s
            .candidates
            .iter()
            .filter(|c| c.raw.get(5) == Some(&1))
            .collect();
        assert_eq!(bulk.len(), 44);
        // Labelled with their entries: the sixth, and the seventh where
        // balance is on.
        assert!(bulk.iter().all(|c| (6..=7).contains(&c.raw.len())
            && c.label == format!("{:?}", c.raw).replace(' ', "")));
        assert_eq!(
            bulk.iter().filter(|c| c.label.ends_with(",1,1]")).count(),
            22
        );
        assert!(
            s.candidates
                .iter()
                .any(|c| c.label == "[0,16,0,4,0,1]" && c.raw == [0, 16, 0, 4, 0, 1])
        );
        assert!(s.candidates.iter().any(|c| c.label == "[1,16,0,4,0]"));
        // Not with --no-bulk-store.
        let s = space(&parse(&["--no-bulk-store"]), &Point::new(12, 8, 4));
        assert_eq!(s.candidates.len(), 44);
        let s = space(
            &parse(&["--no-bulk-store", "--no-balance"]),
            &Point::new(12, 8, 4),
        );
        assert_eq!(s.candidates.len(), 22);
        // Quick: lanes 8 and 16, no evict.
        let s = space(&parse(&["--quick"]), &Point::new(12, 1, 1));
        assert!(
            s.candidates
                .iter()
                .all(|c| c.raw[4] == 0 && c.raw.len() == 5)
        );
        assert!(s.candidates.iter().all(|c| c.raw[1] == 8 || c.raw[1] == 16));
    }
}
