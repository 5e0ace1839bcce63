//! Register budgets on the simulator: `setmaxnreg` changes no value, but the
//! simulator keeps each CTA's register pool, so an `.inc` that no `.dec` can
//! feed blocks and ends in a deadlock report naming the role and the figures.

use kda_device::{Device, LaunchConfig, RuntimeError};
use kda_ir::{Access, Builder, CachePolicy, Dim, Kernel, LaunchDecl, Provenance, Scalar};
use kda_sim::{SimDevice, SimError, SimOptions, WaitOn};

/// 384 threads starting at 168 registers: a producer warpgroup at 40, two
/// consumer warpgroups at 232 (64512 = 384 × 168 in all). Every thread
/// writes `tid + 1000 × role`. With `sync_between`, a `bar.sync` of the whole
/// block sits between the consumers' region and the producer's.
fn budgets(sync_between: bool) -> Kernel {
    let mut b = Builder::new(
        "budgets",
        LaunchDecl {
            block: 384,
            cluster: 1,
            min_blocks_per_sm: None,
            cluster_policy: Default::default(),
        },
    );
    let y = b.tensor(
        "y",
        Scalar::U32,
        &[Dim::Const(384)],
        &[Dim::Const(1)],
        Provenance::Ready,
        Access::Write,
    );
    let producer = b.role("producer", 0, 128);
    let consumers = b.role("consumers", 128, 256);
    b.set_regs(producer, 40);
    b.set_regs(consumers, 232);
    let tid = b.thread_idx();
    let order = if sync_between {
        [(consumers, 2000), (producer, 1000)]
    } else {
        [(producer, 1000), (consumers, 2000)]
    };
    for (i, (role, add)) in order.into_iter().enumerate() {
        if i == 1 && sync_between {
            b.bar_sync(1, 384);
        }
        b.in_role(role, |b| {
            let c = b.u32(add);
            let v = b.add(tid, c);
            b.st_global(y, &[tid], v, None, CachePolicy::Normal);
        });
    }
    b.finish()
}

fn run(k: &Kernel, opts: SimOptions) -> Result<Vec<u32>, RuntimeError> {
    kda_ir::verifier::verify(k).unwrap_or_else(|e| panic!("{e}"));
    let dev = SimDevice::with_options(opts);
    let m = dev.load_unverified(k)?;
    let y = dev.upload(&vec![0u8; 384 * 4])?;
    let cfg = LaunchConfig {
        grid: [2, 1, 1],
        pdl: false,
        syms: vec![],
        scalars: vec![],
    };
    dev.launch(&m, &cfg, &[&y])?;
    Ok(dev
        .download(&y)?
        .chunks(4)
        .map(|c| u32::from_le_bytes(c.try_into().unwrap()))
        .collect())
}

#[test]
fn budgets_change_no_values_under_any_interleaving() {
    let k = budgets(false);
    assert_eq!(k.max_regs, Some(168), "the default start for 384 threads");
    let want: Vec<u32> = (0..384)
        .map(|t| t + if t < 128 { 1000 } else { 2000 })
        .collect();
    assert_eq!(run(&k, SimOptions::default()).unwrap(), want);
    for seed in 0..8 {
        let o = SimOptions {
            seed: Some(seed),
            max_slice: 3,
            ..SimOptions::default()
        };
        // The consumers often reach their `.inc` before the producer's
        // `.dec`: they wait for it, then run.
        assert_eq!(run(&k, o).unwrap(), want, "seed {seed}");
    }
}

#[test]
fn an_inc_waiting_behind_a_block_barrier_deadlocks() {
    // The consumers' `.inc` needs the producer's registers, but the producer
    // waits at the `bar.sync` for the consumers first: the verifier's budget
    // sum holds, the order does not.
    let e = run(&budgets(true), SimOptions::default()).unwrap_err();
    let RuntimeError::Sim(SimError::Deadlock(d)) = &e else {
        panic!("{e}")
    };
    let regs: Vec<_> = d
        .blocked
        .iter()
        .filter(|w| matches!(w.wait, WaitOn::Registers { .. }))
        .collect();
    assert_eq!(
        regs.len(),
        8,
        "every consumer warp waits for registers: {e}"
    );
    assert_eq!(
        regs[0].wait,
        WaitOn::Registers {
            holds: 168,
            wants: 232,
            pool: 0
        }
    );
    assert_eq!(regs[0].role.as_deref(), Some("consumers"));
    let text = e.to_string();
    assert!(
        text.contains(
            "setmaxnreg.inc 232 (holds 168 per thread): needs 2048 registers, the CTA's pool has 0"
        ),
        "{text}"
    );
    assert!(
        text.contains("bar.sync 1: 128/384 threads arrived"),
        "{text}"
    );
}
