//! The late release: each releasing `cluster.arrive` sinks past the
//! consumers of the loads before it, to the thread's next write or
//! synchronisation.
//!
//! A program states a releasing arrive (`cluster.arrive`, not `.relaxed`) where
//! the ordering it announces holds: right after the loads of data that a peer
//! rewrites once its `cluster.wait` returns (GDN's shared q/k conv taps). ptxas
//! (12.9, sm_90a) compiles the release to `MEMBAR.ALL.CTA; MEMBAR.ALL.GPU;
//! ERRBAR; CGAERRBAR; UCGABAR_ARV`: the thread waits there for every load and
//! store it still has in flight, so a release stated right after loads waits
//! for their round trip (42 % of GDN's stall samples at batch 128 sat on it). A
//! load is complete once its value has been used; a store stays in flight after
//! it issues until memory acknowledges it. So with
//! [`ScheduleHints::late_release`] each releasing arrive moves forward,
//! within its region, past loads and the work that uses them, and stops
//! right before the first instruction that is, or (an `if`, `for`, `while`
//! or `role`) contains, one of the stops below; with none, it ends at the
//! end of its region. It never enters a nested region, so each thread still
//! runs it exactly once, under the same conditions (and the backend's choice
//! of `.aligned`, which follows the enclosing control flow, is unchanged),
//! and it stays before the `cluster.wait` of its phase. Relaxed arrives
//! never move: they release nothing (ptxas emits no membar for them), and
//! they usually follow a `fence.mbarrier_init` that peers wait on before
//! they send.
//!
//! Moving a release later only puts more of the thread's own accesses before
//! it, so every ordering the program stated still holds; what it can break is
//! progress: the peers' `cluster.wait` now needs this thread to get further.
//! If the thread blocks, between the stated and the new place, on something
//! that only a thread held at such a wait can complete, the cluster
//! deadlocks. The stops:
//!
//! * `cluster.wait`: the wait of this phase follows its arrive (it would
//!   wait for it forever otherwise); another `cluster.arrive`, relaxed or
//!   not, belongs to another phase.
//! * `bar.sync` (every named barrier): its other threads may be in other
//!   roles, already past their own arrive and blocked in `cluster.wait`.
//! * `mbarrier.wait` and `mbarrier.wait.parity` (a single barrier or a ring):
//!   the arrivals or bytes it waits for may come from a thread, here or in a
//!   peer CTA, that waits on the cluster first.
//! * `setmaxnreg` (`inc` and `dec`): `inc` blocks until other warps of the
//!   CTA give registers back, which they may do only past their cluster
//!   wait. It is first in its role's region, so this never costs a place.
//! * `while`: its trip count is decided as it runs, and its condition may
//!   poll memory that another thread writes past its cluster wait. A `for`
//!   has its bounds fixed at entry and is passed when its body holds no stop.
//! * Writes and signals: `st.global`, `st.shared`, `atom.add`, bulk stores,
//!   and the mbarrier signals `mbarrier.init`, `mbarrier.arrive`,
//!   `mbarrier.arrive.expect_tx`, `st.async` and `mbarrier.arrive.remote`.
//!   None blocks, so passing one could not deadlock, and the release would
//!   cover it too; but it would be in flight at the release's membar, which
//!   would then wait for its acknowledgement (for `st.async` and the remote
//!   arrival a round trip to a peer CTA): the opposite of what the hint is
//!   for. So the release ends after the loads and their consumers and
//!   before the results are written out; and it never changes the order of
//!   the thread's signals to other threads (the cluster's, DSMEM's, the
//!   mbarriers').
//!
//! Passed, because none can wait for another thread of this launch, and none
//! is a store or a signal to another thread:
//!
//! * arithmetic, constants, conversions, `special`, `param`;
//! * loads (`ld.global`, `ld.shared`): the point of the pass. One that the
//!   release passes and nothing uses before the new place is still in
//!   flight there, as the loads before the stated place may be;
//! * `cp.async`, `cp.async.bulk` (loads into shared memory, completed by
//!   their own wait or barrier), `cp.async.commit`, `cp.async.wait`,
//!   `cp.async.bulk.commit` and `cp.async.bulk.wait`: the waits wait for
//!   this thread's own copies, which complete without any other thread;
//! * `pdl.wait`: it waits for the preceding launch, which never waits for
//!   this one (a release before it overlaps the previous launch: the
//!   trade-off that makes this a hint);
//! * `pdl.launch_dependents`: the one signal passed. It blocks nothing and
//!   orders nothing (the dependent's `pdl.wait` waits for this whole launch
//!   to complete wherever the trigger is), and the program states it after
//!   its last produced read, before the work that consumes those reads,
//!   which is where the release should go;
//! * warp collectives (`shfl`, `elect`, `mma`, `warp.sync`): they wait only
//!   for the lanes of this warp, which the verifier makes run them in
//!   warp-uniform control flow, so every lane passes the collective before
//!   any reaches the moved arrive;
//! * `fence.mbarrier_init` and `fence.proxy.async`.
//!
//! Without `late_release` the pass does nothing.
//!
//! [`ScheduleHints::late_release`]: crate::kernel::ScheduleHints::late_release

use crate::kernel::Kernel;
use crate::op::{Effects, Op};
use crate::passes::{contains, sink};

/// Whether the release may not move past `op` (see the module doc): it may
/// wait for another thread (barrier waits, `setmaxnreg`, `while`), or it is
/// a write or a signal (global stores, the thread's own shared stores,
/// anything reaching a peer CTA, mbarrier and cluster signals). Async copies
/// into shared memory are loads here; `pdl.launch_dependents` is no signal
/// to this launch. Region ops stop through what they contain (`contains`).
fn stops(op: &Op) -> bool {
    stops_for(op.effects())
}

fn stops_for(fx: Effects) -> bool {
    fx.intersects(Effects::BLOCKS.with(Effects::SIGNAL))
        || fx.writes_global()
        || fx.reaches_peer()
        || (fx.writes_shared() && !fx.is_async())
}

/// Sink every releasing `cluster.arrive` of `k` to its stopping point
/// (nothing without
/// [`ScheduleHints::late_release`](crate::kernel::ScheduleHints::late_release)).
pub fn run(k: &mut Kernel) {
    if !k.schedule.late_release {
        return;
    }
    sink(
        k,
        &|op| *op == Op::ClusterArrive { relaxed: false },
        &|k, i| contains(k, i, &|k, j| stops(&k.insts[j].op)),
    );
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::op::Opcode;
    use crate::parse::parse_kernel;
    use crate::passes::test_util::{names, top_regions, verified};
    use crate::write::write_kernel;

    /// The table's effects stop the release at exactly the ops the module
    /// doc lists.
    #[test]
    fn the_stops_are_the_documented_ones() {
        let stops: Vec<&str> = Opcode::ALL
            .iter()
            .filter(|c| stops_for(c.effects()))
            .map(|c| c.name())
            .collect();
        assert_eq!(
            stops,
            [
                "st.global",
                "atom.add",
                "st.shared",
                "mbarrier.init",
                "mbarrier.arrive",
                "mbarrier.arrive.expect_tx",
                "mbarrier.arrive.remote",
                "mbarrier.wait",
                "mbarrier.wait.parity",
                "cluster.arrive",
                "cluster.wait",
                "bar.sync",
                "st.async",
                "cp.async.bulk.store",
                "setmaxnreg.inc",
                "setmaxnreg.dec",
                "while",
            ]
        );
    }

    /// A cluster of 2 CTAs of 64 threads: thread 0 initialises the barriers,
    /// the cluster syncs (relaxed), every thread arrives on `bar1` and loads
    /// its tap; then (`sinks_to`) it releases and uses the tap.
    const HEAD: &str = "kernel k block=64 cluster=2 late_release {
  tensor t0 \"taps\": f32[64] strides[1] ready readwrite align 16
  tensor t1 \"x\": f32[64] strides[1] produced read align 4
  tensor t2 \"tickets\": u32[1] strides[1] ready readwrite align 4
  tensor t3 \"out\": f32[64] strides[1] ready write align 16
  shared buf0 \"inbox\": f32[64] align 16 guard(bar0)
  shared buf1 \"slots\": f32[256] align 16
  mbarrier bar0 \"full\": arrivals 1 tx 4
  mbarrier bar1 \"local\": arrivals 64 tx 0
  mbarrier bar2 \"empty\": arrivals 1 tx 0
  mbarrier bar3 \"late\": arrivals 1 tx 0
  mbarrier bar4 \"copied\": arrivals 1 tx 256
  role role0 \"all\" 0..64
  v0:u32 = special tid
  v1:u32 = iconst 0
  v2:bool = cmp.eq v0, v1
  v3:u32 = iconst 1
  v4:u32 = special cluster_rank
  v5:u32 = xor v4, v3
  if v2 {
    mbarrier.init bar0
    mbarrier.init bar1
    mbarrier.init bar2
    mbarrier.init bar4
    mbarrier.arrive.expect_tx bar4, 256
  } else {
  }
  fence.mbarrier_init
  cluster.arrive.relaxed
  cluster.wait
  mbarrier.arrive bar1
  v6:f32 = ld.global t0[v0]
";
    const ARRIVE: &str = "  cluster.arrive\n";
    const USE: &str = "  v7:f32 = add v6, v6\n";
    const TAIL: &str = "  st.global t0[v0], v7\n}\n";

    /// `text` parsed, verified, through the pass, and verified again.
    fn sunk(text: &str) -> Kernel {
        let mut k = parse_kernel(text).unwrap_or_else(|e| panic!("{e}\n{text}"));
        verified(&k);
        run(&mut k);
        verified(&k);
        k
    }

    /// `HEAD`, the release, the tap's use, `passed` and `stop` (then the
    /// rewrite of the taps); after the pass the release must sit between
    /// `passed` and `stop`, and nothing else have moved.
    fn sinks_to(passed: &str, stop: &str) {
        let input = format!("{HEAD}{ARRIVE}{USE}{passed}{stop}{TAIL}");
        let want = format!("{HEAD}{USE}{passed}{ARRIVE}{stop}{TAIL}");
        let k = sunk(&input);
        let want = parse_kernel(&want).unwrap_or_else(|e| panic!("{e}\n{want}"));
        assert_eq!(
            write_kernel(&k),
            write_kernel(&want),
            "passed:\n{passed}stop:\n{stop}"
        );
    }

    #[test]
    fn gdn_the_release_passes_the_conv_and_stops_at_its_store() {
        // The produced read after the PDL wait, the trigger, the conv; then
        // its store to shared memory, a warp reduction, `bar.sync`.
        sinks_to(
            "  pdl.wait
  v10:f32 = ld.global t1[v0]
  pdl.launch_dependents
  v11:f32 = mul v7, v10
",
            "  st.shared buf1[v0], v11
  v12:f32 = shfl.bfly v11, v3
  if v2 {
    st.shared buf1[v1], v12
  } else {
  }
  bar.sync 1, 64
  cluster.wait
",
        );
    }

    /// What the release passes, before a `bar.sync` that stops it.
    const PASSED: [&str; 10] = [
        "  v10:f32 = ld.shared buf1[v0]\n",
        "  v10:f32 = shfl.bfly v7, v3\n  v11:bool = elect\n  warp.sync\n",
        "  v10:u32 = iconst 4\n  v11:u32 = mul v0, v10\n  cp.async buf1[v11], t0[v11]\n  cp.async.commit\n  cp.async.wait 0\n",
        "  fence.proxy.async\n  fence.mbarrier_init\n",
        "  v10:f32 = cvt v0\n  v11:f32 = fma v10, v7, v7\n  v12:u32 = bitcast v11\n",
        "  pdl.wait\n  pdl.launch_dependents\n",
        "  if v2 {
    cp.async.bulk buf1[v1], t0[v1], 256, bar4
    cp.async.bulk.commit
    cp.async.bulk.wait 0
  } else {
  }
",
        "  role role0 {
    v10:f32 = ld.global t0[v0]
    v11:u32 = special laneid
  }
",
        // A loop and a branch with no stop inside.
        "  for v1..v3 step v3 |v10:u32| {
    v11:f32 = ld.global t0[v10]
    v12:f32 = mul v11, v11
    yield
  }
",
        "  v10:f32 = if v2 {
    v11:f32 = ld.global t0[v1]
    yield v11
  } else {
    v12:f32 = fconst 0.0
    yield v12
  }
",
    ];

    #[test]
    fn the_release_passes_loads_and_local_work() {
        for passed in PASSED {
            sinks_to(passed, "  bar.sync 1, 64\n  cluster.wait\n");
        }
    }

    #[test]
    fn each_stop_holds_the_release() {
        for stop in [
            // Waits.
            "  cluster.wait\n",
            "  bar.sync 1, 64\n  cluster.wait\n",
            "  mbarrier.wait bar1, phase 0\n  cluster.wait\n",
            "  mbarrier.wait.parity bar1, v1\n  cluster.wait\n",
            // Any other cluster arrive (not a program a thread should run:
            // two arrivals without a wait; the stop is a safety net).
            "  cluster.arrive.relaxed\n  cluster.wait\n  cluster.wait\n",
            // Writes.
            "  st.shared buf1[v0], v7\n  bar.sync 1, 64\n  cluster.wait\n",
            "  st.global t3[v0], v7\n  cluster.wait\n",
            "  v10:u32 = atom.add t2[v1], v3\n  cluster.wait\n",
            "  if v2 {
    cp.async.bulk.store t3[v1], buf1[v1], 256
    cp.async.bulk.commit
    cp.async.bulk.wait 0
  } else {
  }
  cluster.wait
",
            // Signals: mbarrier arrivals here and in the peer CTA, DSMEM.
            "  mbarrier.arrive bar1\n  cluster.wait\n",
            "  if v2 {
    mbarrier.init bar3
  } else {
  }
  cluster.wait
",
            "  if v2 {
    mbarrier.arrive.expect_tx bar0, 4
  } else {
  }
  cluster.wait
",
            "  if v2 {
    st.async buf0[v1], v7, cta v5, bar0
  } else {
  }
  cluster.wait
",
            "  if v2 {
    mbarrier.arrive.remote bar2, cta v5
  } else {
  }
  mbarrier.wait bar2, phase 0
  cluster.wait
",
            // A `while`, even without a stop inside.
            "  v10:u32 = while (v1) |v11:u32| {
    v12:bool = cmp.lt v11, v3
    yield v12, v11
  } do |v13:u32| {
    v14:u32 = add v13, v3
    yield v14
  }
  cluster.wait
",
            // Loops and branches with a stop inside.
            "  for v1..v3 step v3 |v10:u32| {
    bar.sync 1, 64
    yield
  }
  cluster.wait
",
            "  if v2 {
    cluster.wait
  } else {
    cluster.wait
  }
",
        ] {
            sinks_to(
                "  v20:f32 = mul v7, v7\n  v21:f32 = ld.global t0[v1]\n",
                stop,
            );
        }
    }

    #[test]
    fn a_second_release_stops_the_first_and_sinks_to_its_wait() {
        let input = format!(
            "{HEAD}{ARRIVE}{USE}  cluster.wait\n  cluster.arrive\n  v8:f32 = mul v7, v7\n  cluster.wait\n{TAIL}"
        );
        let want = format!(
            "{HEAD}{USE}{ARRIVE}  cluster.wait\n  v8:f32 = mul v7, v7\n  cluster.arrive\n  cluster.wait\n{TAIL}"
        );
        let k = sunk(&input);
        assert_eq!(
            write_kernel(&k),
            write_kernel(&parse_kernel(&want).unwrap())
        );
    }

    #[test]
    fn setmaxnreg_holds_the_release() {
        let text = "kernel k block=128 cluster=2 maxnreg=64 late_release {
  tensor t0 \"taps\": f32[128] strides[1] ready readwrite align 4
  role role0 \"all\" 0..128 regs 40
  v0:u32 = special tid
  v1:f32 = ld.global t0[v0]
  cluster.arrive
  v2:f32 = add v1, v1
  role role0 {
    setmaxnreg.dec 40
    v3:f32 = mul v2, v2
  }
  cluster.wait
  st.global t0[v0], v2
}
";
        let k = sunk(text);
        assert_eq!(
            names(&k, k.body),
            [
                "special",
                "ld.global",
                "add",
                "cluster.arrive",
                "role",
                "cluster.wait",
                "st.global"
            ],
            "{k}"
        );
    }

    #[test]
    fn the_release_stays_in_its_region_and_relaxed_arrives_stay() {
        // In a role, the release ends its region (before the `yield`); the
        // relaxed arrive at the top does not move past the load and add.
        let text = "kernel k block=64 cluster=2 late_release {
  tensor t0 \"taps\": f32[64] strides[1] ready readwrite align 4
  role role0 \"all\" 0..64
  v0:u32 = special tid
  v1:f32 = ld.global t0[v0]
  cluster.arrive.relaxed
  v2:f32 = add v1, v1
  cluster.wait
  role role0 {
    v3:f32 = ld.global t0[v0]
    cluster.arrive
    v4:f32 = add v3, v3
  }
  cluster.wait
  st.global t0[v0], v2
}
";
        let k = sunk(text);
        assert_eq!(
            names(&k, k.body),
            [
                "special",
                "ld.global",
                "cluster.arrive.relaxed",
                "add",
                "cluster.wait",
                "role",
                "cluster.wait",
                "st.global"
            ],
            "{k}"
        );
        assert_eq!(
            names(&k, top_regions(&k)[0]),
            ["ld.global", "add", "cluster.arrive", "yield"],
            "{k}"
        );
    }

    #[test]
    fn without_the_hint_nothing_moves() {
        let text = format!("{HEAD}{ARRIVE}{USE}  bar.sync 1, 64\n  cluster.wait\n{TAIL}")
            .replace(" late_release", "");
        let mut k = parse_kernel(&text).unwrap_or_else(|e| panic!("{e}"));
        assert!(!k.schedule.late_release);
        let before = write_kernel(&k);
        run(&mut k);
        assert_eq!(write_kernel(&k), before);
    }
}
