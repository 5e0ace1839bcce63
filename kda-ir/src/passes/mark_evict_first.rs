//! The L2 policy of a tensor's traffic: stated once, applied to every access.
//!
//! A kernel whose data is streamed through L2 once per launch (KdaSplit's
//! recurrent state: read, updated, written back, not read again this step)
//! gains from marking that traffic evict-first, so it does not displace the
//! lines the launch reuses (weights, the conv state). Which tensors to mark
//! is a tuning choice of the configuration, not part of the algorithm, so
//! the program writes its accesses without a policy and names the tensors in
//! [`ScheduleHints::evict_first`] (`#[evict_first(..)]` on a kernel
//! parameter). This pass gives every `ld.global`, `st.global`,
//! `cp.async.bulk` (global to shared) and bulk store (shared to global) of a
//! named tensor the [`CachePolicy::EvictFirst`] policy; the PTX backend then
//! creates the policy once per kernel and adds `.L2::cache_hint` to each.
//!
//! `cp.async` (16-byte, `.cg`) takes no policy in this backend and is left as
//! it is. An access that already asks for evict-first (a `.evict_first()`
//! view, `bulk_copy!(.., evict_first)`) keeps it; without the hint the pass
//! changes nothing. It moves nothing, so it may run anywhere in the
//! pipeline; it runs last.
//!
//! [`ScheduleHints::evict_first`]: crate::kernel::ScheduleHints::evict_first
//! [`CachePolicy::EvictFirst`]: crate::op::CachePolicy::EvictFirst

use crate::entities::Inst;
use crate::kernel::Kernel;
use crate::op::CachePolicy;

/// Give every global access of each tensor in `k.schedule.evict_first` the
/// evict-first L2 policy.
pub fn run(k: &mut Kernel) {
    if k.schedule.evict_first.is_empty() {
        return;
    }
    let mut accesses: Vec<Inst> = Vec::new();
    k.walk(|i, _| accesses.push(i));
    for i in accesses {
        let op = &mut k.insts[i].op;
        if let Some((tensor, _)) = op.cache_policy_of()
            && k.schedule.evict_first.contains(&tensor)
            && let Some(policy) = op.cache_policy_mut()
        {
            *policy = CachePolicy::EvictFirst;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::builder::Builder;
    use crate::kernel::{Access, Dim, Provenance};
    use crate::op::Op;
    use crate::passes::test_util::{count, launch, verified};
    use crate::types::{Scalar, Type};
    use crate::write::write_kernel;

    /// Copy `state` to itself and `x` to `y`, one element per thread, with
    /// `hinted` marked evict-first.
    fn copies(hinted: &[&str]) -> Kernel {
        let mut b = Builder::new("copies", launch(32, 1));
        let tensor = |b: &mut Builder, name: &str, access| {
            let t = b.tensor(
                name,
                Scalar::F32,
                &[Dim::Const(32)],
                &[Dim::Const(1)],
                Provenance::Ready,
                access,
            );
            b.set_evict_first(t, hinted.contains(&name));
            t
        };
        let state = tensor(&mut b, "state", Access::ReadWrite);
        let x = tensor(&mut b, "x", Access::Read);
        let y = tensor(&mut b, "y", Access::Write);
        let tid = b.thread_idx();
        let s = b.ld_global(state, &[tid], Type::F32, CachePolicy::Normal);
        b.st_global(state, &[tid], s, None, CachePolicy::Normal);
        let v = b.ld_global(x, &[tid], Type::F32, CachePolicy::Normal);
        b.st_global(y, &[tid], v, None, CachePolicy::Normal);
        b.finish()
    }

    fn evict_first(op: &Op) -> bool {
        matches!(
            op,
            Op::LdGlobal {
                policy: CachePolicy::EvictFirst,
                ..
            } | Op::StGlobal {
                policy: CachePolicy::EvictFirst,
                ..
            }
        )
    }

    #[test]
    fn every_access_of_a_hinted_tensor_and_no_other_is_marked() {
        let mut k = copies(&["state"]);
        verified(&k);
        assert_eq!(count(&k, evict_first), 0);
        run(&mut k);
        verified(&k);
        let text = write_kernel(&k);
        assert_eq!(count(&k, evict_first), 2, "{text}");
        assert!(text.contains("evict_first=t0 {"), "{text}");
        assert!(text.contains("ld.global.evict_first t0"), "{text}");
        assert!(text.contains("st.global.evict_first t0"), "{text}");
        assert!(text.contains("ld.global t1"), "{text}");
        assert!(text.contains("st.global t2"), "{text}");
    }

    #[test]
    fn without_the_hint_nothing_changes() {
        let mut k = copies(&[]);
        let before = write_kernel(&k);
        run(&mut k);
        assert_eq!(write_kernel(&k), before);
    }

    #[test]
    fn the_builder_keeps_the_hint_sorted_and_unique() {
        let mut k = copies(&["y", "state", "x"]);
        assert_eq!(
            k.schedule
                .evict_first
                .iter()
                .map(|t| t.to_string())
                .collect::<Vec<_>>(),
            ["t0", "t1", "t2"]
        );
        run(&mut k);
        assert_eq!(count(&k, evict_first), 4);
        let mut b = Builder::new("off", launch(32, 1));
        let t = b.tensor(
            "t",
            Scalar::F32,
            &[Dim::Const(32)],
            &[Dim::Const(1)],
            Provenance::Ready,
            Access::Read,
        );
        b.set_evict_first(t, true);
        b.set_evict_first(t, true);
        assert_eq!(b.kernel().schedule.evict_first.len(), 1);
        b.set_evict_first(t, false);
        assert!(b.kernel().schedule.evict_first.is_empty());
    }
}
