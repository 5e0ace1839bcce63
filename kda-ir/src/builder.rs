//! The builder API: declarations, then instructions appended at a cursor.
//!
//! Every instruction method is `#[track_caller]`: the instruction's [`Loc`] is
//! the caller's file and line, so a kernel written against this API (or
//! emitted by `#[cluster_kernel]` with the user's spans) reports the user's
//! source in dumps, PTX comments and errors. [`Builder::at`] overrides it.
//!
//! Mbarrier parity is tracked here: [`Builder::wait`] waits on the next phase
//! the current role has not yet waited for. Outside runtime loops the phase
//! is a trace-time count, and waits inside a runtime `if` do not advance it
//! (the branch may not run): wait on the same barrier in a branch and again
//! after it with [`Builder::wait_phase`]. Inside runtime loops it is
//! loop-carried state (see the `phases` module).

mod phases;

use phases::{Bits, Elem, Phases};

use cranelift_entity::EntityRef;

use crate::entities::{Barrier, Buffer, Region, Role, ScalarParam, Sym, Tensor, Value};
use crate::kernel::{
    Access, BarrierDecl, BufferDecl, Dim, Kernel, LaunchDecl, Provenance, RegionData, RoleDecl,
    ScalarDecl, SymDecl, TensorDecl, ValueData, ValueDef,
};
use crate::loc::Loc;
use crate::op::{BinOp, CachePolicy, CmpOp, InstData, Op, ShflMode, Special, UnOp};
use crate::types::{Scalar, Type};

pub struct Builder {
    k: Kernel,
    cursor: Vec<Region>,
    roles: Vec<Role>,
    ph: Phases,
    loc: Option<Loc>,
}

impl Builder {
    pub fn new(name: impl Into<String>, launch: LaunchDecl) -> Builder {
        let k = Kernel::new(name, launch);
        let body = k.body;
        Builder {
            k,
            cursor: vec![body],
            roles: vec![],
            ph: Phases::default(),
            loc: None,
        }
    }

    /// The kernel built so far.
    pub fn kernel(&self) -> &Kernel {
        &self.k
    }

    pub fn finish(self) -> Kernel {
        self.k
    }

    /// Choose the early schedule (see [`crate::kernel::ScheduleHints::early`]).
    pub fn set_early(&mut self, early: bool) {
        self.k.schedule.early = early;
    }

    /// Attribute the following instructions to `loc` (`None`: the caller's).
    pub fn at(&mut self, loc: Option<Loc>) {
        self.loc = loc;
    }

    /// The role whose code is being built, if any.
    pub fn current_role(&self) -> Option<Role> {
        self.roles.last().copied()
    }

    // ---- declarations

    #[track_caller]
    pub fn sym(&mut self, name: impl Into<String>) -> Sym {
        self.k.syms.push(SymDecl { name: name.into() })
    }

    #[track_caller]
    pub fn tensor(
        &mut self,
        name: impl Into<String>,
        dtype: Scalar,
        shape: &[Dim],
        strides: &[Dim],
        provenance: Provenance,
        access: Access,
    ) -> Tensor {
        let align = dtype.bytes();
        let loc = self.loc();
        self.k.tensors.push(TensorDecl {
            name: name.into(),
            dtype,
            shape: shape.to_vec(),
            strides: strides.to_vec(),
            provenance,
            access,
            align,
            loc,
        })
    }

    /// Promise a byte alignment for a tensor's base and rows (enables vector access).
    pub fn set_align(&mut self, t: Tensor, bytes: u32) {
        self.k.tensors[t].align = bytes;
    }

    #[track_caller]
    pub fn scalar(&mut self, name: impl Into<String>, ty: Scalar) -> ScalarParam {
        let loc = self.loc();
        self.k.scalars.push(ScalarDecl {
            name: name.into(),
            ty,
            loc,
        })
    }

    #[track_caller]
    pub fn role(&mut self, name: impl Into<String>, first: u32, threads: u32) -> Role {
        let loc = self.loc();
        self.k.roles.push(RoleDecl {
            name: name.into(),
            first,
            threads,
            loc,
        })
    }

    #[track_caller]
    pub fn shared(
        &mut self,
        name: impl Into<String>,
        elem: Scalar,
        len: u32,
        align: u32,
        roles: &[Role],
        guard: Option<Barrier>,
    ) -> Buffer {
        let loc = self.loc();
        self.k.buffers.push(BufferDecl {
            name: name.into(),
            elem,
            len,
            align,
            roles: roles.to_vec(),
            guard,
            loc,
        })
    }

    #[track_caller]
    pub fn mbarrier(
        &mut self,
        name: impl Into<String>,
        arrivals: u32,
        tx_bytes: u32,
        roles: &[Role],
    ) -> Barrier {
        let loc = self.loc();
        self.k.barriers.push(BarrierDecl {
            name: name.into(),
            arrivals,
            tx_bytes,
            roles: roles.to_vec(),
            loc,
        })
    }

    // ---- the instruction core

    #[track_caller]
    fn loc(&self) -> Loc {
        match &self.loc {
            Some(l) => l.clone(),
            None => Loc::caller(),
        }
    }

    /// Append an instruction with results of the given types.
    #[track_caller]
    pub fn push(&mut self, op: Op, args: &[Value], result_tys: &[Type]) -> Vec<Value> {
        let region = *self.cursor.last().expect("builder cursor is never empty");
        self.push_in(region, op, args, result_tys)
    }

    /// Append an instruction to `region` (an enclosing region whose next op
    /// is not built yet).
    #[track_caller]
    fn push_in(
        &mut self,
        region: Region,
        op: Op,
        args: &[Value],
        result_tys: &[Type],
    ) -> Vec<Value> {
        let loc = self.loc();
        let inst = self.k.insts.push(InstData {
            op,
            args: args.to_vec(),
            results: vec![],
            loc,
        });
        let results: Vec<Value> = result_tys
            .iter()
            .enumerate()
            .map(|(n, &ty)| {
                self.k.values.push(ValueData {
                    ty,
                    def: ValueDef::Result(inst, n as u32),
                })
            })
            .collect();
        self.k.insts[inst].results = results.clone();
        self.k.regions[region].insts.push(inst);
        results
    }

    #[track_caller]
    fn push1(&mut self, op: Op, args: &[Value], ty: Type) -> Value {
        self.push(op, args, &[ty])[0]
    }

    #[track_caller]
    fn push0(&mut self, op: Op, args: &[Value]) {
        self.push(op, args, &[]);
    }

    pub fn ty(&self, v: Value) -> Type {
        self.k.ty(v)
    }

    // ---- constants and indices

    #[track_caller]
    pub fn iconst(&mut self, ty: Type, v: i64) -> Value {
        self.push1(Op::IConst(v), &[], ty)
    }
    #[track_caller]
    pub fn i32(&mut self, v: i32) -> Value {
        self.iconst(Type::I32, v as i64)
    }
    #[track_caller]
    pub fn u32(&mut self, v: u32) -> Value {
        self.iconst(Type::U32, v as i64)
    }
    #[track_caller]
    pub fn bool(&mut self, v: bool) -> Value {
        self.iconst(Type::BOOL, v as i64)
    }
    #[track_caller]
    pub fn f32(&mut self, v: f32) -> Value {
        self.push1(Op::FConst(v as f64), &[], Type::F32)
    }
    #[track_caller]
    pub fn special(&mut self, s: Special) -> Value {
        self.push1(Op::Special(s), &[], Type::U32)
    }
    #[track_caller]
    pub fn thread_idx(&mut self) -> Value {
        self.special(Special::ThreadIdx)
    }
    #[track_caller]
    pub fn block_idx(&mut self, dim: u8) -> Value {
        self.special(Special::BlockIdx(dim))
    }
    #[track_caller]
    pub fn cluster_rank(&mut self) -> Value {
        self.special(Special::ClusterRank)
    }
    #[track_caller]
    pub fn param(&mut self, s: ScalarParam) -> Value {
        let ty = self.k.scalars[s].ty.into();
        self.push1(Op::Param(s), &[], ty)
    }

    // ---- arithmetic

    #[track_caller]
    pub fn bin(&mut self, op: BinOp, a: Value, b: Value) -> Value {
        let ty = self.ty(a);
        self.push1(Op::Bin(op), &[a, b], ty)
    }
    #[track_caller]
    pub fn add(&mut self, a: Value, b: Value) -> Value {
        self.bin(BinOp::Add, a, b)
    }
    #[track_caller]
    pub fn sub(&mut self, a: Value, b: Value) -> Value {
        self.bin(BinOp::Sub, a, b)
    }
    #[track_caller]
    pub fn mul(&mut self, a: Value, b: Value) -> Value {
        self.bin(BinOp::Mul, a, b)
    }
    #[track_caller]
    pub fn fma(&mut self, a: Value, b: Value, c: Value, ftz: bool) -> Value {
        let ty = self.ty(a);
        self.push1(Op::Fma { ftz }, &[a, b, c], ty)
    }
    #[track_caller]
    pub fn un(&mut self, op: UnOp, a: Value) -> Value {
        let ty = self.ty(a);
        self.push1(Op::Un(op), &[a], ty)
    }
    #[track_caller]
    pub fn cmp(&mut self, op: CmpOp, a: Value, b: Value) -> Value {
        self.push1(Op::Cmp(op), &[a, b], Type::BOOL)
    }
    #[track_caller]
    pub fn select(&mut self, c: Value, a: Value, b: Value) -> Value {
        let ty = self.ty(a);
        self.push1(Op::Select, &[c, a, b], ty)
    }
    #[track_caller]
    pub fn cvt(&mut self, a: Value, to: Type) -> Value {
        self.push1(Op::Cvt, &[a], to)
    }
    #[track_caller]
    pub fn bitcast(&mut self, a: Value, to: Type) -> Value {
        self.push1(Op::Bitcast, &[a], to)
    }
    #[track_caller]
    pub fn pack(&mut self, elems: &[Value]) -> Value {
        let ty = self.ty(elems[0]).with_lanes(elems.len() as u8);
        self.push1(Op::Pack, elems, ty)
    }
    #[track_caller]
    pub fn extract(&mut self, v: Value, lane: u8) -> Value {
        let ty = self.ty(v).with_lanes(1);
        self.push1(Op::Extract(lane), &[v], ty)
    }

    // ---- memory

    #[track_caller]
    pub fn ld_global(&mut self, t: Tensor, idx: &[Value], ty: Type, policy: CachePolicy) -> Value {
        self.push1(Op::LdGlobal { tensor: t, policy }, idx, ty)
    }
    #[track_caller]
    pub fn st_global(
        &mut self,
        t: Tensor,
        idx: &[Value],
        v: Value,
        pred: Option<Value>,
        policy: CachePolicy,
    ) {
        let mut args = idx.to_vec();
        args.push(v);
        args.extend(pred);
        self.push0(
            Op::StGlobal {
                tensor: t,
                policy,
                predicated: pred.is_some(),
            },
            &args,
        );
    }
    #[track_caller]
    pub fn ld_shared(&mut self, b: Buffer, idx: Value, ty: Type) -> Value {
        self.push1(Op::LdShared { buffer: b }, &[idx], ty)
    }
    #[track_caller]
    pub fn st_shared(&mut self, b: Buffer, idx: Value, v: Value) {
        self.push0(Op::StShared { buffer: b }, &[idx, v]);
    }

    // ---- warp collectives

    #[track_caller]
    pub fn shfl(&mut self, mode: ShflMode, v: Value, lane: Value) -> Value {
        let ty = self.ty(v);
        self.push1(Op::Shfl(mode), &[v, lane], ty)
    }
    #[track_caller]
    pub fn elect(&mut self) -> Value {
        self.push1(Op::ElectSync, &[], Type::BOOL)
    }
    #[track_caller]
    pub fn mma(&mut self, a: Value, b: Value, c: Value) -> Value {
        self.push1(Op::Mma16816, &[a, b, c], Type::vec(Scalar::F32, 4))
    }

    // ---- barriers

    #[track_caller]
    pub fn mbarrier_init(&mut self, bar: Barrier) {
        self.push0(Op::MbarInit { barrier: bar }, &[]);
    }
    #[track_caller]
    pub fn mbarrier_arrive(&mut self, bar: Barrier) {
        self.push0(
            Op::MbarArrive {
                barrier: bar,
                ring: 0,
            },
            &[],
        );
    }
    /// One arrival on element `at` of the ring of `ring` barriers from `first`.
    #[track_caller]
    pub fn mbarrier_arrive_at(&mut self, first: Barrier, ring: u32, at: Value) {
        self.push0(
            Op::MbarArrive {
                barrier: first,
                ring,
            },
            &[at],
        );
    }
    #[track_caller]
    pub fn mbarrier_arrive_expect_tx(&mut self, bar: Barrier, bytes: u32) {
        self.push0(
            Op::MbarArriveExpectTx {
                barrier: bar,
                bytes,
                ring: 0,
            },
            &[],
        );
    }
    #[track_caller]
    pub fn mbarrier_arrive_expect_tx_at(
        &mut self,
        first: Barrier,
        ring: u32,
        at: Value,
        bytes: u32,
    ) {
        self.push0(
            Op::MbarArriveExpectTx {
                barrier: first,
                bytes,
                ring,
            },
            &[at],
        );
    }
    /// Wait for the next phase of `bar` this role has not waited for yet.
    #[track_caller]
    pub fn wait(&mut self, bar: Barrier) {
        let role = self.current_role();
        let (first, n) = self.group(bar);
        let key = (first, role);
        if self.dynamic(key) {
            let k = (bar.index() - first.index()) as u32;
            return self.wait_bits(key, n, Elem::Const(k));
        }
        let phase = self.ph.counts.entry((bar, role)).or_insert(0);
        let p = *phase;
        *phase += 1;
        self.push0(
            Op::MbarWait {
                barrier: bar,
                phase: p,
            },
            &[],
        );
    }
    /// Wait for the next phase of element `at` (a runtime u32) of the ring
    /// of `ring` barriers from `first`: the phase bits of the whole ring are
    /// runtime state from here on.
    #[track_caller]
    pub fn wait_at(&mut self, first: Barrier, ring: u32, at: Value) {
        if !self.ph.groups.contains_key(&first) {
            self.declare_ring(first, ring);
        }
        let key = (first, self.current_role());
        self.wait_bits(key, ring, Elem::Runtime(at));
    }
    /// Wait for an explicit phase of `bar`.
    #[track_caller]
    pub fn wait_phase(&mut self, bar: Barrier, phase: u32) {
        self.push0(
            Op::MbarWait {
                barrier: bar,
                phase,
            },
            &[],
        );
    }
    /// `bar.warp.sync` of the whole warp (`__syncwarp()`).
    #[track_caller]
    pub fn warp_sync(&mut self) {
        self.push0(Op::WarpSync, &[]);
    }
    #[track_caller]
    pub fn fence_mbarrier_init(&mut self) {
        self.push0(Op::FenceMbarInit, &[]);
    }
    #[track_caller]
    pub fn fence_proxy_async(&mut self) {
        self.push0(Op::FenceProxyAsync, &[]);
    }
    #[track_caller]
    pub fn cluster_arrive(&mut self, relaxed: bool) {
        self.push0(Op::ClusterArrive { relaxed }, &[]);
    }
    #[track_caller]
    pub fn cluster_wait(&mut self) {
        self.push0(Op::ClusterWait, &[]);
    }
    #[track_caller]
    pub fn bar_sync(&mut self, id: u8, threads: u32) {
        self.push0(Op::BarSync { id, threads }, &[]);
    }

    // ---- DSMEM and async copies

    /// `st.async` `v` into `buf[idx]` of cluster CTA `cta`, completing its `bar`.
    #[track_caller]
    pub fn st_async(&mut self, buf: Buffer, idx: Value, v: Value, cta: Value, bar: Barrier) {
        self.push0(
            Op::StAsync {
                buffer: buf,
                barrier: bar,
            },
            &[idx, v, cta],
        );
    }
    #[track_caller]
    pub fn cp_async(&mut self, buf: Buffer, sidx: Value, t: Tensor, gidx: &[Value]) {
        let mut args = vec![sidx];
        args.extend_from_slice(gidx);
        self.push0(
            Op::CpAsync {
                buffer: buf,
                tensor: t,
            },
            &args,
        );
    }
    #[track_caller]
    pub fn cp_async_commit(&mut self) {
        self.push0(Op::CpAsyncCommit, &[]);
    }
    #[track_caller]
    pub fn cp_async_wait(&mut self, n: u32) {
        self.push0(Op::CpAsyncWait(n), &[]);
    }
    #[track_caller]
    pub fn bulk_copy(
        &mut self,
        buf: Buffer,
        sidx: Value,
        t: Tensor,
        gidx: &[Value],
        bytes: u32,
        bar: Barrier,
        policy: CachePolicy,
    ) {
        let mut args = vec![sidx];
        args.extend_from_slice(gidx);
        self.push0(
            Op::BulkCopy {
                buffer: buf,
                tensor: t,
                barrier: bar,
                bytes,
                policy,
                ring: 0,
            },
            &args,
        );
    }
    /// A bulk copy completing on element `at` of the ring of `ring` barriers from `first`.
    #[track_caller]
    pub fn bulk_copy_at(
        &mut self,
        buf: Buffer,
        sidx: Value,
        t: Tensor,
        gidx: &[Value],
        bytes: u32,
        (first, ring, at): (Barrier, u32, Value),
        policy: CachePolicy,
    ) {
        let mut args = vec![sidx];
        args.extend_from_slice(gidx);
        args.push(at);
        self.push0(
            Op::BulkCopy {
                buffer: buf,
                tensor: t,
                barrier: first,
                bytes,
                policy,
                ring,
            },
            &args,
        );
    }

    // ---- PDL

    #[track_caller]
    pub fn pdl_wait(&mut self) {
        self.push0(Op::GridDepWait, &[]);
    }
    #[track_caller]
    pub fn pdl_launch_dependents(&mut self) {
        self.push0(Op::GridDepLaunch, &[]);
    }

    // ---- structure

    fn new_region(&mut self, param_tys: &[Type]) -> (Region, Vec<Value>) {
        let r = self.k.regions.push(RegionData::default());
        let params: Vec<Value> = param_tys
            .iter()
            .enumerate()
            .map(|(n, &ty)| {
                self.k.values.push(ValueData {
                    ty,
                    def: ValueDef::Param(r, n as u32),
                })
            })
            .collect();
        self.k.regions[r].params = params.clone();
        (r, params)
    }

    #[track_caller]
    fn fill(&mut self, r: Region, f: impl FnOnce(&mut Builder) -> Vec<Value>) -> Vec<Value> {
        self.cursor.push(r);
        let ys = f(self);
        self.push0(Op::Yield, &ys);
        self.cursor.pop();
        ys
    }

    /// `if cond { then }` with no results.
    #[track_caller]
    pub fn if_(&mut self, cond: Value, then: impl FnOnce(&mut Builder)) {
        self.if_else(
            cond,
            |b| {
                then(b);
                vec![]
            },
            |_| vec![],
        );
    }

    /// `if cond { then } else { els }`, both yielding values of the same types.
    #[track_caller]
    pub fn if_else(
        &mut self,
        cond: Value,
        then: impl FnOnce(&mut Builder) -> Vec<Value>,
        els: impl FnOnce(&mut Builder) -> Vec<Value>,
    ) -> Vec<Value> {
        let (rt, _) = self.new_region(&[]);
        let (re, _) = self.new_region(&[]);
        // Waits inside a runtime branch do not advance a trace-time phase:
        // the branch may not run. A barrier waited on in a branch and again
        // later needs `wait_phase`. Runtime phase bits a branch changes are
        // yielded by both branches instead.
        let counts = self.ph.counts.clone();
        let bits = self.ph.bits.clone();
        let ys = self.fill(rt, then);
        let bits_then = std::mem::replace(&mut self.ph.bits, bits.clone());
        self.ph.counts = counts.clone();
        self.fill(re, els);
        let bits_else = std::mem::replace(&mut self.ph.bits, bits.clone());
        self.ph.counts = counts;
        let d = self.ph.loops.len();
        let mut keys = Builder::branch_changes(&bits, &bits_then, d);
        keys.extend(Builder::branch_changes(&bits, &bits_else, d));
        keys.sort_by_key(|&(b, r)| (b.index(), r.map(|r| r.index())));
        keys.dedup();
        let mut tys: Vec<Type> = ys.iter().map(|&v| self.ty(v)).collect();
        let n = tys.len();
        for &key in &keys {
            let before = self.bits_at(key, d);
            for (r, after) in [(rt, &bits_then), (re, &bits_else)] {
                let v = match after.get(&key) {
                    Some(&Bits::Val(v, at)) if at == d => v,
                    _ => before,
                };
                let y = *self.k.regions[r]
                    .insts
                    .last()
                    .expect("a built region ends in a yield");
                self.k.insts[y].args.push(v);
            }
            tys.push(Type::U32);
        }
        let rs = self.push(Op::If { then: rt, els: re }, &[cond], &tys);
        for (&key, &r) in keys.iter().zip(&rs[n..]) {
            self.ph.bits.insert(key, Bits::Val(r, d));
        }
        rs[..n].to_vec()
    }

    /// `for iv in (lo..hi).step_by(step)` carrying `inits`; `body` gets the
    /// induction variable and the carried values and yields the next ones.
    #[track_caller]
    pub fn for_(
        &mut self,
        lo: Value,
        hi: Value,
        step: Value,
        inits: &[Value],
        body: impl FnOnce(&mut Builder, Value, &[Value]) -> Vec<Value>,
    ) -> Vec<Value> {
        let mut tys = vec![self.ty(lo)];
        tys.extend(inits.iter().map(|&v| self.ty(v)));
        let (r, params) = self.new_region(&tys);
        self.open_loop(r);
        self.cursor.push(r);
        let mut ys = body(self, params[0], &params[1..]);
        ys.extend(self.loop_yields());
        self.push0(Op::Yield, &ys);
        self.cursor.pop();
        let carried = self.close_loop();
        let mut args = vec![lo, hi, step];
        args.extend_from_slice(inits);
        args.extend(carried.iter().map(|c| c.init));
        let n = tys.len() - 1;
        tys.extend(carried.iter().map(|_| Type::U32));
        let rs = self.push(Op::For { body: r }, &args, &tys[1..]);
        self.loop_results(&carried, &rs[n..]);
        rs[..n].to_vec()
    }

    /// `while cond(carried) { carried = body(carried) }`.
    #[track_caller]
    pub fn while_(
        &mut self,
        inits: &[Value],
        cond: impl FnOnce(&mut Builder, &[Value]) -> Value,
        body: impl FnOnce(&mut Builder, &[Value]) -> Vec<Value>,
    ) -> Vec<Value> {
        let mut tys: Vec<Type> = inits.iter().map(|&v| self.ty(v)).collect();
        let n = tys.len();
        let (rc, pc) = self.new_region(&tys);
        self.open_loop(rc);
        self.cursor.push(rc);
        let c = cond(self, &pc);
        let mut ys = vec![c];
        ys.extend_from_slice(&pc);
        ys.extend(self.loop_yields());
        self.push0(Op::Yield, &ys);
        self.cursor.pop();
        let (rb, pb) = self.new_region(&tys);
        self.loop_region(rb);
        self.cursor.push(rb);
        let mut ys = body(self, &pb);
        ys.extend(self.loop_yields());
        self.push0(Op::Yield, &ys);
        self.cursor.pop();
        let carried = self.close_loop();
        let mut args = inits.to_vec();
        args.extend(carried.iter().map(|c| c.init));
        tys.extend(carried.iter().map(|_| Type::U32));
        let rs = self.push(Op::While { cond: rc, body: rb }, &args, &tys);
        self.loop_results(&carried, &rs[n..]);
        rs[..n].to_vec()
    }

    /// Code that runs only in `role`'s threads.
    #[track_caller]
    pub fn in_role(&mut self, role: Role, body: impl FnOnce(&mut Builder)) {
        let (r, _) = self.new_region(&[]);
        self.roles.push(role);
        self.ph.role_depth.push(self.ph.loops.len());
        let bits = self.ph.bits.clone();
        self.fill(r, |b| {
            body(b);
            vec![]
        });
        // Phase bits defined inside the role's region do not outlive it.
        for (key, v) in self.ph.bits.iter_mut() {
            if bits.get(key) != Some(v) {
                *v = Bits::Lost;
            }
        }
        self.ph.role_depth.pop();
        self.roles.pop();
        self.push0(Op::InRole { role, body: r }, &[]);
    }
}
