//! Pre-decoding a kernel into a compact program for the interpreter.
//!
//! The structured IR becomes a flat list of [`Ins`] with every operand
//! resolved to a register slot and control flow turned into explicit
//! mask-stack ops and jumps (SIMT: divergent `if`s run both sides under
//! masks, loops run until no lane is left).
//!
//! Registers: every SSA value gets a *slot* of consecutive 32-bit words; a
//! warp's register file stores word `w` of lane `l` at `w * 32 + l`, so an
//! op over a warp touches contiguous memory. Slots are reused: a liveness
//! pass numbers the instructions in layout order, a value lives from its
//! definition to its last use (extended to the end of any loop that uses it
//! but does not define it), and a linear scan hands out slots by size class.
//! Results of `if`/`for`/`while` and region parameters are written by
//! yields, so they live over the whole construct.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use kda_ir::kernel::{Kernel, Provenance};
use kda_ir::op::InstData;
use kda_ir::{BinOp, CmpOp, Inst, Op, Region, Scalar, ShflMode, Special, Type, UnOp, Value};

use crate::memory::SharedLayout;
use crate::numeric::{const_float, const_int, set_elem, words};
use kda_device::error::sim::SimError;

/// An index operand: a register slot and how to widen it to i64.
#[derive(Copy, Clone, Debug)]
pub(crate) struct Idx {
    pub slot: u32,
    pub kind: Scalar,
}

/// A barrier op's element of a ring: the index operand and the ring's length.
#[derive(Copy, Clone, Debug)]
pub(crate) struct Ring {
    pub at: Idx,
    pub len: u32,
}

/// A shared buffer as an instruction sees it: its place in the CTA's shared memory.
#[derive(Copy, Clone, Debug)]
pub(crate) struct ShBuf {
    pub buf: u32,
    /// Byte offset in the CTA's shared memory.
    pub base: u32,
    /// Element size in bytes.
    pub eb: u32,
    /// Size in bytes.
    pub size: u32,
}

/// A `wgmma.mma_async`: its operand tiles, K-column operands and
/// accumulator slots (one f32 word each).
#[derive(Clone, Debug)]
pub(crate) struct WgmmaIns {
    pub a: ShBuf,
    pub b: ShBuf,
    pub ta: kda_ir::wgmma::MmaTile,
    pub tb: kda_ir::wgmma::MmaTile,
    pub n: u32,
    pub ka: Idx,
    pub kb: Idx,
    /// The accumulators read (`scale-d` 1), or none (`D = A·Bᵀ`).
    pub c: Option<Box<[u32]>>,
    /// The accumulators written.
    pub d: Box<[u32]>,
}

/// A list of register moves performed together under the active mask.
#[derive(Clone, Debug, Default)]
pub(crate) struct Copies {
    /// `(dst slot, src slot, words)`.
    pub moves: Box<[(u32, u32, u32)]>,
    /// Some source overlaps some destination: copy through scratch.
    pub parallel: bool,
}

impl Copies {
    fn new(moves: Vec<(u32, u32, u32)>) -> Copies {
        let overlap = |a: u32, n: u32, b: u32, m: u32| a < b + m && b < a + n;
        let mut parallel = false;
        for (i, &(d, _, n)) in moves.iter().enumerate() {
            for (j, &(_, s, m)) in moves.iter().enumerate() {
                if i != j && overlap(d, n, s, m) {
                    parallel = true;
                }
            }
        }
        let moves: Vec<_> = moves.into_iter().filter(|&(d, s, _)| d != s).collect();
        Copies {
            moves: moves.into(),
            parallel,
        }
    }

    pub fn words(&self) -> u32 {
        self.moves.iter().map(|m| m.2).sum()
    }
}

/// Element types of arithmetic.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub(crate) enum Num {
    Bool,
    I32,
    U32,
    I64,
    U64,
    F32,
    BF16,
}

impl Num {
    fn of(s: Scalar) -> Num {
        match s {
            Scalar::Bool => Num::Bool,
            Scalar::I32 => Num::I32,
            Scalar::U32 => Num::U32,
            Scalar::I64 => Num::I64,
            Scalar::U64 => Num::U64,
            Scalar::F32 => Num::F32,
            Scalar::BF16 => Num::BF16,
        }
    }
}

/// One decoded instruction. Slots are word indices into the register file.
#[derive(Clone, Debug)]
pub(crate) enum Ins {
    /// Write the same words to every lane.
    Const {
        d: u32,
        words: Box<[u32]>,
    },
    Special {
        d: u32,
        s: Special,
    },
    Param {
        d: u32,
        p: u32,
        words: u32,
    },
    Bin {
        op: BinOp,
        ty: Num,
        n: u32,
        d: u32,
        a: u32,
        b: u32,
    },
    Fma {
        ty: Num,
        ftz: bool,
        n: u32,
        d: u32,
        a: u32,
        b: u32,
        c: u32,
    },
    Un {
        op: UnOp,
        ty: Num,
        n: u32,
        d: u32,
        a: u32,
    },
    Cmp {
        op: CmpOp,
        ty: Num,
        d: u32,
        a: u32,
        b: u32,
    },
    Select {
        d: u32,
        c: u32,
        a: u32,
        b: u32,
        words: u32,
    },
    Cvt {
        from: Scalar,
        to: Scalar,
        n: u32,
        d: u32,
        a: u32,
    },
    Copy {
        d: u32,
        a: u32,
        words: u32,
    },
    Pack {
        elem: Scalar,
        d: u32,
        srcs: Box<[u32]>,
    },
    /// Pack of 32- or 64-bit elements: `w` words from each source.
    PackWords {
        d: u32,
        srcs: Box<[u32]>,
        w: u32,
    },
    Extract {
        elem: Scalar,
        e: u32,
        d: u32,
        a: u32,
    },
    LdGlobal {
        t: u32,
        d: u32,
        idx: Box<[Idx]>,
        bytes: u32,
    },
    StGlobal {
        t: u32,
        v: u32,
        idx: Box<[Idx]>,
        bytes: u32,
        pred: Option<u32>,
    },
    /// `atom.global.add` of one 32-bit word: `d` gets the old value.
    AtomAdd {
        t: u32,
        d: u32,
        v: u32,
        idx: Box<[Idx]>,
    },
    LdShared {
        sb: ShBuf,
        d: u32,
        idx: Idx,
        bytes: u32,
    },
    StShared {
        sb: ShBuf,
        v: u32,
        idx: Idx,
        bytes: u32,
    },
    Shfl {
        mode: ShflMode,
        d: u32,
        v: u32,
        l: u32,
        words: u32,
    },
    Elect {
        d: u32,
    },
    Mma {
        d: u32,
        a: u32,
        b: u32,
        c: u32,
    },
    /// `wgmma.mma_async` (boxed: the accumulator slots are many).
    Wgmma(Box<WgmmaIns>),
    /// `wgmma.commit_group`.
    WgCommit,
    /// `wgmma.wait_group n`.
    WgWait {
        n: u32,
    },
    /// Before an instruction that reads wgmma accumulators (other than as
    /// another wgmma's accumulator operand): none of these slots may belong
    /// to a wgmma whose group is not yet waited for.
    WgUse {
        slots: Box<[u32]>,
    },
    MbarInit {
        bar: u32,
    },
    /// An arrival per active lane, each expecting `tx` bytes first; with
    /// `ring`, on element `ring index` of the ring from `bar`; with `cta`,
    /// on the barrier of the CTA that lane's rank names
    /// (`mbarrier.arrive.remote`), else on the lane's own CTA's.
    MbarArrive {
        bar: u32,
        tx: u32,
        ring: Option<Ring>,
        cta: Option<Idx>,
    },
    MbarWait {
        bar: u32,
        phase: u32,
    },
    /// Block until every active lane's barrier has a current phase parity
    /// other than its `parity & 1` (`try_wait.parity`).
    MbarWaitParity {
        bar: u32,
        parity: Idx,
        ring: Option<Ring>,
    },
    Nop,
    /// `cp.async.commit_group` (the simulator's copies are done at once;
    /// the race detector counts the groups).
    CpCommit,
    /// `cp.async.wait_group n`.
    CpWait {
        n: u32,
    },
    PdlWait,
    ClusterArrive,
    ClusterWait,
    BarSync {
        id: u8,
        threads: u32,
    },
    /// `setmaxnreg`: the warp's register count becomes `regs`, through its
    /// CTA's pool (`inc` blocks until the pool holds enough).
    SetMaxNReg {
        inc: bool,
        regs: u32,
    },
    StAsync {
        sb: ShBuf,
        bar: u32,
        idx: Idx,
        v: u32,
        cta: Idx,
        bytes: u32,
        /// The ring index, when `bar` is the first element of a ring.
        ring: Option<Ring>,
    },
    CpAsync {
        sb: ShBuf,
        t: u32,
        sidx: Idx,
        gidx: Box<[Idx]>,
    },
    Bulk {
        sb: ShBuf,
        t: u32,
        bar: u32,
        bytes: u32,
        sidx: Idx,
        gidx: Box<[Idx]>,
        ring: Option<Ring>,
    },
    /// `cp.async.bulk.global.shared::cta.bulk_group`: queued, executed
    /// later (`exec::bulk`).
    BulkStore {
        sb: ShBuf,
        t: u32,
        bytes: u32,
        sidx: Idx,
        gidx: Box<[Idx]>,
    },
    /// `cp.async.bulk.commit_group`.
    BulkCommit,
    /// `cp.async.bulk.wait_group[.read] n`.
    BulkWait {
        n: u32,
        read: bool,
    },
    /// Push the mask; run the lanes where `c` holds, else jump to `else_pc`.
    IfBegin {
        c: u32,
        else_pc: u32,
    },
    /// Switch to the lanes where the condition failed, or jump to `end_pc`.
    Else {
        end_pc: u32,
    },
    /// Masked register moves (yields of `if`).
    Move {
        copies: Copies,
    },
    /// Pop the mask (end of `if`, `while`, role).
    PopMask,
    ForInit {
        ty: Num,
        iv: u32,
        lo: u32,
        copies: Copies,
    },
    ForHead {
        ty: Num,
        iv: u32,
        hi: u32,
        exit_pc: u32,
    },
    ForNext {
        ty: Num,
        iv: u32,
        step: u32,
        copies: Copies,
        head_pc: u32,
    },
    /// Pop the mask, then copy the carried values to the results.
    ForExit {
        copies: Copies,
    },
    WhileInit {
        copies: Copies,
    },
    WhileCond {
        c: u32,
        to_body: Copies,
        to_res: Copies,
        exit_pc: u32,
    },
    WhileNext {
        copies: Copies,
        head_pc: u32,
    },
    /// Push the mask and keep the lanes of the role (one mask per warp).
    RoleBegin {
        masks: Box<[u32]>,
        end_pc: u32,
    },
    Exit,
}

/// A decoded kernel.
pub(crate) struct Program {
    pub kernel: Kernel,
    pub code: Vec<Ins>,
    /// The IR instruction each op came from (for locations in reports).
    pub origin: Vec<Inst>,
    /// Words of registers per lane.
    pub reg_words: u32,
    /// Largest parallel copy, in words.
    pub scratch_words: u32,
    pub layout: SharedLayout,
    /// Warps per CTA and the lanes that exist in each.
    pub warps: u32,
    pub lanes: Vec<u32>,
    /// Whether each tensor is produced by the preceding launch.
    pub produced: Vec<bool>,
    /// The innermost role region around each op (`NO_ROLE`: none).
    pub role_at: Vec<u32>,
    /// The smallest shared-memory access in bytes (the race detector's granule).
    pub min_shared_access: u32,
}

/// `Program::role_at` of an op outside every role region.
pub(crate) const NO_ROLE: u32 = u32::MAX;

impl Program {
    pub fn loc_of(&self, pc: usize) -> &kda_ir::Loc {
        &self.kernel.insts[self.origin[pc]].loc
    }

    pub fn op_name(&self, pc: usize) -> &'static str {
        self.kernel.insts[self.origin[pc]].op.name()
    }

    /// The role an op runs in: the innermost role region around it, else
    /// the first role warp `warp` has a thread in.
    pub fn role_name(&self, pc: usize, warp: u32) -> Option<String> {
        let k = &self.kernel;
        match self.role_at.get(pc) {
            Some(&r) if r != NO_ROLE => Some(k.roles[kda_ir::Role::from_u32(r)].name.clone()),
            _ => k
                .roles
                .values()
                .find(|r| (0..32).any(|l| r.contains(warp * 32 + l)))
                .map(|r| r.name.clone()),
        }
    }
}

fn unsupported(what: impl Into<String>, d: &InstData) -> SimError {
    SimError::Unsupported {
        what: what.into(),
        loc: d.loc.clone(),
    }
}

/// Liveness: positions in layout order, the same numbering the emitter uses.
struct Live {
    pos: u32,
    def: Vec<u32>,
    end: Vec<u32>,
    /// Open loops: (start position, loop id).
    loops: Vec<(u32, usize)>,
    loop_end: Vec<u32>,
    /// A use inside loop `id` of a value defined before it.
    pending: Vec<(Value, usize)>,
}

impl Live {
    fn next(&mut self) -> u32 {
        self.pos += 1;
        self.pos
    }
    fn def(&mut self, v: Value, p: u32) {
        self.def[v.as_u32() as usize] = p;
        self.end[v.as_u32() as usize] = self.end[v.as_u32() as usize].max(p);
    }
    fn use_(&mut self, v: Value, p: u32) {
        let i = v.as_u32() as usize;
        self.end[i] = self.end[i].max(p);
        let d = self.def[i];
        if let Some(&(_, id)) = self.loops.iter().find(|&&(s, _)| s > d) {
            self.pending.push((v, id));
        }
    }
    fn extend(&mut self, v: Value, p: u32) {
        self.end[v.as_u32() as usize] = self.end[v.as_u32() as usize].max(p);
    }

    fn region(&mut self, k: &Kernel, r: Region) {
        for &inst in &k.regions[r].insts {
            let d = &k.insts[inst];
            let pos = self.next();
            for &a in &d.args {
                self.use_(a, pos);
            }
            for &v in &d.results {
                self.def(v, pos);
            }
            let regions = d.op.regions();
            let is_loop = matches!(d.op, Op::For { .. } | Op::While { .. });
            if regions.is_empty() {
                continue;
            }
            let id = self.loop_end.len();
            if is_loop {
                self.loop_end.push(0);
                self.loops.push((pos, id));
            }
            for &sub in &regions {
                for &p in &k.regions[sub].params {
                    self.def(p, pos);
                }
            }
            for &sub in &regions {
                self.region(k, sub);
            }
            let end = self.next();
            if is_loop {
                self.loops.pop();
                self.loop_end[id] = end;
                // Loop bounds and inits are read again on every iteration.
                for &a in &d.args {
                    self.extend(a, end);
                }
            }
            for &v in &d.results {
                self.extend(v, end);
            }
            for &sub in &regions {
                for &p in &k.regions[sub].params {
                    self.extend(p, end);
                }
            }
        }
    }
}

/// Linear-scan slot allocation by size class (1, 2, 4, ... words).
struct Alloc {
    next: u32,
    free: Vec<Vec<u32>>,
    busy: BinaryHeap<Reverse<(u32, u32, usize)>>,
    slot: Vec<u32>,
    end: Vec<u32>,
}

impl Alloc {
    fn at(&mut self, pos: u32) {
        while let Some(&Reverse((end, slot, class))) = self.busy.peek() {
            if end >= pos {
                break;
            }
            self.busy.pop();
            self.free[class].push(slot);
        }
    }
    fn def(&mut self, v: Value, ty: Type) {
        let w = words(ty.elem, ty.lanes).max(1);
        let class = w.next_power_of_two().trailing_zeros() as usize;
        if self.free.len() <= class {
            self.free.resize(class + 1, vec![]);
        }
        let slot = self.free[class].pop().unwrap_or_else(|| {
            let s = self.next;
            self.next += 1 << class;
            s
        });
        self.busy
            .push(Reverse((self.end[v.as_u32() as usize], slot, class)));
        self.slot[v.as_u32() as usize] = slot;
    }
}

struct Emit<'k> {
    k: &'k Kernel,
    layout: SharedLayout,
    pos: u32,
    alloc: Alloc,
    code: Vec<Ins>,
    origin: Vec<Inst>,
    scratch: u32,
    warps: u32,
    /// Every wgmma result: reading one gets a `WgUse` check.
    wg_results: std::collections::HashSet<Value>,
}

impl<'k> Emit<'k> {
    fn s(&self, v: Value) -> u32 {
        self.alloc.slot[v.as_u32() as usize]
    }
    fn w(&self, v: Value) -> u32 {
        let t = self.k.ty(v);
        words(t.elem, t.lanes)
    }
    fn sb(&self, b: kda_ir::Buffer) -> ShBuf {
        let i = b.as_u32() as usize;
        let l = &self.layout;
        ShBuf {
            buf: b.as_u32(),
            base: l.buffers[i],
            eb: l.elem_bytes[i],
            size: l.sizes[i],
        }
    }
    fn idx(&self, v: Value, d: &InstData) -> Result<Idx, SimError> {
        let t = self.k.ty(v);
        if !t.is_scalar() || !t.elem.is_int() {
            return Err(unsupported(format!("{} with a {t} index", d.op.name()), d));
        }
        Ok(Idx {
            slot: self.s(v),
            kind: t.elem,
        })
    }
    /// The ring operand of a barrier op (its last operand) when `ring > 0`.
    fn ring(&self, ring: u32, d: &InstData) -> Result<Option<Ring>, SimError> {
        if ring == 0 {
            return Ok(None);
        }
        let Some(&v) = d.args.last() else {
            return Err(unsupported(
                format!("{} without its ring index", d.op.name()),
                d,
            ));
        };
        Ok(Some(Ring {
            at: self.idx(v, d)?,
            len: ring,
        }))
    }
    fn push(&mut self, ins: Ins, origin: Inst) -> u32 {
        self.code.push(ins);
        self.origin.push(origin);
        self.code.len() as u32 - 1
    }
    fn copies(&mut self, dst: &[Value], src: &[Value]) -> Copies {
        let moves = dst
            .iter()
            .zip(src)
            .map(|(&d, &s)| (self.s(d), self.s(s), self.w(d)))
            .collect();
        let c = Copies::new(moves);
        if c.parallel {
            self.scratch = self.scratch.max(c.words());
        }
        c
    }
    fn step(&mut self) -> u32 {
        self.pos += 1;
        self.alloc.at(self.pos);
        self.pos
    }

    /// Emit a region; returns the values its `yield` yields.
    fn region(&mut self, r: Region) -> Result<Vec<Value>, SimError> {
        let k = self.k;
        let mut yielded = vec![];
        for &inst in &k.regions[r].insts {
            let d = &k.insts[inst];
            self.step();
            for &v in &d.results {
                self.alloc.def(v, k.ty(v));
            }
            for sub in d.op.regions() {
                for &p in &k.regions[sub].params {
                    self.alloc.def(p, k.ty(p));
                }
            }
            // A yield carries accumulators on (the copies pass their
            // pending state to the destination, see exec/wgmma.rs; the
            // verifier allows it only where PTX keeps the registers).
            let reads: &[Value] = match d.op {
                Op::Wgmma { .. } | Op::Yield => &[],
                _ => &d.args,
            };
            {
                let slots: Box<[u32]> = reads
                    .iter()
                    .filter(|&&v| self.wg_results.contains(&v))
                    .map(|&v| self.s(v))
                    .collect();
                if !slots.is_empty() {
                    self.push(Ins::WgUse { slots }, inst);
                }
            }
            match d.op {
                Op::Yield => yielded = d.args.clone(),
                Op::If { then, els } => {
                    let c = self.s(d.args[0]);
                    let at = self.push(Ins::IfBegin { c, else_pc: 0 }, inst);
                    let ys = self.region(then)?;
                    let mv = self.copies(&d.results, &ys);
                    self.push(Ins::Move { copies: mv }, inst);
                    let else_pc = self.push(Ins::Else { end_pc: 0 }, inst);
                    let ys = self.region(els)?;
                    let mv = self.copies(&d.results, &ys);
                    self.push(Ins::Move { copies: mv }, inst);
                    let end_pc = self.push(Ins::PopMask, inst);
                    self.code[at as usize] = Ins::IfBegin { c, else_pc };
                    self.code[else_pc as usize] = Ins::Else { end_pc };
                    self.step();
                }
                Op::For { body } => {
                    let params = k.regions[body].params.clone();
                    let ty = k.ty(d.args[0]);
                    if !ty.is_scalar() || !ty.elem.is_int() {
                        return Err(unsupported(format!("a for loop over {ty}"), d));
                    }
                    let ty = Num::of(ty.elem);
                    let (lo, hi, step) = (self.s(d.args[0]), self.s(d.args[1]), self.s(d.args[2]));
                    let iv = self.s(params[0]);
                    let init = self.copies(&params[1..], &d.args[3..]);
                    self.push(
                        Ins::ForInit {
                            ty,
                            iv,
                            lo,
                            copies: init,
                        },
                        inst,
                    );
                    let head_pc = self.push(
                        Ins::ForHead {
                            ty,
                            iv,
                            hi,
                            exit_pc: 0,
                        },
                        inst,
                    );
                    let ys = self.region(body)?;
                    let next = self.copies(&params[1..], &ys);
                    self.push(
                        Ins::ForNext {
                            ty,
                            iv,
                            step,
                            copies: next,
                            head_pc,
                        },
                        inst,
                    );
                    let out = self.copies(&d.results, &params[1..]);
                    let exit_pc = self.push(Ins::ForExit { copies: out }, inst);
                    self.code[head_pc as usize] = Ins::ForHead {
                        ty,
                        iv,
                        hi,
                        exit_pc,
                    };
                    self.step();
                }
                Op::While { cond, body } => {
                    let cp = k.regions[cond].params.clone();
                    let bp = k.regions[body].params.clone();
                    let init = self.copies(&cp, &d.args);
                    self.push(Ins::WhileInit { copies: init }, inst);
                    let head_pc = self.code.len() as u32;
                    let ys = self.region(cond)?;
                    let c = self.s(ys[0]);
                    let to_body = self.copies(&bp, &ys[1..]);
                    let to_res = self.copies(&d.results, &ys[1..]);
                    let at = self.push(Ins::Nop, inst);
                    let ys = self.region(body)?;
                    let back = self.copies(&cp, &ys);
                    self.push(
                        Ins::WhileNext {
                            copies: back,
                            head_pc,
                        },
                        inst,
                    );
                    let exit_pc = self.push(Ins::PopMask, inst);
                    self.code[at as usize] = Ins::WhileCond {
                        c,
                        to_body,
                        to_res,
                        exit_pc,
                    };
                    self.step();
                }
                Op::InRole { role, body } => {
                    let r = &k.roles[role];
                    let masks: Box<[u32]> = (0..self.warps)
                        .map(|w| {
                            (0..32u32)
                                .filter(|l| r.contains(w * 32 + l))
                                .fold(0u32, |m, l| m | 1 << l)
                        })
                        .collect();
                    let at = self.push(
                        Ins::RoleBegin {
                            masks: masks.clone(),
                            end_pc: 0,
                        },
                        inst,
                    );
                    self.region(body)?;
                    let end_pc = self.push(Ins::PopMask, inst);
                    self.code[at as usize] = Ins::RoleBegin { masks, end_pc };
                    self.step();
                }
                _ => {
                    let ins = self.simple(d)?;
                    self.push(ins, inst);
                }
            }
        }
        Ok(yielded)
    }

    /// Lower a non-structural op.
    fn simple(&self, d: &InstData) -> Result<Ins, SimError> {
        let k = self.k;
        let a = |i: usize| self.s(d.args[i]);
        let ta = |i: usize| k.ty(d.args[i]);
        let r = || self.s(d.results[0]);
        let tr = || k.ty(d.results[0]);
        let gidx = |args: &[Value]| -> Result<Box<[Idx]>, SimError> {
            args.iter().map(|&v| self.idx(v, d)).collect()
        };
        let check_rank = |t: kda_ir::Tensor, n: usize| -> Result<(), SimError> {
            let rank = k.tensors[t].shape.len();
            if rank != n || rank > 8 {
                return Err(unsupported(
                    format!(
                        "{} of rank-{rank} tensor `{}` with {n} indices",
                        d.op.name(),
                        k.tensors[t].name
                    ),
                    d,
                ));
            }
            Ok(())
        };
        let mem_bytes = |ty: Type| -> Result<u32, SimError> {
            let b = ty.bytes();
            if ty.elem == Scalar::Bool || !(b == 2 || b.is_multiple_of(4)) || b > 16 {
                return Err(unsupported(format!("{} of {ty}", d.op.name()), d));
            }
            Ok(b)
        };
        Ok(match d.op {
            Op::IConst(v) => splat(r(), tr(), const_int(tr().elem, v)),
            Op::FConst(f) => splat(r(), tr(), const_float(tr().elem, f)),
            Op::Special(s) => Ins::Special { d: r(), s },
            Op::Param(p) => Ins::Param {
                d: r(),
                p: p.as_u32(),
                words: self.w(d.results[0]),
            },
            Op::Bin(op) => {
                let t = ta(0);
                let bad = match t.elem {
                    Scalar::F32 | Scalar::BF16 => {
                        matches!(
                            op,
                            BinOp::Rem
                                | BinOp::And
                                | BinOp::Or
                                | BinOp::Xor
                                | BinOp::Shl
                                | BinOp::Shr
                        )
                    }
                    Scalar::Bool => !matches!(op, BinOp::And | BinOp::Or | BinOp::Xor),
                    _ => false,
                };
                if bad {
                    return Err(unsupported(format!("{} on {t}", d.op.name()), d));
                }
                Ins::Bin {
                    op,
                    ty: Num::of(t.elem),
                    n: t.lanes as u32,
                    d: r(),
                    a: a(0),
                    b: a(1),
                }
            }
            Op::Fma { ftz } => {
                let t = ta(0);
                if !t.elem.is_float() {
                    return Err(unsupported(format!("fma on {t}"), d));
                }
                Ins::Fma {
                    ty: Num::of(t.elem),
                    ftz,
                    n: t.lanes as u32,
                    d: r(),
                    a: a(0),
                    b: a(1),
                    c: a(2),
                }
            }
            Op::Un(op) => {
                let t = ta(0);
                let ok = match op {
                    UnOp::Neg | UnOp::Abs => t.elem != Scalar::Bool,
                    UnOp::Not => !t.elem.is_float(),
                    _ => t.elem.is_float(),
                };
                if !ok {
                    return Err(unsupported(format!("{} on {t}", d.op.name()), d));
                }
                Ins::Un {
                    op,
                    ty: Num::of(t.elem),
                    n: t.lanes as u32,
                    d: r(),
                    a: a(0),
                }
            }
            Op::Cmp(op) => {
                let t = ta(0);
                if !t.is_scalar() {
                    return Err(unsupported(format!("cmp on {t}"), d));
                }
                Ins::Cmp {
                    op,
                    ty: Num::of(t.elem),
                    d: r(),
                    a: a(0),
                    b: a(1),
                }
            }
            Op::Select => Ins::Select {
                d: r(),
                c: a(0),
                a: a(1),
                b: a(2),
                words: self.w(d.results[0]),
            },
            Op::Cvt => {
                let (f, t) = (ta(0), tr());
                if f.lanes != t.lanes {
                    return Err(unsupported(format!("cvt {f} -> {t}"), d));
                }
                Ins::Cvt {
                    from: f.elem,
                    to: t.elem,
                    n: t.lanes as u32,
                    d: r(),
                    a: a(0),
                }
            }
            Op::Bitcast => {
                let (f, t) = (ta(0), tr());
                if f.bytes() != t.bytes() || f.elem == Scalar::Bool || t.elem == Scalar::Bool {
                    return Err(unsupported(format!("bitcast {f} -> {t}"), d));
                }
                Ins::Copy {
                    d: r(),
                    a: a(0),
                    words: self.w(d.results[0]),
                }
            }
            Op::Pack => {
                let elem = ta(0).elem;
                let srcs = d.args.iter().map(|&v| self.s(v)).collect();
                match elem {
                    Scalar::BF16 | Scalar::Bool => Ins::Pack { elem, d: r(), srcs },
                    _ => Ins::PackWords {
                        d: r(),
                        srcs,
                        w: elem.bytes() / 4,
                    },
                }
            }
            Op::Extract(e) => {
                let t = ta(0);
                if e >= t.lanes {
                    return Err(unsupported(format!("extract {e} of {t}"), d));
                }
                match t.elem {
                    Scalar::BF16 | Scalar::Bool => Ins::Extract {
                        elem: t.elem,
                        e: e as u32,
                        d: r(),
                        a: a(0),
                    },
                    el => {
                        let w = el.bytes() / 4;
                        Ins::Copy {
                            d: r(),
                            a: a(0) + e as u32 * w,
                            words: w,
                        }
                    }
                }
            }
            Op::LdGlobal { tensor, .. } => {
                check_rank(tensor, d.args.len())?;
                Ins::LdGlobal {
                    t: tensor.as_u32(),
                    d: r(),
                    idx: gidx(&d.args)?,
                    bytes: mem_bytes(tr())?,
                }
            }
            Op::StGlobal {
                tensor, predicated, ..
            } => {
                let n = d.args.len() - 1 - predicated as usize;
                check_rank(tensor, n)?;
                Ins::StGlobal {
                    t: tensor.as_u32(),
                    v: a(n),
                    idx: gidx(&d.args[..n])?,
                    bytes: mem_bytes(ta(n))?,
                    pred: predicated.then(|| a(n + 1)),
                }
            }
            Op::AtomAdd { tensor } => {
                let n = d.args.len() - 1;
                check_rank(tensor, n)?;
                Ins::AtomAdd {
                    t: tensor.as_u32(),
                    d: r(),
                    v: a(n),
                    idx: gidx(&d.args[..n])?,
                }
            }
            Op::LdShared { buffer } => Ins::LdShared {
                sb: self.sb(buffer),
                d: r(),
                idx: self.idx(d.args[0], d)?,
                bytes: mem_bytes(tr())?,
            },
            Op::StShared { buffer } => Ins::StShared {
                sb: self.sb(buffer),
                v: a(1),
                idx: self.idx(d.args[0], d)?,
                bytes: mem_bytes(ta(1))?,
            },
            Op::Shfl(mode) => {
                let tl = ta(1);
                if !tl.is_scalar() || !tl.elem.is_int() {
                    return Err(unsupported(format!("shfl with a {tl} lane"), d));
                }
                Ins::Shfl {
                    mode,
                    d: r(),
                    v: a(0),
                    l: a(1),
                    words: self.w(d.args[0]),
                }
            }
            Op::ElectSync => Ins::Elect { d: r() },
            Op::Mma16816 => {
                let ok = ta(0) == Type::vec(Scalar::U32, 4)
                    && ta(1) == Type::vec(Scalar::U32, 2)
                    && ta(2) == Type::vec(Scalar::F32, 4);
                if !ok {
                    return Err(unsupported(
                        format!("mma with {}, {}, {}", ta(0), ta(1), ta(2)),
                        d,
                    ));
                }
                Ins::Mma {
                    d: r(),
                    a: a(0),
                    b: a(1),
                    c: a(2),
                }
            }
            Op::MbarInit { barrier } => Ins::MbarInit {
                bar: barrier.as_u32(),
            },
            Op::MbarArrive { barrier, ring } => Ins::MbarArrive {
                bar: barrier.as_u32(),
                tx: 0,
                ring: self.ring(ring, d)?,
                cta: None,
            },
            Op::MbarArriveExpectTx {
                barrier,
                bytes,
                ring,
            } => Ins::MbarArrive {
                bar: barrier.as_u32(),
                tx: bytes,
                ring: self.ring(ring, d)?,
                cta: None,
            },
            Op::MbarArriveRemote { barrier, ring } => Ins::MbarArrive {
                bar: barrier.as_u32(),
                tx: 0,
                ring: self.ring(ring, d)?,
                cta: Some(self.idx(d.args[0], d)?),
            },
            Op::MbarWaitParity { barrier, ring } => Ins::MbarWaitParity {
                bar: barrier.as_u32(),
                parity: self.idx(d.args[0], d)?,
                ring: self.ring(ring, d)?,
            },
            Op::MbarWait { barrier, phase } => Ins::MbarWait {
                bar: barrier.as_u32(),
                phase,
            },
            // The simulator runs a warp's lanes in lockstep: a warp sync
            // orders nothing further (the verifier keeps it out of
            // lane-divergent code).
            Op::FenceMbarInit | Op::FenceProxyAsync | Op::GridDepLaunch | Op::WarpSync => Ins::Nop,
            Op::CpAsyncCommit => Ins::CpCommit,
            Op::CpAsyncWait(n) => Ins::CpWait { n },
            // The simulator writes a wgmma's registers as it issues; the
            // fence orders nothing further (WgUse checks the reads).
            Op::WgmmaFence => Ins::Nop,
            Op::WgmmaCommit => Ins::WgCommit,
            Op::WgmmaWait(n) => Ins::WgWait { n },
            Op::Wgmma { a, b, n, scale_d } => {
                let tile = |buf: kda_ir::Buffer| {
                    k.buffers[buf].tile.ok_or_else(|| {
                        unsupported(
                            format!("wgmma on buffer `{}` without a tile", k.buffers[buf].name),
                            d,
                        )
                    })
                };
                let acc = (n / 2) as usize;
                if d.results.len() != acc || d.args.len() != 2 + if scale_d { acc } else { 0 } {
                    return Err(unsupported("a wgmma with the wrong accumulator count", d));
                }
                let slots =
                    |vs: &[Value]| -> Box<[u32]> { vs.iter().map(|&v| self.s(v)).collect() };
                Ins::Wgmma(Box::new(WgmmaIns {
                    a: self.sb(a),
                    b: self.sb(b),
                    ta: tile(a)?,
                    tb: tile(b)?,
                    n,
                    ka: self.idx(d.args[0], d)?,
                    kb: self.idx(d.args[1], d)?,
                    c: scale_d.then(|| slots(&d.args[2..])),
                    d: slots(&d.results),
                }))
            }
            Op::GridDepWait => Ins::PdlWait,
            Op::ClusterArrive { .. } => Ins::ClusterArrive,
            Op::ClusterWait => Ins::ClusterWait,
            Op::SetMaxNReg { inc, regs } => Ins::SetMaxNReg { inc, regs },
            Op::BarSync { id, threads } => {
                if id >= 16 {
                    return Err(unsupported(format!("bar.sync {id}"), d));
                }
                Ins::BarSync { id, threads }
            }
            Op::StAsync {
                buffer,
                barrier,
                ring,
            } => Ins::StAsync {
                sb: self.sb(buffer),
                bar: barrier.as_u32(),
                idx: self.idx(d.args[0], d)?,
                v: a(1),
                cta: self.idx(d.args[2], d)?,
                bytes: mem_bytes(ta(1))?,
                ring: self.ring(ring, d)?,
            },
            Op::CpAsync { buffer, tensor } => {
                check_rank(tensor, d.args.len() - 1)?;
                Ins::CpAsync {
                    sb: self.sb(buffer),
                    t: tensor.as_u32(),
                    sidx: self.idx(d.args[0], d)?,
                    gidx: gidx(&d.args[1..])?,
                }
            }
            Op::BulkCopy {
                buffer,
                tensor,
                barrier,
                bytes,
                ring,
                ..
            } => {
                let g = &d.args[1..d.args.len() - (ring > 0) as usize];
                check_rank(tensor, g.len())?;
                if bytes % 16 != 0 {
                    return Err(unsupported(
                        format!("cp.async.bulk of {bytes} bytes (not a multiple of 16)"),
                        d,
                    ));
                }
                Ins::Bulk {
                    sb: self.sb(buffer),
                    t: tensor.as_u32(),
                    bar: barrier.as_u32(),
                    bytes,
                    sidx: self.idx(d.args[0], d)?,
                    gidx: gidx(g)?,
                    ring: self.ring(ring, d)?,
                }
            }
            Op::BulkStore {
                buffer,
                tensor,
                bytes,
                ..
            } => {
                check_rank(tensor, d.args.len() - 1)?;
                if bytes % 16 != 0 {
                    return Err(unsupported(
                        format!("cp.async.bulk.store of {bytes} bytes (not a multiple of 16)"),
                        d,
                    ));
                }
                Ins::BulkStore {
                    sb: self.sb(buffer),
                    t: tensor.as_u32(),
                    bytes,
                    sidx: self.idx(d.args[0], d)?,
                    gidx: gidx(&d.args[1..])?,
                }
            }
            Op::BulkCommit => Ins::BulkCommit,
            Op::BulkWait { n, read } => Ins::BulkWait { n, read },
            Op::If { .. } | Op::For { .. } | Op::While { .. } | Op::InRole { .. } | Op::Yield => {
                unreachable!("structural ops are emitted by `region`")
            }
        })
    }
}

/// A constant: the same element in every vector lane and every thread.
fn splat(d: u32, ty: Type, bits: u64) -> Ins {
    let n = words(ty.elem, ty.lanes);
    let mut one = vec![0u32; n as usize * 32];
    for e in 0..ty.lanes as u32 {
        set_elem(&mut one, 0, ty.elem, e, 0, bits);
    }
    Ins::Const {
        d,
        words: (0..n as usize).map(|w| one[w * 32]).collect(),
    }
}

/// Decode a kernel.
pub(crate) fn decode(k: &Kernel) -> Result<Program, SimError> {
    let nv = k.values.len();
    let mut live = Live {
        pos: 0,
        def: vec![0; nv],
        end: vec![0; nv],
        loops: vec![],
        loop_end: vec![],
        pending: vec![],
    };
    live.region(k, k.body);
    let mut end = live.end;
    for (v, id) in live.pending {
        end[v.as_u32() as usize] = end[v.as_u32() as usize].max(live.loop_end[id]);
    }
    let warps = k.launch.block.div_ceil(32);
    let mut e = Emit {
        k,
        layout: SharedLayout::new(k).map_err(|what| SimError::Unsupported {
            what,
            loc: k
                .buffers
                .values()
                .last()
                .map_or_else(kda_ir::Loc::synthetic, |b| b.loc.clone()),
        })?,
        pos: 0,
        alloc: Alloc {
            next: 0,
            free: vec![],
            busy: BinaryHeap::new(),
            slot: vec![u32::MAX; nv],
            end,
        },
        code: vec![],
        origin: vec![],
        scratch: 0,
        warps,
        wg_results: k
            .insts
            .values()
            .filter(|d| matches!(d.op, Op::Wgmma { .. }))
            .flat_map(|d| d.results.iter().copied())
            .collect(),
    };
    e.region(k.body)?;
    debug_assert_eq!(
        e.pos, live.pos,
        "liveness and emission number positions alike"
    );
    let last = e
        .origin
        .last()
        .copied()
        .unwrap_or_else(|| Inst::from_u32(0));
    e.push(Ins::Exit, last);
    let lanes = (0..warps)
        .map(|w| {
            let n = (k.launch.block - w * 32).min(32);
            if n == 32 { u32::MAX } else { (1u32 << n) - 1 }
        })
        .collect();
    let produced = k
        .tensors
        .values()
        .map(|t| t.provenance == Provenance::Produced)
        .collect();
    let mut role_at = vec![NO_ROLE; e.code.len()];
    for (pc, ins) in e.code.iter().enumerate() {
        if let &Ins::RoleBegin { end_pc, .. } = ins
            && let Op::InRole { role, .. } = k.insts[e.origin[pc]].op
        {
            // Later (inner) regions overwrite the outer ones they sit in.
            role_at[pc..=end_pc as usize].fill(role.as_u32());
        }
    }
    let min_shared_access = e
        .code
        .iter()
        .filter_map(|i| match *i {
            Ins::LdShared { bytes, .. }
            | Ins::StShared { bytes, .. }
            | Ins::StAsync { bytes, .. } => Some(bytes),
            _ => None,
        })
        .min()
        .unwrap_or(4);
    Ok(Program {
        role_at,
        min_shared_access,
        code: e.code,
        origin: e.origin,
        reg_words: e.alloc.next.max(1),
        scratch_words: e.scratch,
        layout: e.layout,
        warps,
        lanes,
        produced,
        kernel: k.clone(),
    })
}
