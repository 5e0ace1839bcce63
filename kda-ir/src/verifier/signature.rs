//! Operand and result counts and types of every op, read from the op table's
//! signatures (`op/table.rs`), and the types that flow through region
//! parameters and yields.
//!
//! The common path is data: each slot of a row's [`Sig`] states its rule and
//! [`Sig::check`] words every error from it (counts, a named operand's fixed
//! type, the type variable `T` and its class, tensor indices, ring indices,
//! predicates, tensor and buffer element accesses, the access mode from the
//! row's effects). What depends on an op's immediates or declarations, the
//! rows mark `Ty::Dep` or `Arg::Rest`; the hooks at the end check it
//! ([`Sig::dependent`] once the counts hold, [`Sig::immediates`] always).

use super::{Ctx, Layout};
use cranelift_entity::EntityRef;

use crate::entities::{Barrier, Buffer, Inst, Region, Tensor, Value};
use crate::kernel::Dim;
use crate::op::{self, Arg, CmpOp, Op, Special, Ty};
use crate::types::{Scalar, Type};

/// The fewest registers per thread `setmaxnreg` may set.
pub(super) const MIN_REGS: u32 = 24;

/// The most registers per thread `setmaxnreg` may set.
pub(super) const MAX_REGS: u32 = 256;

/// Largest transaction count of one mbarrier phase (`2^20 - 1`).
pub(super) const MAX_TX: u32 = (1 << 20) - 1;

pub(super) fn check(cx: &mut Ctx, layout: &Layout) {
    let k = cx.k;
    for &i in &layout.order {
        for &r in k.insts[i].op.regions().iter() {
            for &p in &k.regions[r].params {
                if let Some(msg) = malformed(cx, p) {
                    cx.error(i, msg);
                }
            }
        }
        for &v in &k.insts[i].results {
            if let Some(msg) = malformed(cx, v) {
                cx.error(i, msg);
            }
        }
        Sig { cx: &mut *cx, i }.check();
    }
}

/// Value types: a scalar or a vector of 2, 4 or 8 lanes; bool only as a scalar.
fn malformed(cx: &Ctx, v: Value) -> Option<String> {
    let t = cx.k.ty(v);
    if !matches!(t.lanes, 1 | 2 | 4 | 8) {
        Some(format!(
            "{v} has type {t}; allowed: a scalar or a vector of 2, 4 or 8 lanes"
        ))
    } else if t.elem == Scalar::Bool && t.lanes != 1 {
        Some(format!("{v} has type {t}; bool values are scalars"))
    } else {
        None
    }
}

struct Sig<'a, 'k> {
    cx: &'a mut Ctx<'k>,
    i: Inst,
}

/// `(f32, i32)`.
fn tys(ts: &[Type]) -> String {
    format!(
        "({})",
        ts.iter()
            .map(|t| t.to_string())
            .collect::<Vec<_>>()
            .join(", ")
    )
}

/// `a`, `a and b`, `a, b and c`.
fn and_list(parts: &[String]) -> String {
    match parts.split_last() {
        None => String::new(),
        Some((last, [])) => last.clone(),
        Some((last, init)) => format!("{} and {last}", init.join(", ")),
    }
}

fn int_scalar(t: Type) -> bool {
    t.is_scalar() && t.elem.is_int()
}

/// The access sizes a single vector load or store can have.
fn vector_bytes_ok(t: Type) -> bool {
    t.is_scalar() || (matches!(t.lanes, 2 | 4 | 8) && matches!(t.bytes(), 4 | 8 | 16))
}

impl Sig<'_, '_> {
    fn err(&mut self, msg: impl Into<String>) {
        self.cx.error(self.i, msg);
    }

    fn m(&self) -> String {
        self.cx.mnemonic(self.i)
    }

    fn op(&self) -> &Op {
        &self.cx.k.insts[self.i].op
    }

    fn ty(&self, v: Value) -> Type {
        self.cx.k.ty(v)
    }

    fn tys_of(&self, vs: &[Value]) -> Vec<Type> {
        vs.iter().map(|&v| self.ty(v)).collect()
    }

    fn v(&self, v: Value) -> String {
        self.cx.value(v)
    }

    /// How many operands a slot stands for in this instruction (`None`: any).
    fn slot_len(&self, a: Arg) -> Option<usize> {
        let k = self.cx.k;
        let op = self.op();
        Some(match a {
            Arg::One(..) => 1,
            Arg::Indices => op.tensor().map_or(0, |t| k.tensors[t].shape.len()),
            Arg::RingIndex => op.barrier().is_some_and(|(_, ring)| ring > 0) as usize,
            Arg::Predicate => matches!(
                op,
                Op::StGlobal {
                    predicated: true,
                    ..
                }
            ) as usize,
            Arg::Rest => return None,
        })
    }

    /// The table's operand and result counts; false (after reporting) when wrong.
    fn counts(&mut self, sig: &op::Sig) -> bool {
        let d = &self.cx.k.insts[self.i];
        let (na, nr) = (d.args.len(), d.results.len());
        let m = self.m();
        let mut ok = true;
        // Every slot but a run (`Rest`) has a count here; with a run, the hook counts.
        let lens: Option<Vec<usize>> = sig.args.iter().map(|&a| self.slot_len(a)).collect();
        if let Some(lens) = lens {
            let want: usize = lens.iter().sum();
            if na != want {
                ok = false;
                let msg = match self.op().tensor() {
                    Some(t) => self.tensor_count(t, sig.args, &lens, want, na),
                    None => {
                        let s = if want == 1 { "" } else { "s" };
                        format!("`{m}` takes {want} operand{s}, found {na}")
                    }
                };
                self.err(msg);
            }
        }
        if sig.results.iter().all(|r| matches!(r, Arg::One(..))) {
            let want = sig.results.len();
            if nr != want {
                let s = if want == 1 { "" } else { "s" };
                self.err(format!("`{m}` has {want} result{s}, found {nr}"));
                ok = false;
            }
        }
        ok
    }

    /// A tensor op's count error names every slot present: `` `atom.add` of
    /// t0 "queue" takes one index per dimension (1) and the addend: 2
    /// operands, found 3``.
    fn tensor_count(
        &self,
        t: Tensor,
        slots: &[Arg],
        lens: &[usize],
        want: usize,
        na: usize,
    ) -> String {
        let m = self.m();
        let rank = self.cx.k.tensors[t].shape.len();
        let name = self.cx.tensor(t);
        let parts: Vec<String> = slots
            .iter()
            .zip(lens)
            .filter(|&(a, &n)| n > 0 || matches!(a, Arg::Indices))
            .map(|(a, _)| match a {
                Arg::One(name, _) => format!("the {name}"),
                Arg::Indices => format!("one index per dimension ({rank})"),
                Arg::RingIndex => "the ring index".into(),
                Arg::Predicate => "the predicate".into(),
                Arg::Rest => unreachable!("a run has no count"),
            })
            .collect();
        if let [Arg::Indices] = slots {
            format!("`{m}` of {name} takes {}, found {na}", parts[0])
        } else {
            format!(
                "`{m}` of {name} takes {}: {want} operands, found {na}",
                and_list(&parts)
            )
        }
    }

    fn check(&mut self) {
        let k = self.cx.k;
        let d = &k.insts[self.i];
        let sig = d.op.opcode().sig();
        if self.counts(sig) {
            self.types(sig, &d.args, &d.results);
        }
        self.immediates();
        if let Some((base, ring)) = d.op.barrier()
            && ring > 0
        {
            self.ring(base, ring);
        }
    }

    /// Every rule of the signature, on operands and results whose counts hold.
    fn types(&mut self, sig: &op::Sig, args: &[Value], results: &[Value]) {
        let m = self.m();
        // Operands with a fixed rule, in order; the rest by kind.
        let (mut t_args, mut elems) = (Vec::new(), Vec::new());
        let mut at = 0;
        for &slot in sig.args {
            let Some(n) = self.slot_len(slot) else {
                break;
            };
            for &v in &args[at..at + n] {
                let (name, rule) = match slot {
                    Arg::One(name, rule) => (name, rule),
                    Arg::Indices => ("index", Ty::IntScalar),
                    Arg::RingIndex => ("ring index", Ty::Is(Type::U32)),
                    Arg::Predicate => ("predicate", Ty::Is(Type::BOOL)),
                    Arg::Rest => unreachable!("slot_len is None"),
                };
                match (rule, rule.fixed(self.ty(v))) {
                    (Ty::T, _) => t_args.push((name, v)),
                    (Ty::GlobalElem | Ty::SharedElem, _) => elems.push((rule, v)),
                    (_, Some((false, what))) => {
                        self.err(format!("`{m}` {name} must be {what}, found {}", self.v(v)))
                    }
                    _ => {}
                }
            }
            at += n;
        }
        let t_results: Vec<Value> = sig
            .results
            .iter()
            .zip(results)
            .filter(|(r, _)| matches!(r, Arg::One(_, Ty::T)))
            .map(|(_, &v)| v)
            .collect();
        self.type_variable(sig.class, &t_args, &t_results);
        for (r, &v) in sig.results.iter().zip(results) {
            if let Arg::One(_, rule @ (Ty::GlobalElem | Ty::SharedElem)) = *r {
                elems.push((rule, v));
            }
        }
        self.access();
        for (rule, v) in elems {
            let t = self.ty(v);
            match (rule, self.op().tensor(), self.op().buffer()) {
                (Ty::GlobalElem, Some(tensor), _) => self.global_elem(tensor, t),
                (Ty::SharedElem, _, Some(buffer)) => self.shared(buffer, t),
                _ => unreachable!("element rules name the op's tensor or buffer"),
            }
        }
        self.dependent(args, results);
        for (r, &v) in sig.results.iter().zip(results) {
            let t = self.ty(v);
            match *r {
                Arg::One(_, Ty::Is(want)) if t != want => {
                    self.err(format!("`{m}` produces {want}, found {}", self.v(v)))
                }
                Arg::One(_, Ty::In(c)) if !(c.admits)(t) => {
                    self.err(format!("`{m}` {}, found {t}", c.phrase))
                }
                _ => {}
            }
        }
    }

    /// The values typed `T` have one type, which the row's class admits.
    fn type_variable(&mut self, class: op::Class, args: &[(&str, Value)], results: &[Value]) {
        let Some(&(name, first)) = args.first() else {
            return;
        };
        let m = self.m();
        let t = self.ty(first);
        let all = args.iter().map(|&(_, v)| v).chain(results.iter().copied());
        if all.clone().any(|v| self.ty(v) != t) {
            let vs = |xs: &mut dyn Iterator<Item = Value>| {
                xs.map(|v| self.v(v)).collect::<Vec<_>>().join(", ")
            };
            let ins = vs(&mut args.iter().map(|&(_, v)| v));
            let outs = vs(&mut results.iter().copied());
            let msg = match (args.len(), results.is_empty()) {
                (1, false) => format!("`{m}` produces its {name}'s type, found {ins} -> {outs}"),
                (_, false) => {
                    format!("`{m}` operands and result must have one type, found {ins} -> {outs}")
                }
                (_, true) => format!("`{m}` operands must have one type, found {ins}"),
            };
            return self.err(msg);
        }
        if !(class.admits)(t) {
            self.err(format!("`{m}` {}, found {}", class.phrase, self.v(first)));
        }
    }

    /// The tensor allows what the op's effects do to it.
    fn access(&mut self) {
        let Some(t) = self.op().tensor() else {
            return;
        };
        let fx = self.op().effects();
        let d = &self.cx.k.tensors[t];
        let m = self.m();
        let name = self.cx.tensor(t);
        if fx.reads_global() && !d.access.reads() {
            self.err(format!(
                "{name} is write-only; `{m}` needs read or readwrite access"
            ));
        }
        if fx.writes_global() && !d.access.writes() {
            self.err(format!(
                "{name} is read-only; `{m}` needs write or readwrite access"
            ));
        }
    }

    /// An element access of `ty` to tensor `t`.
    fn global_elem(&mut self, t: Tensor, ty: Type) {
        let d = &self.cx.k.tensors[t];
        let m = self.m();
        let name = self.cx.tensor(t);
        if ty.elem != d.dtype {
            self.err(format!(
                "`{m}` of {name} accesses {ty}; its elements must be the tensor's dtype {}",
                d.dtype
            ));
        }
        if !vector_bytes_ok(ty) {
            self.err(format!(
                "`{m}` accesses {ty} ({} bytes); allowed: a scalar or a vector of 4, 8 or 16 bytes",
                ty.bytes()
            ));
        } else if !ty.is_scalar() {
            if ty.bytes() > d.align {
                self.err(format!(
                    "`{m}` of {ty} needs {name} aligned to {} bytes; it declares align {}",
                    ty.bytes(),
                    d.align
                ));
            }
            if d.strides.last() != Some(&Dim::Const(1)) {
                self.err(format!(
                    "`{m}` of {ty} needs a unit innermost stride; {name} does not declare one"
                ));
            }
        }
    }

    /// An element access of `ty` to buffer `b`.
    fn shared(&mut self, b: Buffer, ty: Type) {
        let d = &self.cx.k.buffers[b];
        let m = self.m();
        let name = self.cx.buffer(b);
        if ty.elem != d.elem {
            self.err(format!(
                "`{m}` of {name} accesses {ty}; its elements must be the buffer's {}",
                d.elem
            ));
        }
        if !vector_bytes_ok(ty) {
            self.err(format!(
                "`{m}` accesses {ty} ({} bytes); allowed: a scalar or a vector of 4, 8 or 16 bytes",
                ty.bytes()
            ));
        } else if ty.bytes() > d.align {
            self.err(format!(
                "`{m}` of {ty} needs {name} aligned to {} bytes; it declares align {}",
                ty.bytes(),
                d.align
            ));
        }
    }

    /// A ring of `ring` declared barriers from `base` that any element may
    /// stand for, so they agree in arrivals, bytes and roles.
    fn ring(&mut self, base: Barrier, ring: u32) {
        let k = self.cx.k;
        let m = self.m();
        let first = base.index();
        if first + ring as usize > k.barriers.len() {
            self.err(format!(
                "`{m}` names a ring of {ring} mbarriers from {}, but only {} are declared from there",
                self.cx.barrier(base),
                k.barriers.len().saturating_sub(first)
            ));
            return;
        }
        let d0 = &k.barriers[base];
        for n in 1..ring as usize {
            let e = Barrier::new(first + n);
            let d = &k.barriers[e];
            if d.arrivals != d0.arrivals || d.tx_bytes != d0.tx_bytes || d.roles != d0.roles {
                self.err(format!(
                    "`{m}` names a ring of {ring} mbarriers from {}, but {} differs from it in arrivals, bytes or roles",
                    self.cx.barrier(base),
                    self.cx.barrier(e)
                ));
                return;
            }
        }
    }

    // ---- hooks: what the table's rows mark `Ty::Dep` or `Arg::Rest`

    /// Types that depend on the op's immediates or declarations; runs once
    /// the counts hold.
    fn dependent(&mut self, a: &[Value], results: &[Value]) {
        let k = self.cx.k;
        let m = self.m();
        match *self.op() {
            Op::IConst(c) => {
                let t = self.ty(results[0]);
                let range = match (t.lanes, t.elem) {
                    (1, Scalar::Bool) => (0, 1),
                    (1, Scalar::I32) => (i32::MIN as i64, i32::MAX as i64),
                    (1, Scalar::U32) => (0, u32::MAX as i64),
                    (1, Scalar::I64 | Scalar::U64) => (i64::MIN, i64::MAX),
                    // Not an integer or bool scalar: the table's rule reports it.
                    _ => return,
                };
                if c < range.0 || c > range.1 {
                    self.err(format!(
                        "`iconst {c}` does not fit {t} (allowed: {}..={})",
                        range.0, range.1
                    ));
                }
            }
            Op::Param(s) => self.result_is(results[0], k.scalars[s].ty.into()),
            Op::Cmp(c) => {
                let (x, y) = (self.ty(a[0]), self.ty(a[1]));
                if x != y {
                    self.err(format!(
                        "`{m}` compares two values of one type, found {} and {}",
                        self.v(a[0]),
                        self.v(a[1])
                    ));
                } else if !x.is_scalar() {
                    self.err(format!("`{m}` compares scalars, found {}", self.v(a[0])));
                } else if x.elem == Scalar::Bool && !matches!(c, CmpOp::Eq | CmpOp::Ne) {
                    self.err(format!(
                        "`{m}` cannot order bool values; bool allows only `cmp.eq` and `cmp.ne`"
                    ));
                }
            }
            Op::Cvt => {
                let (x, r) = (self.ty(a[0]), self.ty(results[0]));
                if x.elem == Scalar::Bool || r.elem == Scalar::Bool {
                    self.err(format!(
                        "`cvt` converts between numeric types, found {} -> {r}; use `select` to turn a bool into a number and `cmp` for the reverse",
                        self.v(a[0])
                    ));
                } else if x.lanes != r.lanes {
                    self.err(format!(
                        "`cvt` keeps the lane count, found {} -> {r}",
                        self.v(a[0])
                    ));
                }
            }
            Op::Bitcast => {
                let (x, r) = (self.ty(a[0]), self.ty(results[0]));
                if x.elem == Scalar::Bool || r.elem == Scalar::Bool {
                    self.err(format!("`bitcast` cannot reinterpret bool (it has no bits in memory), found {} -> {r}", self.v(a[0])));
                } else if x.bytes() != r.bytes() {
                    self.err(format!(
                        "`bitcast` keeps the size, found {} ({} bytes) -> {r} ({} bytes)",
                        self.v(a[0]),
                        x.bytes(),
                        r.bytes()
                    ));
                }
            }
            Op::Pack => {
                let n = a.len();
                if !matches!(n, 2 | 4 | 8) {
                    return self.err(format!("`pack` takes 2, 4 or 8 scalars, found {n}"));
                }
                let e = self.ty(a[0]);
                if !e.is_scalar() || e.elem == Scalar::Bool {
                    self.err(format!(
                        "`pack` takes non-bool scalars, found {}",
                        self.v(a[0])
                    ));
                } else if let Some(&x) = a.iter().find(|&&x| self.ty(x) != e) {
                    self.err(format!(
                        "`pack` takes scalars of one type, found {} and {}",
                        self.v(a[0]),
                        self.v(x)
                    ));
                } else {
                    self.result_is(results[0], e.with_lanes(n as u8));
                }
            }
            Op::Extract(lane) => {
                let x = self.ty(a[0]);
                if x.is_scalar() {
                    self.err(format!("`{m}` takes a vector, found {}", self.v(a[0])));
                } else if lane >= x.lanes {
                    self.err(format!(
                        "`{m}` reads lane {lane} of {}, which has lanes 0..{}",
                        self.v(a[0]),
                        x.lanes
                    ));
                } else {
                    self.result_is(results[0], Type::scalar(x.elem));
                }
            }
            Op::AtomAdd { .. } => {
                let t = self.ty(results[0]);
                if t != Type::U32 && t != Type::I32 {
                    self.err(format!("`{m}` adds to a u32 or i32 element, found {t}"));
                }
                let addend = a[a.len() - 1];
                if self.ty(addend) != t {
                    self.err(format!(
                        "`{m}` addend must be {t} (the result's type), found {}",
                        self.v(addend)
                    ));
                }
            }
            Op::StAsync { buffer, .. } => {
                let x = self.ty(a[1]);
                if !matches!(x.bytes(), 4 | 8 | 16) || x.elem == Scalar::Bool {
                    self.err(format!(
                        "`st.async` stores 4, 8 or 16 bytes, found {} ({} bytes)",
                        self.v(a[1]),
                        x.bytes()
                    ));
                } else {
                    self.shared(buffer, x);
                }
            }
            Op::CpAsync { buffer, tensor } => self.copy_target(buffer, tensor, 16),
            Op::BulkCopy {
                buffer,
                tensor,
                bytes,
                ..
            }
            | Op::BulkStore {
                buffer,
                tensor,
                bytes,
                ..
            } => {
                if bytes == 0 || !bytes.is_multiple_of(16) {
                    let verb = if self.op().effects().writes_global() {
                        "stores"
                    } else {
                        "copies"
                    };
                    self.err(format!(
                        "`{m}` {verb} a positive multiple of 16 bytes, found {bytes}"
                    ));
                }
                self.copy_target(buffer, tensor, bytes);
            }
            Op::If { then, els } => {
                let res = self.tys_of(results);
                self.region_io(
                    then,
                    "the then-region of this `if`",
                    &[],
                    &res,
                    " (the `if` results)",
                );
                self.region_io(
                    els,
                    "the else-region of this `if`",
                    &[],
                    &res,
                    " (the `if` results)",
                );
            }
            Op::For { body } => self.for_loop(body, a, results),
            Op::While { cond, body } => self.while_loop(cond, body, a, results),
            _ => {}
        }
    }

    /// Immediates and region shapes checked whatever the operands.
    fn immediates(&mut self) {
        let m = self.m();
        match *self.op() {
            Op::Special(Special::BlockIdx(n) | Special::GridDim(n)) if n > 2 => {
                self.err(format!(
                    "`special` dimension {n} does not exist; allowed: 0 (x), 1 (y), 2 (z)"
                ));
            }
            Op::MbarArriveExpectTx { bytes, .. } if bytes == 0 || bytes > MAX_TX => {
                self.err(format!(
                    "`{m}` expects {bytes} bytes; allowed: 1..={MAX_TX}"
                ));
            }
            Op::SetMaxNReg { regs, .. }
                if !(MIN_REGS..=MAX_REGS).contains(&regs) || !regs.is_multiple_of(8) =>
            {
                self.err(format!(
                    "`{m}` sets {regs} registers per thread; allowed: a multiple of 8 in {MIN_REGS}..={MAX_REGS}"
                ));
            }
            Op::BarSync { id, threads } => {
                if id >= 16 {
                    self.err(format!(
                        "`bar.sync` id {id} does not exist; named barriers are 0..16"
                    ));
                }
                let block = self.cx.k.launch.block;
                if threads == 0 || threads % 32 != 0 || threads > block {
                    self.err(format!(
                        "`bar.sync` counts {threads} threads; allowed: a positive multiple of 32 up to the block ({block})"
                    ));
                }
            }
            Op::InRole { body, .. } => {
                self.region_io(body, "the body of this `role`", &[], &[], "")
            }
            _ => {}
        }
    }

    fn result_is(&mut self, r: Value, want: Type) {
        if self.ty(r) != want {
            self.err(format!(
                "`{}` produces {want}, found {}",
                self.m(),
                self.v(r)
            ));
        }
    }

    /// An async copy of `bytes` between `b` and `t`: both 16-byte aligned,
    /// no more than the buffer holds.
    fn copy_target(&mut self, b: Buffer, t: Tensor, bytes: u32) {
        let k = self.cx.k;
        let m = self.m();
        let (bd, td) = (&k.buffers[b], &k.tensors[t]);
        if bd.align < 16 {
            self.err(format!(
                "`{m}` needs {} aligned to 16 bytes; it declares align {}",
                self.cx.buffer(b),
                bd.align
            ));
        }
        if td.align < 16 {
            self.err(format!(
                "`{m}` needs {} aligned to 16 bytes; it declares align {}",
                self.cx.tensor(t),
                td.align
            ));
        }
        if bytes > bd.bytes() {
            let msg = if self.op().effects().writes_global() {
                format!(
                    "`{m}` stores {bytes} bytes from {} into {}, but the buffer holds {} bytes",
                    self.cx.buffer(b),
                    self.cx.tensor(t),
                    bd.size()
                )
            } else {
                format!(
                    "`{m}` copies {bytes} bytes from {} into {}, which holds {}",
                    self.cx.tensor(t),
                    self.cx.buffer(b),
                    bd.size()
                )
            };
            self.err(msg);
        }
    }

    /// The values the region's final `yield` passes on (none without a yield).
    fn yields(&self, r: Region) -> Vec<Type> {
        let k = self.cx.k;
        match k.regions[r].insts.last() {
            Some(&y) if k.insts[y].op == Op::Yield => self.tys_of(&k.insts[y].args),
            _ => Vec::new(),
        }
    }

    fn params(&self, r: Region) -> Vec<Type> {
        self.tys_of(&self.cx.k.regions[r].params)
    }

    fn region_io(&mut self, r: Region, what: &str, params: &[Type], yields: &[Type], why: &str) {
        let (p, y) = (self.params(r), self.yields(r));
        if p != params {
            self.err(format!(
                "{what} takes {} but must take {}{why}",
                tys(&p),
                tys(params)
            ));
        }
        if y != yields {
            self.err(format!(
                "{what} yields {} but must yield {}{why}",
                tys(&y),
                tys(yields)
            ));
        }
    }

    /// `lo, hi, step, init.. -> results`: body params `(iv, carried..)`.
    fn for_loop(&mut self, body: Region, a: &[Value], results: &[Value]) {
        if a.len() < 3 {
            return self.err(format!(
                "`for` takes lo, hi, step and the initial carried values, found {} operands",
                a.len()
            ));
        }
        let (lo, hi, step) = (self.ty(a[0]), self.ty(a[1]), self.ty(a[2]));
        if !int_scalar(lo) || hi != lo || step != lo {
            self.err(format!(
                "`for` bounds must have one integer scalar type, found lo {}, hi {}, step {}",
                self.v(a[0]),
                self.v(a[1]),
                self.v(a[2])
            ));
        }
        let carried = self.tys_of(&a[3..]);
        let res = self.tys_of(results);
        if res != carried {
            self.err(format!(
                "this `for` carries {} but has results {}",
                tys(&carried),
                tys(&res)
            ));
        }
        let mut params = vec![lo];
        params.extend(&carried);
        self.region_io(body, "the body of this `for`", &params, &carried, "");
    }

    /// `init.. -> results`: `cond` yields `bool, carried..`, `body` the carried.
    fn while_loop(&mut self, cond: Region, body: Region, a: &[Value], results: &[Value]) {
        let carried = self.tys_of(a);
        let res = self.tys_of(results);
        if res != carried {
            self.err(format!(
                "this `while` carries {} but has results {}",
                tys(&carried),
                tys(&res)
            ));
        }
        let mut cy = vec![Type::BOOL];
        cy.extend(&carried);
        self.region_io(
            cond,
            "the condition of this `while`",
            &carried,
            &cy,
            " (the condition, then the carried values)",
        );
        self.region_io(
            body,
            "the body of this `while`",
            &carried,
            &carried,
            " (the carried values)",
        );
    }
}
