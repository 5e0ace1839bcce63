//! Where the conv taps' release (the kernel's one releasing
//! `cluster_arrive()`, stated right after the taps' loads) ends up after
//! scheduling: at the stated place with `early_release` (batch 1), sunk by
//! the `late_release` hint past the conv to its first shared store
//! otherwise (batch 128), after every global load of the thread.

use gdn_decode::GdnConfig;
use gdn_decode::kernel::{Dtypes, Schedule, build};
use kda_ir::Kernel;
use kda_ir::entities::{Inst, Region};
use kda_ir::op::Op;
use kda_ir::pipeline::{Options, schedule};

fn scheduled(cfg: &GdnConfig, s: &Schedule) -> Kernel {
    let k = build(cfg, &Dtypes::default(), s).unwrap();
    let opts = Options {
        verify_each_pass: true,
        dump: None,
        skip: Vec::new(),
        probes: false,
    };
    schedule(&k, &opts).unwrap_or_else(|e| panic!("{e}"))
}

/// Every releasing arrive, with its region's instructions and its position.
fn releases(k: &Kernel) -> Vec<(Vec<Inst>, usize)> {
    let mut found = Vec::new();
    let regions: Vec<Region> = k.regions.keys().collect();
    for r in regions {
        let insts = k.regions[r].insts.clone();
        for (n, &i) in insts.iter().enumerate() {
            if k.insts[i].op == (Op::ClusterArrive { relaxed: false }) {
                found.push((insts.clone(), n));
            }
        }
    }
    found
}

fn position(k: &Kernel, insts: &[Inst], f: impl Fn(&Op) -> bool) -> Option<usize> {
    insts.iter().position(|&i| f(&k.insts[i].op))
}

#[test]
fn the_release_is_early_at_batch_1_and_after_the_conv_from_batch_64() {
    for (hk, hv) in [(4, 8), (2, 16)] {
        for tokens in 1..=4 {
            let cfg = GdnConfig::new(hk, hv, tokens, true).unwrap();
            for batch in [1, 128] {
                let s = Schedule::for_batch(tokens, batch);
                assert_eq!(s.early_release, batch == 1);
                let k = scheduled(&cfg, &s);
                assert_eq!(k.schedule.late_release, !s.early_release);
                let label = format!("HK{hk} HV{hv} T{tokens} batch {batch}");
                let found = releases(&k);
                assert_eq!(found.len(), 1, "{label}: one release\n{k}");
                let (insts, at) = &found[0];
                let pdl_wait = position(&k, insts, |op| *op == Op::GridDepWait)
                    .unwrap_or_else(|| panic!("{label}: a pdl.wait in the release's region\n{k}"));
                let last_load = insts
                    .iter()
                    .rposition(|&i| matches!(k.insts[i].op, Op::LdGlobal { .. }))
                    .unwrap();
                if s.early_release {
                    // Before the PDL wait, overlapping the previous launch.
                    assert!(*at < pdl_wait, "{label}\n{k}");
                } else {
                    // After every global load of its region (the produced
                    // reads included) and before the conv's first store.
                    assert!(*at > pdl_wait && *at > last_load, "{label}\n{k}");
                    let next = &k.insts[insts[at + 1]].op;
                    assert!(
                        matches!(next, Op::StShared { .. }),
                        "{label}: {next:?}\n{k}"
                    );
                }
            }
        }
    }
}

#[test]
fn no_cluster_no_release() {
    let cfg = GdnConfig::new(16, 16, 1, true).unwrap();
    let k = scheduled(&cfg, &Schedule::for_batch(1, 128));
    assert!(releases(&k).is_empty());
}
