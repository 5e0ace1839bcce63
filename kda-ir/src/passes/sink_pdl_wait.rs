//! The early schedule's PDL waits: each `pdl.wait` sinks to the first thing
//! that needs it.
//!
//! With [`ScheduleHints::early`], within each region a `pdl.wait` moves
//! forward past the instructions that follow it, stopping right before the
//! first one that reads a *produced* tensor (`ld.global`, `cp.async`,
//! `cp.async.bulk`), writes global memory (`st.global`: the preceding launch
//! may still read what this kernel overwrites), is another `pdl.wait`, or is
//! a region op (`if`, `for`, `while`, `role`) containing any of those; with
//! nothing stopping it, it ends at the end of its region. It never enters a
//! nested region. So the program can put the wait at the top of a role and
//! the ready work that follows — including loads inside `if`s and loops,
//! `cp.async.bulk` of ready tensors and mbarrier setup, which
//! `hoist_ready_loads` does not move — is issued before it, overlapping the
//! tail of the preceding launch.
//!
//! `hoist_ready_loads` runs after this pass and complements it: it moves the
//! ready `ld.global`s that come after the first produced read above the wait.
//! Without `early` the pass does nothing (`place_pdl_wait` has put the one
//! wait at the entry).
//!
//! [`ScheduleHints::early`]: crate::kernel::ScheduleHints::early

use crate::entities::{Inst, Tensor};
use crate::kernel::{Kernel, Provenance};
use crate::op::Op;
use crate::passes::{contains, sink};

/// Whether `i` itself must stay after the PDL wait: it reads a produced
/// tensor, writes global memory, or is another wait.
fn needs_wait(k: &Kernel, i: Inst) -> bool {
    let op = &k.insts[i].op;
    let fx = op.effects();
    let produced = |t: Tensor| k.tensors[t].provenance == Provenance::Produced;
    (fx.reads_global() && op.tensor().is_some_and(produced))
        || fx.writes_global()
        || *op == Op::GridDepWait
}

/// Sink every `pdl.wait` of `k` to the first instruction that needs it
/// (nothing without [`ScheduleHints::early`](crate::kernel::ScheduleHints::early)).
pub fn run(k: &mut Kernel) {
    if !k.schedule.early {
        return;
    }
    sink(k, &|op| *op == Op::GridDepWait, &|k, i| {
        contains(k, i, &needs_wait)
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::builder::Builder;
    use crate::entities::Tensor;
    use crate::kernel::{Access, Dim};
    use crate::op::{CachePolicy, CmpOp};
    use crate::passes::test_util::{launch, names, top_regions, verified};
    use crate::types::{Scalar, Type};
    use crate::write::write_kernel;

    fn vector(b: &mut Builder, name: &str, prov: Provenance, access: Access) -> Tensor {
        let t = b.tensor(
            name,
            Scalar::F32,
            &[Dim::Const(256)],
            &[Dim::Const(1)],
            prov,
            access,
        );
        b.set_align(t, 16);
        t
    }

    /// The flagship's state role, in miniature: the wait at the top of the
    /// role, ready loads (some under an `if`, one bulk-copied behind mbarrier
    /// setup), then produced loads, then the store.
    fn state_role(early: bool) -> Kernel {
        let mut b = Builder::new("state_role", launch(32, 1));
        b.set_early(early);
        let state = vector(&mut b, "state", Provenance::Ready, Access::ReadWrite);
        let weights = vector(&mut b, "weights", Provenance::Ready, Access::Read);
        let x = vector(&mut b, "x", Provenance::Produced, Access::Read);
        let beta = vector(&mut b, "beta", Provenance::Produced, Access::Read);
        let r = b.role("state", 0, 32);
        let bar = b.mbarrier("staged", 1, 128, &[r]);
        let staged = b.shared("staged", Scalar::F32, 32, 128, &[r], Some(bar));
        let tid = b.thread_idx();
        b.in_role(r, |b| {
            b.pdl_wait();
            let zero = b.u32(0);
            let first = b.cmp(CmpOp::Eq, tid, zero);
            b.if_(first, |b| {
                b.mbarrier_init(bar);
                b.mbarrier_arrive_expect_tx(bar, 128);
                b.bulk_copy(staged, zero, state, &[zero], 128, bar, CachePolicy::Normal);
            });
            let _ = b.ld_global(weights, &[tid], Type::F32, CachePolicy::Normal);
            let lim = b.u32(16);
            let low = b.cmp(CmpOp::Lt, tid, lim);
            b.if_(low, |b| {
                let _ = b.ld_global(state, &[tid], Type::F32, CachePolicy::Normal);
            });
            let v = b.ld_global(x, &[tid], Type::F32, CachePolicy::Normal);
            let bt = b.ld_global(beta, &[tid], Type::F32, CachePolicy::Normal);
            let y = b.mul(v, bt);
            b.wait(bar);
            b.st_global(state, &[tid], y, None, CachePolicy::Normal);
        });
        b.finish()
    }

    #[test]
    fn the_wait_sinks_past_ready_work_to_the_first_produced_read() {
        let mut k = state_role(true);
        verified(&k);
        run(&mut k);
        verified(&k);
        let role = top_regions(&k)[0];
        assert_eq!(
            names(&k, role),
            [
                "iconst",
                "cmp.eq",
                "if",
                "ld.global",
                "iconst",
                "cmp.lt",
                "if",
                "pdl.wait",
                "ld.global",
                "ld.global",
                "mul",
                "mbarrier.wait",
                "st.global",
                "yield"
            ],
            "{}",
            write_kernel(&k)
        );
    }

    #[test]
    fn stores_and_regions_with_produced_reads_stop_it() {
        let mut b = Builder::new("stops", launch(32, 1));
        b.set_early(true);
        let out = vector(&mut b, "out", Provenance::Ready, Access::Write);
        let x = vector(&mut b, "x", Provenance::Produced, Access::Read);
        let tid = b.thread_idx();
        let one = b.f32(1.0);
        // A store (of a ready tensor) stops it.
        b.pdl_wait();
        let _ = b.u32(3);
        b.st_global(out, &[tid], one, None, CachePolicy::Normal);
        // A produced read nested in a loop stops it.
        b.pdl_wait();
        let zero = b.u32(0);
        let two = b.u32(2);
        let step = b.u32(1);
        b.for_(zero, two, step, &[], |b, iv, _| {
            let _ = b.ld_global(x, &[iv], Type::F32, CachePolicy::Normal);
            vec![]
        });
        // Nothing after it: the end of the region.
        b.pdl_wait();
        let _ = b.u32(4);
        let mut k = b.finish();
        verified(&k);
        run(&mut k);
        verified(&k);
        assert_eq!(
            names(&k, k.body),
            [
                "special",
                "fconst",
                "iconst",
                "pdl.wait",
                "st.global",
                "iconst",
                "iconst",
                "iconst",
                "pdl.wait",
                "for",
                "iconst",
                "pdl.wait"
            ],
            "{}",
            write_kernel(&k)
        );
    }

    #[test]
    fn the_wait_ends_its_region_before_the_yield_and_stays_out_of_nested_ones() {
        let mut b = Builder::new("nested", launch(32, 1));
        b.set_early(true);
        let w = vector(&mut b, "w", Provenance::Ready, Access::Read);
        let r = b.role("all", 0, 32);
        let tid = b.thread_idx();
        b.in_role(r, |b| {
            b.pdl_wait();
            let zero = b.u32(0);
            let first = b.cmp(CmpOp::Eq, tid, zero);
            b.if_(first, |b| {
                let _ = b.ld_global(w, &[tid], Type::F32, CachePolicy::Normal);
            });
        });
        let mut k = b.finish();
        run(&mut k);
        verified(&k);
        let rs = top_regions(&k);
        assert_eq!(
            names(&k, rs[0]),
            ["iconst", "cmp.eq", "if", "pdl.wait", "yield"]
        );
    }

    #[test]
    fn without_early_nothing_moves() {
        let mut k = state_role(false);
        let before = write_kernel(&k);
        run(&mut k);
        assert_eq!(write_kernel(&k), before);
    }
}
