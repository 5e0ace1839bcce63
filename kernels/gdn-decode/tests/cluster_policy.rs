//! `Schedule::balance` asks for the load-balancing cluster scheduling policy
//! exactly where the kernel has clusters (G = HV / HK > 1); at G = 1 the
//! kernel keeps the default policy, so the knob is a no-op there rather than
//! a verifier error (a policy without clusters does not verify), and every
//! such kernel compiles.

use gdn_decode::GdnConfig;
use gdn_decode::kernel::{Dtypes, Schedule, build};
use kda_host::testing::assert_balance_policy;

#[test]
fn balance_sets_load_balancing_exactly_with_clusters() {
    // G = 1 (no cluster), 2 (the bench's shape) and 8 (the largest).
    for (hk, hv) in [(4, 4), (4, 8), (2, 16)] {
        let group = hv / hk;
        for tokens in [1, 4] {
            let cfg = GdnConfig::new(hk, hv, tokens, true).unwrap();
            for base in [Schedule::default(), Schedule::for_batch(tokens, 128)] {
                for balance in [false, true] {
                    let s = Schedule { balance, ..base };
                    let label = format!("HK{hk} HV{hv} T{tokens} {}", s.label());
                    let k = build(&cfg, &Dtypes::default(), &s)
                        .unwrap_or_else(|e| panic!("{label}: {e}"));
                    assert_eq!(k.launch.cluster, group, "{label}");
                    assert_balance_policy(&label, &k, balance);
                }
            }
        }
    }
}

#[test]
fn balance_is_labelled_bal() {
    let s = Schedule {
        balance: true,
        ..Schedule::for_batch(1, 128)
    };
    assert_eq!(s.label(), "l16 evict trig staged bal");
    assert_eq!(Schedule::default().label(), "l16");
}
