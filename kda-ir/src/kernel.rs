//! The kernel: its declarations (tensors, scalars, roles, shared buffers,
//! mbarriers), the data-flow graph (values and instructions) and the
//! structured layout (regions holding instruction lists).

use cranelift_entity::PrimaryMap;

use crate::entities::{Barrier, Buffer, Inst, Region, Role, ScalarParam, Sym, Tensor, Value};
use crate::loc::Loc;
use crate::op::InstData;
use crate::types::{Scalar, Type};

/// Whether a global tensor may be read before `griddepcontrol.wait`.
#[derive(Copy, Clone, PartialEq, Eq, Hash, Debug)]
pub enum Provenance {
    /// Written before a graph or non-PDL boundary (weights, slot tables, this
    /// layer's previous state): may be read at any time.
    Ready,
    /// Written by the preceding launch: readable only after the PDL wait.
    Produced,
}

/// How the kernel may touch a tensor.
#[derive(Copy, Clone, PartialEq, Eq, Hash, Debug)]
pub enum Access {
    /// Loads only.
    Read,
    /// Stores only.
    Write,
    /// Loads and stores.
    ReadWrite,
}

impl Access {
    /// Whether loads are allowed.
    pub fn reads(self) -> bool {
        matches!(self, Access::Read | Access::ReadWrite)
    }
    /// Whether stores are allowed.
    pub fn writes(self) -> bool {
        matches!(self, Access::Write | Access::ReadWrite)
    }
}

/// An extent or stride: known now, or bound at launch.
#[derive(Copy, Clone, PartialEq, Eq, Hash, Debug)]
pub enum Dim {
    /// Known when the kernel is built (elements).
    Const(u64),
    /// A launch-time `.u64` parameter.
    Sym(Sym),
}

/// A global tensor parameter: a typed, strided view of device memory.
#[derive(Clone, Debug)]
pub struct TensorDecl {
    /// The DSL parameter name (in the PTX parameter's name, `t0_<name>`, and dumps).
    pub name: String,
    /// The element type.
    pub dtype: Scalar,
    /// Extent of each dimension, outermost first (elements).
    pub shape: Vec<Dim>,
    /// Element strides, one per dimension.
    pub strides: Vec<Dim>,
    /// Whether it may be read before the PDL wait.
    pub provenance: Provenance,
    /// Whether the kernel loads it, stores it or both (the verifier rejects
    /// any other access).
    pub access: Access,
    /// Byte alignment the caller guarantees for the base and for every
    /// innermost row (vector and bulk accesses rely on it).
    pub align: u32,
    /// Where it was declared.
    pub loc: Loc,
}

/// A scalar parameter passed by value at launch.
#[derive(Clone, Debug)]
pub struct ScalarDecl {
    /// The DSL parameter name (in the PTX parameter's name, `s0_<name>`).
    pub name: String,
    /// Its type (not `bool`).
    pub ty: Scalar,
    /// Where it was declared.
    pub loc: Loc,
}

/// A symbolic extent or stride, bound at launch.
#[derive(Clone, Debug)]
pub struct SymDecl {
    /// The name (in the PTX parameter's name, `sym0_<name>`).
    pub name: String,
}

/// A named, warp-aligned thread range `[first, first + threads)`.
#[derive(Clone, Debug)]
pub struct RoleDecl {
    /// The role's name, for dumps and errors.
    pub name: String,
    /// The first thread (`%tid.x`), a multiple of 32.
    pub first: u32,
    /// How many threads, a positive multiple of 32.
    pub threads: u32,
    /// The role's per-thread register budget (`role!(.., regs = N)`), set by
    /// `setmaxnreg` when its threads enter their first region of the role:
    /// 24..=256, a multiple of 8; the role must cover whole warpgroups (128
    /// threads from a multiple of 128). `None`: its threads keep the kernel's
    /// starting count ([`Kernel::max_regs`]).
    pub regs: Option<u32>,
    /// Where it was declared.
    pub loc: Loc,
}

impl RoleDecl {
    /// One past the last thread, saturating: a range past `u32::MAX` lies
    /// outside every block, which the verifier reports.
    pub fn end(&self) -> u32 {
        self.first.saturating_add(self.threads)
    }
    /// Whether `thread` (`%tid.x`) is in the role.
    pub fn contains(&self, thread: u32) -> bool {
        (self.first..self.end()).contains(&thread)
    }
}

/// A shared-memory buffer of the CTA (placed by [`crate::ptx::Layout`]).
#[derive(Clone, Debug)]
pub struct BufferDecl {
    /// The buffer's name, for dumps and errors.
    pub name: String,
    /// The element type (not `bool`).
    pub elem: Scalar,
    /// Number of elements.
    pub len: u32,
    /// Byte alignment (at least 16 for vector access, 128 for bulk copies).
    pub align: u32,
    /// Roles allowed to touch the buffer (empty: every thread).
    pub roles: Vec<Role>,
    /// A buffer filled through this barrier may be read only after a wait on it.
    pub guard: Option<Barrier>,
    /// The wgmma operand tile the buffer holds, when it is one: its shape
    /// and swizzle, from which the compiler builds matrix descriptors.
    pub tile: Option<crate::wgmma::MmaTile>,
    /// Where it was declared.
    pub loc: Loc,
}

impl BufferDecl {
    /// The buffer's size in bytes. Computed in `u64`, where `u32` elements of
    /// at most 16 bytes cannot overflow (a `u32` product wrapped: a 4 GiB
    /// buffer passed the shared-memory budget as 0 bytes).
    pub fn size(&self) -> u64 {
        u64::from(self.elem.bytes()) * u64::from(self.len)
    }

    /// [`size`](Self::size) as a `u32`, saturating at `u32::MAX`. The
    /// verifier rejects any buffer past the 227 KiB budget, so a verified
    /// kernel never saturates; an unverified one gets a size too large for
    /// every check rather than a wrapped small one.
    pub fn bytes(&self) -> u32 {
        u32::try_from(self.size()).unwrap_or(u32::MAX)
    }
}

/// An mbarrier: 8 bytes of shared memory, phases of `arrivals` arrivals and
/// `tx_bytes` transaction bytes.
#[derive(Clone, Debug)]
pub struct BarrierDecl {
    /// The barrier's name, for dumps and errors.
    pub name: String,
    /// Arrivals that complete a phase.
    pub arrivals: u32,
    /// Transaction bytes expected per phase (0 = none).
    pub tx_bytes: u32,
    /// Roles allowed to touch the barrier (empty: every thread).
    pub roles: Vec<Role>,
    /// Where it was declared.
    pub loc: Loc,
}

/// Launch-time shape fixed by the kernel.
#[derive(Clone, Debug)]
pub struct LaunchDecl {
    /// Threads per block (x only).
    pub block: u32,
    /// CTAs per cluster (x only; 1 = no cluster).
    pub cluster: u32,
    /// `.minnctapersm`, if any.
    pub min_blocks_per_sm: Option<u32>,
    /// How the GPU's block scheduler places this kernel's clusters (only for
    /// a cluster of more than one CTA; the verifier rejects anything else).
    pub cluster_policy: ClusterPolicy,
}

/// The cluster scheduling policy preference of a kernel with clusters of
/// more than one CTA (the driver's launch attribute
/// `CU_LAUNCH_ATTRIBUTE_CLUSTER_SCHEDULING_POLICY_PREFERENCE`). PTX has no
/// directive for it: the backend names it in a comment above the entry and
/// the runtime adds it to every launch of the kernel. It changes where and
/// when clusters start, never what a kernel computes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum ClusterPolicy {
    /// The driver's default.
    #[default]
    Default,
    /// Spread a launch's clusters over the GPCs.
    Spread,
    /// Load balancing: start a cluster where its CTAs' slots free up first.
    /// Measured on the H200 (docs/perf.md, issue 15 sixth session): it
    /// halves a cluster of two's refill gap; the step gets faster at some
    /// points and slower at others, so it is a schedule knob.
    LoadBalancing,
}

impl ClusterPolicy {
    /// The name the IR text and the PTX comment use: `default`, `spread`,
    /// `balance`.
    pub fn name(self) -> &'static str {
        match self {
            ClusterPolicy::Default => "default",
            ClusterPolicy::Spread => "spread",
            ClusterPolicy::LoadBalancing => "balance",
        }
    }

    /// `LoadBalancing` where `on` and the kernel has clusters of more than
    /// one CTA, else `Default` (the policy a schedule knob asks for: a no-op
    /// without clusters, not a verifier error).
    pub fn load_balancing_if(on: bool, cluster: u32) -> ClusterPolicy {
        if on && cluster > 1 {
            ClusterPolicy::LoadBalancing
        } else {
            ClusterPolicy::Default
        }
    }

    /// The policy [`ClusterPolicy::name`] names.
    pub fn from_name(name: &str) -> Option<ClusterPolicy> {
        [
            ClusterPolicy::Default,
            ClusterPolicy::Spread,
            ClusterPolicy::LoadBalancing,
        ]
        .into_iter()
        .find(|p| p.name() == name)
    }
}

/// Schedule choices the kernel author (or its configuration) makes and the
/// scheduling passes carry out (see `pipeline`).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ScheduleHints {
    /// Issue ready loads before the PDL wait and sync the cluster late (the
    /// seed's `early >= 1`). Without it, one `pdl.wait` runs at the kernel's
    /// entry and cluster waits stay where the program puts them.
    pub early: bool,
    /// Move the PDL trigger (`pdl.launch_dependents`) to the kernel's entry
    /// (the seed's trigger for a batch of one), wherever the program puts it:
    /// the dependent launch may then start while this one still reads its
    /// inputs. Only a placement choice — the dependent's `pdl.wait` waits for
    /// this launch to complete either way — so the program states the trigger
    /// once, after its last read of a produced tensor. See
    /// `passes::place_pdl_trigger`.
    pub trigger_at_entry: bool,
    /// Move each releasing `cluster.arrive` (not `.relaxed`) forward, within
    /// its region, past loads and the work that consumes them, to just
    /// before the thread's next write, signal or wait (a store, an mbarrier
    /// arrival, a DSMEM send, another cluster op, `bar.sync`, an mbarrier or
    /// cluster wait; see `passes::sink_cluster_release`). The program states
    /// its release where the ordering holds (right after the loads it
    /// orders); ptxas makes the release wait for every load and store of the
    /// thread still in flight (`MEMBAR.ALL.GPU`), so a release stated right
    /// after loads waits for their round trip, while after their values are
    /// consumed nothing is in flight. A later release orders more, never
    /// less. Off, the release stays where the program states it, which is
    /// better when that place overlaps the preceding launch (before the PDL
    /// wait) and the later one does not.
    pub late_release: bool,
    /// Tensors whose global traffic is streamed: every `ld.global`,
    /// `st.global`, `cp.async.bulk` and bulk store of them gets the L2
    /// evict-first policy (`passes::mark_evict_first`), so the program states
    /// its accesses once and the policy is chosen here (the seed's `evict`
    /// on the staged state). In declaration order, each once.
    pub evict_first: Vec<Tensor>,
    /// Tensors whose ready data goes through shared memory (the seed's
    /// staging at `early >= 2`): a tile of one of them (`Tensor::tile` in
    /// the DSL) is one bulk copy into a shared buffer, completing an
    /// mbarrier, read back with `ld.shared` after a wait, instead of loads
    /// straight into registers; its 16-byte `ld.global`s issued before the
    /// role's PDL wait become `cp.async`s into per-thread shared slots, read
    /// back after the wait (`passes::stage_through_shared`). The program
    /// states its reads once; where the data lands is chosen here. In
    /// declaration order, each once.
    pub stage_through_shared: Vec<Tensor>,
    /// Tensors whose stored tiles go out through shared memory: a tile the
    /// program stores (`Tensor::tile_writer` in the DSL, one tile per token)
    /// is written into a ring of two shared stages and leaves as one bulk
    /// store (`cp.async.bulk` shared -> global) per tile, issued by one
    /// thread after a named barrier among the writing role's threads,
    /// instead of each thread's register stores. The program states its
    /// stores once; where they go is chosen here. The trace applies it (no
    /// pass reads it); it is kept here so the dump shows it. In declaration
    /// order, each once.
    pub store_through_shared: Vec<Tensor>,
    /// How many independent row chains are issued together: a program that
    /// states one chain in phases (`kda::dsl::chains`) has the phases of
    /// `wave` chains issued one phase after the other, then those of the
    /// next `wave` (the seed's waves of state-row passes: fewer rows live at
    /// once when the state is staged in shared memory). The trace applies it
    /// as it emits the chains; it is kept here so the dump shows the grouping
    /// (no pass reads it). `None`: every chain in one wave. At least 1.
    pub wave: Option<u32>,
}

impl ScheduleHints {
    /// The hints that name tensors, with their names in the IR header, in
    /// header order.
    pub fn tensor_hints(&self) -> [(&'static str, &Vec<Tensor>); 3] {
        [
            ("evict_first", &self.evict_first),
            ("stage_through_shared", &self.stage_through_shared),
            ("store_through_shared", &self.store_through_shared),
        ]
    }
}

/// Where a value is defined.
#[derive(Clone, Debug)]
pub enum ValueDef {
    /// Result `n` of an instruction.
    Result(Inst, u32),
    /// Parameter `n` of a region.
    Param(Region, u32),
}

/// One SSA value.
#[derive(Clone, Debug)]
pub struct ValueData {
    /// Its type.
    pub ty: Type,
    /// Its one definition.
    pub def: ValueDef,
}

/// A region: parameters bound on entry, then instructions in order; a nested
/// region ends in a `yield`.
#[derive(Clone, Debug, Default)]
pub struct RegionData {
    /// Values bound on entry (a `for`'s `(iv, carried..)`, a `while`'s carried).
    pub params: Vec<Value>,
    /// The instructions, in execution order.
    pub insts: Vec<Inst>,
}

/// A whole kernel.
#[derive(Clone, Debug)]
pub struct Kernel {
    /// The PTX entry's name (lowering requires a PTX identifier).
    pub name: String,
    /// Block, cluster and occupancy the kernel is compiled for.
    pub launch: LaunchDecl,
    /// How the scheduling passes place PDL and cluster waits.
    pub schedule: ScheduleHints,
    /// `.maxnreg`: the per-thread register count every warp starts with
    /// (24..=248, a multiple of 8). Needed by roles with a register budget
    /// ([`RoleDecl::regs`]), whose `setmaxnreg` moves from it; `None`: ptxas
    /// picks the count.
    pub max_regs: Option<u32>,
    /// Global tensor parameters, in parameter order.
    pub tensors: PrimaryMap<Tensor, TensorDecl>,
    /// Scalar parameters, in parameter order (after the tensors).
    pub scalars: PrimaryMap<ScalarParam, ScalarDecl>,
    /// Symbolic extents and strides, in parameter order (after the scalars).
    pub syms: PrimaryMap<Sym, SymDecl>,
    /// Roles (disjoint thread ranges).
    pub roles: PrimaryMap<Role, RoleDecl>,
    /// Shared-memory buffers.
    pub buffers: PrimaryMap<Buffer, BufferDecl>,
    /// Mbarriers (in shared memory after the buffers).
    pub barriers: PrimaryMap<Barrier, BarrierDecl>,
    /// Every SSA value.
    pub values: PrimaryMap<Value, ValueData>,
    /// Every instruction, laid out or not: only those reached from [`Kernel::body`]
    /// run (a pass deletes an instruction by dropping it from its region).
    pub insts: PrimaryMap<Inst, InstData>,
    /// Every region.
    pub regions: PrimaryMap<Region, RegionData>,
    /// The top-level region (no params).
    pub body: Region,
}

impl Kernel {
    /// An empty kernel: no declarations, an empty body.
    pub fn new(name: impl Into<String>, launch: LaunchDecl) -> Kernel {
        let mut regions = PrimaryMap::new();
        let body = regions.push(RegionData::default());
        Kernel {
            name: name.into(),
            launch,
            schedule: ScheduleHints::default(),
            max_regs: None,
            tensors: PrimaryMap::new(),
            scalars: PrimaryMap::new(),
            syms: PrimaryMap::new(),
            roles: PrimaryMap::new(),
            buffers: PrimaryMap::new(),
            barriers: PrimaryMap::new(),
            values: PrimaryMap::new(),
            insts: PrimaryMap::new(),
            regions,
            body,
        }
    }

    /// The type of `v`.
    pub fn ty(&self, v: Value) -> Type {
        self.values[v].ty
    }

    /// A new instruction with one result value per type of `result_tys`,
    /// not yet placed in any region (the caller puts it in one).
    pub fn add_inst(
        &mut self,
        op: crate::op::Op,
        args: Vec<Value>,
        result_tys: &[Type],
        loc: Loc,
    ) -> Inst {
        let inst = self.insts.push(InstData {
            op,
            args,
            results: vec![],
            loc,
        });
        let results = result_tys
            .iter()
            .enumerate()
            .map(|(n, &ty)| {
                self.values.push(ValueData {
                    ty,
                    def: ValueDef::Result(inst, n as u32),
                })
            })
            .collect();
        self.insts[inst].results = results;
        inst
    }

    /// Visit every instruction in layout order (pre-order: an instruction
    /// before the instructions of its regions), with its nesting path.
    pub fn walk(&self, mut f: impl FnMut(Inst, &[Inst])) {
        fn go(k: &Kernel, r: Region, path: &mut Vec<Inst>, f: &mut dyn FnMut(Inst, &[Inst])) {
            for &i in &k.regions[r].insts {
                f(i, path);
                path.push(i);
                for sub in k.insts[i].op.regions() {
                    go(k, sub, path, f);
                }
                path.pop();
            }
        }
        go(self, self.body, &mut Vec::new(), &mut f);
    }

    /// The value of a `Dim` when it is a constant.
    pub fn const_dim(d: Dim) -> Option<u64> {
        match d {
            Dim::Const(c) => Some(c),
            Dim::Sym(_) => None,
        }
    }
}

/// Registers of one CTA's register file on sm_90 (and of the SM's: 64 K 32-bit).
pub const REGISTER_FILE: u32 = 65536;

/// The largest per-thread register count, a multiple of 8, at which
/// `min_blocks` CTAs of `block` threads fit the register file at once (at
/// most 248, at least 24): the starting count a kernel with role register
/// budgets gets when it declares none (what `__launch_bounds__(block,
/// min_blocks)` gives a CUDA kernel). 384 threads: 168.
pub fn default_max_regs(block: u32, min_blocks: Option<u32>) -> u32 {
    let threads = u64::from(block.max(1)) * u64::from(min_blocks.unwrap_or(1).max(1));
    let per = (u64::from(REGISTER_FILE) / threads) / 8 * 8;
    per.clamp(24, 248) as u32
}

impl Kernel {
    /// Bake known strides in as constants: every stride symbol gets its value
    /// from `values` (indexed by symbol, as `bind_syms` returns them), and
    /// symbols no longer used by any tensor are dropped (the rest renumbered).
    /// Specialising on the call's layout removes parameters and address
    /// arithmetic; a launch with other strides is then rejected by the
    /// runtime's binding check instead of computing garbage.
    pub fn specialize_strides(&mut self, values: &[i64]) {
        for t in self.tensors.values_mut() {
            for s in &mut t.strides {
                if let Dim::Sym(sym) = *s
                    && let Some(&v) = values.get(sym.as_u32() as usize)
                {
                    *s = Dim::Const(v as u64);
                }
            }
        }
        let used: std::collections::BTreeSet<Sym> = self
            .tensors
            .values()
            .flat_map(|t| t.shape.iter().chain(&t.strides))
            .filter_map(|d| match *d {
                Dim::Sym(s) => Some(s),
                Dim::Const(_) => None,
            })
            .collect();
        let mut syms = PrimaryMap::new();
        let mut remap = std::collections::HashMap::new();
        for (s, d) in self.syms.iter() {
            if used.contains(&s) {
                remap.insert(s, syms.push(d.clone()));
            }
        }
        for t in self.tensors.values_mut() {
            for d in t.shape.iter_mut().chain(t.strides.iter_mut()) {
                if let Dim::Sym(s) = *d {
                    *d = Dim::Sym(remap[&s]);
                }
            }
        }
        self.syms = syms;
    }
}
