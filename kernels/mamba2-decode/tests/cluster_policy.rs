//! `Schedule::balance` asks for the load-balancing cluster scheduling policy
//! exactly where the plan has clusters of more than one CTA; with clusters
//! of one (one head per group, or `max_cluster: 1`) the kernel keeps the
//! default policy, so the knob is a no-op there rather than a verifier error
//! (a policy without clusters does not verify), and every such kernel
//! compiles.

use kda_host::testing::assert_balance_policy;
use mamba2_decode::Mamba2Config;
use mamba2_decode::kernel::{Plan, Schedule, TUNED_BATCH, build_with, sweep_schedules};

fn config(heads: u32, n_groups: u32) -> Mamba2Config {
    Mamba2Config {
        heads,
        n_groups,
        head_dim: 64,
        d_state: 128,
        ..Mamba2Config::default()
    }
    .validated()
    .unwrap()
}

#[test]
fn balance_sets_load_balancing_exactly_with_clusters() {
    // Clusters of 1 (one head per group; 17 heads, a prime above the
    // largest cluster; or max_cluster 1), 8 and 12.
    let cases = [
        ((4, 4), Schedule::DEFAULT, 1),
        ((17, 1), Schedule::DEFAULT, 1),
        (
            (24, 1),
            Schedule {
                max_cluster: 1,
                ..Schedule::DEFAULT
            },
            1,
        ),
        ((24, 1), Schedule::for_config(&config(24, 1)), 8),
        // The large-batch default at the bench's shape: clusters of 4.
        ((24, 1), Schedule::for_batch(&config(24, 1), TUNED_BATCH), 4),
        ((24, 1), Schedule::PLAIN, 12),
    ];
    for ((heads, groups), base, cluster) in cases {
        let cfg = config(heads, groups);
        for balance in [false, true] {
            let s = Schedule { balance, ..base };
            let label = format!("H{heads} G{groups} [{}]", s.label());
            assert_eq!(Plan::with(&cfg, &s).unwrap().cluster, cluster, "{label}");
            let k = build_with(&cfg, false, false, &s).unwrap_or_else(|e| panic!("{label}: {e}"));
            assert_eq!(k.launch.cluster, cluster, "{label}");
            assert_balance_policy(&label, &k, balance);
        }
    }
}

#[test]
fn the_sweep_measures_every_early_schedule_balanced() {
    let list = sweep_schedules();
    let (balanced, plain): (Vec<Schedule>, Vec<Schedule>) = list.iter().partition(|s| s.balance);
    assert_eq!(
        balanced,
        plain
            .iter()
            .filter(|s| s.early)
            .map(|s| Schedule {
                balance: true,
                ..*s
            })
            .collect::<Vec<_>>()
    );
    // The default at the bench's shape is among them, balanced.
    let default = Schedule::for_config(&config(24, 1));
    assert!(balanced.contains(&Schedule {
        balance: true,
        ..default
    }));
    assert_eq!(
        Schedule {
            balance: true,
            ..default
        }
        .label(),
        "c8 early bal"
    );
    // So is the large-batch default, as it is.
    let large = Schedule::for_batch(&config(24, 1), 128);
    assert!(large.balance && balanced.contains(&large));
    assert_eq!(large.label(), "c4 early bal");
}
