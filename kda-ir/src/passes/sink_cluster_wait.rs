//! The early schedule's cluster syncs: each `cluster.wait` sinks to the
//! first DSMEM send after it.
//!
//! The program puts `cluster.arrive` + `cluster.wait` right after the
//! mbarrier setup of each role (so peers' barriers exist before anyone
//! sends). With [`ScheduleHints::early`] (the seed's `early >= 1`) the wait
//! moves forward, within its region, past the instructions that follow it,
//! stopping right before the first one that is, or (an `if`, `for`, `while`
//! or `role`) contains, an `st.async` or `mbarrier.arrive.remote` (both
//! reach a peer's barrier, which exists only past the wait), a `cluster.arrive`, a
//! `cluster.wait`, an `st.global` (the barrier may order a store after
//! the peers' loads before their arrival) or an `mbarrier.wait`; `bar.sync`
//! and loads are passed. With no
//! send after it, it ends at the end of its region: every thread that
//! arrived still waits once before it exits. It never enters a nested
//! region, so each thread still runs it exactly once, and it stays after
//! every `mbarrier.init` it followed. The arrivals do not move, so each
//! role's setup and loads overlap the peers' arrival instead of waiting for
//! the slowest CTA of the cluster before issuing its loads.
//!
//! Why not past an `mbarrier.wait`: on the hardware a thread may block on an
//! mbarrier with its cluster wait still pending (the barrier completes on
//! arrivals), but `compute-sanitizer --tool racecheck` models the cluster
//! barrier so that such a kernel never finishes under it (measured on the
//! H200: KdaSplit's state threads waited for decays while its gate warp sat
//! in its cluster wait; docs/validation.md). Waiting on the cluster first
//! costs next to nothing: every CTA of a cluster arrives at its start.
//!
//! Without `early` the pass does nothing.
//!
//! [`ScheduleHints::early`]: crate::kernel::ScheduleHints::early

use crate::kernel::Kernel;
use crate::op::Op;
use crate::passes::{contains, sink};

/// Sink every `cluster.wait` of `k` to its stopping point (nothing without
/// [`ScheduleHints::early`](crate::kernel::ScheduleHints::early)).
pub fn run(k: &mut Kernel) {
    if !k.schedule.early {
        return;
    }
    sink(k, &|op| *op == Op::ClusterWait, &|k, i| {
        contains(k, i, &|k, j| {
            let op = &k.insts[j].op;
            let fx = op.effects();
            // A send into a peer's shared memory (`st.async`, a remote
            // arrival): the peer's barrier exists only past the wait.
            fx.reaches_peer()
                // A global store the barrier may order after the peers' loads
                // before their arrival (a shared value rewritten once all
                // have read it).
                || fx.writes_global()
                || matches!(
                    op,
                    Op::ClusterArrive { .. }
                        | Op::ClusterWait
                        | Op::MbarWait { .. }
                        | Op::MbarWaitParity { .. }
                )
        })
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::builder::Builder;
    use crate::entities::{Barrier, Buffer, Role, Tensor, Value};
    use crate::kernel::{Access, Dim, Provenance};
    use crate::op::{BinOp, CachePolicy, CmpOp};
    use crate::passes::test_util::{count, launch, names, top_regions, verified};
    use crate::types::{Scalar, Type};
    use crate::write::write_kernel;

    /// A cluster of 2, 64 threads: the `state` warp initialises the barrier,
    /// then both warps arrive and wait on the cluster barrier, load, sync and
    /// send into the peer's inbox (`state` directly, `gate` under an `if`);
    /// `state` then waits for the inbox.
    fn exchange(early: bool) -> Kernel {
        let Pair {
            mut b,
            w,
            state,
            gate,
            full,
            inbox,
            tid,
            lane,
            peer,
        } = pair("exchange", early, 256);
        b.in_role(state, |b| {
            setup(b, lane, full, 256);
            let v = b.ld_global(w, &[tid], Type::F32, CachePolicy::Normal);
            b.bar_sync(1, 64);
            b.st_async(inbox, lane, v, peer, full);
            b.wait(full);
            let _ = b.ld_shared(inbox, lane, Type::F32);
        });
        b.in_role(gate, |b| {
            b.cluster_arrive(true);
            b.cluster_wait();
            let v = b.ld_global(w, &[tid], Type::F32, CachePolicy::Normal);
            b.bar_sync(1, 64);
            let t = b.u32(32);
            let at = b.add(lane, t);
            let yes = b.bool(true);
            b.if_(yes, |b| b.st_async(inbox, at, v, peer, full));
        });
        b.finish()
    }

    /// `k` after the pass, verified before and after.
    fn sunk(mut k: Kernel) -> Kernel {
        verified(&k);
        run(&mut k);
        verified(&k);
        k
    }

    /// A cluster of 2, 64 threads in two warp roles, `state` and `gate`, a
    /// barrier `full` of `tx` bytes and its inbox, a ready tensor `w`.
    struct Pair {
        b: Builder,
        w: Tensor,
        state: Role,
        gate: Role,
        full: Barrier,
        inbox: Buffer,
        tid: Value,
        lane: Value,
        peer: Value,
    }

    fn pair(name: &str, early: bool, tx: u32) -> Pair {
        let mut b = Builder::new(name, launch(64, 2));
        b.set_early(early);
        let w = b.tensor(
            "w",
            Scalar::F32,
            &[Dim::Const(64)],
            &[Dim::Const(1)],
            Provenance::Ready,
            Access::Read,
        );
        let state = b.role("state", 0, 32);
        let gate = b.role("gate", 32, 32);
        let full = b.mbarrier("full", 1, tx, &[state, gate]);
        let inbox = b.shared("inbox", Scalar::F32, 64, 16, &[state, gate], Some(full));
        let tid = b.thread_idx();
        let c31 = b.u32(31);
        let lane = b.bin(BinOp::And, tid, c31);
        let rank = b.cluster_rank();
        let one = b.u32(1);
        let peer = b.bin(BinOp::Xor, rank, one);
        Pair {
            b,
            w,
            state,
            gate,
            full,
            inbox,
            tid,
            lane,
            peer,
        }
    }

    /// Lane 0 initialises and arms `full`; fence; arrive and wait on the cluster.
    fn setup(b: &mut Builder, lane: Value, full: Barrier, tx: u32) {
        let zero = b.u32(0);
        let first = b.cmp(CmpOp::Eq, lane, zero);
        b.if_(first, |b| {
            b.mbarrier_init(full);
            b.mbarrier_arrive_expect_tx(full, tx);
        });
        b.fence_mbarrier_init();
        b.cluster_arrive(true);
        b.cluster_wait();
    }

    #[test]
    fn each_roles_wait_sinks_to_its_first_send() {
        let k = sunk(exchange(true));
        let rs = top_regions(&k);
        assert_eq!(
            names(&k, rs[0]),
            [
                "iconst",
                "cmp.eq",
                "if",
                "fence.mbarrier_init",
                "cluster.arrive.relaxed",
                "ld.global",
                "bar.sync",
                "cluster.wait",
                "st.async",
                "mbarrier.wait",
                "ld.shared",
                "yield"
            ],
            "{}",
            write_kernel(&k)
        );
        assert_eq!(
            names(&k, rs[1]),
            [
                "cluster.arrive.relaxed",
                "ld.global",
                "bar.sync",
                "iconst",
                "add",
                "iconst",
                "cluster.wait",
                "if",
                "yield"
            ],
            "{}",
            write_kernel(&k)
        );
        assert_eq!(count(&k, |op| *op == Op::ClusterWait), 2);
    }

    #[test]
    fn without_a_send_the_wait_ends_its_region_and_arrivals_stop_it() {
        let mut b = Builder::new("no_send", launch(32, 2));
        b.set_early(true);
        let r = b.role("all", 0, 32);
        let tid = b.thread_idx();
        b.cluster_arrive(false);
        b.cluster_wait();
        let zero = b.u32(0);
        // A second cluster sync stops the first wait.
        b.cluster_arrive(false);
        b.cluster_wait();
        b.in_role(r, |b| {
            let first = b.cmp(CmpOp::Eq, tid, zero);
            b.if_(first, |b| b.bar_sync(1, 32));
        });
        let k = sunk(b.finish());
        assert_eq!(
            names(&k, k.body),
            [
                "special",
                "cluster.arrive",
                "iconst",
                "cluster.wait",
                "cluster.arrive",
                "role",
                "cluster.wait"
            ],
            "{}",
            write_kernel(&k)
        );
        let rs = top_regions(&k);
        assert_eq!(names(&k, rs[0]), ["cmp.eq", "if", "yield"]);
    }

    #[test]
    fn a_global_store_stops_the_wait() {
        // Loads of a shared value, the arrive, then a rewrite of that value:
        // the wait must stay before the store (peers may not have read yet).
        let mut b = Builder::new("rewrite", launch(32, 2));
        b.set_early(true);
        let t = b.tensor(
            "taps",
            Scalar::F32,
            &[Dim::Const(32)],
            &[Dim::Const(1)],
            Provenance::Ready,
            Access::ReadWrite,
        );
        let tid = b.thread_idx();
        let v = b.ld_global(t, &[tid], Type::F32, CachePolicy::Normal);
        b.cluster_arrive(true);
        b.cluster_wait();
        let w = b.add(v, v);
        b.st_global(t, &[tid], w, None, CachePolicy::Normal);
        let k = sunk(b.finish());
        assert_eq!(
            names(&k, k.body),
            [
                "special",
                "ld.global",
                "cluster.arrive.relaxed",
                "add",
                "cluster.wait",
                "st.global"
            ],
            "{}",
            write_kernel(&k)
        );
    }

    #[test]
    fn an_mbarrier_wait_stops_the_wait() {
        // The receiver blocks on its inbox before it ever sends: its cluster
        // wait must come before that block (racecheck hangs otherwise).
        let Pair {
            mut b,
            state: recv,
            gate: send,
            full,
            inbox,
            lane,
            peer,
            ..
        } = pair("receive_first", true, 128);
        b.in_role(recv, |b| {
            setup(b, lane, full, 128);
            let two = b.u32(2);
            let _ = b.mul(lane, two);
            b.wait(full);
            let _ = b.ld_shared(inbox, lane, Type::F32);
        });
        b.in_role(send, |b| {
            b.cluster_arrive(true);
            b.cluster_wait();
            let v = b.f32(1.0);
            b.st_async(inbox, lane, v, peer, full);
        });
        let k = sunk(b.finish());
        let rs = top_regions(&k);
        assert_eq!(
            names(&k, rs[0]),
            [
                "iconst",
                "cmp.eq",
                "if",
                "fence.mbarrier_init",
                "cluster.arrive.relaxed",
                "iconst",
                "mul",
                "cluster.wait",
                "mbarrier.wait",
                "ld.shared",
                "yield"
            ],
            "{}",
            write_kernel(&k)
        );
    }

    #[test]
    fn without_early_nothing_moves() {
        let mut k = exchange(false);
        let before = write_kernel(&k);
        run(&mut k);
        assert_eq!(write_kernel(&k), before);
    }
}
