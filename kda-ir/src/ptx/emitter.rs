//! The lowering state: virtual registers, labels, the output text, and the
//! dispatch from each IR op to its family's emitter.

use std::fmt::{self, Write};

use cranelift_entity::{EntityRef, SecondaryMap};

use crate::entities::{Barrier, Inst, Region, Sym, Tensor, Value};
use crate::kernel::Kernel;
use crate::loc::Loc;
use crate::op::Op;
use crate::types::{Scalar, Type};

use super::probe::{self, ProbeSite};
use super::{Layout, PtxError, annotate};

/// A register class; one `.reg` declaration each.
#[derive(Copy, Clone, PartialEq, Eq, Debug)]
pub(super) enum Bank {
    Pred,
    B16,
    B32,
    B64,
    F32,
}

impl Bank {
    pub(super) const ALL: [Bank; 5] = [Bank::Pred, Bank::B16, Bank::B32, Bank::B64, Bank::F32];

    fn index(self) -> usize {
        self as usize
    }

    pub(super) fn prefix(self) -> &'static str {
        match self {
            Bank::Pred => "p",
            Bank::B16 => "h",
            Bank::B32 => "r",
            Bank::B64 => "rd",
            Bank::F32 => "f",
        }
    }

    pub(super) fn decl_type(self) -> &'static str {
        match self {
            Bank::Pred => ".pred",
            Bank::B16 => ".b16",
            Bank::B32 => ".b32",
            Bank::B64 => ".b64",
            Bank::F32 => ".f32",
        }
    }

    pub(super) fn of(s: Scalar) -> Bank {
        match s {
            Scalar::Bool => Bank::Pred,
            Scalar::BF16 => Bank::B16,
            Scalar::I32 | Scalar::U32 => Bank::B32,
            Scalar::I64 | Scalar::U64 => Bank::B64,
            Scalar::F32 => Bank::F32,
        }
    }
}

/// One virtual register.
#[derive(Copy, Clone, PartialEq, Eq, Debug)]
pub(super) struct Reg {
    pub bank: Bank,
    pub n: u32,
}

impl fmt::Display for Reg {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "%{}{}", self.bank.prefix(), self.n)
    }
}

/// `{a, b, c}`: a PTX vector operand.
pub(super) fn brace(regs: &[Reg]) -> String {
    let names: Vec<String> = regs.iter().map(|r| r.to_string()).collect();
    format!("{{{}}}", names.join(", "))
}

pub(super) struct Emitter<'k> {
    pub k: &'k Kernel,
    pub layout: Layout,
    body: String,
    counts: [u32; 5],
    regs: SecondaryMap<Value, Vec<Reg>>,
    labels: u32,
    last_loc: Option<Loc>,
    /// Depth of control flow whose condition may differ between the lanes of
    /// a warp (`if`, loops); `.aligned` forms are used only at depth 0.
    pub divergent: u32,
    pub tensor_base: SecondaryMap<Tensor, Option<Reg>>,
    pub sym_reg: SecondaryMap<Sym, Option<Reg>>,
    /// 32-bit shared-window address of the dynamic shared memory.
    pub smem: Option<Reg>,
    /// `%tid.x / 32`, for role dispatch.
    pub warp: Option<Reg>,
    pub tid: Option<Reg>,
    /// The `createpolicy` L2 evict-first policy.
    pub evict_first: Option<Reg>,
    /// Barriers whose bytes arrive as counts: in a one-CTA cluster, a
    /// barrier that only sends (no bulk copy) complete bytes on. See
    /// [`Emitter::sends_arrive`].
    pub counts_bytes: SecondaryMap<Barrier, bool>,
    /// Barriers remote arrivals reach, whose waits acquire at cluster scope.
    /// See [`Emitter::remote_arrived`].
    pub cluster_acquire: SecondaryMap<Barrier, bool>,
    /// CTA timeline probes, when the emission records them.
    pub probes: Option<super::probe::Probes>,
}

impl<'k> Emitter<'k> {
    pub fn new(k: &'k Kernel) -> Emitter<'k> {
        Emitter {
            k,
            layout: Layout::of(k),
            body: String::new(),
            counts: [0; 5],
            regs: SecondaryMap::new(),
            labels: 0,
            last_loc: None,
            divergent: 0,
            tensor_base: SecondaryMap::new(),
            sym_reg: SecondaryMap::new(),
            smem: None,
            warp: None,
            tid: None,
            evict_first: None,
            counts_bytes: Emitter::sends_arrive(k),
            cluster_acquire: Emitter::remote_arrived(k),
            probes: None,
        }
    }

    /// The barriers an `mbarrier.arrive.remote` names (every element of a
    /// ring it names), in a cluster of more than one CTA. The arrival
    /// releases at cluster scope; a wait's default semantics are
    /// `.acquire.cta`, which does not synchronise with a release from
    /// another CTA, so the consumer's reads would not be ordered before the
    /// producer's writes that follow its wait. Waits on these barriers use
    /// `.acquire.cluster`.
    fn remote_arrived(k: &Kernel) -> SecondaryMap<Barrier, bool> {
        let mut remote = SecondaryMap::new();
        if k.launch.cluster == 1 {
            return remote;
        }
        k.walk(|i, _| {
            if let Op::MbarArriveRemote { barrier, ring } = k.insts[i].op {
                for n in 0..ring.max(1) as usize {
                    remote[Barrier::new(barrier.index() + n)] = true;
                }
            }
        });
        remote
    }

    /// In a one-CTA cluster there is no peer to `st.async` to, so a send is a
    /// local `st.shared` followed by an mbarrier operation. For a barrier
    /// whose bytes come only from sends, that operation is a releasing
    /// `mbarrier.arrive` with a count of the send's bytes, the barrier is
    /// initialised with `arrivals + tx_bytes` and its `expect_tx` arms arrive
    /// once: the same phase, completed by the protocol every tool knows
    /// (compute-sanitizer's racecheck does not take `mbarrier.complete_tx`
    /// after a fence as ordering the store before the waiter's reads).
    /// Barriers that bulk copies complete keep their bytes. A ring a send
    /// names at run time is one choice for all its elements: it keeps its
    /// bytes when a bulk copy completes any of them.
    fn sends_arrive(k: &Kernel) -> SecondaryMap<Barrier, bool> {
        let mut by_count = SecondaryMap::new();
        if k.launch.cluster != 1 {
            return by_count;
        }
        for (b, d) in k.barriers.iter() {
            by_count[b] = d.tx_bytes > 0;
        }
        k.walk(|i, _| {
            if let Op::BulkCopy { barrier, ring, .. } = k.insts[i].op {
                for n in 0..ring.max(1) as usize {
                    by_count[Barrier::new(barrier.index() + n)] = false;
                }
            }
        });
        k.walk(|i, _| {
            if let Op::StAsync { barrier, ring, .. } = k.insts[i].op
                && ring > 0
            {
                let elems = (0..ring as usize).map(|n| Barrier::new(barrier.index() + n));
                if elems.clone().any(|e| !by_count[e]) {
                    for e in elems {
                        by_count[e] = false;
                    }
                }
            }
        });
        by_count
    }

    pub fn run(mut self, probes: bool) -> Result<(String, Option<Vec<ProbeSite>>), PtxError> {
        let clocks = probes.then(|| self.probe_clocks());
        self.prologue()?;
        if let Some(clocks) = clocks {
            self.probe_entry(clocks);
        }
        let body = self.k.body;
        self.region(body)?;
        self.probe_exit();
        self.ret();
        let ptx = self.module();
        let sites = self.probes.take().map(|p| p.finish()).transpose()?;
        Ok((ptx, sites))
    }

    /// Registers declared so far, per bank.
    pub fn reg_counts(&self) -> impl Iterator<Item = (Bank, u32)> + '_ {
        Bank::ALL
            .into_iter()
            .map(|b| (b, self.counts[b.index()]))
            .filter(|&(_, n)| n > 0)
    }

    pub fn take_body(&mut self) -> String {
        std::mem::take(&mut self.body)
    }

    // ---- registers

    pub fn new_reg(&mut self, bank: Bank) -> Reg {
        let n = self.counts[bank.index()];
        self.counts[bank.index()] += 1;
        Reg { bank, n }
    }

    pub fn new_regs(&mut self, ty: Type) -> Vec<Reg> {
        (0..ty.lanes)
            .map(|_| self.new_reg(Bank::of(ty.elem)))
            .collect()
    }

    /// Give `v` fresh registers (one per lane) and return them.
    pub fn def(&mut self, v: Value) -> Vec<Reg> {
        let regs = self.new_regs(self.k.ty(v));
        self.regs[v] = regs.clone();
        regs
    }

    /// The single register of a scalar result.
    pub fn def1(&mut self, v: Value) -> Reg {
        self.def(v)[0]
    }

    /// Make `v` live in existing registers (loop results share the carried ones).
    pub fn alias(&mut self, v: Value, regs: Vec<Reg>) {
        self.regs[v] = regs;
    }

    pub fn regs(&self, v: Value) -> Vec<Reg> {
        let r = &self.regs[v];
        assert!(
            !r.is_empty(),
            "{v} used before it is defined (unverified kernel?)"
        );
        r.clone()
    }

    /// The register of a scalar value.
    pub fn reg(&self, v: Value) -> Reg {
        self.regs(v)[0]
    }

    // ---- output

    /// One instruction line.
    pub fn ins(&mut self, text: impl AsRef<str>) {
        let _ = writeln!(self.body, "\t{};", text.as_ref());
    }

    /// One predicated instruction line.
    pub fn ins_if(&mut self, pred: Option<Reg>, text: impl AsRef<str>) {
        match pred {
            Some(p) => {
                let _ = writeln!(self.body, "\t@{p} {};", text.as_ref());
            }
            None => self.ins(text),
        }
    }

    pub fn new_label(&mut self, what: &str) -> String {
        self.labels += 1;
        format!("$L_{what}_{}", self.labels)
    }

    pub fn label(&mut self, l: &str) {
        let _ = writeln!(self.body, "{l}:");
    }

    pub fn comment(&mut self, text: &str) {
        let _ = writeln!(self.body, "\t// {text}");
    }

    /// Annotate what follows with `i`'s DSL location if it changed.
    pub fn at(&mut self, i: Inst) {
        let loc = &self.k.insts[i].loc;
        if self.last_loc.as_ref() != Some(loc) {
            let line = format!("{loc}  {}", annotate::inst_line(self.k, i));
            self.comment(&line);
            self.last_loc = Some(loc.clone());
        }
    }

    /// Forget the last location (the next instruction is annotated again).
    pub fn reset_loc(&mut self) {
        self.last_loc = None;
    }

    pub fn err(&self, i: Inst, msg: impl Into<String>) -> PtxError {
        PtxError {
            loc: self.k.insts[i].loc.clone(),
            msg: msg.into(),
        }
    }

    // ---- dispatch

    /// Lower a region's instructions; returns the values its `yield` passes on.
    pub fn region(&mut self, r: Region) -> Result<Vec<Value>, PtxError> {
        let k = self.k;
        for &i in &k.regions[r].insts {
            if k.insts[i].op == Op::Yield {
                return Ok(k.insts[i].args.clone());
            }
            self.inst(i)?;
        }
        Ok(vec![])
    }

    fn inst(&mut self, i: Inst) -> Result<(), PtxError> {
        self.lower(i)?;
        if probe::waits(&self.k.insts[i].op) {
            self.probe_site(i);
        }
        Ok(())
    }

    fn lower(&mut self, i: Inst) -> Result<(), PtxError> {
        let k = self.k;
        let d = &k.insts[i];
        self.at(i);
        match &d.op {
            Op::IConst(c) => self.iconst(i, *c),
            Op::FConst(c) => self.fconst(i, *c),
            Op::Special(s) => self.special(i, *s),
            Op::Param(s) => self.param(i, *s),
            Op::Bin(b) => self.bin(i, *b),
            Op::Fma { ftz } => self.fma(i, *ftz),
            Op::Un(u) => self.un(i, *u),
            Op::Cmp(c) => self.cmp(i, *c),
            Op::Select => self.select(i),
            Op::Cvt => self.cvt(i),
            Op::Bitcast => self.bitcast(i),
            Op::Pack => self.pack(i),
            Op::Extract(n) => self.extract(i, *n),
            Op::LdGlobal { tensor, policy } => self.ld_global(i, *tensor, *policy),
            Op::StGlobal {
                tensor,
                policy,
                predicated,
            } => self.st_global(i, *tensor, *policy, *predicated),
            Op::AtomAdd { tensor } => self.atom_add(i, *tensor),
            Op::LdShared { buffer } => self.ld_shared(i, *buffer),
            Op::StShared { buffer } => self.st_shared(i, *buffer),
            Op::Shfl(m) => self.shfl(i, *m),
            Op::ElectSync => self.elect(i),
            Op::Mma16816 => self.mma(i),
            Op::WgmmaFence => self.wgmma_fence(),
            Op::WgmmaCommit => self.wgmma_commit(),
            Op::WgmmaWait(n) => self.wgmma_wait(*n),
            Op::Wgmma { .. } => self.wgmma(i),
            Op::MbarInit { barrier } => self.mbar_init(*barrier),
            Op::MbarArrive { barrier, ring } => {
                let at = self.ring_at(i, *ring);
                self.mbar_arrive(*barrier, at, None)
            }
            Op::MbarArriveExpectTx {
                barrier,
                bytes,
                ring,
            } => {
                let at = self.ring_at(i, *ring);
                self.mbar_arrive(*barrier, at, Some(*bytes))
            }
            Op::MbarArriveRemote { barrier, ring } => {
                let at = self.ring_at(i, *ring);
                self.mbar_arrive_remote(i, (*barrier, at))
            }
            Op::MbarWait { barrier, phase } => self.mbar_wait(*barrier, *phase),
            Op::MbarWaitParity { barrier, ring } => {
                let at = self.ring_at(i, *ring);
                let parity = self.reg(d.args[0]);
                self.mbar_wait_parity(*barrier, at, parity)
            }
            Op::FenceMbarInit => self.fence_mbarrier_init(),
            Op::WarpSync => {
                self.ins("bar.warp.sync -1");
                Ok(())
            }
            Op::FenceProxyAsync => self.fence_proxy_async(),
            Op::SetMaxNReg { inc, regs } => {
                let action = if *inc { "inc" } else { "dec" };
                self.ins(format!("setmaxnreg.{action}.sync.aligned.u32 {regs}"));
                Ok(())
            }
            Op::ClusterArrive { relaxed } => self.cluster_arrive(*relaxed),
            Op::ClusterWait => self.cluster_wait(),
            Op::BarSync { id, threads } => self.bar_sync(*id, *threads),
            Op::StAsync {
                buffer,
                barrier,
                ring,
            } => {
                let at = self.ring_at(i, *ring);
                self.st_async(i, *buffer, (*barrier, at))
            }
            Op::CpAsync { buffer, tensor } => self.cp_async(i, *buffer, *tensor),
            Op::CpAsyncCommit => self.cp_async_commit(),
            Op::CpAsyncWait(n) => self.cp_async_wait(*n),
            Op::BulkCopy {
                buffer,
                tensor,
                barrier,
                bytes,
                policy,
                ring,
            } => {
                let at = self.ring_at(i, *ring);
                self.bulk_copy(i, *buffer, *tensor, (*barrier, at), *bytes, *policy)
            }
            Op::BulkStore {
                buffer,
                tensor,
                bytes,
                policy,
            } => self.bulk_store(i, *buffer, *tensor, *bytes, *policy),
            Op::BulkCommit => {
                self.ins("cp.async.bulk.commit_group");
                Ok(())
            }
            Op::BulkWait { n, read } => {
                let read = if *read { ".read" } else { "" };
                self.ins(format!("cp.async.bulk.wait_group{read} {n}"));
                Ok(())
            }
            Op::GridDepWait => self.griddep_wait(),
            Op::GridDepLaunch => self.griddep_launch(),
            Op::If { then, els } => self.if_(i, *then, *els),
            Op::For { body } => self.for_(i, *body),
            Op::While { cond, body } => self.while_(i, *cond, *body),
            Op::InRole { role, body } => self.in_role(i, *role, *body),
            Op::Yield => Err(self.err(i, "`yield` outside the end of a region")),
        }
    }
}
