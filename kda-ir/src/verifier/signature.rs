//! Operand and result counts and types of every op, per the signatures in
//! the op table (`op.rs`), and the types that flow through region
//! parameters and yields.

use super::{Ctx, Layout};
use cranelift_entity::EntityRef;

use crate::entities::{Barrier, Buffer, Inst, Region, Tensor, Value};
use crate::kernel::{Access, Dim};
use crate::op::{BinOp, CmpOp, Op, Special, UnOp};
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

fn is_int(t: Type) -> bool {
    t.elem.is_int()
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

    fn ty(&self, v: Value) -> Type {
        self.cx.k.ty(v)
    }

    fn tys_of(&self, vs: &[Value]) -> Vec<Type> {
        vs.iter().map(|&v| self.ty(v)).collect()
    }

    fn v(&self, v: Value) -> String {
        self.cx.value(v)
    }

    /// Exact operand and result counts; false (after reporting) when wrong.
    fn arity(&mut self, args: usize, results: usize) -> bool {
        let d = &self.cx.k.insts[self.i];
        let na = d.args.len();
        let mut ok = true;
        if na != args {
            let s = if args == 1 { "" } else { "s" };
            self.err(format!(
                "`{}` takes {args} operand{s}, found {na}",
                self.m()
            ));
            ok = false;
        }
        ok &= self.results(results);
        ok
    }

    fn results(&mut self, results: usize) -> bool {
        let nr = self.cx.k.insts[self.i].results.len();
        if nr != results {
            let s = if results == 1 { "" } else { "s" };
            self.err(format!(
                "`{}` has {results} result{s}, found {nr}",
                self.m()
            ));
            return false;
        }
        true
    }

    fn result_is(&mut self, want: Type) {
        let r = self.cx.k.insts[self.i].results[0];
        if self.ty(r) != want {
            self.err(format!(
                "`{}` produces {want}, found {}",
                self.m(),
                self.v(r)
            ));
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

    fn check(&mut self) {
        let k = self.cx.k;
        let d = &k.insts[self.i];
        let a = d.args.clone();
        let m = self.m();
        match &d.op {
            Op::IConst(c) => {
                if self.arity(0, 1) {
                    let t = self.ty(d.results[0]);
                    let range = match (t.lanes, t.elem) {
                        (1, Scalar::Bool) => Some((0, 1)),
                        (1, Scalar::I32) => Some((i32::MIN as i64, i32::MAX as i64)),
                        (1, Scalar::U32) => Some((0, u32::MAX as i64)),
                        (1, Scalar::I64 | Scalar::U64) => Some((i64::MIN, i64::MAX)),
                        _ => None,
                    };
                    match range {
                        None => self.err(format!(
                            "`iconst` produces an integer or bool scalar, found {t}"
                        )),
                        Some((lo, hi)) if *c < lo || *c > hi => self.err(format!(
                            "`iconst {c}` does not fit {t} (allowed: {lo}..={hi})"
                        )),
                        _ => {}
                    }
                }
            }
            Op::FConst(_) => {
                if self.arity(0, 1) {
                    let t = self.ty(d.results[0]);
                    if t != Type::F32 && t != Type::BF16 {
                        self.err(format!("`fconst` produces f32 or bf16, found {t}"));
                    }
                }
            }
            Op::Special(s) => {
                if self.arity(0, 1) {
                    self.result_is(Type::U32);
                }
                if let Special::BlockIdx(n) | Special::GridDim(n) = s
                    && *n > 2
                {
                    self.err(format!(
                        "`special` dimension {n} does not exist; allowed: 0 (x), 1 (y), 2 (z)"
                    ));
                }
            }
            Op::Param(s) => {
                if self.arity(0, 1) {
                    self.result_is(k.scalars[*s].ty.into());
                }
            }
            Op::Bin(b) => {
                if self.arity(2, 1) {
                    self.bin(*b, a[0], a[1], d.results[0]);
                }
            }
            Op::Fma { .. } => {
                if self.arity(3, 1) {
                    for &x in a.iter().chain(&d.results) {
                        if self.ty(x) != Type::F32 {
                            self.err(format!(
                                "`{m}` operands and result must be f32, found {}",
                                self.v(x)
                            ));
                        }
                    }
                }
            }
            Op::Un(u) => {
                if self.arity(1, 1) {
                    self.un(*u, a[0], d.results[0]);
                }
            }
            Op::Cmp(c) => {
                if self.arity(2, 1) {
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
                    self.result_is(Type::BOOL);
                }
            }
            Op::Select => {
                if self.arity(3, 1) {
                    if self.ty(a[0]) != Type::BOOL {
                        self.err(format!(
                            "`select` condition must be bool, found {}",
                            self.v(a[0])
                        ));
                    }
                    let (x, y, r) = (self.ty(a[1]), self.ty(a[2]), self.ty(d.results[0]));
                    if x != y || x != r {
                        self.err(format!(
                            "`select` operands and result must have one type, found {}, {} -> {}",
                            self.v(a[1]),
                            self.v(a[2]),
                            self.v(d.results[0])
                        ));
                    }
                }
            }
            Op::Cvt => {
                if self.arity(1, 1) {
                    let (x, r) = (self.ty(a[0]), self.ty(d.results[0]));
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
            }
            Op::Bitcast => {
                if self.arity(1, 1) {
                    let (x, r) = (self.ty(a[0]), self.ty(d.results[0]));
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
            }
            Op::Pack => {
                if self.results(1) {
                    let n = a.len();
                    if !matches!(n, 2 | 4 | 8) {
                        self.err(format!("`pack` takes 2, 4 or 8 scalars, found {n}"));
                    } else {
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
                            self.result_is(e.with_lanes(n as u8));
                        }
                    }
                }
            }
            Op::Extract(lane) => {
                if self.arity(1, 1) {
                    let x = self.ty(a[0]);
                    if x.is_scalar() {
                        self.err(format!("`{m}` takes a vector, found {}", self.v(a[0])));
                    } else if *lane >= x.lanes {
                        self.err(format!(
                            "`{m}` reads lane {lane} of {}, which has lanes 0..{}",
                            self.v(a[0]),
                            x.lanes
                        ));
                    } else {
                        self.result_is(Type::scalar(x.elem));
                    }
                }
            }
            Op::LdGlobal { tensor, .. } => {
                if self.results(1) {
                    let r = d.results[0];
                    self.global(*tensor, &a, Some(self.ty(r)), Access::Read);
                }
            }
            Op::StGlobal {
                tensor, predicated, ..
            } => {
                self.results(0);
                let rank = k.tensors[*tensor].shape.len();
                let want = rank + 1 + *predicated as usize;
                if a.len() != want {
                    let p = if *predicated {
                        " and a bool predicate"
                    } else {
                        ""
                    };
                    self.err(format!(
                        "`{m}` of {} takes {rank} indices, the value{p} ({want} operands), found {}",
                        self.cx.tensor(*tensor),
                        a.len()
                    ));
                } else {
                    self.global(*tensor, &a[..rank], Some(self.ty(a[rank])), Access::Write);
                    if *predicated && self.ty(a[rank + 1]) != Type::BOOL {
                        self.err(format!(
                            "`{m}` predicate must be bool, found {}",
                            self.v(a[rank + 1])
                        ));
                    }
                }
            }
            Op::AtomAdd { tensor } => {
                if self.results(1) {
                    let rank = k.tensors[*tensor].shape.len();
                    let t = self.ty(d.results[0]);
                    if a.len() != rank + 1 {
                        self.err(format!(
                            "`{m}` of {} takes one index per dimension ({rank}) and the addend: {} operands, found {}",
                            self.cx.tensor(*tensor),
                            rank + 1,
                            a.len()
                        ));
                    } else {
                        if t != Type::scalar(Scalar::U32) && t != Type::scalar(Scalar::I32) {
                            self.err(format!("`{m}` adds to a u32 or i32 element, found {t}"));
                        }
                        if self.ty(a[rank]) != t {
                            self.err(format!(
                                "`{m}` addend must be {t} (the result's type), found {}",
                                self.v(a[rank])
                            ));
                        }
                        // Reads and writes the element.
                        self.global(*tensor, &a[..rank], Some(t), Access::ReadWrite);
                    }
                }
            }
            Op::LdShared { buffer } => {
                if self.arity(1, 1) {
                    self.index(a[0]);
                    self.shared(*buffer, self.ty(d.results[0]));
                }
            }
            Op::StShared { buffer } => {
                if self.arity(2, 0) {
                    self.index(a[0]);
                    self.shared(*buffer, self.ty(a[1]));
                }
            }
            Op::Shfl(_) => {
                if self.arity(2, 1) {
                    let x = self.ty(a[0]);
                    if x.bytes() != 4 || x.elem == Scalar::Bool {
                        self.err(format!(
                            "`{m}` moves 32-bit values (f32, i32, u32, bf16x2), found {}",
                            self.v(a[0])
                        ));
                    }
                    if !int_scalar(self.ty(a[1])) {
                        self.err(format!(
                            "`{m}` lane or mask must be an integer scalar, found {}",
                            self.v(a[1])
                        ));
                    }
                    if self.ty(d.results[0]) != x {
                        self.err(format!(
                            "`{m}` produces its value's type {x}, found {}",
                            self.v(d.results[0])
                        ));
                    }
                }
            }
            Op::ElectSync => {
                if self.arity(0, 1) {
                    self.result_is(Type::BOOL);
                }
            }
            Op::Mma16816 => {
                if self.arity(3, 1) {
                    let want = [
                        Type::vec(Scalar::U32, 4),
                        Type::vec(Scalar::U32, 2),
                        Type::vec(Scalar::F32, 4),
                    ];
                    for (n, (&x, w)) in a.iter().zip(want).enumerate() {
                        if self.ty(x) != w {
                            let name = ["a", "b", "c"][n];
                            self.err(format!(
                                "`{m}` operand {name} must be {w}, found {}",
                                self.v(x)
                            ));
                        }
                    }
                    self.result_is(Type::vec(Scalar::F32, 4));
                }
            }
            Op::MbarArriveExpectTx {
                bytes,
                barrier,
                ring,
            } => {
                if self.arity((*ring > 0) as usize, 0) {
                    self.ring(*barrier, *ring, a.last().copied());
                }
                if *bytes == 0 || *bytes > MAX_TX {
                    self.err(format!(
                        "`{m}` expects {bytes} bytes; allowed: 1..={MAX_TX}"
                    ));
                }
            }
            Op::SetMaxNReg { regs, .. } => {
                self.arity(0, 0);
                if !(MIN_REGS..=MAX_REGS).contains(regs) || !regs.is_multiple_of(8) {
                    self.err(format!(
                        "`{m}` sets {regs} registers per thread; allowed: a multiple of 8 in {MIN_REGS}..={MAX_REGS}"
                    ));
                }
            }
            Op::BarSync { id, threads } => {
                self.arity(0, 0);
                if *id >= 16 {
                    self.err(format!(
                        "`bar.sync` id {id} does not exist; named barriers are 0..16"
                    ));
                }
                let block = k.launch.block;
                if *threads == 0 || threads % 32 != 0 || *threads > block {
                    self.err(format!(
                        "`bar.sync` counts {threads} threads; allowed: a positive multiple of 32 up to the block ({block})"
                    ));
                }
            }
            Op::StAsync {
                buffer,
                barrier,
                ring,
            } => {
                if self.arity(3 + (*ring > 0) as usize, 0) {
                    if *ring > 0 {
                        self.ring(*barrier, *ring, a.get(3).copied());
                    }
                    self.index(a[0]);
                    let x = self.ty(a[1]);
                    if !matches!(x.bytes(), 4 | 8 | 16) || x.elem == Scalar::Bool {
                        self.err(format!(
                            "`st.async` stores 4, 8 or 16 bytes, found {} ({} bytes)",
                            self.v(a[1]),
                            x.bytes()
                        ));
                    } else {
                        self.shared(*buffer, x);
                    }
                    if !int_scalar(self.ty(a[2])) {
                        self.err(format!(
                            "`st.async` destination cta must be an integer scalar, found {}",
                            self.v(a[2])
                        ));
                    }
                }
            }
            Op::CpAsync { buffer, tensor } => {
                self.results(0);
                match a.split_first() {
                    None => self.err(format!(
                        "`{m}` takes a shared index and one index per tensor dimension, found none"
                    )),
                    Some((&s, g)) => {
                        self.index(s);
                        self.global(*tensor, g, None, Access::Read);
                        self.copy_target(*buffer, *tensor, 16);
                    }
                }
            }
            Op::BulkCopy {
                buffer,
                tensor,
                bytes,
                barrier,
                ring,
                ..
            } => {
                self.results(0);
                let a = if *ring > 0 {
                    self.ring(*barrier, *ring, a.last().copied());
                    &a[..a.len().saturating_sub(1)]
                } else {
                    &a[..]
                };
                self.bulk_operands(&m, a, *buffer, *tensor, *bytes, true);
            }
            Op::BulkStore {
                buffer,
                tensor,
                bytes,
                ..
            } => {
                self.results(0);
                self.bulk_operands(&m, &a, *buffer, *tensor, *bytes, false);
            }
            Op::MbarArrive { barrier, ring } => {
                if self.arity((*ring > 0) as usize, 0) {
                    self.ring(*barrier, *ring, a.last().copied());
                }
            }
            Op::MbarArriveRemote { barrier, ring } => {
                if self.arity(1 + (*ring > 0) as usize, 0) {
                    if !int_scalar(self.ty(a[0])) {
                        self.err(format!(
                            "`{m}` destination cta must be an integer scalar, found {}",
                            self.v(a[0])
                        ));
                    }
                    self.ring(*barrier, *ring, a.get(1).copied());
                }
            }
            Op::MbarWaitParity { barrier, ring } => {
                if self.arity(1 + (*ring > 0) as usize, 0) {
                    if self.ty(a[0]) != Type::U32 {
                        self.err(format!(
                            "`{m}` parity must be a u32, found {}",
                            self.v(a[0])
                        ));
                    }
                    self.ring(*barrier, *ring, a.get(1).copied());
                }
            }
            Op::MbarInit { .. }
            | Op::MbarWait { .. }
            | Op::FenceMbarInit
            | Op::WarpSync
            | Op::FenceProxyAsync
            | Op::ClusterArrive { .. }
            | Op::ClusterWait
            | Op::CpAsyncCommit
            | Op::CpAsyncWait(_)
            | Op::BulkCommit
            | Op::BulkWait { .. }
            | Op::GridDepWait
            | Op::GridDepLaunch => {
                self.arity(0, 0);
            }
            Op::If { then, els } => {
                if self.arity(1, d.results.len()) {
                    if self.ty(a[0]) != Type::BOOL {
                        self.err(format!(
                            "`if` condition must be bool, found {}",
                            self.v(a[0])
                        ));
                    }
                    let res = self.tys_of(&d.results);
                    self.region_io(
                        *then,
                        "the then-region of this `if`",
                        &[],
                        &res,
                        " (the `if` results)",
                    );
                    self.region_io(
                        *els,
                        "the else-region of this `if`",
                        &[],
                        &res,
                        " (the `if` results)",
                    );
                }
            }
            Op::For { body } => {
                if a.len() < 3 {
                    self.err(format!("`for` takes lo, hi, step and the initial carried values, found {} operands", a.len()));
                    return;
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
                let res = self.tys_of(&d.results);
                if res != carried {
                    self.err(format!(
                        "this `for` carries {} but has results {}",
                        tys(&carried),
                        tys(&res)
                    ));
                }
                let mut params = vec![lo];
                params.extend(&carried);
                self.region_io(*body, "the body of this `for`", &params, &carried, "");
            }
            Op::While { cond, body } => {
                let carried = self.tys_of(&a);
                let res = self.tys_of(&d.results);
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
                    *cond,
                    "the condition of this `while`",
                    &carried,
                    &cy,
                    " (the condition, then the carried values)",
                );
                self.region_io(
                    *body,
                    "the body of this `while`",
                    &carried,
                    &carried,
                    " (the carried values)",
                );
            }
            Op::InRole { body, .. } => {
                self.arity(0, 0);
                self.region_io(*body, "the body of this `role`", &[], &[], "");
            }
            Op::Yield => {
                self.results(0);
            }
        }
    }

    fn bin(&mut self, b: BinOp, x: Value, y: Value, r: Value) {
        let (tx, ty, tr) = (self.ty(x), self.ty(y), self.ty(r));
        let m = self.m();
        if tx != ty || tx != tr {
            self.err(format!(
                "`{m}` operands and result must have one type, found {}, {} -> {}",
                self.v(x),
                self.v(y),
                self.v(r)
            ));
            return;
        }
        let e = tx.elem;
        let (ok, allowed) = match b {
            BinOp::Add | BinOp::Sub | BinOp::Mul | BinOp::Div | BinOp::Min | BinOp::Max => {
                (e.is_int() || e.is_float(), "integers or floats")
            }
            BinOp::Rem | BinOp::Shl | BinOp::Shr => (e.is_int(), "integers"),
            BinOp::And | BinOp::Or | BinOp::Xor => {
                (e.is_int() || e == Scalar::Bool, "integers or bool")
            }
        };
        if !ok {
            self.err(format!("`{m}` takes {allowed}, found {}", self.v(x)));
        }
    }

    fn un(&mut self, u: UnOp, x: Value, r: Value) {
        let (tx, tr) = (self.ty(x), self.ty(r));
        let m = self.m();
        if tx != tr {
            self.err(format!(
                "`{m}` produces its operand's type, found {} -> {}",
                self.v(x),
                self.v(r)
            ));
            return;
        }
        let e = tx.elem;
        let (ok, allowed) = match u {
            UnOp::Neg | UnOp::Abs => (e.is_float() || e.is_signed(), "signed integers or floats"),
            UnOp::Not => (e.is_int() || e == Scalar::Bool, "integers or bool"),
            _ => (tx == Type::F32, "f32"),
        };
        if !ok {
            self.err(format!("`{m}` takes {allowed}, found {}", self.v(x)));
        }
    }

    /// A ring operand: `ring` declared barriers from `base` on that any
    /// element may stand for, so they agree in arrivals, bytes and roles;
    /// the index is a u32.
    fn ring(&mut self, base: Barrier, ring: u32, idx: Option<Value>) {
        if ring == 0 {
            return;
        }
        let k = self.cx.k;
        let m = self.m();
        if let Some(v) = idx
            && self.ty(v) != Type::U32
        {
            self.err(format!(
                "`{m}` ring index must be a u32, found {}",
                self.v(v)
            ));
        }
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

    fn index(&mut self, v: Value) {
        if !int_scalar(self.ty(v)) {
            self.err(format!(
                "`{}` index must be an integer scalar, found {}",
                self.m(),
                self.v(v)
            ));
        }
    }

    /// A global access of `ty` (None: a byte copy) at `idx` of `t`, making
    /// the accesses `need` (an `atom.add` reads and writes).
    fn global(&mut self, t: Tensor, idx: &[Value], ty: Option<Type>, need: Access) {
        let k = self.cx.k;
        let d = &k.tensors[t];
        let m = self.m();
        let name = self.cx.tensor(t);
        if idx.len() != d.shape.len() {
            self.err(format!(
                "`{m}` of {name} takes one index per dimension ({}), found {}",
                d.shape.len(),
                idx.len()
            ));
        }
        for &x in idx {
            if !is_int(self.ty(x)) || !self.ty(x).is_scalar() {
                self.err(format!(
                    "`{m}` index must be an integer scalar, found {}",
                    self.v(x)
                ));
            }
        }
        if need.reads() && !d.access.reads() {
            self.err(format!(
                "{name} is write-only; `{m}` needs read or readwrite access"
            ));
        }
        if need.writes() && !d.access.writes() {
            self.err(format!(
                "{name} is read-only; `{m}` needs write or readwrite access"
            ));
        }
        let Some(ty) = ty else { return };
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

    /// A shared access of `ty` to `b`.
    fn shared(&mut self, b: Buffer, ty: Type) {
        let k = self.cx.k;
        let d = &k.buffers[b];
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

    /// The operands of a bulk copy (`load`: global to shared) or bulk store
    /// between buffer `b` and tensor `t`: a shared index, one index per
    /// tensor dimension, a positive multiple of 16 bytes.
    fn bulk_operands(
        &mut self,
        m: &str,
        a: &[Value],
        b: Buffer,
        t: Tensor,
        bytes: u32,
        load: bool,
    ) {
        let Some((&s, g)) = a.split_first() else {
            return self.err(format!(
                "`{m}` takes a shared index and one index per tensor dimension, found none"
            ));
        };
        self.index(s);
        self.global(t, g, None, if load { Access::Read } else { Access::Write });
        if bytes == 0 || !bytes.is_multiple_of(16) {
            let verb = if load { "copies" } else { "stores" };
            self.err(format!(
                "`{m}` {verb} a positive multiple of 16 bytes, found {bytes}"
            ));
        }
        self.copy_target(b, t, bytes);
    }

    /// An async copy of `bytes` into `b` from `t`: both 16-byte aligned.
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
            let msg = if matches!(self.cx.k.insts[self.i].op, Op::BulkStore { .. }) {
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
}
