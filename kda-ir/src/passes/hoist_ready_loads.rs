//! Hoist loads of *ready* tensors above the PDL wait.
//!
//! In each region holding a `pdl.wait`, a later `ld.global` of a tensor with
//! [`Provenance::Ready`] moves to just before the wait, together with the
//! pure arithmetic its indices need, when all its operands are available
//! there (defined before the wait, outside the region, or by something that
//! moves with it). This is the seed's "early" schedule, made automatic: the
//! loads of weights, slot tables and the previous state overlap the tail of
//! the preceding launch, while produced tensors stay after the wait.
//!
//! A load does not move across a store to its own tensor in the same region
//! (its value could change), nor, for a tensor this kernel writes anywhere,
//! across a synchronisation (`bar.sync`, an mbarrier or cluster wait,
//! `cp.async.wait`) that could order another thread's store before it.
//! Distinct tensors are assumed not to alias. Loads inside nested regions
//! after the wait stay where they are (moving them would execute them
//! speculatively). Only the first wait of a region is considered.
//!
//! Runs only with [`ScheduleHints::early`] (the seed's `early = 0` keeps
//! every load after the wait `place_pdl_wait` puts at the entry), after
//! `sink_pdl_wait` has moved each wait down to its first produced read; this
//! pass then picks up the ready loads that follow that read.
//!
//! [`ScheduleHints::early`]: crate::kernel::ScheduleHints::early

use std::collections::HashSet;

use crate::entities::{Inst, Region, Tensor, Value};
use crate::kernel::{Kernel, Provenance, ValueDef};
use crate::op::Op;

/// Hoist the ready loads of every region of `k` above its first `pdl.wait`
/// (nothing without [`ScheduleHints::early`](crate::kernel::ScheduleHints::early)).
pub fn run(k: &mut Kernel) {
    if !k.schedule.early {
        return;
    }
    let mut written = HashSet::new();
    k.walk(|i, _| {
        let op = &k.insts[i].op;
        if op.effects().writes_global() {
            written.extend(op.tensor());
        }
    });
    let regions: Vec<Region> = k.regions.keys().collect();
    for r in regions {
        hoist_in(k, r, &written);
    }
}

/// What an instruction (with its nested regions) does that blocks hoisting a
/// later load: the tensors it stores to, and whether it synchronises (a wait
/// that acquires other threads' or its own async copies' writes).
fn effects(k: &Kernel, i: Inst, stored: &mut HashSet<Tensor>, synced: &mut bool) {
    let op = &k.insts[i].op;
    let fx = op.effects();
    if fx.writes_global() {
        stored.extend(op.tensor());
    }
    *synced |= fx.acquires();
    for r in k.insts[i].op.regions() {
        for &j in &k.regions[r].insts {
            effects(k, j, stored, synced);
        }
    }
}

fn hoist_in(k: &mut Kernel, r: Region, written: &HashSet<Tensor>) {
    let insts = k.regions[r].insts.clone();
    let Some(w) = insts.iter().position(|&i| k.insts[i].op == Op::GridDepWait) else {
        return;
    };
    let after = &insts[w + 1..];
    // Values defined after the wait in this region: unavailable at the wait
    // unless their definition moves too.
    let later: HashSet<Value> = after
        .iter()
        .flat_map(|&i| k.insts[i].results.iter().copied())
        .collect();
    let mut movable: HashSet<Inst> = HashSet::new();
    let mut moved_values: HashSet<Value> = HashSet::new();
    let (mut stored, mut synced) = (HashSet::new(), false);
    for &i in after {
        let d = &k.insts[i];
        let ready_load = match d.op {
            Op::LdGlobal { tensor, .. } => {
                k.tensors[tensor].provenance == Provenance::Ready
                    && !stored.contains(&tensor)
                    && !(synced && written.contains(&tensor))
            }
            _ => false,
        };
        let pure = d.op.is_pure();
        let available = d
            .args
            .iter()
            .all(|a| !later.contains(a) || moved_values.contains(a));
        if (ready_load || pure) && available {
            movable.insert(i);
            moved_values.extend(d.results.iter().copied());
        }
        effects(k, i, &mut stored, &mut synced);
    }

    // Move the ready loads and the movable arithmetic they depend on.
    let mut chosen: HashSet<Inst> = movable
        .iter()
        .copied()
        .filter(|&i| matches!(k.insts[i].op, Op::LdGlobal { .. }))
        .collect();
    let mut work: Vec<Inst> = chosen.iter().copied().collect();
    while let Some(i) = work.pop() {
        for &a in &k.insts[i].args {
            if let ValueDef::Result(def, _) = k.values[a].def
                && movable.contains(&def)
                && chosen.insert(def)
            {
                work.push(def);
            }
        }
    }
    if chosen.is_empty() {
        return;
    }
    let mut order: Vec<Inst> = insts[..w].to_vec();
    order.extend(after.iter().copied().filter(|i| chosen.contains(i)));
    order.push(insts[w]);
    order.extend(after.iter().copied().filter(|i| !chosen.contains(i)));
    k.regions[r].insts = order;
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::builder::Builder;
    use crate::kernel::{Access, Dim, LaunchDecl};
    use crate::op::CachePolicy;
    use crate::types::{Scalar, Type};
    use crate::write::write_kernel;

    fn launch() -> LaunchDecl {
        LaunchDecl {
            block: 32,
            cluster: 1,
            min_blocks_per_sm: None,
            cluster_policy: Default::default(),
        }
    }

    fn vector(b: &mut Builder, name: &str, prov: Provenance, access: Access) -> Tensor {
        b.tensor(
            name,
            Scalar::F32,
            &[Dim::Const(64)],
            &[Dim::Const(1)],
            prov,
            access,
        )
    }

    /// The op names of a region, in order.
    fn names(k: &Kernel, r: Region) -> Vec<String> {
        k.regions[r]
            .insts
            .iter()
            .map(|&i| crate::write::mnemonic(&k.insts[i].op))
            .collect()
    }

    #[test]
    fn ready_loads_and_their_indices_move_above_the_wait() {
        let mut b = Builder::new("hoist", launch());
        b.set_early(true);
        let weight = vector(&mut b, "weight", Provenance::Ready, Access::Read);
        let x = vector(&mut b, "x", Provenance::Produced, Access::Read);
        let out = vector(&mut b, "out", Provenance::Ready, Access::Write);
        b.pdl_wait();
        let tid = b.thread_idx();
        let one = b.u32(1);
        let at = b.add(tid, one);
        let w = b.ld_global(weight, &[at], Type::F32, CachePolicy::Normal);
        let v = b.ld_global(x, &[tid], Type::F32, CachePolicy::Normal);
        let y = b.mul(w, v);
        b.st_global(out, &[tid], y, None, CachePolicy::Normal);
        let mut k = b.finish();
        run(&mut k);
        assert_eq!(
            names(&k, k.body),
            [
                "special",
                "iconst",
                "add",
                "ld.global",
                "pdl.wait",
                "ld.global",
                "mul",
                "st.global"
            ],
            "{}",
            write_kernel(&k)
        );
        // The hoisted load is the ready one.
        let hoisted = k.regions[k.body].insts[3];
        assert!(matches!(k.insts[hoisted].op, Op::LdGlobal { tensor, .. } if tensor == weight));
    }

    #[test]
    fn loads_that_depend_on_produced_data_or_follow_a_store_stay() {
        let mut b = Builder::new("stay", launch());
        b.set_early(true);
        let slots = b.tensor(
            "slots",
            Scalar::I32,
            &[Dim::Const(64)],
            &[Dim::Const(1)],
            Provenance::Produced,
            Access::Read,
        );
        let state = vector(&mut b, "state", Provenance::Ready, Access::ReadWrite);
        let table = vector(&mut b, "table", Provenance::Ready, Access::Read);
        let tid = b.thread_idx();
        b.pdl_wait();
        // Indexed by produced data: must stay after the wait.
        let slot = b.ld_global(slots, &[tid], Type::I32, CachePolicy::Normal);
        let t = b.ld_global(table, &[slot], Type::F32, CachePolicy::Normal);
        // The state row is overwritten before it is read again.
        b.st_global(state, &[tid], t, None, CachePolicy::Normal);
        let s = b.ld_global(state, &[tid], Type::F32, CachePolicy::Normal);
        b.st_global(state, &[tid], s, None, CachePolicy::Normal);
        let mut k = b.finish();
        let before = names(&k, k.body);
        run(&mut k);
        assert_eq!(names(&k, k.body), before, "{}", write_kernel(&k));
    }

    #[test]
    fn without_early_nothing_moves() {
        let mut b = Builder::new("late", launch());
        let weight = vector(&mut b, "weight", Provenance::Ready, Access::Read);
        b.pdl_wait();
        let tid = b.thread_idx();
        let _ = b.ld_global(weight, &[tid], Type::F32, CachePolicy::Normal);
        let mut k = b.finish();
        let before = names(&k, k.body);
        run(&mut k);
        assert_eq!(names(&k, k.body), before);
    }

    #[test]
    fn hoisting_happens_inside_a_role() {
        let mut b = Builder::new("role", launch());
        b.set_early(true);
        let weight = vector(&mut b, "weight", Provenance::Ready, Access::Read);
        let out = vector(&mut b, "out", Provenance::Ready, Access::Write);
        let r = b.role("all", 0, 32);
        let tid = b.thread_idx();
        b.in_role(r, |b| {
            b.pdl_wait();
            let w = b.ld_global(weight, &[tid], Type::F32, CachePolicy::EvictFirst);
            b.st_global(out, &[tid], w, None, CachePolicy::Normal);
        });
        let mut k = b.finish();
        run(&mut k);
        let Op::InRole { body, .. } = k.insts[k.regions[k.body].insts[1]].op else {
            panic!()
        };
        assert_eq!(
            names(&k, body),
            ["ld.global.evict_first", "pdl.wait", "st.global", "yield"]
        );
    }
}
