//! Stage the early 16-byte loads of a hinted tensor through shared memory.
//!
//! A role that loads ready operands before its PDL wait holds them in
//! registers across the wait. With [`ScheduleHints::stage_through_shared`]
//! naming the tensor (`#[stage_through_shared(..)]` on the parameter; the
//! seed's `early = 3` for KdaSplit's F_B rows), each 16-byte `ld.global` of
//! it that a region issues before its `pdl.wait` becomes a `cp.async` into
//! the thread's own 16-byte slot of a new shared buffer (slot `n` of thread
//! `t` of the role at element `(n · threads + t) · 16 / elem bytes`), the
//! group is committed after the last one, and right before the first
//! instruction after the wait that uses a loaded value the region waits for
//! the group (`cp.async.wait 0`) and reads each slot back with `ld.shared`
//! into the value the load defined. The pure arithmetic on the loaded values
//! that the program put before the wait (bitcasts, lane extracts) moves with
//! the reads, so nothing loaded is live across the wait.
//!
//! A region where a loaded value is used before the wait by anything but
//! pure arithmetic (a store, a collective, a nested region, the index of a
//! staged load) is left as it is. Tiles of a hinted tensor are staged by the
//! trace instead (`kda::dsl::Tile`: one bulk copy); they issue no
//! `ld.global`.
//!
//! Runs last: after `hoist_ready_loads` has put the ready loads before the
//! wait (without `early` the wait is at the kernel's entry and no load
//! precedes it, so nothing changes).
//!
//! [`ScheduleHints::stage_through_shared`]: crate::kernel::ScheduleHints::stage_through_shared

use std::collections::HashSet;

use crate::entities::{Buffer, Inst, Region, Role, Value};
use crate::kernel::{BufferDecl, Kernel};
use crate::loc::Loc;
use crate::op::{BinOp, Op, Special};
use crate::passes::contains;
use crate::types::Type;

/// Bytes per staged load (one `cp.async.cg`).
const SLOT_BYTES: u32 = 16;

/// Stage the early loads of the hinted tensors in the kernel body and in
/// every role's body.
pub fn run(k: &mut Kernel) {
    if k.schedule.stage_through_shared.is_empty() {
        return;
    }
    let mut scopes: Vec<(Region, Option<Role>)> = vec![(k.body, None)];
    k.walk(|i, _| {
        if let Op::InRole { role, body } = k.insts[i].op {
            scopes.push((body, Some(role)));
        }
    });
    for (r, role) in scopes {
        stage_in(k, r, role);
    }
}

/// The region's instruction list under construction.
struct Emit<'a> {
    k: &'a mut Kernel,
    out: Vec<Inst>,
}

impl Emit<'_> {
    fn push(&mut self, op: Op, args: Vec<Value>, ty: Option<Type>) -> Option<Value> {
        let tys: Vec<Type> = ty.into_iter().collect();
        let inst = self.k.add_inst(op, args, &tys, Loc::synthetic());
        self.out.push(inst);
        self.k.insts[inst].results.first().copied()
    }

    fn iconst(&mut self, c: u32) -> Value {
        self.push(Op::IConst(c as i64), vec![], Some(Type::U32))
            .expect("iconst defines a value")
    }

    fn bin(&mut self, op: BinOp, a: Value, b: Value) -> Value {
        self.push(Op::Bin(op), vec![a, b], Some(Type::U32))
            .expect("a binary op defines a value")
    }
}

fn stage_in(k: &mut Kernel, r: Region, role: Option<Role>) {
    let insts = k.regions[r].insts.clone();
    let Some(w) = insts.iter().position(|&i| k.insts[i].op == Op::GridDepWait) else {
        return;
    };
    let staged: Vec<Inst> = insts[..w]
        .iter()
        .copied()
        .filter(|&i| match k.insts[i].op {
            Op::LdGlobal { tensor, .. } => {
                k.schedule.stage_through_shared.contains(&tensor)
                    && k.ty(k.insts[i].results[0]).bytes() == SLOT_BYTES
            }
            _ => false,
        })
        .collect();
    if staged.is_empty() {
        return;
    }
    // The pure arithmetic before the wait on what the loads define moves
    // after the wait with them; any other use there keeps the region as it is.
    let mut loaded: HashSet<Value> = staged.iter().map(|&i| k.insts[i].results[0]).collect();
    let mut derived: Vec<Inst> = Vec::new();
    for &i in &insts[..w] {
        let uses = |k: &Kernel, j: Inst| k.insts[j].args.iter().any(|a| loaded.contains(a));
        if staged.contains(&i) {
            // Its cp.async is issued where the load was, before the wait;
            // an index computed from a loaded value is only there after it.
            if uses(k, i) {
                return;
            }
            continue;
        }
        let d = &k.insts[i];
        if !contains(k, i, &uses) {
            continue;
        }
        if !d.op.is_pure() {
            return;
        }
        loaded.extend(d.results.iter().copied());
        derived.push(i);
    }
    let uses_loaded = |k: &Kernel, j: Inst| k.insts[j].args.iter().any(|a| loaded.contains(a));
    // Right before the first use after the wait (or the region's end).
    let end = insts.len() - usize::from(insts.last().is_some_and(|&i| k.insts[i].op == Op::Yield));
    let first_use = insts[w + 1..end]
        .iter()
        .position(|&i| contains(k, i, &uses_loaded))
        .map_or(end, |p| w + 1 + p);

    let (first, threads) = match role {
        Some(role) => (k.roles[role].first, k.roles[role].threads),
        None => (0, k.launch.block),
    };
    // One buffer per tensor; slot n of thread t at element (n·threads + t)·per_slot.
    let mut counts: Vec<(crate::entities::Tensor, u32)> = Vec::new();
    for &i in &staged {
        let Op::LdGlobal { tensor, .. } = k.insts[i].op else {
            unreachable!("staged loads are ld.global")
        };
        match counts.iter_mut().find(|(t, _)| *t == tensor) {
            Some((_, n)) => *n += 1,
            None => counts.push((tensor, 1)),
        }
    }
    let mut buffers: Vec<(crate::entities::Tensor, Buffer, u32)> = Vec::new();
    for (tensor, n) in counts {
        let d = &k.tensors[tensor];
        let buffer = k.buffers.push(BufferDecl {
            name: format!("{}_staged", d.name),
            elem: d.dtype,
            len: n * threads * (SLOT_BYTES / d.dtype.bytes()),
            align: 128,
            roles: role.into_iter().collect(),
            guard: None,
            tile: None,
            loc: Loc::synthetic(),
        });
        buffers.push((tensor, buffer, 0));
    }

    let mut e = Emit {
        k,
        out: Vec::with_capacity(insts.len() + 4 * staged.len() + 8),
    };
    // The thread's index in the role, then its slot offset per element
    // size: a bf16 and an f32 tensor hold 8 and 4 elements per slot.
    let mut thread: Option<Value> = None;
    let mut scaled: Vec<(u32, Value)> = Vec::new();
    let mut slots: Vec<(Inst, Buffer, Value)> = Vec::new();
    let last = *staged.last().expect("some loads are staged");
    for &i in &insts[..w] {
        if derived.contains(&i) {
            continue;
        }
        if !staged.contains(&i) {
            e.out.push(i);
            continue;
        }
        let Op::LdGlobal { tensor, .. } = e.k.insts[i].op else {
            unreachable!("staged loads are ld.global")
        };
        let per_slot = SLOT_BYTES / e.k.tensors[tensor].dtype.bytes();
        let rel = match thread {
            Some(t) => t,
            None => {
                let tid = e
                    .push(Op::Special(Special::ThreadIdx), vec![], Some(Type::U32))
                    .expect("special defines a value");
                let t = if first == 0 {
                    tid
                } else {
                    let f = e.iconst(first);
                    e.bin(BinOp::Sub, tid, f)
                };
                *thread.insert(t)
            }
        };
        let t = match scaled.iter().find(|&&(p, _)| p == per_slot) {
            Some(&(_, t)) => t,
            None => {
                let size = e.iconst(per_slot);
                let t = e.bin(BinOp::Mul, rel, size);
                scaled.push((per_slot, t));
                t
            }
        };
        let (_, buffer, n) = buffers
            .iter_mut()
            .find(|(b, ..)| *b == tensor)
            .expect("a buffer per staged tensor");
        let element = match *n {
            0 => t,
            n => {
                let offset = e.iconst(n * threads * per_slot);
                e.bin(BinOp::Add, t, offset)
            }
        };
        *n += 1;
        let mut args = vec![element];
        args.extend(e.k.insts[i].args.iter().copied());
        let buffer = *buffer;
        e.push(Op::CpAsync { buffer, tensor }, args, None);
        slots.push((i, buffer, element));
        if i == last {
            e.push(Op::CpAsyncCommit, vec![], None);
        }
    }
    e.out.extend_from_slice(&insts[w..first_use]);
    e.push(Op::CpAsyncWait(0), vec![], None);
    for (i, buffer, element) in slots {
        // The load becomes the read of its slot; its value stays the same.
        let d = &mut e.k.insts[i];
        d.op = Op::LdShared { buffer };
        d.args = vec![element];
        e.out.push(i);
    }
    e.out.extend_from_slice(&derived);
    e.out.extend_from_slice(&insts[first_use..]);
    let out = e.out;
    k.regions[r].insts = out;
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::builder::Builder;
    use crate::kernel::{Access, Dim, Provenance, ValueDef};
    use crate::op::CachePolicy;
    use crate::passes::test_util::{count, launch, names, top_regions, verified};
    use crate::types::Scalar;
    use crate::write::write_kernel;

    /// A ready `[32, cols]` row-major tensor the kernel reads, 16-byte
    /// aligned, staged where `hinted`.
    fn staged_rows(
        b: &mut Builder,
        name: &str,
        dtype: Scalar,
        cols: u32,
        hinted: bool,
    ) -> crate::entities::Tensor {
        let t = b.tensor(
            name,
            dtype,
            &[Dim::Const(32), Dim::Const(cols.into())],
            &[Dim::Const(cols.into()), Dim::Const(1)],
            Provenance::Ready,
            Access::Read,
        );
        b.set_align(t, 16);
        b.set_stage_through_shared(t, hinted);
        t
    }

    /// The `[64]` u32 tensor the test kernels store into.
    fn out64(b: &mut Builder) -> crate::entities::Tensor {
        b.tensor(
            "out",
            Scalar::U32,
            &[Dim::Const(64)],
            &[Dim::Const(1)],
            Provenance::Ready,
            Access::Write,
        )
    }

    /// What the warp of [`warp_loads`] does with its first row before the wait.
    #[derive(Clone, Copy, Debug)]
    enum EarlyUse {
        /// Only the bitcast and the lane extract (pure arithmetic).
        Arithmetic,
        /// Also stores a lane of it.
        Store,
        /// Also indexes the second load with a lane of it.
        Index,
    }

    /// A warp (threads 32..64) that loads two 16-byte rows of `w` before its
    /// PDL wait, bitcasts one (and `early_use`), and stores a lane of each
    /// after the wait.
    fn warp_loads(hinted: bool, early_use: EarlyUse) -> Kernel {
        let mut b = Builder::new("stage", launch(64, 1));
        b.set_early(true);
        let w = staged_rows(&mut b, "w", Scalar::BF16, 8, hinted);
        let out = out64(&mut b);
        let warp = b.role("warp", 32, 32);
        b.in_role(warp, |b| {
            let tid = b.thread_idx();
            let f = b.u32(32);
            let lane = b.sub(tid, f);
            let zero = b.u32(0);
            let row = Type::vec(Scalar::BF16, 8);
            let a = b.ld_global(w, &[lane, zero], row, CachePolicy::Normal);
            let a = b.bitcast(a, Type::vec(Scalar::U32, 4));
            let a0 = b.extract(a, 0);
            let mut second = lane;
            match early_use {
                EarlyUse::Arithmetic => {}
                EarlyUse::Store => b.st_global(out, &[tid], a0, None, CachePolicy::Normal),
                EarlyUse::Index => {
                    let rows = b.u32(31);
                    second = b.bin(BinOp::And, a0, rows);
                }
            }
            let c = b.ld_global(w, &[second, zero], row, CachePolicy::Normal);
            b.pdl_wait();
            let c = b.bitcast(c, Type::vec(Scalar::U32, 4));
            let c1 = b.extract(c, 1);
            let s = b.add(a0, c1);
            b.st_global(out, &[tid], s, None, CachePolicy::Normal);
        });
        b.finish()
    }

    #[test]
    fn early_loads_go_through_per_thread_slots_read_after_the_wait() {
        let mut k = warp_loads(true, EarlyUse::Arithmetic);
        verified(&k);
        run(&mut k);
        verified(&k);
        let text = write_kernel(&k);
        let role = top_regions(&k)[0];
        let ops = names(&k, role);
        let at = |m: &str| {
            ops.iter()
                .position(|n| n == m)
                .unwrap_or_else(|| panic!("{m}: {text}"))
        };
        assert_eq!(
            count(&k, |op| matches!(op, Op::CpAsync { .. })),
            2,
            "{text}"
        );
        assert_eq!(
            count(&k, |op| matches!(op, Op::LdGlobal { .. })),
            0,
            "{text}"
        );
        assert!(at("cp.async") < at("cp.async.commit"), "{text}");
        assert!(at("cp.async.commit") < at("pdl.wait"), "{text}");
        assert!(at("pdl.wait") < at("cp.async.wait"), "{text}");
        assert!(at("cp.async.wait") < at("ld.shared"), "{text}");
        // the bitcast of the first row moved after the wait with its read
        assert!(at("ld.shared") < at("bitcast"), "{text}");
        // two slots of 32 threads of 16 bytes, for the warp only
        let buf = k.buffers.values().last().expect("a staging buffer");
        assert_eq!(
            (buf.elem, buf.len, buf.align),
            (Scalar::BF16, 2 * 32 * 8, 128)
        );
        assert_eq!(buf.roles.len(), 1);
        assert!(text.contains("stage_through_shared=t0 {"), "{text}");
    }

    /// A warp that loads a 16-byte row of `w` (bf16, 8 per slot) and one of
    /// `g` (f32, 4 per slot) before its PDL wait and stores a lane of each
    /// after it.
    fn two_element_sizes() -> Kernel {
        let mut b = Builder::new("stage2", launch(64, 1));
        b.set_early(true);
        let w = staged_rows(&mut b, "w", Scalar::BF16, 8, true);
        let g = staged_rows(&mut b, "g", Scalar::F32, 4, true);
        let out = out64(&mut b);
        let warp = b.role("warp", 32, 32);
        b.in_role(warp, |b| {
            let tid = b.thread_idx();
            let f = b.u32(32);
            let lane = b.sub(tid, f);
            let zero = b.u32(0);
            let a = b.ld_global(
                w,
                &[lane, zero],
                Type::vec(Scalar::BF16, 8),
                CachePolicy::Normal,
            );
            let c = b.ld_global(
                g,
                &[lane, zero],
                Type::vec(Scalar::F32, 4),
                CachePolicy::Normal,
            );
            b.pdl_wait();
            let a = b.bitcast(a, Type::vec(Scalar::U32, 4));
            let c = b.bitcast(c, Type::vec(Scalar::U32, 4));
            let a0 = b.extract(a, 0);
            let c1 = b.extract(c, 1);
            let s = b.add(a0, c1);
            b.st_global(out, &[tid], s, None, CachePolicy::Normal);
        });
        b.finish()
    }

    /// The value of a slot's element index (constants, the thread index and
    /// `sub`/`mul`/`add` of them) in thread `tid`.
    fn slot_at(k: &Kernel, v: Value, tid: i128) -> i128 {
        let ValueDef::Result(i, _) = k.values[v].def else {
            panic!("{v} is not an instruction's result")
        };
        let d = &k.insts[i];
        let arg = |n: usize| slot_at(k, d.args[n], tid);
        match d.op {
            Op::IConst(c) => i128::from(c),
            Op::Special(Special::ThreadIdx) => tid,
            Op::Bin(BinOp::Sub) => arg(0) - arg(1),
            Op::Bin(BinOp::Mul) => arg(0) * arg(1),
            Op::Bin(BinOp::Add) => arg(0) + arg(1),
            ref op => panic!("{op:?} in a slot index"),
        }
    }

    /// Every thread's slot of each tensor's buffer lies inside it, and no
    /// two threads share one: a thread's slot offset is scaled by the
    /// elements per slot of the tensor it is for, not of the first one.
    #[test]
    fn slots_of_tensors_of_different_element_sizes_are_each_threads_own() {
        let mut k = two_element_sizes();
        verified(&k);
        run(&mut k);
        let text = write_kernel(&k);
        verified(&k);
        let mut slots: Vec<(Buffer, Vec<i128>)> = Vec::new();
        k.walk(|i, _| {
            if let Op::CpAsync { buffer, .. } = k.insts[i].op {
                let at: Vec<i128> = (32..64)
                    .map(|t| slot_at(&k, k.insts[i].args[0], t))
                    .collect();
                slots.push((buffer, at));
            }
        });
        assert_eq!(slots.len(), 2, "{text}");
        for (buffer, at) in slots {
            let d = &k.buffers[buffer];
            let per_slot = 16 / i128::from(d.elem.bytes());
            let mut seen = at.clone();
            seen.sort();
            seen.dedup();
            assert_eq!(
                seen.len(),
                32,
                "{}: two threads share a slot: {at:?}\n{text}",
                d.name
            );
            for e in at {
                assert!(
                    e >= 0 && e + per_slot <= i128::from(d.len),
                    "{}: slot at {e} outside its {} elements\n{text}",
                    d.name,
                    d.len
                );
            }
        }
    }

    #[test]
    fn a_region_with_another_early_use_or_without_the_hint_is_left_alone() {
        for (hinted, early_use) in [
            (true, EarlyUse::Store),
            (true, EarlyUse::Index),
            (false, EarlyUse::Arithmetic),
        ] {
            let mut k = warp_loads(hinted, early_use);
            verified(&k);
            let before = write_kernel(&k);
            run(&mut k);
            assert_eq!(write_kernel(&k), before, "{early_use:?}");
        }
    }
}
