//! The interpreter: runs one warp of a decoded [`Program`] until it blocks,
//! finishes or uses up its instruction budget.
//!
//! SIMT execution: a warp has one pc and an active mask; arithmetic runs over
//! all 32 lanes (results of inactive lanes are never read: every value's slot
//! belongs to it alone while it lives), side effects and yields only in the
//! active lanes. Warp collectives (shuffle, mma) read every lane, as the
//! hardware's full-warp forms do. A blocking op (mbarrier wait, cluster wait,
//! `bar.sync`) that cannot pass leaves the pc on itself and returns
//! [`Stop::Blocked`]; running the warp again retries it.
//!
//! [`run`] is the loop and the dispatch; the ops live with their family:
//!
//! * `arith`: constants, specials, parameters, arithmetic, comparisons,
//!   selects, conversions and packing — pure register computations;
//! * `ldst`: global and shared loads and stores, DSMEM `st.async`,
//!   `cp.async` and bulk copies, with their bounds and alignment checks;
//! * `sync`: mbarriers, the cluster barrier, `bar.sync`, the PDL wait and
//!   the ordering-only ops (fences, commits) that have nothing to do here;
//! * `collective`: the full-warp ops — shuffles, `elect`, `mma.sync`;
//! * `control`: `if` / `for` / `while` / role regions (the mask stack and
//!   the yields' register moves) and `exit`.
//!
//! Each family is one function matching its own ops, inlined into the loop
//! so the interpreter stays a single function as fast as one big match.

mod arith;
pub(crate) mod bulk;
mod collective;
mod control;
mod ldst;
mod sync;
pub(crate) mod wgmma;

use crate::decode::{Ins, Program};
use crate::mbarrier::{ClusterBar, Mbar, Named};
use crate::memory::TensorView;
use crate::race::{Conflict, Prior};
use kda_device::error::sim::{
    AccessKind, BarrierMisuse, RaceAccess, RaceKind, SharedRace, SimError, Site,
};

/// A mask-stack entry: the mask to restore and, for an `if`, the else lanes.
#[derive(Copy, Clone, Debug)]
pub(crate) struct Frame {
    pub saved: u32,
    pub other: u32,
}

/// One warp's state.
pub(crate) struct Warp {
    /// Rank of its CTA in the cluster.
    pub rank: u32,
    /// Warp index in the CTA.
    pub warp: u32,
    pub pc: u32,
    pub active: u32,
    /// Lanes that exist (the last warp of an odd-sized block is partial).
    pub lanes: u32,
    pub stack: Vec<Frame>,
    /// `regs[word * 32 + lane]`.
    pub regs: Vec<u32>,
    pub scratch: Vec<u32>,
    pub done: bool,
    /// A `bar.sync` this warp arrived at: (id, generation).
    pub bar_wait: Option<(u8, u32)>,
    /// Lanes arrived at the cluster barrier and the phase they arrived in.
    pub cl_mask: u32,
    pub cl_phase: u32,
    /// Whether the warp has passed `griddepcontrol.wait`.
    pub pdl_waited: bool,
    /// Bulk groups committed per lane.
    pub bulk_commits: [u32; 32],
    /// Registers per thread it holds: the kernel's `maxnreg` until a
    /// `setmaxnreg` (0 when the kernel declares none).
    pub nreg: u32,
    /// wgmma accumulator slots issued since the last commit, and the
    /// committed groups not yet waited for (oldest first): what
    /// `wgmma.wait_group` retires and `WgUse` checks against.
    pub wg_open: Vec<u32>,
    pub wg_groups: std::collections::VecDeque<Vec<u32>>,
    /// wgmma groups this warp has committed (the next group's number).
    pub wg_committed: u64,
}

impl Warp {
    pub fn new(prog: &Program, rank: u32, warp: u32) -> Warp {
        let lanes = prog.lanes[warp as usize];
        Warp {
            rank,
            warp,
            pc: 0,
            active: lanes,
            lanes,
            stack: Vec::with_capacity(16),
            regs: vec![0; prog.reg_words as usize * 32],
            scratch: vec![0; prog.scratch_words as usize * 32],
            done: false,
            bar_wait: None,
            cl_mask: 0,
            cl_phase: 0,
            pdl_waited: false,
            bulk_commits: [0; 32],
            nreg: prog.kernel.max_regs.unwrap_or(0),
            wg_open: Vec::new(),
            wg_groups: std::collections::VecDeque::new(),
            wg_committed: 0,
        }
    }

    /// Back to the start, registers zeroed (runs are deterministic whatever
    /// the registers last held).
    pub fn reset(&mut self, rank: u32) {
        self.rank = rank;
        self.pc = 0;
        self.active = self.lanes;
        self.stack.clear();
        self.regs.fill(0);
        self.done = false;
        self.bar_wait = None;
        self.cl_mask = 0;
        self.cl_phase = 0;
        self.pdl_waited = false;
        self.bulk_commits = [0; 32];
        self.wg_open.clear();
        self.wg_groups.clear();
        self.wg_committed = 0;
    }
}

/// One CTA's shared state.
pub(crate) struct Cta {
    pub smem: Vec<u32>,
    pub mbar: Vec<Mbar>,
    pub named: [Named; 16],
    pub block: [u32; 3],
    /// Threads that have not exited.
    pub live: u32,
    /// Registers the CTA's warps released with `setmaxnreg.dec` and no
    /// `.inc` has taken yet (the pool starts empty: every warp holds the
    /// starting count).
    pub reg_pool: u64,
}

/// Everything the warps of one cluster share.
pub(crate) struct Cluster<'a> {
    pub ctas: Vec<Cta>,
    pub cbar: ClusterBar,
    pub tensors: &'a [TensorView<'a>],
    pub params: &'a [[u32; 2]],
    pub grid: [u32; 3],
    pub index: u32,
    /// Report reads of produced tensors before the PDL wait.
    pub check_pdl: bool,
    /// The race detector's state (inert unless `race.on`).
    pub race: crate::race::Race,
    /// Bulk stores issued and not yet finished.
    pub bulk: Vec<bulk::Pending>,
    /// Shared bytes wgmmas read whose groups are not yet waited for.
    pub wg_reads: Vec<wgmma::PendingRead>,
}

/// Why [`run`] returned.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub(crate) enum Stop {
    Budget,
    Blocked,
    Done,
}

/// What an op asks of the interpreter loop once it has run.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
enum Next {
    /// Go on with the instruction after it.
    Step,
    /// Go on at the pc the op set.
    Jump,
    /// Could not pass: leave the pc on the op to retry it.
    Block,
    /// The warp exited.
    Exit,
}

#[inline(always)]
fn lanes(regs: &[u32], slot: u32) -> [u32; 32] {
    let b = slot as usize * 32;
    regs[b..b + 32].try_into().expect("32 lanes")
}

#[inline(always)]
fn out(regs: &mut [u32], slot: u32) -> &mut [u32; 32] {
    let b = slot as usize * 32;
    (&mut regs[b..b + 32]).try_into().expect("32 lanes")
}

#[inline(always)]
fn f(x: u32) -> f32 {
    f32::from_bits(x)
}

fn lane_mask(regs: &[u32], slot: u32) -> u32 {
    let x = lanes(regs, slot);
    (0..32).fold(0u32, |m, l| m | ((x[l] != 0) as u32) << l)
}

/// The barrier lane `l` names: `bar`, or element `ring index` of the ring
/// from `bar` (an index past the ring is an error).
fn ring_elem(
    prog: &Program,
    w: &Warp,
    cx: &Cluster<'_>,
    bar: u32,
    ring: Option<crate::decode::Ring>,
    l: usize,
) -> Result<u32, SimError> {
    let Some(r) = ring else {
        return Ok(bar);
    };
    let s = ldst::rd_idx(&w.regs, r.at, l);
    if s < 0 || s >= r.len as i64 {
        let msg = format!(
            "ring index {s} past the {} mbarriers of the ring from `{}`",
            r.len,
            bar_name(&prog.kernel, bar)
        );
        return Err(misuse(prog, w, cx, Some(l as u32), msg));
    }
    Ok(bar + s as u32)
}

fn bar_name(k: &kda_ir::Kernel, bar: u32) -> &str {
    &k.barriers[kda_ir::Barrier::from_u32(bar)].name
}

/// Where an error happened: the op at the warp's pc, in `lane` if one.
fn site(prog: &Program, w: &Warp, cx: &Cluster<'_>, lane: Option<u32>) -> Site {
    let pc = w.pc as usize;
    Site {
        loc: prog.loc_of(pc).clone(),
        op: prog.op_name(pc),
        cluster: cx.index,
        block: cx.ctas[w.rank as usize].block,
        rank: w.rank,
        warp: w.warp,
        lane,
    }
}

#[cold]
fn misuse(prog: &Program, w: &Warp, cx: &Cluster<'_>, lane: Option<u32>, msg: String) -> SimError {
    SimError::Barrier(Box::new(BarrierMisuse {
        msg,
        site: site(prog, w, cx, lane),
    }))
}

/// The race a check of the access at `w`'s pc (`later`, by lane `lane`) found.
#[cold]
fn race_error(
    prog: &Program,
    w: &Warp,
    cx: &Cluster<'_>,
    c: Conflict,
    lane: u32,
    later: AccessKind,
) -> SimError {
    let k = &prog.kernel;
    let lay = &prog.layout;
    let (buf, base) = (0..lay.buffers.len())
        .find(|&i| (lay.buffers[i]..lay.buffers[i] + lay.sizes[i]).contains(&c.start))
        .map(|i| {
            (
                k.buffers[kda_ir::Buffer::from_u32(i as u32)].name.clone(),
                lay.buffers[i],
            )
        })
        .unwrap_or_else(|| ("?".to_string(), 0));
    let (er, ew) = cx.race.split(c.warp);
    let earlier_kind = match c.prior {
        Prior::Read => AccessKind::Read,
        Prior::Write => AccessKind::Write,
        Prior::Async { rank, bar, phase } => AccessKind::AsyncWrite {
            barrier: bar_name(k, bar).to_string(),
            rank,
            phase,
        },
        Prior::CpAsync { group } => AccessKind::CpAsync { group },
        Prior::BulkRead { group } => AccessKind::BulkRead { group },
    };
    let kind = match (&earlier_kind, &later) {
        (AccessKind::AsyncWrite { .. } | AccessKind::CpAsync { .. }, _) => RaceKind::Unwaited,
        (AccessKind::BulkRead { .. }, _) => RaceKind::BulkSource,
        (AccessKind::Read, _) => RaceKind::ReadWrite,
        (_, AccessKind::Read) => RaceKind::WriteRead,
        _ => RaceKind::WriteWrite,
    };
    let pc = c.pc as usize;
    SimError::Race(Box::new(SharedRace {
        kind,
        buffer: buf,
        rank: c.rank,
        start: c.start - base,
        end: c.end - base,
        earlier: earlier_access(prog, cx, pc, er, ew, earlier_kind),
        later: later_access(prog, w, cx, lane, later),
    }))
}

/// The earlier access of a race: warp `ew` of CTA rank `er` at `pc` (no
/// lane: the detector keeps clocks per warp).
fn earlier_access(
    prog: &Program,
    cx: &Cluster<'_>,
    pc: usize,
    er: u32,
    ew: u32,
    kind: AccessKind,
) -> RaceAccess {
    RaceAccess {
        kind,
        site: Site {
            loc: prog.loc_of(pc).clone(),
            op: prog.op_name(pc),
            cluster: cx.index,
            block: cx.ctas[er as usize].block,
            rank: er,
            warp: ew,
            lane: None,
        },
        role: prog.role_name(pc, ew),
    }
}

/// The later access of a race: `lane` of warp `w`, now.
fn later_access(
    prog: &Program,
    w: &Warp,
    cx: &Cluster<'_>,
    lane: u32,
    kind: AccessKind,
) -> RaceAccess {
    RaceAccess {
        kind,
        site: site(prog, w, cx, Some(lane)),
        role: prog.role_name(w.pc as usize, w.warp),
    }
}

/// Run `w` for at most `budget` instructions. Returns the number executed
/// (a blocked wait does not count) and why it stopped.
pub(crate) fn run(
    prog: &Program,
    w: &mut Warp,
    cx: &mut Cluster<'_>,
    budget: u64,
) -> Result<(u64, Stop), SimError> {
    let mut executed = 0u64;
    loop {
        if executed >= budget {
            return Ok((executed, Stop::Budget));
        }
        let ins = &prog.code[w.pc as usize];
        let next = match ins {
            Ins::Const { .. }
            | Ins::Special { .. }
            | Ins::Param { .. }
            | Ins::Bin { .. }
            | Ins::Fma { .. }
            | Ins::Un { .. }
            | Ins::Cmp { .. }
            | Ins::Select { .. }
            | Ins::Cvt { .. }
            | Ins::Copy { .. }
            | Ins::Pack { .. }
            | Ins::PackWords { .. }
            | Ins::Extract { .. } => {
                arith::exec(ins, w, cx);
                Next::Step
            }
            Ins::LdGlobal { .. }
            | Ins::StGlobal { .. }
            | Ins::AtomAdd { .. }
            | Ins::LdShared { .. }
            | Ins::StShared { .. }
            | Ins::StAsync { .. }
            | Ins::CpAsync { .. }
            | Ins::Bulk { .. } => {
                ldst::exec(prog, ins, w, cx)?;
                Next::Step
            }
            Ins::BulkStore { .. } | Ins::BulkCommit | Ins::BulkWait { .. } => {
                bulk::exec(prog, ins, w, cx)?;
                Next::Step
            }
            Ins::Wgmma(_) | Ins::WgCommit | Ins::WgWait { .. } | Ins::WgUse { .. } => {
                wgmma::exec(prog, ins, w, cx)?;
                Next::Step
            }
            Ins::Shfl { .. } | Ins::Elect { .. } | Ins::Mma { .. } => {
                collective::exec(ins, w);
                Next::Step
            }
            Ins::MbarInit { .. }
            | Ins::MbarArrive { .. }
            | Ins::MbarWait { .. }
            | Ins::MbarWaitParity { .. }
            | Ins::Nop
            | Ins::CpCommit
            | Ins::CpWait { .. }
            | Ins::PdlWait
            | Ins::ClusterArrive
            | Ins::ClusterWait
            | Ins::BarSync { .. }
            | Ins::SetMaxNReg { .. } => sync::exec(prog, ins, w, cx)?,
            Ins::IfBegin { .. }
            | Ins::Else { .. }
            | Ins::Move { .. }
            | Ins::PopMask
            | Ins::ForInit { .. }
            | Ins::ForHead { .. }
            | Ins::ForNext { .. }
            | Ins::ForExit { .. }
            | Ins::WhileInit { .. }
            | Ins::WhileCond { .. }
            | Ins::WhileNext { .. }
            | Ins::RoleBegin { .. }
            | Ins::Exit => control::exec(ins, w, cx),
        };
        match next {
            Next::Step => w.pc += 1,
            Next::Jump => {}
            Next::Block => return Ok((executed, Stop::Blocked)),
            Next::Exit => return Ok((executed + 1, Stop::Done)),
        }
        executed += 1;
    }
}
