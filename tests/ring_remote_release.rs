//! A ring whose stages another CTA fills, released by remote arrivals:
//! the producer of each CTA of a cluster of two sends its rows into the
//! peer's ring (`send!(.., to = peer, completes = full[s])`), and the
//! peer's consumers, once they have read stage `s`, release it to the
//! producer with `empty[s].arrive_on(peer)`: an arrival on the producer
//! CTA's `empty[s]`, which the producer waits on before refilling the
//! stage. No cluster barrier per item (docs/perf.md, "A persistent
//! KdaSplit, measured and taken out").
//!
//! On the simulator (seeded interleavings, hold-back, the race detector):
//! every row arrives intact for 1..=3 stages and more items than stages,
//! with no race between the consumers' reads and the next fill; with the
//! releases stopped early the producer's wait never returns and the
//! simulator reports the deadlock on `empty`. Through ptxas: the release is
//! `mapa` + `mbarrier.arrive.release.cluster.shared::cluster`, the
//! producer's wait acquires at cluster scope.

mod common;
mod remote_ring;

use common::schedules;
use kda::runtime::{RuntimeError, SimDevice, SimOptions};
use remote_ring::{ping_pong, run_on};

/// Run `k` on the simulator (`opts`) on one cluster.
fn run(
    k: &kda::ir::Kernel,
    opts: &SimOptions,
    n: u32,
    keep: u32,
) -> Result<Vec<f32>, RuntimeError> {
    run_on(&SimDevice::with_options(opts.clone()), k, 1, n, keep)
}

#[test]
fn every_row_crosses_to_the_peer_and_no_stage_is_refilled_early() {
    for stages in [1, 2, 3] {
        let k = ping_pong(stages, false);
        kda::ir::verifier::verify(&k).unwrap_or_else(|e| panic!("{e}"));
        let text = kda::ir::write::write_kernel(&k);
        assert!(
            text.contains("mbarrier.arrive.remote")
                && text.contains(&format!(" of {stages}], cta")),
            "the release names the ring element of the peer: {text}"
        );
        for n in [0u32, 1, 7] {
            for opts in schedules() {
                let got = run(&k, &opts, n, n)
                    .unwrap_or_else(|e| panic!("stages {stages}, n {n}, {opts:?}: {e}"));
                for (i, v) in got.iter().enumerate().take(2 * n as usize * 128) {
                    assert_eq!(
                        *v,
                        i as f32 + 1.0,
                        "stages {stages}, n {n}, {opts:?}: element {i}"
                    );
                }
            }
        }
    }
}

#[test]
fn a_missing_remote_release_deadlocks_the_producer() {
    let stages = 2;
    let k = ping_pong(stages, true);
    // All released: the same kernel passes.
    run(&k, &SimOptions::default(), 5, 5).unwrap_or_else(|e| panic!("{e}"));
    for opts in schedules() {
        let e = run(&k, &opts, 5, 2).unwrap_err();
        let RuntimeError::Sim(s) = &e else {
            panic!("{opts:?}: {e}")
        };
        let d = s.as_deadlock().unwrap_or_else(|| panic!("{opts:?}: {e}"));
        assert!(
            d.blocked.iter().any(|b| b.to_string().contains("empty")),
            "{opts:?}: the producer waits on `empty`: {e}"
        );
    }
}

#[test]
fn the_release_is_a_cluster_scope_arrive_and_the_wait_acquires_it() {
    let k = ping_pong(3, false);
    let ptx = kda::ir::pipeline::compile(&k, &kda::ir::pipeline::Options::default())
        .unwrap_or_else(|e| panic!("{e}"))
        .ptx;
    for needle in [
        "mbarrier.arrive.release.cluster.shared::cluster.b64 _,",
        "mbarrier.try_wait.parity.acquire.cluster.shared::cta.b64",
    ] {
        assert!(ptx.contains(needle), "missing `{needle}` in\n{ptx}");
    }
    // `full` gets no remote arrivals: its waits keep the CTA-scope acquire.
    assert!(
        ptx.contains("mbarrier.try_wait.parity.shared::cta.b64"),
        "{ptx}"
    );
    if let Err(e) = kda::ir::ptxas::check_no_spills(&ptx) {
        panic!("{e}\n(run `bash scripts/provision-ptxas.sh` to install ptxas)");
    }
}
