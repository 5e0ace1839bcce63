//! Where dependent launches are triggered: the program's place, or the entry.
//!
//! The program states the PDL trigger (`pdl.launch_dependents`) where it is
//! done with what the trigger should follow — normally after its last read of
//! a produced tensor, in every branch that ends the work (the padding branch
//! too). Triggering is only a placement choice: the dependent launch's
//! `pdl.wait` waits until this launch has completed and its memory is
//! visible, wherever the trigger is. With
//! [`ScheduleHints::trigger_at_entry`] (the seed's choice for a batch of one,
//! where the dependent's prologue is worth overlapping with this whole
//! launch) every trigger of the program is deleted and one runs first thing
//! at the kernel's entry, executed by every thread. Without the hint, or in a
//! kernel that never triggers (its dependents start when it exits), the pass
//! does nothing.
//!
//! It runs before `place_pdl_wait`, which puts the non-early schedule's wait
//! in front of it.
//!
//! [`ScheduleHints::trigger_at_entry`]: crate::kernel::ScheduleHints::trigger_at_entry

use crate::kernel::Kernel;
use crate::op::Op;

/// With `trigger_at_entry`, replace every `pdl.launch_dependents` of `k` by
/// one at the front of the kernel body.
pub fn run(k: &mut Kernel) {
    if !k.schedule.trigger_at_entry {
        return;
    }
    super::one_at_entry(k, &Op::GridDepLaunch);
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

    /// A role that reads a produced tensor and triggers after it, in both
    /// branches of an `if` (as a padding branch would).
    fn triggers_after_reads(at_entry: bool) -> Kernel {
        let mut b = Builder::new("triggers", launch(32, 1));
        b.set_trigger_at_entry(at_entry);
        let x = b.tensor(
            "x",
            Scalar::F32,
            &[Dim::Const(32)],
            &[Dim::Const(1)],
            Provenance::Produced,
            Access::Read,
        );
        let a = b.role("a", 0, 32);
        let tid = b.thread_idx();
        b.in_role(a, |b| {
            b.pdl_wait();
            let _ = b.ld_global(x, &[tid], Type::F32, CachePolicy::Normal);
            let zero = b.u32(0);
            let first = b.cmp(CmpOp::Eq, tid, zero);
            b.if_else(
                first,
                |b| {
                    b.pdl_launch_dependents();
                    vec![]
                },
                |b| {
                    b.pdl_launch_dependents();
                    vec![]
                },
            );
        });
        b.finish()
    }

    #[test]
    fn at_entry_every_trigger_becomes_one_at_the_front() {
        let mut k = triggers_after_reads(true);
        verified(&k);
        assert_eq!(count(&k, |op| *op == Op::GridDepLaunch), 2);
        run(&mut k);
        verified(&k);
        assert_eq!(
            count(&k, |op| *op == Op::GridDepLaunch),
            1,
            "{}",
            write_kernel(&k)
        );
        assert_eq!(names(&k, k.body)[0], "pdl.launch_dependents");
        // The role keeps its read and the emptied `if`.
        let rs = top_regions(&k);
        assert_eq!(rs.len(), 1);
        assert_eq!(
            names(&k, rs[0]),
            ["pdl.wait", "ld.global", "iconst", "cmp.eq", "if", "yield"]
        );
    }

    #[test]
    fn without_the_hint_or_a_trigger_nothing_moves() {
        let mut k = triggers_after_reads(false);
        let before = write_kernel(&k);
        run(&mut k);
        assert_eq!(write_kernel(&k), before);

        let mut b = Builder::new("no_trigger", launch(32, 1));
        b.set_trigger_at_entry(true);
        let _ = b.thread_idx();
        let mut k = b.finish();
        let before = write_kernel(&k);
        run(&mut k);
        assert_eq!(write_kernel(&k), before);
    }
}
