//! Mbarrier phases as compiler state.
//!
//! Outside runtime loops a role's phase of a barrier is a trace-time count
//! ([`Builder::wait`] emits `mbarrier.wait bN, phase p`, as it always has).
//! Inside a runtime `for`/`while` the phase changes every iteration, so it
//! becomes a runtime value: a `u32` of phase bits, one per element of the
//! barrier's group (a single barrier, or the `n` consecutive barriers of a
//! ring declared with [`Builder::declare_ring`]). Bit `k` is the parity the
//! role waits for next on element `k`; a wait flips it.
//!
//! The bits are carried lazily: the first wait on a group inside a loop body
//! adds a `u32` region parameter to that loop (and to every enclosing open
//! loop that does not carry it yet), its initial value is the phase known
//! before the loop, the body yields the bits as they are at its end, and the
//! loop's extra result is the group's phase after the loop. A runtime `if`
//! whose branches change the bits yields them too. Loops and ifs whose
//! bodies do not wait carry nothing, so kernels without waits in runtime
//! loops build byte-identical IR.
//!
//! Limits, each a trace-time panic naming the barrier: a role's phase cannot
//! leave its `in_role` region (the region has no results), so a wait inside
//! a role whose region sits inside a runtime loop, or a wait in a second
//! `in_role` block after a first one left the phase a runtime value, is
//! refused; put the loop inside the role.

use std::collections::{HashMap, HashSet};

use cranelift_entity::EntityRef;

use super::Builder;
use crate::entities::{Barrier, Region, Role, Value};
use crate::kernel::{ValueData, ValueDef};
use crate::op::{BinOp, Op};
use crate::types::Type;

/// A group's phase bits per role.
pub(super) type Key = (Barrier, Option<Role>);

#[derive(Copy, Clone, PartialEq, Eq, Debug)]
pub(super) enum Bits {
    /// The bits, defined at this loop depth.
    Val(Value, usize),
    /// Defined inside an `in_role` region that has ended.
    Lost,
}

/// A runtime loop whose body is being built.
pub(super) struct OpenLoop {
    /// The region the loop op will be appended to.
    pub parent: Region,
    /// The loop's regions built so far (a `while`: cond, then body); the
    /// last is the one being built or the last built.
    pub regions: Vec<Region>,
    /// Whether the last region's yield has been appended.
    pub closed: bool,
    pub carried: Vec<Carried>,
}

pub(super) struct Carried {
    pub key: Key,
    pub init: Value,
    /// One parameter per region in [`OpenLoop::regions`].
    pub params: Vec<Value>,
}

/// Phase tracking state of a [`Builder`].
#[derive(Default)]
pub(super) struct Phases {
    /// Trace-time counts per (barrier, role): the phase the next wait waits for.
    pub counts: HashMap<(Barrier, Option<Role>), u32>,
    /// Runtime phase bits per (group, role), once a group's phase is one.
    pub bits: HashMap<Key, Bits>,
    pub loops: Vec<OpenLoop>,
    /// The loop depth at each open `in_role`.
    pub role_depth: Vec<usize>,
    /// Ring element -> (first element, length).
    pub groups: HashMap<Barrier, (Barrier, u32)>,
    /// Rings (by first element) whose phase bits start at 1: the first wait
    /// on each element passes at once.
    pub released: HashSet<Barrier>,
}

/// Which element of a group a wait names.
#[derive(Copy, Clone)]
pub(super) enum Elem {
    Const(u32),
    Runtime(Value),
}

impl Builder {
    /// Declare `n` consecutive barriers from `first` a ring: an element may
    /// be named by a runtime index ([`Builder::wait_at`] and the other
    /// `_at` ops) and its phase bits are tracked together.
    pub fn declare_ring(&mut self, first: Barrier, n: u32) {
        for k in 0..n as usize {
            let e = Barrier::new(first.index() + k);
            self.ph.groups.insert(e, (first, n));
        }
    }

    /// Start every role's phase of the ring (or barrier) at `first` released:
    /// the first wait on each element passes without a completion (a
    /// ring's "empty" barriers, which the producer passes on its first lap).
    pub fn release(&mut self, first: Barrier) {
        self.ph.released.insert(first);
    }

    pub(super) fn group(&self, b: Barrier) -> (Barrier, u32) {
        self.ph.groups.get(&b).copied().unwrap_or((b, 1))
    }

    /// Whether a wait on `key` uses runtime phase bits.
    pub(super) fn dynamic(&self, key: Key) -> bool {
        !self.ph.loops.is_empty()
            || self.ph.bits.contains_key(&key)
            || self.ph.released.contains(&key.0)
    }

    fn name(&self, b: Barrier) -> &str {
        &self.k.barriers[b].name
    }

    /// Wait on element `e` of the group of `key` with runtime phase bits.
    #[track_caller]
    pub(super) fn wait_bits(&mut self, key: Key, n: u32, e: Elem) {
        let (first, role) = key;
        if self.ph.role_depth.last().is_some_and(|&d| d > 0) && role.is_some() {
            panic!(
                "kda: wait on mbarrier `{}` inside a role whose `in_role!` block sits inside a runtime loop: \
                 the role's phase cannot leave its block, so each iteration would wait on the same parity; \
                 put the loop inside the role",
                self.name(first)
            );
        }
        let d = self.ph.loops.len();
        let bits = self.bits_at(key, d);
        let (parity, flip) = match e {
            Elem::Const(k) if n == 1 => {
                debug_assert_eq!(k, 0);
                (bits, self.u32(1))
            }
            Elem::Const(k) => {
                let sh = self.u32(k);
                let s = self.bin(BinOp::Shr, bits, sh);
                let one = self.u32(1);
                (self.bin(BinOp::And, s, one), self.u32(1 << k))
            }
            Elem::Runtime(s) => {
                let sh = self.bin(BinOp::Shr, bits, s);
                let one = self.u32(1);
                let p = self.bin(BinOp::And, sh, one);
                (p, self.bin(BinOp::Shl, one, s))
            }
        };
        match e {
            Elem::Const(k) => {
                let b = Barrier::new(first.index() + k as usize);
                self.push(
                    Op::MbarWaitParity {
                        barrier: b,
                        ring: 0,
                    },
                    &[parity],
                    &[],
                );
            }
            Elem::Runtime(s) => {
                self.push(
                    Op::MbarWaitParity {
                        barrier: first,
                        ring: n,
                    },
                    &[parity, s],
                    &[],
                );
            }
        }
        let next = self.bin(BinOp::Xor, bits, flip);
        self.ph.bits.insert(key, Bits::Val(next, d));
    }

    /// The phase bits of `key` valid inside loop depth `d` (the cursor is
    /// there or deeper), carrying them into open loops as needed.
    pub(super) fn bits_at(&mut self, key: Key, d: usize) -> Value {
        match self.ph.bits.get(&key) {
            Some(&Bits::Val(v, at)) if at == d => return v,
            Some(Bits::Lost) => panic!(
                "kda: wait on mbarrier `{}` after an earlier `in_role!` block of the same role left its phase \
                 a runtime value (a wait inside a runtime loop): wait on it in that block",
                self.name(key.0)
            ),
            _ => {}
        }
        if d == 0 {
            let region = match self.ph.loops.first() {
                Some(l) => l.parent,
                None => *self.cursor.last().expect("builder cursor is never empty"),
            };
            let mask = self.const_bits(key);
            let v = self.push_in(region, Op::IConst(mask as i64), &[], &[Type::U32])[0];
            self.ph.bits.insert(key, Bits::Val(v, 0));
            return v;
        }
        if let Some(c) = self.ph.loops[d - 1].carried.iter().find(|c| c.key == key) {
            let v = *c.params.last().expect("a carried value has a parameter");
            self.ph.bits.insert(key, Bits::Val(v, d));
            return v;
        }
        let init = self.bits_at(key, d - 1);
        let regions = self.ph.loops[d - 1].regions.clone();
        let closed = self.ph.loops[d - 1].closed;
        let mut params = Vec::new();
        for (n, &r) in regions.iter().enumerate() {
            let p = self.add_param(r, Type::U32);
            params.push(p);
            // A region already built (a `while`'s cond) passes it through.
            if n + 1 < regions.len() || closed {
                let y = *self.k.regions[r]
                    .insts
                    .last()
                    .expect("a built region ends in a yield");
                self.k.insts[y].args.push(p);
            }
        }
        let v = *params.last().expect("an open loop has a region");
        self.ph.loops[d - 1]
            .carried
            .push(Carried { key, init, params });
        self.ph.bits.insert(key, Bits::Val(v, d));
        v
    }

    /// The bits the trace-time counts of `key`'s group stand for.
    fn const_bits(&self, key: Key) -> u32 {
        let (first, role) = key;
        let (_, n) = self.group(first);
        if self.ph.released.contains(&first) {
            return if n >= 32 { u32::MAX } else { (1 << n) - 1 };
        }
        (0..n).fold(0, |m, k| {
            let e = Barrier::new(first.index() + k as usize);
            let c = self.ph.counts.get(&(e, role)).copied().unwrap_or(0);
            m | ((c & 1) << k)
        })
    }

    pub(super) fn add_param(&mut self, r: Region, ty: Type) -> Value {
        let n = self.k.regions[r].params.len() as u32;
        let v = self.k.values.push(ValueData {
            ty,
            def: ValueDef::Param(r, n),
        });
        self.k.regions[r].params.push(v);
        v
    }

    /// Open a runtime loop whose first region is `r`.
    pub(super) fn open_loop(&mut self, r: Region) {
        let parent = *self.cursor.last().expect("builder cursor is never empty");
        self.ph.loops.push(OpenLoop {
            parent,
            regions: vec![r],
            closed: false,
            carried: vec![],
        });
    }

    /// The innermost loop gets another region (a `while`'s body after its
    /// cond): it takes a parameter per carried group.
    pub(super) fn loop_region(&mut self, r: Region) {
        let d = self.ph.loops.len();
        let keys: Vec<Key> = self.ph.loops[d - 1].carried.iter().map(|c| c.key).collect();
        for (n, key) in keys.into_iter().enumerate() {
            let p = self.add_param(r, Type::U32);
            self.ph.loops[d - 1].carried[n].params.push(p);
            self.ph.bits.insert(key, Bits::Val(p, d));
        }
        let l = self.ph.loops.last_mut().expect("an open loop");
        l.regions.push(r);
        l.closed = false;
    }

    /// What the innermost loop's current region yields besides the user's
    /// values: each carried group's bits as they are now.
    pub(super) fn loop_yields(&mut self) -> Vec<Value> {
        let d = self.ph.loops.len();
        let keys: Vec<Key> = self.ph.loops[d - 1].carried.iter().map(|c| c.key).collect();
        let ys = keys.into_iter().map(|k| self.bits_at(k, d)).collect();
        self.ph.loops[d - 1].closed = true;
        ys
    }

    /// Close the innermost loop: its extra inits, and a function to record
    /// its extra results.
    pub(super) fn close_loop(&mut self) -> Vec<Carried> {
        self.ph.loops.pop().expect("an open loop").carried
    }

    /// After the loop op: the carried groups' bits are its extra results.
    pub(super) fn loop_results(&mut self, carried: &[Carried], results: &[Value]) {
        let d = self.ph.loops.len();
        for (c, &r) in carried.iter().zip(results) {
            self.ph.bits.insert(c.key, Bits::Val(r, d));
        }
    }

    /// Groups whose bits a branch changed, with the values before it.
    pub(super) fn branch_changes(
        before: &HashMap<Key, Bits>,
        after: &HashMap<Key, Bits>,
        d: usize,
    ) -> Vec<Key> {
        let mut keys: Vec<Key> = after
            .iter()
            .filter(|&(k, v)| matches!(v, Bits::Val(_, at) if *at == d) && before.get(k) != Some(v))
            .map(|(k, _)| *k)
            .collect();
        keys.sort_by_key(|&(b, r)| (b.index(), r.map(|r| r.index())));
        keys
    }
}
