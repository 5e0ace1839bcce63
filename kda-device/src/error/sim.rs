//! Typed simulator errors with readable reports: deadlocks (every blocked warp
//! with the barrier it waits on and that barrier's state), out-of-bounds and
//! misaligned accesses, transaction-byte overflows and barrier misuse. Every
//! report names the DSL source line of the instruction involved.

use std::fmt;

use kda_ir::Loc;

/// Where an error happened: the instruction's source line, its op and the
/// thread (CTA, warp and, for per-thread errors, lane) that executed it.
#[derive(Clone, Debug, PartialEq)]
pub struct Site {
    /// The DSL source location of the instruction.
    pub loc: Loc,
    /// The op's text name (`ld.global`, `st.async`...).
    pub op: &'static str,
    /// Index of the cluster in the launch (clusters are numbered x-fastest).
    pub cluster: u32,
    /// `%ctaid` of the CTA.
    pub block: [u32; 3],
    /// `%cluster_ctarank` of the CTA.
    pub rank: u32,
    /// Warp index in the CTA.
    pub warp: u32,
    /// Lane, for errors of one thread.
    pub lane: Option<u32>,
}

impl fmt::Display for Site {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "`{}` at {} (CTA {} rank {}, warp {}",
            self.op,
            self.loc,
            fmt_block(self.block),
            self.rank,
            self.warp
        )?;
        if let Some(l) = self.lane {
            write!(f, ", lane {l}, thread {}", self.warp * 32 + l)?;
        }
        f.write_str(")")
    }
}

pub(crate) fn fmt_block(b: [u32; 3]) -> String {
    format!("({},{},{})", b[0], b[1], b[2])
}

/// Memory space of a bad access.
#[derive(Clone, Debug, PartialEq)]
pub enum Space {
    /// A global tensor parameter.
    Global,
    /// A shared buffer of the CTA whose rank is given (DSMEM writes name the peer).
    Shared {
        /// The CTA's rank in the cluster.
        rank: u32,
    },
}

/// An access outside a tensor's shape or a shared buffer.
#[derive(Clone, Debug, PartialEq)]
pub struct OutOfBounds {
    /// Global or shared (and whose).
    pub space: Space,
    /// The tensor or buffer name.
    pub name: String,
    /// The element index (one entry per dimension).
    pub index: Vec<i64>,
    /// The shape (tensor) or length in elements (buffer).
    pub extent: Vec<i64>,
    /// Elements covered by the access along the innermost dimension (vectors, copies).
    pub elems: u64,
    /// Who made the access, and where in the source.
    pub site: Site,
}

impl fmt::Display for OutOfBounds {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let what = match self.space {
            Space::Global => format!("tensor `{}`", self.name),
            Space::Shared { rank } => format!("shared buffer `{}` of CTA rank {rank}", self.name),
        };
        write!(f, "out-of-bounds access to {what}: index {:?}", self.index)?;
        if self.elems > 1 {
            write!(f, " (+{} elements)", self.elems)?;
        }
        write!(f, " outside shape {:?}, by {}", self.extent, self.site)
    }
}

/// An access whose address is not aligned to its size (the GPU faults).
#[derive(Clone, Debug, PartialEq)]
pub struct Misaligned {
    /// Global or shared (and whose).
    pub space: Space,
    /// The tensor or buffer name.
    pub name: String,
    /// Byte offset from the start of the tensor / the CTA's shared memory.
    pub byte_offset: u64,
    /// Required alignment in bytes.
    pub align: u32,
    /// Who made the access, and where in the source.
    pub site: Site,
}

impl fmt::Display for Misaligned {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let what = match self.space {
            Space::Global => format!("tensor `{}`", self.name),
            Space::Shared { rank } => format!("shared buffer `{}` of CTA rank {rank}", self.name),
        };
        write!(
            f,
            "misaligned access to {what}: byte offset {} is not a multiple of {}, by {}",
            self.byte_offset, self.align, self.site
        )
    }
}

/// More transaction bytes reached an mbarrier than its phase expects.
#[derive(Clone, Debug, PartialEq)]
pub struct TxOverflow {
    /// The barrier's name.
    pub barrier: String,
    /// Rank of the CTA that owns the barrier.
    pub rank: u32,
    /// The phase that overflowed.
    pub phase: u32,
    /// Bytes the phase expects (`expect_tx` arms, or the declaration's figure).
    pub expected: u64,
    /// Bytes that arrived (or were sent) for the phase.
    pub arrived: u64,
    /// The send or copy that overflowed it (or, for an overflow found when the
    /// cluster finished, the barrier's declaration).
    pub site: Site,
}

impl fmt::Display for TxOverflow {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "transaction-byte overflow on mbarrier `{}` of CTA rank {}: phase {} expects {} bytes but {} arrive, by {}",
            self.barrier, self.rank, self.phase, self.expected, self.arrived, self.site
        )
    }
}

/// Misuse of an mbarrier, cluster barrier or named barrier found at run time.
#[derive(Clone, Debug, PartialEq)]
pub struct BarrierMisuse {
    /// What is wrong, in words (names the barrier).
    pub msg: String,
    /// Who misused it, and where in the source.
    pub site: Site,
}

impl fmt::Display for BarrierMisuse {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}, by {}", self.msg, self.site)
    }
}

/// What a blocked warp waits for, with the state of that barrier.
#[derive(Clone, Debug, PartialEq)]
pub enum WaitOn {
    /// `mbarrier.wait` on `phase`.
    Mbarrier {
        /// The barrier's declared name.
        name: String,
        /// Its index among the kernel's barriers.
        barrier: u32,
        /// The phase waited for.
        phase: u32,
        /// Whether `mbarrier.init` has run.
        initialized: bool,
        /// Phases completed so far (the barrier is in phase `completed`).
        completed: u32,
        /// Arrivals the current phase needs and has received.
        arrivals_expected: u32,
        /// Arrivals received in the current phase.
        arrivals_done: u32,
        /// Transaction bytes armed by `expect_tx` in the current phase, bytes
        /// arrived, and bytes still pending (armed - arrived).
        tx_expected: u64,
        /// Transaction bytes arrived in the current phase.
        tx_arrived: u64,
        /// Bytes still pending (armed - arrived).
        tx_pending: i64,
    },
    /// `barrier.cluster.wait`.
    Cluster {
        /// The phase of the cluster barrier being waited for.
        phase: u32,
        /// Threads of the cluster that have arrived.
        arrived: u32,
        /// Threads the barrier needs.
        expected: u32,
    },
    /// `bar.sync id, threads`.
    Named {
        /// The barrier id (0..16).
        id: u8,
        /// Threads arrived.
        arrived: u32,
        /// Threads the barrier waits for.
        expected: u32,
    },
    /// `setmaxnreg.inc`: the CTA's register pool holds fewer registers than
    /// the warp needs to grow (what other warps released with `.dec`).
    Registers {
        /// Registers per thread the warp holds.
        holds: u32,
        /// Registers per thread it asks for.
        wants: u32,
        /// Registers in the CTA's pool.
        pool: u64,
    },
}

/// One warp that cannot make progress.
#[derive(Clone, Debug, PartialEq)]
pub struct BlockedWarp {
    /// `%ctaid` of the warp's CTA.
    pub block: [u32; 3],
    /// The CTA's rank in its cluster.
    pub rank: u32,
    /// The warp's index in its CTA.
    pub warp: u32,
    /// Active lanes at the wait.
    pub lanes: u32,
    /// What the warp waits for, with that barrier's state.
    pub wait: WaitOn,
    /// Source line of the wait.
    pub loc: Loc,
    /// The kernel role the wait is in (the innermost `in_role!` around it,
    /// else a role the warp belongs to), if any.
    pub role: Option<String>,
}

impl fmt::Display for BlockedWarp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "CTA {} rank {} warp {}: ",
            fmt_block(self.block),
            self.rank,
            self.warp
        )?;
        match &self.wait {
            WaitOn::Mbarrier {
                name,
                barrier,
                phase,
                initialized,
                completed,
                arrivals_expected,
                arrivals_done,
                tx_expected,
                tx_arrived,
                tx_pending,
            } => {
                write!(
                    f,
                    "mbarrier.wait on `{name}` (bar{barrier}) phase {phase}: "
                )?;
                if !initialized {
                    write!(f, "barrier never initialised")?;
                } else {
                    write!(
                        f,
                        "barrier in phase {completed}, arrivals {arrivals_done}/{arrivals_expected}, \
                         tx bytes {tx_arrived}/{tx_expected} arrived ({tx_pending} pending)"
                    )?;
                }
            }
            WaitOn::Cluster {
                phase,
                arrived,
                expected,
            } => write!(
                f,
                "barrier.cluster.wait (cluster barrier phase {phase}): {arrived}/{expected} threads arrived"
            )?,
            WaitOn::Named {
                id,
                arrived,
                expected,
            } => write!(f, "bar.sync {id}: {arrived}/{expected} threads arrived")?,
            WaitOn::Registers { holds, wants, pool } => write!(
                f,
                "setmaxnreg.inc {wants} (holds {holds} per thread): needs {} registers, the CTA's pool has {pool} (no other warpgroup released them with setmaxnreg.dec)",
                (u64::from(*wants) - u64::from(*holds).min(u64::from(*wants))) * 32
            )?,
        }
        write!(f, " at {}", self.loc)?;
        if let Some(r) = &self.role {
            write!(f, ", in role `{r}`")?;
        }
        Ok(())
    }
}

/// No warp of a cluster can make progress.
#[derive(Clone, Debug, PartialEq)]
pub struct Deadlock {
    /// The kernel's name.
    pub kernel: String,
    /// The cluster's index in the grid.
    pub cluster: u32,
    /// `%ctaid` of each CTA of the cluster, by rank.
    pub ctas: Vec<[u32; 3]>,
    /// Every unfinished warp and what it waits for.
    pub blocked: Vec<BlockedWarp>,
}

impl fmt::Display for Deadlock {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let ctas: Vec<String> = self.ctas.iter().map(|&b| fmt_block(b)).collect();
        writeln!(
            f,
            "deadlock in `{}`, cluster {} (CTAs {}): {} warp(s) blocked, none can make progress",
            self.kernel,
            self.cluster,
            ctas.join(" "),
            self.blocked.len()
        )?;
        for (i, b) in self.blocked.iter().enumerate() {
            if i > 0 {
                writeln!(f)?;
            }
            write!(f, "  {b}")?;
        }
        Ok(())
    }
}

/// How an access touched shared memory, for race reports.
#[derive(Clone, Debug, PartialEq)]
pub enum AccessKind {
    /// A load (`ld.shared`).
    Read,
    /// A plain store (`st.shared`).
    Write,
    /// An asynchronous write (`st.async` into a peer's or one's own shared
    /// memory, `cp.async.bulk`) whose bytes count toward a phase of an
    /// mbarrier: visible to a warp only after it waits for that phase.
    AsyncWrite {
        /// The mbarrier's declared name.
        barrier: String,
        /// Rank of the CTA that owns the mbarrier (and the written memory).
        rank: u32,
        /// The phase the write's transaction bytes count toward.
        phase: u32,
    },
    /// A `cp.async`: visible to its warp after the `cp.async.wait_group`
    /// that completes its commit group.
    CpAsync {
        /// The warp's commit group it belongs to (0: the first).
        group: u32,
    },
    /// A bulk store (`cp.async.bulk.store`) reading its shared source: done
    /// once a `cp.async.bulk.wait_group.read` covering its group has passed.
    BulkRead {
        /// The issuing warp's bulk group (0: the first).
        group: u32,
    },
    /// A bulk store writing its global destination: done once a
    /// `cp.async.bulk.wait_group` covering its group has passed.
    BulkWrite {
        /// The issuing warp's bulk group (0: the first).
        group: u32,
    },
}

impl fmt::Display for AccessKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            AccessKind::Read => f.write_str("read"),
            AccessKind::Write => f.write_str("write"),
            AccessKind::AsyncWrite {
                barrier,
                rank,
                phase,
            } => write!(
                f,
                "asynchronous write completing phase {phase} of mbarrier `{barrier}` of CTA rank {rank}"
            ),
            AccessKind::CpAsync { group } => write!(f, "cp.async write in commit group {group}"),
            AccessKind::BulkRead { group } => {
                write!(f, "bulk store's read of its source in bulk group {group}")
            }
            AccessKind::BulkWrite { group } => {
                write!(f, "bulk store's write in bulk group {group}")
            }
        }
    }
}

/// One side of a race.
#[derive(Clone, Debug, PartialEq)]
pub struct RaceAccess {
    /// What the access did.
    pub kind: AccessKind,
    /// Who made it (CTA, warp; the lane for the access that found the race)
    /// and its source line.
    pub site: Site,
    /// The kernel role the access is in, if any.
    pub role: Option<String>,
}

impl fmt::Display for RaceAccess {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} by {}", self.kind, self.site)?;
        if let Some(r) = &self.role {
            write!(f, " in role `{r}`")?;
        }
        Ok(())
    }
}

/// Which kind of conflict a race is.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum RaceKind {
    /// The earlier access is an asynchronous write that the later warp has
    /// not made visible to itself (no wait on the phase or `cp.async`
    /// group that covers it is ordered before the later access).
    Unwaited,
    /// A write, then a read not ordered after it.
    WriteRead,
    /// A read, then a write not ordered after it.
    ReadWrite,
    /// Two writes, the later not ordered after the earlier.
    WriteWrite,
    /// A bulk store's source is written before a
    /// `cp.async.bulk.wait_group.read` covering the store is ordered before
    /// the write: the store may still be reading the old bytes.
    BulkSource,
}

/// Two accesses to the same shared-memory bytes, by different warps (or an
/// asynchronous write and any warp), at least one a write, with no
/// synchronisation ordering the first before the second.
#[derive(Clone, Debug, PartialEq)]
pub struct SharedRace {
    /// What conflicts with what.
    pub kind: RaceKind,
    /// The shared buffer's declared name.
    pub buffer: String,
    /// Rank of the CTA whose shared memory holds the bytes.
    pub rank: u32,
    /// First byte of the conflicting range, from the start of the buffer.
    pub start: u32,
    /// One past the last byte of the range.
    pub end: u32,
    /// The earlier access (its lane is not recorded).
    pub earlier: RaceAccess,
    /// The later access, which found the race.
    pub later: RaceAccess,
}

impl fmt::Display for SharedRace {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let why = match self.kind {
            RaceKind::Unwaited => {
                "the later warp has not waited for the phase (or cp.async group) that makes the earlier write visible"
            }
            RaceKind::WriteRead => "a read not ordered after the write by any barrier",
            RaceKind::ReadWrite => "a write not ordered after the read by any barrier",
            RaceKind::WriteWrite => "two writes not ordered by any barrier",
            RaceKind::BulkSource => {
                "the source of a bulk store is written before a `cp.async.bulk.wait_group.read` covering the store (the store may still be reading it)"
            }
        };
        write!(
            f,
            "data race on shared buffer `{}` of CTA rank {}, bytes {}..{}: {why}\n  earlier: {}\n  later:   {}",
            self.buffer, self.rank, self.start, self.end, self.earlier, self.later
        )
    }
}

/// A global access of bytes a bulk store of the same kernel is still
/// writing: not ordered after a `cp.async.bulk.wait_group` that covers the
/// store (by the issuing thread, then synchronisation to the accessing one).
#[derive(Clone, Debug, PartialEq)]
pub struct GlobalRace {
    /// The tensor's declared name.
    pub tensor: String,
    /// First byte of the overlap, from the start of the tensor's buffer.
    pub start: u64,
    /// One past its last byte.
    pub end: u64,
    /// The bulk store (its lane is not recorded).
    pub earlier: RaceAccess,
    /// The access that found the race.
    pub later: RaceAccess,
}

impl fmt::Display for GlobalRace {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "data race on tensor `{}`, bytes {}..{}: a bulk store may still be writing them (no `cp.async.bulk.wait_group` covering it is ordered before this access)\n  earlier: {}\n  later:   {}",
            self.tensor, self.start, self.end, self.earlier, self.later
        )
    }
}

/// What was left unfinished on an mbarrier when its CTA exited.
#[derive(Clone, Debug, PartialEq)]
pub enum AtExit {
    /// The current phase still expects transaction bytes: a send or copy
    /// is (or would be) still writing into the exited CTA's shared memory.
    TxIncoming {
        /// The phase the bytes are armed in.
        phase: u32,
        /// Bytes armed by `expect_tx` in the phase.
        expected: u64,
        /// Bytes arrived so far.
        arrived: u64,
    },
    /// A phase that carried transaction bytes completed after the last wait
    /// any warp of the CTA made on the barrier: data was delivered that
    /// nobody waited for (and so nobody may read).
    Unwaited {
        /// The last such phase.
        phase: u32,
    },
}

/// A CTA exited with an mbarrier in an unfinished state.
#[derive(Clone, Debug, PartialEq)]
pub struct BarrierAtExit {
    /// The barrier's declared name.
    pub barrier: String,
    /// Rank of the CTA that owns it.
    pub rank: u32,
    /// What was unfinished.
    pub issue: AtExit,
    /// The exit of the CTA's last warp (its source line is the kernel's end).
    pub site: Site,
    /// The barrier's declaration.
    pub decl: Loc,
}

impl fmt::Display for BarrierAtExit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "CTA rank {} exits with mbarrier `{}` (declared at {}) unfinished: ",
            self.rank, self.barrier, self.decl
        )?;
        match self.issue {
            AtExit::TxIncoming {
                phase,
                expected,
                arrived,
            } => write!(
                f,
                "phase {phase} still has transaction bytes incoming ({arrived} of {expected} arrived)"
            )?,
            AtExit::Unwaited { phase } => write!(
                f,
                "phase {phase} delivered transaction bytes but no warp waited for it"
            )?,
        }
        write!(f, "; last warp exits at {}", self.site)
    }
}

/// Why the simulator stopped.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum SimError {
    #[error("{0}")]
    /// No warp of a cluster can make progress.
    Deadlock(Box<Deadlock>),
    #[error("{0}")]
    /// An access outside a tensor or a shared buffer.
    OutOfBounds(Box<OutOfBounds>),
    #[error("{0}")]
    /// An access not aligned to its size.
    Misaligned(Box<Misaligned>),
    #[error("{0}")]
    /// More transaction bytes than a phase expects.
    TxOverflow(Box<TxOverflow>),
    #[error("{0}")]
    /// A barrier used against its rules.
    Barrier(Box<BarrierMisuse>),
    #[error("{0}")]
    /// Conflicting shared-memory accesses not ordered by synchronisation
    /// (found by the race detector, `SimOptions::race_check`).
    Race(Box<SharedRace>),
    #[error("{0}")]
    /// A global access overlapping a bulk store in flight (found by the race
    /// detector).
    GlobalRace(Box<GlobalRace>),
    #[error("{0}")]
    /// A CTA exited with transactions incoming or delivered data unwaited
    /// (found by the race detector).
    AtExit(Box<BarrierAtExit>),
    /// A `produced` tensor was read before `griddepcontrol.wait` in a PDL launch.
    #[error(
        "tensor `{tensor}` is produced by the preceding launch but is read before the PDL wait, by {site}"
    )]
    ProducedBeforeWait {
        /// The tensor read.
        tensor: String,
        /// Who read it, and where in the source.
        site: Box<Site>,
    },
    /// A DSMEM send or remote arrival names a CTA outside the cluster.
    #[error("{} to CTA rank {rank} of a cluster of {cluster}, by {site}", site.op)]
    BadPeer {
        /// The rank named.
        rank: i64,
        /// CTAs per cluster.
        cluster: u32,
        /// Who sent, and where in the source.
        site: Box<Site>,
    },
    /// The cluster ran more warp-instructions than `SimOptions::max_steps`.
    #[error(
        "cluster {cluster} of `{kernel}` exceeded {limit} warp-instructions (an endless loop?)"
    )]
    StepLimit {
        /// The kernel's name.
        kernel: String,
        /// The cluster's index in the grid.
        cluster: u32,
        /// The step limit.
        limit: u64,
    },
    /// A wgmma rule broken at run time: an accumulator read while its
    /// group may be in flight, an operand slice outside its tile.
    #[error("{msg}, by {site}")]
    Wgmma {
        /// What went wrong.
        msg: String,
        /// Who did it, and where in the source.
        site: Box<Site>,
    },
    /// The kernel uses something the simulator cannot execute.
    #[error("the simulator cannot run `{what}` at {loc}")]
    Unsupported {
        /// The op or feature.
        what: String,
        /// Where the kernel uses it.
        loc: Loc,
    },
}

impl SimError {
    /// The deadlock report, if this is one.
    pub fn as_deadlock(&self) -> Option<&Deadlock> {
        match self {
            SimError::Deadlock(d) => Some(d),
            _ => None,
        }
    }
}
