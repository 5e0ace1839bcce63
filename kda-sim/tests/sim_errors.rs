//! Broken twins of the DSMEM exchange demo and what the simulator reports:
//! a deadlock when the send is missing, a transaction-byte overflow, an
//! out-of-bounds load, and other barrier misuse.

use kda_device::{Device, LaunchConfig, RuntimeError};
use kda_ir::{
    Access, Builder, CachePolicy, CmpOp, Dim, Kernel, LaunchDecl, Provenance, Scalar, Type,
};
use kda_sim::{SimDevice, SimError, SimOptions, Space, WaitOn};

const LANES: u32 = 32;

/// How a twin departs from the demo.
#[derive(Copy, Clone, PartialEq)]
enum Twist {
    None,
    /// No st.async: the receiver waits forever.
    NoSend,
    /// The barrier declares and arms 64 bytes; 128 arrive.
    Overflow,
    /// The sender reads `input[cta, lane + 1]`: lane 31 is out of bounds.
    OobLoad,
    /// Every receiver lane arrives on a barrier whose count is 1.
    AllLanesArrive,
    /// Senders skip the cluster barrier and send before the peer initialises.
    SendBeforeInit,
    /// The sender reads the produced input before the PDL wait.
    NoPdlWait,
}

/// The demo kernel with a twist; returns it and the source line of the receiver's wait.
fn exchange(cluster: u32, twist: Twist) -> (Kernel, u32) {
    let mut b = Builder::new(
        "exchange_twin",
        LaunchDecl {
            block: 64,
            cluster,
            min_blocks_per_sm: None,
            cluster_policy: Default::default(),
        },
    );
    let rows = b.sym("rows");
    let shape = [Dim::Sym(rows), Dim::Const(LANES as u64)];
    let strides = [Dim::Const(LANES as u64), Dim::Const(1)];
    let input = b.tensor(
        "input",
        Scalar::F32,
        &shape,
        &strides,
        Provenance::Produced,
        Access::Read,
    );
    let output = b.tensor(
        "output",
        Scalar::F32,
        &shape,
        &strides,
        Provenance::Ready,
        Access::Write,
    );
    let sender = b.role("sender", 0, 32);
    let receiver = b.role("receiver", 32, 32);
    let bytes = if twist == Twist::Overflow {
        64
    } else {
        4 * LANES
    };
    let full = b.mbarrier("inbox_full", 1, bytes, &[sender, receiver]);
    let inbox = b.shared(
        "inbox",
        Scalar::F32,
        LANES,
        16,
        &[sender, receiver],
        Some(full),
    );

    let tid = b.thread_idx();
    let lane_mask = b.u32(31);
    let lane = b.bin(kda_ir::BinOp::And, tid, lane_mask);
    let cta = b.block_idx(0);
    let rank = b.cluster_rank();

    b.in_role(receiver, |b| {
        let zero = b.u32(0);
        let first = b.cmp(CmpOp::Eq, lane, zero);
        if twist == Twist::AllLanesArrive {
            b.if_(first, |b| b.mbarrier_init(full));
            b.mbarrier_arrive(full);
        } else {
            b.if_(first, |b| {
                b.mbarrier_init(full);
                b.mbarrier_arrive_expect_tx(full, bytes);
            });
        }
        b.fence_mbarrier_init();
    });
    b.cluster_arrive(true);
    if twist != Twist::SendBeforeInit {
        b.cluster_wait();
    }

    b.in_role(sender, |b| {
        if twist != Twist::NoPdlWait {
            b.pdl_wait();
        }
        let col = if twist == Twist::OobLoad {
            let one = b.u32(1);
            b.add(lane, one)
        } else {
            lane
        };
        let x = b.ld_global(input, &[cta, col], Type::F32, CachePolicy::Normal);
        let two = b.f32(2.0);
        let r = b.cvt(rank, Type::F32);
        let y = b.fma(x, two, r, false);
        let one = b.u32(1);
        let c = b.u32(cluster);
        let next = b.add(rank, one);
        let peer = b.bin(kda_ir::BinOp::Rem, next, c);
        if twist != Twist::NoSend {
            b.st_async(inbox, lane, y, peer, full);
        }
    });
    if twist == Twist::SendBeforeInit {
        b.cluster_wait();
    }

    let mut wait_line = 0;
    b.in_role(receiver, |b| {
        wait_line = line!() + 1; // the next line: the test checks the reported line
        b.wait(full);
        let v = b.ld_shared(inbox, lane, Type::F32);
        b.st_global(output, &[cta, lane], v, None, CachePolicy::Normal);
    });
    (b.finish(), wait_line)
}

/// Run a twin (unverified: the verifier may rightly reject these kernels).
fn run(k: &Kernel, rows: u32, opts: SimOptions) -> Result<Vec<f32>, RuntimeError> {
    let dev = SimDevice::with_options(opts);
    let m = dev.load_unverified(k)?;
    let x: Vec<u8> = (0..rows * LANES)
        .flat_map(|i| (i as f32).to_le_bytes())
        .collect();
    let inp = dev.upload(&x)?;
    let out = dev.upload(&vec![0u8; x.len()])?;
    let cfg = LaunchConfig {
        grid: [rows, 1, 1],
        pdl: true,
        syms: vec![rows as i64],
        scalars: vec![],
    };
    dev.launch(&m, &cfg, &[&inp, &out])?;
    Ok(dev
        .download(&out)?
        .chunks(4)
        .map(|c| f32::from_le_bytes(c.try_into().unwrap()))
        .collect())
}

fn sim_err(r: Result<Vec<f32>, RuntimeError>) -> SimError {
    match r {
        Err(RuntimeError::Sim(e)) => e,
        Err(e) => panic!("expected a simulator error, got: {e}"),
        Ok(_) => panic!("expected a simulator error, the kernel ran"),
    }
}

#[test]
fn the_untwisted_twin_runs() {
    let (k, _) = exchange(2, Twist::None);
    let out = run(&k, 4, SimOptions::default()).unwrap();
    let x: Vec<f32> = (0..4 * LANES).map(|i| i as f32).collect();
    assert_eq!(out, kda_ir::testkernels::dsmem_exchange_reference(&x, 2));
}

#[test]
fn missing_send_deadlocks_with_a_report() {
    let (k, line) = exchange(2, Twist::NoSend);
    let e = sim_err(run(&k, 2, SimOptions::default()));
    let text = e.to_string();
    println!("{text}");
    let d = e.as_deadlock().expect("a deadlock");
    assert_eq!(d.cluster, 0);
    assert_eq!(d.ctas, vec![[0, 0, 0], [1, 0, 0]]);
    // Both receivers (warp 1 of each CTA) wait on inbox_full; the senders exited.
    assert_eq!(d.blocked.len(), 2);
    for (rank, w) in d.blocked.iter().enumerate() {
        assert_eq!((w.rank, w.warp), (rank as u32, 1));
        assert_eq!(w.loc.line, line);
        match &w.wait {
            WaitOn::Mbarrier {
                name,
                phase,
                arrivals_expected,
                arrivals_done,
                tx_expected,
                tx_arrived,
                tx_pending,
                ..
            } => {
                assert_eq!(name, "inbox_full");
                assert_eq!(*phase, 0);
                assert_eq!((*arrivals_done, *arrivals_expected), (1, 1));
                assert_eq!((*tx_arrived, *tx_expected, *tx_pending), (0, 128, 128));
            }
            other => panic!("unexpected wait {other:?}"),
        }
    }
    assert!(
        text.starts_with("deadlock in `exchange_twin`, cluster 0 (CTAs (0,0,0) (1,0,0))"),
        "{text}"
    );
    let wait = format!(
        "CTA (0,0,0) rank 0 warp 1: mbarrier.wait on `inbox_full` (bar0) phase 0: barrier in phase 0, \
         arrivals 1/1, tx bytes 0/128 arrived (128 pending) at {}:{line}:",
        file!()
    );
    assert!(text.contains(&wait), "{text}\nmissing: {wait}");
    assert!(
        text.contains("CTA (1,0,0) rank 1 warp 1: mbarrier.wait on `inbox_full`"),
        "{text}"
    );
}

#[test]
fn deadlock_is_found_under_random_scheduling_too() {
    let (k, _) = exchange(4, Twist::NoSend);
    let e = sim_err(run(
        &k,
        8,
        SimOptions {
            seed: Some(7),
            ..SimOptions::default()
        },
    ));
    let d = e.as_deadlock().expect("a deadlock");
    assert_eq!(d.cluster, 0, "the lowest failing cluster is reported");
    assert_eq!(d.blocked.len(), 4);
}

#[test]
fn tx_overflow_names_the_barrier() {
    let (k, _) = exchange(2, Twist::Overflow);
    let e = sim_err(run(&k, 2, SimOptions::default()));
    let text = e.to_string();
    println!("{text}");
    let SimError::TxOverflow(o) = &e else {
        panic!("expected a tx overflow, got {e}")
    };
    assert_eq!(o.barrier, "inbox_full");
    assert_eq!((o.phase, o.expected, o.arrived), (0, 64, 128));
    assert_eq!(o.site.op, "st.async");
    assert!(
        text.contains("transaction-byte overflow on mbarrier `inbox_full`"),
        "{text}"
    );
    assert!(
        text.contains("phase 0 expects 64 bytes but 128 arrive"),
        "{text}"
    );
    // Random interleavings find it as well (bytes may then arrive before the arming).
    for seed in 0..8 {
        let e = sim_err(run(
            &k,
            2,
            SimOptions {
                seed: Some(seed),
                max_slice: 2,
                ..SimOptions::default()
            },
        ));
        let SimError::TxOverflow(o) = &e else {
            panic!("seed {seed}: expected a tx overflow, got {e}")
        };
        assert_eq!(
            (o.barrier.as_str(), o.expected, o.arrived),
            ("inbox_full", 64, 128),
            "seed {seed}"
        );
    }
}

#[test]
fn out_of_bounds_load_names_the_tensor() {
    let (k, _) = exchange(2, Twist::OobLoad);
    let e = sim_err(run(&k, 2, SimOptions::default()));
    let text = e.to_string();
    println!("{text}");
    let SimError::OutOfBounds(o) = &e else {
        panic!("expected an out-of-bounds access, got {e}")
    };
    assert_eq!(o.space, Space::Global);
    assert_eq!(o.name, "input");
    assert_eq!(o.index, vec![0, 32]);
    assert_eq!(o.extent, vec![2, 32]);
    assert_eq!(o.site.lane, Some(31));
    assert_eq!(o.site.op, "ld.global");
    assert!(
        text.contains(
            "out-of-bounds access to tensor `input`: index [0, 32] outside shape [2, 32]"
        ),
        "{text}"
    );
    assert!(text.contains(file!()), "{text}");
}

#[test]
fn every_lane_arriving_on_a_count_1_barrier_is_misuse() {
    let (k, _) = exchange(2, Twist::AllLanesArrive);
    let e = sim_err(run(&k, 2, SimOptions::default()));
    let text = e.to_string();
    assert!(matches!(e, SimError::Barrier(_)), "{text}");
    assert!(
        text.contains("32 lanes arrive at once on mbarrier `inbox_full`"),
        "{text}"
    );
}

#[test]
fn send_before_peer_init_is_reported_under_some_interleaving() {
    let (k, _) = exchange(2, Twist::SendBeforeInit);
    // Deterministic order: CTA 0's sender runs first and reaches CTA 1's
    // barrier before CTA 1's receiver has initialised it.
    let e = sim_err(run(&k, 2, SimOptions::default()));
    let text = e.to_string();
    assert!(
        text.contains("before that barrier is initialised"),
        "{text}"
    );
}

#[test]
fn produced_read_before_pdl_wait_is_reported() {
    let (k, _) = exchange(2, Twist::NoPdlWait);
    let e = sim_err(run(&k, 2, SimOptions::default()));
    let text = e.to_string();
    assert!(matches!(e, SimError::ProducedBeforeWait { .. }), "{text}");
    assert!(
        text.contains("tensor `input` is produced by the preceding launch"),
        "{text}"
    );
    // Without the check (or without PDL) the kernel runs.
    run(
        &k,
        2,
        SimOptions {
            check_pdl: false,
            ..SimOptions::default()
        },
    )
    .unwrap();
}

#[test]
fn bad_launches_are_rejected_before_running() {
    let (k, _) = exchange(2, Twist::None);
    let dev = SimDevice::new();
    let m = dev.load_unverified(&k).unwrap();
    let buf = dev.upload(&[0u8; 64]).unwrap();
    let cfg = LaunchConfig {
        grid: [3, 1, 1],
        pdl: false,
        syms: vec![3],
        scalars: vec![],
    };
    let e = dev.launch(&m, &cfg, &[&buf, &buf]).unwrap_err();
    assert!(matches!(e, RuntimeError::BadLaunch { .. }), "{e}");
}
