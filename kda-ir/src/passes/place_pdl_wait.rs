//! The non-early schedule's PDL wait: one `pdl.wait` at the kernel's entry.
//!
//! The program places a `pdl.wait` before each role's first read of a
//! *produced* tensor. Without [`ScheduleHints::early`] (the seed's
//! `early = 0`) the whole kernel waits for the preceding launch first thing:
//! the first wait (in layout order) moves to the front of the kernel body and
//! every other one is deleted, as the wait at the entry dominates them all.
//! A kernel without any `pdl.wait` reads no produced tensor (the verifier
//! checks that) and is left alone. With `early` the pass does nothing: the
//! waits stay where the program puts them, for `sink_pdl_wait` and
//! `hoist_ready_loads` to move.
//!
//! [`ScheduleHints::early`]: crate::kernel::ScheduleHints::early

use crate::kernel::Kernel;
use crate::op::Op;

/// Keep the first `pdl.wait` of `k`, moved to the entry, and delete the rest
/// (nothing with [`ScheduleHints::early`](crate::kernel::ScheduleHints::early)).
pub fn run(k: &mut Kernel) {
    if k.schedule.early {
        return;
    }
    super::one_at_entry(k, &Op::GridDepWait);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::builder::Builder;
    use crate::kernel::{Access, Dim, Provenance};
    use crate::op::{CachePolicy, CmpOp};
    use crate::passes::test_util::{count, launch, names, top_regions, verified};
    use crate::types::{Scalar, Type};
    use crate::write::write_kernel;

    /// Two roles, each waiting before its produced read; one waits in both
    /// branches of an `if`.
    fn two_roles(early: bool) -> Kernel {
        let mut b = Builder::new("two_roles", launch(64, 1));
        b.set_early(early);
        let x = b.tensor(
            "x",
            Scalar::F32,
            &[Dim::Const(64)],
            &[Dim::Const(1)],
            Provenance::Produced,
            Access::Read,
        );
        let w = b.tensor(
            "w",
            Scalar::F32,
            &[Dim::Const(64)],
            &[Dim::Const(1)],
            Provenance::Ready,
            Access::Read,
        );
        let a = b.role("a", 0, 32);
        let c = b.role("c", 32, 32);
        b.pdl_launch_dependents();
        let tid = b.thread_idx();
        b.in_role(a, |b| {
            let _ = b.ld_global(w, &[tid], Type::F32, CachePolicy::Normal);
            b.pdl_wait();
            let _ = b.ld_global(x, &[tid], Type::F32, CachePolicy::Normal);
        });
        b.in_role(c, |b| {
            let zero = b.u32(0);
            let t = b.cmp(CmpOp::Eq, tid, zero);
            b.if_else(
                t,
                |b| {
                    b.pdl_wait();
                    vec![]
                },
                |b| {
                    b.pdl_wait();
                    vec![]
                },
            );
            let _ = b.ld_global(x, &[tid], Type::F32, CachePolicy::Normal);
        });
        b.finish()
    }

    #[test]
    fn one_wait_at_the_entry_replaces_all_others() {
        let mut k = two_roles(false);
        verified(&k);
        let first = {
            let mut w = None;
            k.walk(|i, _| {
                if w.is_none() && k.insts[i].op == Op::GridDepWait {
                    w = Some(i);
                }
            });
            w.unwrap()
        };
        run(&mut k);
        verified(&k);
        assert_eq!(k.regions[k.body].insts[0], first, "{}", write_kernel(&k));
        assert_eq!(count(&k, |op| *op == Op::GridDepWait), 1);
        assert_eq!(
            names(&k, k.body),
            [
                "pdl.wait",
                "pdl.launch_dependents",
                "special",
                "role",
                "role"
            ]
        );
        let rs = top_regions(&k);
        assert_eq!(names(&k, rs[0]), ["ld.global", "ld.global", "yield"]);
        // The emptied `if` stays (nothing else moves).
        assert_eq!(
            names(&k, rs[1]),
            ["iconst", "cmp.eq", "if", "ld.global", "yield"]
        );
    }

    #[test]
    fn early_and_wait_free_kernels_are_left_alone() {
        let mut k = two_roles(true);
        let before = write_kernel(&k);
        run(&mut k);
        assert_eq!(write_kernel(&k), before);

        let mut b = Builder::new("no_pdl", launch(32, 1));
        let _ = b.thread_idx();
        let mut k = b.finish();
        let before = write_kernel(&k);
        run(&mut k);
        assert_eq!(write_kernel(&k), before);
    }
}
