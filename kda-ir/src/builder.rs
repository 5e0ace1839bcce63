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
use crate::op::{BinOp, CachePolicy, CmpOp, Op, ShflMode, Special, UnOp};
use crate::types::{Scalar, Type};

/// Builds a [`Kernel`]: declarations, then instructions appended at the cursor
/// (the innermost region being built; the closures of [`Builder::if_else`],
/// [`Builder::for_`], [`Builder::while_`] and [`Builder::in_role`] build the
/// nested ones). It checks nothing: [`crate::verifier::verify`] and
/// [`crate::pipeline::compile`] do.
///
/// ```
/// use kda_ir::{Access, Builder, CachePolicy, Dim, LaunchDecl, Provenance, Scalar, Type};
///
/// // y[i] = x[i] * x[i], one element per thread of a 64-thread block.
/// let launch = LaunchDecl {
///     block: 64,
///     cluster: 1,
///     min_blocks_per_sm: None,
///     cluster_policy: Default::default(),
/// };
/// let mut b = Builder::new("square", launch);
/// let (n, unit) = ([Dim::Const(64)], [Dim::Const(1)]);
/// let x = b.tensor("x", Scalar::F32, &n, &unit, Provenance::Ready, Access::Read);
/// let y = b.tensor("y", Scalar::F32, &n, &unit, Provenance::Ready, Access::Write);
/// let i = b.thread_idx();
/// let v = b.ld_global(x, &[i], Type::F32, CachePolicy::Normal);
/// let sq = b.mul(v, v);
/// b.st_global(y, &[i], sq, None, CachePolicy::Normal);
/// let k = b.finish();
/// kda_ir::verifier::verify(&k)?;
/// # Ok::<(), kda_ir::verifier::VerifierErrors>(())
/// ```
pub struct Builder {
    k: Kernel,
    cursor: Vec<Region>,
    roles: Vec<Role>,
    ph: Phases,
    loc: Option<Loc>,
    /// Roles whose `setmaxnreg` has been emitted (at their first region).
    budgeted: std::collections::HashSet<Role>,
}

impl Builder {
    /// An empty kernel `name` (its PTX entry's name) with the cursor in its body.
    pub fn new(name: impl Into<String>, launch: LaunchDecl) -> Builder {
        let k = Kernel::new(name, launch);
        let body = k.body;
        Builder {
            k,
            cursor: vec![body],
            roles: vec![],
            ph: Phases::default(),
            loc: None,
            budgeted: Default::default(),
        }
    }

    /// The kernel built so far.
    pub fn kernel(&self) -> &Kernel {
        &self.k
    }

    /// The kernel, as built (unverified).
    pub fn finish(self) -> Kernel {
        self.k
    }

    /// Choose the cluster scheduling policy
    /// ([`LaunchDecl::cluster_policy`](crate::kernel::LaunchDecl::cluster_policy)).
    pub fn set_cluster_policy(&mut self, policy: crate::kernel::ClusterPolicy) {
        self.k.launch.cluster_policy = policy;
    }

    /// Choose the early schedule (see [`crate::kernel::ScheduleHints::early`]).
    pub fn set_early(&mut self, early: bool) {
        self.k.schedule.early = early;
    }

    /// Ask the scheduler to trigger dependent launches at the kernel's entry
    /// ([`ScheduleHints::trigger_at_entry`](crate::kernel::ScheduleHints::trigger_at_entry)).
    pub fn set_trigger_at_entry(&mut self, at_entry: bool) {
        self.k.schedule.trigger_at_entry = at_entry;
    }

    /// Ask the scheduler to sink each releasing `cluster.arrive` past the
    /// consumers of the loads before it
    /// ([`ScheduleHints::late_release`](crate::kernel::ScheduleHints::late_release)).
    pub fn set_late_release(&mut self, late: bool) {
        self.k.schedule.late_release = late;
    }

    /// Give every global access of `t` the L2 evict-first policy, or not
    /// ([`ScheduleHints::evict_first`](crate::kernel::ScheduleHints::evict_first)).
    pub fn set_evict_first(&mut self, t: Tensor, on: bool) {
        set_hinted(&mut self.k.schedule.evict_first, t, on);
    }

    /// Stage `t`'s ready data through shared memory, or not
    /// ([`ScheduleHints::stage_through_shared`](crate::kernel::ScheduleHints::stage_through_shared)).
    pub fn set_stage_through_shared(&mut self, t: Tensor, on: bool) {
        set_hinted(&mut self.k.schedule.stage_through_shared, t, on);
    }

    /// Store `t`'s tiles through shared memory, or not
    /// ([`ScheduleHints::store_through_shared`](crate::kernel::ScheduleHints::store_through_shared)).
    pub fn set_store_through_shared(&mut self, t: Tensor, on: bool) {
        set_hinted(&mut self.k.schedule.store_through_shared, t, on);
    }

    /// Issue row chains `wave` at a time
    /// ([`ScheduleHints::wave`](crate::kernel::ScheduleHints::wave)).
    pub fn set_wave(&mut self, wave: u32) {
        self.k.schedule.wave = Some(wave);
    }

    /// Start every warp at `regs` registers per thread (`.maxnreg`; see
    /// [`Kernel::max_regs`]). Set it before the first region of a role with a
    /// register budget: that region's `setmaxnreg` moves from it.
    pub fn set_max_regs(&mut self, regs: u32) {
        self.k.max_regs = Some(regs);
    }

    /// Give `role` a per-thread register budget (see
    /// [`crate::kernel::RoleDecl::regs`]): [`Builder::in_role`] makes its
    /// first region start with the `setmaxnreg` that sets it, from the
    /// kernel's starting count ([`Kernel::max_regs`], which becomes
    /// [`crate::kernel::default_max_regs`] of the launch when none is set).
    pub fn set_regs(&mut self, role: Role, regs: u32) {
        self.k.roles[role].regs = Some(regs);
    }

    /// Attribute the following instructions to `loc` (`None`: the caller's).
    pub fn at(&mut self, loc: Option<Loc>) {
        self.loc = loc;
    }

    /// The role whose code is being built, if any.
    pub fn current_role(&self) -> Option<Role> {
        self.roles.last().copied()
    }

    /// Whether the cursor is inside a runtime loop ([`Builder::for_`],
    /// [`Builder::while_`]): code built here runs any number of times.
    pub fn in_runtime_loop(&self) -> bool {
        !self.ph.loops.is_empty()
    }

    // ---- declarations

    /// Declare a symbolic extent or stride, bound at launch (a `.u64` parameter
    /// after the scalars).
    #[track_caller]
    pub fn sym(&mut self, name: impl Into<String>) -> Sym {
        self.k.syms.push(SymDecl { name: name.into() })
    }

    /// Declare a global tensor: a `.u64` pointer parameter, in declaration order,
    /// with `strides` in elements. Its alignment starts at the dtype's size;
    /// [`Builder::set_align`] promises more.
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

    /// Declare a scalar parameter passed at launch; [`Builder::param`] reads it.
    #[track_caller]
    pub fn scalar(&mut self, name: impl Into<String>, ty: Scalar) -> ScalarParam {
        let loc = self.loc();
        self.k.scalars.push(ScalarDecl {
            name: name.into(),
            ty,
            loc,
        })
    }

    /// Declare a role: threads `first..first + threads` (both multiples of 32);
    /// [`Builder::in_role`] builds its code.
    #[track_caller]
    pub fn role(&mut self, name: impl Into<String>, first: u32, threads: u32) -> Role {
        let loc = self.loc();
        self.k.roles.push(RoleDecl {
            name: name.into(),
            first,
            threads,
            regs: None,
            loc,
        })
    }

    /// Declare a shared buffer of `len` elements, `align`-byte aligned, touched
    /// only inside the `roles`' regions (empty: by every thread). With `guard`, the
    /// buffer is filled through that barrier and read only after waiting on it.
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
            tile: None,
            loc,
        })
    }

    /// Declare an mbarrier whose phase completes on `arrivals` arrivals and
    /// `tx_bytes` transaction bytes (0: none), used only inside the `roles`'
    /// regions (empty: by every thread). [`Builder::mbarrier_init`] initialises it.
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
        let inst = self.k.add_inst(op, args.to_vec(), result_tys, loc);
        self.k.regions[region].insts.push(inst);
        self.k.insts[inst].results.clone()
    }

    #[track_caller]
    fn push1(&mut self, op: Op, args: &[Value], ty: Type) -> Value {
        self.push(op, args, &[ty])[0]
    }

    #[track_caller]
    fn push0(&mut self, op: Op, args: &[Value]) {
        self.push(op, args, &[]);
    }

    /// The type of `v`.
    pub fn ty(&self, v: Value) -> Type {
        self.k.ty(v)
    }

    // ---- constants and indices

    /// `iconst`: the integer or `bool` constant `v` of type `ty`.
    #[track_caller]
    pub fn iconst(&mut self, ty: Type, v: i64) -> Value {
        self.push1(Op::IConst(v), &[], ty)
    }
    /// An `i32` constant.
    #[track_caller]
    pub fn i32(&mut self, v: i32) -> Value {
        self.iconst(Type::I32, v as i64)
    }
    /// A `u32` constant.
    #[track_caller]
    pub fn u32(&mut self, v: u32) -> Value {
        self.iconst(Type::U32, v as i64)
    }
    /// A `bool` constant.
    #[track_caller]
    pub fn bool(&mut self, v: bool) -> Value {
        self.iconst(Type::BOOL, v as i64)
    }
    /// An `f32` constant.
    #[track_caller]
    pub fn f32(&mut self, v: f32) -> Value {
        self.push1(Op::FConst(v as f64), &[], Type::F32)
    }
    /// Read a hardware index register (`u32`).
    #[track_caller]
    pub fn special(&mut self, s: Special) -> Value {
        self.push1(Op::Special(s), &[], Type::U32)
    }
    /// `%tid.x`.
    #[track_caller]
    pub fn thread_idx(&mut self) -> Value {
        self.special(Special::ThreadIdx)
    }
    /// `%ctaid` along axis `dim` (0..3: x, y, z).
    #[track_caller]
    pub fn block_idx(&mut self, dim: u8) -> Value {
        self.special(Special::BlockIdx(dim))
    }
    /// `%cluster_ctarank`.
    #[track_caller]
    pub fn cluster_rank(&mut self) -> Value {
        self.special(Special::ClusterRank)
    }
    /// The value of scalar parameter `s`, of its declared type.
    #[track_caller]
    pub fn param(&mut self, s: ScalarParam) -> Value {
        let ty = self.k.scalars[s].ty.into();
        self.push1(Op::Param(s), &[], ty)
    }

    // ---- arithmetic

    /// `a op b`, of `a`'s type.
    #[track_caller]
    pub fn bin(&mut self, op: BinOp, a: Value, b: Value) -> Value {
        let ty = self.ty(a);
        self.push1(Op::Bin(op), &[a, b], ty)
    }
    /// `a + b`.
    #[track_caller]
    pub fn add(&mut self, a: Value, b: Value) -> Value {
        self.bin(BinOp::Add, a, b)
    }
    /// `a - b`.
    #[track_caller]
    pub fn sub(&mut self, a: Value, b: Value) -> Value {
        self.bin(BinOp::Sub, a, b)
    }
    /// `a * b`.
    #[track_caller]
    pub fn mul(&mut self, a: Value, b: Value) -> Value {
        self.bin(BinOp::Mul, a, b)
    }
    /// `a * b + c` rounded once (`fma.rn`, `.ftz` with `ftz`).
    #[track_caller]
    pub fn fma(&mut self, a: Value, b: Value, c: Value, ftz: bool) -> Value {
        let ty = self.ty(a);
        self.push1(Op::Fma { ftz }, &[a, b, c], ty)
    }
    /// `op a`, of `a`'s type.
    #[track_caller]
    pub fn un(&mut self, op: UnOp, a: Value) -> Value {
        let ty = self.ty(a);
        self.push1(Op::Un(op), &[a], ty)
    }
    /// `a op b`, a `bool`.
    #[track_caller]
    pub fn cmp(&mut self, op: CmpOp, a: Value, b: Value) -> Value {
        self.push1(Op::Cmp(op), &[a, b], Type::BOOL)
    }
    /// `if c { a } else { b }` without a branch.
    #[track_caller]
    pub fn select(&mut self, c: Value, a: Value, b: Value) -> Value {
        let ty = self.ty(a);
        self.push1(Op::Select, &[c, a, b], ty)
    }
    /// Convert `a` to `to` (rounding and saturation as [`Op::Cvt`] says).
    #[track_caller]
    pub fn cvt(&mut self, a: Value, to: Type) -> Value {
        self.push1(Op::Cvt, &[a], to)
    }
    /// Reinterpret `a`'s bits as `to`, of the same byte size.
    #[track_caller]
    pub fn bitcast(&mut self, a: Value, to: Type) -> Value {
        self.push1(Op::Bitcast, &[a], to)
    }
    /// A vector of `elems` (2, 4 or 8 of one scalar type; not empty), lane 0 first.
    #[track_caller]
    pub fn pack(&mut self, elems: &[Value]) -> Value {
        let ty = self.ty(elems[0]).with_lanes(elems.len() as u8);
        self.push1(Op::Pack, elems, ty)
    }
    /// Lane `lane` of vector `v`.
    #[track_caller]
    pub fn extract(&mut self, v: Value, lane: u8) -> Value {
        let ty = self.ty(v).with_lanes(1);
        self.push1(Op::Extract(lane), &[v], ty)
    }

    // ---- memory

    /// Load a `ty` (the tensor's dtype, or a vector of it) from `t` at one element
    /// index per dimension.
    #[track_caller]
    pub fn ld_global(&mut self, t: Tensor, idx: &[Value], ty: Type, policy: CachePolicy) -> Value {
        self.push1(Op::LdGlobal { tensor: t, policy }, idx, ty)
    }
    /// Store `v` into `t` at one element index per dimension; with `pred`, only in
    /// the threads where it holds.
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
    /// `atom.global.add` of `v` (u32 or i32, the tensor's dtype) to the
    /// element of `t` at one index per dimension: the element's old value.
    #[track_caller]
    pub fn atom_add(&mut self, t: Tensor, idx: &[Value], v: Value) -> Value {
        let mut args = idx.to_vec();
        args.push(v);
        let ty = self.ty(v);
        self.push1(Op::AtomAdd { tensor: t }, &args, ty)
    }
    /// Load a `ty` from this CTA's buffer `b` at element `idx`.
    #[track_caller]
    pub fn ld_shared(&mut self, b: Buffer, idx: Value, ty: Type) -> Value {
        self.push1(Op::LdShared { buffer: b }, &[idx], ty)
    }
    /// Store `v` into this CTA's buffer `b` at element `idx`.
    #[track_caller]
    pub fn st_shared(&mut self, b: Buffer, idx: Value, v: Value) {
        self.push0(Op::StShared { buffer: b }, &[idx, v]);
    }

    // ---- warp collectives

    /// `shfl.sync` of the 32-bit `v` across the full warp: from lane `lane ^ mask`
    /// ([`ShflMode::Bfly`], `lane` the mask) or from lane `lane` ([`ShflMode::Idx`]).
    #[track_caller]
    pub fn shfl(&mut self, mode: ShflMode, v: Value, lane: Value) -> Value {
        let ty = self.ty(v);
        self.push1(Op::Shfl(mode), &[v, lane], ty)
    }
    /// `elect.sync`: true in exactly one lane of the warp.
    #[track_caller]
    pub fn elect(&mut self) -> Value {
        self.push1(Op::ElectSync, &[], Type::BOOL)
    }
    /// `mma.sync.m16n8k16` on bf16 fragments (`a: u32x4`, `b: u32x2`) accumulating
    /// into `c: f32x4`; the result is the new accumulator.
    #[track_caller]
    pub fn mma(&mut self, a: Value, b: Value, c: Value) -> Value {
        self.push1(Op::Mma16816, &[a, b, c], Type::vec(Scalar::F32, 4))
    }

    // ---- warpgroup MMA (see `crate::wgmma`)

    /// Declare a shared buffer holding a K-major bf16 wgmma operand tile of
    /// `rows × cols` (K) with `swizzle`, aligned as the swizzle needs.
    #[track_caller]
    pub fn shared_tile(
        &mut self,
        name: impl Into<String>,
        rows: u32,
        cols: u32,
        swizzle: crate::wgmma::Swizzle,
        roles: &[Role],
    ) -> Buffer {
        let b = self.shared(
            name,
            Scalar::BF16,
            rows * cols,
            swizzle.align(),
            roles,
            None,
        );
        self.set_tile(
            b,
            crate::wgmma::MmaTile {
                rows,
                cols,
                swizzle,
            },
        );
        b
    }

    /// Declare that buffer `b` holds a wgmma operand tile (the verifier
    /// checks its element type, size and alignment).
    pub fn set_tile(&mut self, b: Buffer, tile: crate::wgmma::MmaTile) {
        self.k.buffers[b].tile = Some(tile);
    }

    /// The element index (u32) of `(r, k)` in tile buffer `b`: the store
    /// code's side of [`MmaTile::offset`](crate::wgmma::MmaTile::offset),
    /// swizzle included. `r` and `k` are u32.
    #[track_caller]
    pub fn tile_index(&mut self, b: Buffer, r: Value, k: Value) -> Value {
        use crate::wgmma::Swizzle;
        let t = self.k.buffers[b]
            .tile
            .expect("tile_index of a buffer without a tile");
        let c = |s: &mut Builder, x: u32| s.u32(x);
        let (shr, and, shl, xor) = (BinOp::Shr, BinOp::And, BinOp::Shl, BinOp::Xor);
        let bytes = match t.swizzle {
            Swizzle::None => {
                // (r/8)·SBO + (k/8)·128 + (r%8)·16 + (k%8)·2
                let (c3, c7) = (c(self, 3), c(self, 7));
                let r8 = self.bin(shr, r, c3);
                let sbo = c(self, t.sbo());
                let a = self.mul(r8, sbo);
                let k8 = self.bin(shr, k, c3);
                let c128 = c(self, 128);
                let b2 = self.mul(k8, c128);
                let rm = self.bin(and, r, c7);
                let c16 = c(self, 16);
                let b3 = self.mul(rm, c16);
                let km = self.bin(and, k, c7);
                let c2 = c(self, 2);
                let b4 = self.mul(km, c2);
                let s1 = self.add(a, b2);
                let s2 = self.add(b3, b4);
                self.add(s1, s2)
            }
            s => {
                // p·rows·W + r·W + (k%P)·2, then chunk bits ^= bits 7..
                let panel = s.span() / 2;
                let sh = c(self, panel.trailing_zeros());
                let p = self.bin(shr, k, sh);
                let pw = c(self, t.rows * s.span());
                let a = self.mul(p, pw);
                let w = c(self, s.span());
                let b2 = self.mul(r, w);
                let pm = c(self, panel - 1);
                let km = self.bin(and, k, pm);
                let c1 = c(self, 1);
                let b3 = self.bin(shl, km, c1);
                let s1 = self.add(a, b2);
                let logical = self.add(s1, b3);
                let c7 = c(self, 7);
                let hi = self.bin(shr, logical, c7);
                let mask = c(self, (s.span() / 16) - 1);
                let hm = self.bin(and, hi, mask);
                let c4 = c(self, 4);
                let x = self.bin(shl, hm, c4);
                self.bin(xor, logical, x)
            }
        };
        let c1 = c(self, 1);
        self.bin(shr, bytes, c1)
    }

    /// `wgmma.fence`.
    #[track_caller]
    pub fn wgmma_fence(&mut self) {
        self.push0(Op::WgmmaFence, &[]);
    }
    /// `wgmma.commit_group`.
    #[track_caller]
    pub fn wgmma_commit(&mut self) {
        self.push0(Op::WgmmaCommit, &[]);
    }
    /// `wgmma.wait_group n`.
    #[track_caller]
    pub fn wgmma_wait(&mut self, n: u32) {
        self.push0(Op::WgmmaWait(n), &[]);
    }
    /// `wgmma.mma_async m64nNk16`: `D = A·Bᵀ (+ acc)`, A the 64×16 slice of
    /// tile `a` at K column `ka`, B the N×16 slice of tile `b` at `kb`;
    /// `acc` the N/2 f32 accumulators (`None`: overwrite, `scale-d` 0).
    /// Returns the N/2 accumulators (the fragment of [`crate::wgmma::acc_coord`]).
    #[track_caller]
    pub fn wgmma(
        &mut self,
        n: u32,
        a: Buffer,
        ka: Value,
        b: Buffer,
        kb: Value,
        acc: Option<&[Value]>,
    ) -> Vec<Value> {
        let mut args = vec![ka, kb];
        args.extend(acc.unwrap_or(&[]));
        let tys = vec![Type::F32; (n / 2) as usize];
        let op = Op::Wgmma {
            a,
            b,
            n,
            scale_d: acc.is_some(),
        };
        self.push(op, &args, &tys)
    }

    // ---- barriers

    /// `mbarrier.init` with the declared arrival count;
    /// [`Builder::fence_mbarrier_init`] makes it visible to the cluster.
    #[track_caller]
    pub fn mbarrier_init(&mut self, bar: Barrier) {
        self.push0(Op::MbarInit { barrier: bar }, &[]);
    }
    /// One arrival on `bar`.
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
    /// One arrival on `bar` of CTA `cta` (an integer cluster rank) of the cluster.
    #[track_caller]
    pub fn mbarrier_arrive_remote(&mut self, bar: Barrier, cta: Value) {
        self.push0(
            Op::MbarArriveRemote {
                barrier: bar,
                ring: 0,
            },
            &[cta],
        );
    }
    /// [`Builder::mbarrier_arrive_remote`] on element `at` (a runtime `u32`)
    /// of the ring of `ring` barriers from `first`.
    #[track_caller]
    pub fn mbarrier_arrive_remote_at(&mut self, first: Barrier, ring: u32, at: Value, cta: Value) {
        self.push0(
            Op::MbarArriveRemote {
                barrier: first,
                ring,
            },
            &[cta, at],
        );
    }
    /// One arrival on `bar` that also expects `bytes` transaction bytes this phase.
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
    /// [`Builder::mbarrier_arrive_expect_tx`] on element `at` (a runtime `u32`) of
    /// the ring of `ring` barriers from `first`.
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
    /// `fence.mbarrier_init.release.cluster`: make the initialised mbarriers
    /// visible to the cluster before peers arrive on them.
    #[track_caller]
    pub fn fence_mbarrier_init(&mut self) {
        self.push0(Op::FenceMbarInit, &[]);
    }
    /// `fence.proxy.async.shared::cta`: order generic-proxy shared writes before
    /// async-proxy accesses.
    #[track_caller]
    pub fn fence_proxy_async(&mut self) {
        self.push0(Op::FenceProxyAsync, &[]);
    }
    /// `barrier.cluster.arrive` (`.relaxed` with `relaxed`).
    #[track_caller]
    pub fn cluster_arrive(&mut self, relaxed: bool) {
        self.push0(Op::ClusterArrive { relaxed }, &[]);
    }
    /// `barrier.cluster.wait`: until every thread of the cluster has arrived.
    #[track_caller]
    pub fn cluster_wait(&mut self) {
        self.push0(Op::ClusterWait, &[]);
    }
    /// `bar.sync id, threads`: a named barrier among `threads` threads.
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
                ring: 0,
            },
            &[idx, v, cta],
        );
    }
    /// An `st.async` completing its bytes on element `at` of the ring of
    /// `ring` barriers from `first` (of CTA `cta`).
    #[track_caller]
    pub fn st_async_at(
        &mut self,
        buf: Buffer,
        idx: Value,
        v: Value,
        cta: Value,
        (first, ring, at): (Barrier, u32, Value),
    ) {
        self.push0(
            Op::StAsync {
                buffer: buf,
                barrier: first,
                ring,
            },
            &[idx, v, cta, at],
        );
    }
    /// `cp.async.cg` of 16 bytes from `t` at `gidx` (one index per dimension) into
    /// `buf` at element `sidx`; completes with [`Builder::cp_async_commit`] and
    /// [`Builder::cp_async_wait`].
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
    /// `cp.async.commit_group`: close the group of this thread's pending `cp.async`s.
    #[track_caller]
    pub fn cp_async_commit(&mut self) {
        self.push0(Op::CpAsyncCommit, &[]);
    }
    /// `cp.async.wait_group n`: wait until at most `n` committed groups are pending.
    #[track_caller]
    pub fn cp_async_wait(&mut self, n: u32) {
        self.push0(Op::CpAsyncWait(n), &[]);
    }
    /// `cp.async.bulk` of `bytes` (a multiple of 16) from `t` at `gidx` into `buf`
    /// at element `sidx`, completing them as transaction bytes on `bar`.
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

    /// `cp.async.bulk.global.shared::cta.bulk_group` of `bytes` (a multiple
    /// of 16) from `buf` at element `sidx` into `t` at `gidx`, in this
    /// thread's open bulk group; completes with [`Builder::bulk_commit`] and
    /// [`Builder::bulk_wait`].
    #[track_caller]
    pub fn bulk_store(
        &mut self,
        t: Tensor,
        gidx: &[Value],
        buf: Buffer,
        sidx: Value,
        bytes: u32,
        policy: CachePolicy,
    ) {
        let mut args = vec![sidx];
        args.extend_from_slice(gidx);
        self.push0(
            Op::BulkStore {
                buffer: buf,
                tensor: t,
                bytes,
                policy,
            },
            &args,
        );
    }
    /// `cp.async.bulk.commit_group`: close this thread's open bulk group.
    #[track_caller]
    pub fn bulk_commit(&mut self) {
        self.push0(Op::BulkCommit, &[]);
    }
    /// `cp.async.bulk.wait_group[.read] n`: wait until at most `n` of this
    /// thread's committed bulk groups are pending (with `read`: have not
    /// finished reading their shared sources).
    #[track_caller]
    pub fn bulk_wait(&mut self, n: u32, read: bool) {
        self.push0(Op::BulkWait { n, read }, &[]);
    }

    // ---- PDL

    /// `griddepcontrol.wait`: the preceding launch's writes are visible after it.
    #[track_caller]
    pub fn pdl_wait(&mut self) {
        self.push0(Op::GridDepWait, &[]);
    }
    /// `griddepcontrol.launch_dependents`: let the next launch start early.
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

    /// `setmaxnreg.inc regs` (`inc`) or `setmaxnreg.dec regs`: the
    /// executing warpgroup's register count becomes `regs`.
    /// [`Builder::in_role`] emits it for roles with a budget; this is for
    /// hand-built kernels.
    #[track_caller]
    pub fn setmaxnreg(&mut self, inc: bool, regs: u32) {
        self.push0(Op::SetMaxNReg { inc, regs }, &[]);
    }

    /// Code that runs only in `role`'s threads. The first region of a role
    /// with a register budget starts with its `setmaxnreg` (none when the
    /// budget is the starting count), before any of `body`'s code: the whole
    /// warpgroup runs it, converged.
    #[track_caller]
    pub fn in_role(&mut self, role: Role, body: impl FnOnce(&mut Builder)) {
        let (r, _) = self.new_region(&[]);
        self.roles.push(role);
        self.ph.role_depth.push(self.ph.loops.len());
        let bits = self.ph.bits.clone();
        let budget = self.k.roles[role]
            .regs
            .filter(|_| self.budgeted.insert(role));
        let start = budget.map(|_| {
            let l = &self.k.launch;
            *self.k.max_regs.get_or_insert_with(|| {
                crate::kernel::default_max_regs(l.block, l.min_blocks_per_sm)
            })
        });
        let here = self.loc();
        self.fill(r, |b| {
            if let (Some(regs), Some(start)) = (budget, start)
                && regs != start
            {
                let prev = b.loc.replace(here);
                b.setmaxnreg(regs > start, regs);
                b.loc = prev;
            }
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

/// Add `t` to (or remove it from) a hint's tensor list, kept sorted and
/// unique.
fn set_hinted(hinted: &mut Vec<Tensor>, t: Tensor, on: bool) {
    hinted.retain(|&h| h != t);
    if on {
        hinted.push(t);
        hinted.sort();
    }
}
