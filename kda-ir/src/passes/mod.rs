//! Scheduling passes (DESIGN §5), one file each. Every pass takes a verified
//! kernel and leaves a verified kernel; `pipeline.rs` lists them in order.

pub mod hoist_ready_loads;
pub mod mark_evict_first;
pub mod place_pdl_trigger;
pub mod place_pdl_wait;
pub mod sink_cluster_release;
pub mod sink_cluster_wait;
pub mod sink_pdl_wait;
pub mod stage_through_shared;

use crate::entities::{Inst, Region};
use crate::kernel::Kernel;
use crate::op::Op;

/// Whether `i`, or an instruction of its nested regions, satisfies `pred`.
pub(crate) fn contains(k: &Kernel, i: Inst, pred: &dyn Fn(&Kernel, Inst) -> bool) -> bool {
    pred(k, i)
        || k.insts[i]
            .op
            .regions()
            .into_iter()
            .any(|r| k.regions[r].insts.iter().any(|&j| contains(k, j, pred)))
}

/// Delete every instruction of `k` whose op is `op`, at any depth, and put
/// the first of them (in layout order) at the front of the kernel body: one
/// at the entry dominates them all. Nothing happens when there is none.
pub(crate) fn one_at_entry(k: &mut Kernel, op: &Op) {
    let mut found: Vec<Inst> = Vec::new();
    k.walk(|i, _| {
        if k.insts[i].op == *op {
            found.push(i);
        }
    });
    let Some(&first) = found.first() else {
        return;
    };
    let found: std::collections::HashSet<Inst> = found.into_iter().collect();
    let regions: Vec<Region> = k.regions.keys().collect();
    for r in regions {
        k.regions[r].insts.retain(|i| !found.contains(i));
    }
    let body = k.body;
    k.regions[body].insts.insert(0, first);
}

/// In every region, move each instruction that `moves` selects forward, past
/// the instructions that follow it in the same region, to just before the
/// first one that `stops` (or another selected one, or the region's `yield`);
/// with nothing stopping it, to the end of the region. Never into a nested
/// region. The moved instructions must have no operands and no results.
pub(crate) fn sink(
    k: &mut Kernel,
    moves: &dyn Fn(&Op) -> bool,
    stops: &dyn Fn(&Kernel, Inst) -> bool,
) {
    let regions: Vec<Region> = k.regions.keys().collect();
    for r in regions {
        let insts = std::mem::take(&mut k.regions[r].insts);
        let mut order = Vec::with_capacity(insts.len());
        let mut pending: Option<Inst> = None;
        for i in insts {
            let op = &k.insts[i].op;
            let moved = moves(op);
            if pending.is_some() && (moved || *op == Op::Yield || stops(k, i)) {
                order.extend(pending.take());
            }
            if moved {
                debug_assert!(k.insts[i].args.is_empty() && k.insts[i].results.is_empty());
                pending = Some(i);
            } else {
                order.push(i);
            }
        }
        order.extend(pending);
        k.regions[r].insts = order;
    }
}

#[cfg(test)]
pub(crate) mod test_util {
    use crate::entities::Region;
    use crate::kernel::{Kernel, LaunchDecl};
    use crate::op::Op;

    pub fn launch(block: u32, cluster: u32) -> LaunchDecl {
        LaunchDecl {
            block,
            cluster,
            min_blocks_per_sm: None,
            cluster_policy: Default::default(),
        }
    }

    /// The mnemonics of a region's instructions, in order.
    pub fn names(k: &Kernel, r: Region) -> Vec<String> {
        k.regions[r]
            .insts
            .iter()
            .map(|&i| crate::write::mnemonic(&k.insts[i].op))
            .collect()
    }

    /// The regions of the top-level instructions that have them, in order
    /// (the body of each `role`, then `if` then/else, ...).
    pub fn top_regions(k: &Kernel) -> Vec<Region> {
        k.regions[k.body]
            .insts
            .iter()
            .flat_map(|&i| k.insts[i].op.regions())
            .collect()
    }

    /// How many instructions of the whole kernel satisfy `pred`.
    pub fn count(k: &Kernel, pred: impl Fn(&Op) -> bool) -> usize {
        let mut n = 0;
        k.walk(|i, _| n += usize::from(pred(&k.insts[i].op)));
        n
    }

    /// Verify, printing the kernel on failure.
    pub fn verified(k: &Kernel) {
        if let Err(e) = crate::verifier::verify(k) {
            panic!("{e}");
        }
    }
}
