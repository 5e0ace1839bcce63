//! Synchronisation in `#[cluster_kernel]`: mbarrier declarations (one or an
//! array), parity tracked per role, multicast sends, cluster barriers, PDL,
//! and the schedule hints (`early`, `late_release`).

use kda::cluster_kernel;
use kda::ir::write::write_kernel;

pub struct Cfg {
    pub cluster: u32,
    pub tokens: u32,
    pub early: bool,
}

/// Each CTA owns the outputs of tokens `t % cluster == rank`, one barrier per
/// owned token; the gate warp multicasts per-token values to every CTA.
#[cluster_kernel(block = 64, cluster = cfg.cluster, early = cfg.early)]
fn tokens(#[comptime] cfg: &Cfg, #[produced] x: Tensor<f32, rows, 32>, y: Tensor<f32, rows, 32>) {
    let main = role!(0..32);
    let gate = role!(32..64);
    let owned = cfg.tokens.div_ceil(cfg.cluster);
    let outs = mbarrier!(
        arrivals = 1,
        tx = 128 * cfg.cluster,
        roles = [main, gate],
        count = owned
    );
    let inbox = shared!([f32; owned, 32 * cfg.cluster], roles = [main, gate]);
    let lane = thread_idx() % 32;
    let rank = cluster_rank();
    in_role!(main, {
        if lane == 0 {
            for bar in &outs {
                bar.init();
                bar.arm();
            }
        }
        fence_mbarrier_init();
    });
    cluster_sync();
    in_role!(gate, {
        pdl_wait();
        for k in 0..owned {
            let v = x[[block_idx(0), lane]] * (k as f32);
            send!(
                inbox[[k, rank * 32 + lane]] = v,
                to = all,
                completes = outs[k as usize]
            );
        }
    });
    in_role!(main, {
        for k in 0..owned {
            outs[k as usize].wait();
            y[[block_idx(0), lane]] = inbox[[k, lane]];
        }
    });
}

#[test]
fn barrier_arrays_and_multicast() {
    let k = tokens(&Cfg {
        cluster: 4,
        tokens: 8,
        early: true,
    });
    assert!(k.schedule.early);
    let text = write_kernel(&k);
    assert!(
        text.contains("mbarrier bar0 \"outs[0]\": arrivals 1 tx 512"),
        "{text}"
    );
    assert!(text.contains("mbarrier bar1 \"outs[1]\""), "{text}");
    // 2 owned tokens × 4 destination CTAs
    assert_eq!(text.matches("st.async").count(), 8, "{text}");
    kda::ir::verifier::verify(&k).unwrap_or_else(|e| panic!("{e}"));
}

#[cluster_kernel(block = 64)]
fn phases(y: Tensor<f32, rows, 32>, n: u32) {
    let producer = role!(0..32);
    let consumer = role!(32..64);
    let full = mbarrier!(arrivals = 32, roles = [producer, consumer]);
    let empty = mbarrier!(arrivals = 32, roles = [producer, consumer]);
    let slot = shared!([f32; 32], guard = full, roles = [producer, consumer]);
    let lane = thread_idx() % 32;
    in_role!(producer, {
        if lane == 0 {
            full.init();
            empty.init();
        }
    });
    bar_sync(0, 64);
    in_role!(producer, {
        for i in 0..3 {
            if i > 0 {
                empty.wait();
            }
            slot[lane] = lane.cast::<f32>() + i as f32;
            full.arrive();
        }
    });
    in_role!(consumer, {
        let mut acc = val::<f32>(0.0);
        for _ in 0..3 {
            full.wait();
            acc += slot[lane];
            empty.arrive();
        }
        y[[block_idx(0), lane]] = acc;
    });
    let _ = n;
}

#[test]
fn parity_is_tracked_per_role() {
    let text = write_kernel(&phases());
    for p in 0..3 {
        assert!(
            text.contains(&format!("mbarrier.wait bar0, phase {p}")),
            "{text}"
        );
    }
    assert!(text.contains("mbarrier.wait bar1, phase 1"), "{text}");
    assert!(!text.contains("mbarrier.wait bar1, phase 2"), "{text}");
}

/// Every CTA reads its element of a shared row, releases (stated right after
/// the read), combines it with the produced input, and the first CTA
/// rewrites the row once the cluster has waited.
#[cluster_kernel(block = 32, cluster = 2, early = true, late_release = late)]
fn release(
    #[comptime] late: bool,
    row: Tensor<f32, 32>,
    #[produced] x: Tensor<f32, 32>,
    y: Tensor<f32, 32>,
) {
    let t = thread_idx();
    let r = row[t];
    cluster_arrive();
    pdl_wait();
    let v = r * x[t];
    y[t] = v;
    cluster_wait();
    if cluster_rank() == 0 {
        row[t] = v;
    }
}

#[test]
fn late_release_reaches_the_scheduler() {
    use kda::ir::pipeline::{Options, schedule};
    for late in [false, true] {
        let k = release(late);
        assert_eq!(k.schedule.late_release, late);
        assert_eq!(write_kernel(&k).contains(" late_release {"), late);
        let opts = Options {
            verify_each_pass: true,
            dump: None,
            skip: Vec::new(),
            probes: false,
        };
        let s = schedule(&k, &opts).unwrap_or_else(|e| panic!("{e}"));
        let text = write_kernel(&s);
        let lines: Vec<&str> = text.lines().map(str::trim_start).collect();
        let arrive = lines
            .iter()
            .position(|l| l.starts_with("cluster.arrive "))
            .unwrap_or_else(|| panic!("{text}"));
        // Stated before the PDL wait; with the hint, after the product that
        // consumes both loads, right before its store.
        let next = lines[arrive + 1];
        if late {
            assert!(next.starts_with("st.global"), "{text}");
            assert!(lines[arrive - 1].contains(" = mul "), "{text}");
        } else {
            assert!(next.starts_with("pdl.wait"), "{text}");
        }
    }
}
