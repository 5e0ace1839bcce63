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
        }
        write!(f, " at {}", self.loc)
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
    /// A DSMEM send names a CTA outside the cluster.
    #[error("st.async to CTA rank {rank} of a cluster of {cluster}, by {site}")]
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
