//! Barrier state: mbarriers (arrival counts, transaction bytes, phases), the
//! cluster barrier and the CTA's named barriers (`bar.sync`).
//!
//! mbarrier semantics (PTX ISA "Parallel Synchronization and Communication
//! Instructions: mbarrier"):
//!
//! * `init(count)` sets the pending arrival count of phase 0 to `count`;
//! * an arrival decrements the pending count; `expect_tx(b)` adds `b` to the
//!   transaction count, and every completed transaction (`st.async`, bulk
//!   copy) subtracts its bytes. Bytes may arrive before they are expected
//!   (the count goes negative);
//! * the phase completes when the pending count is 0 and the transaction count
//!   is 0: the phase number advances and the pending count is re-armed;
//! * `MbarWait { phase }` (`try_wait.parity` with parity `phase & 1`) passes once
//!   phase `phase` has completed.
//!
//! Checks beyond the hardware (which would silently corrupt the next phase):
//! transaction bytes beyond what the phase expects, arrivals beyond the count,
//! one warp instruction whose lanes spill over a phase boundary, bytes sent to
//! an uninitialised barrier, and waiting on a phase the barrier has already
//! lapped (a parity wait would then wait for the wrong phase).

/// One mbarrier of one CTA.
#[derive(Clone, Debug, Default)]
pub(crate) struct Mbar {
    pub init: bool,
    /// Arrivals per phase.
    pub count: u32,
    /// Arrivals still missing in the current phase.
    pub pending: u32,
    /// Transaction bytes pending (expected minus arrived) in the current phase.
    pub tx: i64,
    /// Completed phases.
    pub phase: u32,
    /// Bytes armed by `expect_tx` in the current phase.
    pub expected: u64,
    /// Bytes arrived in the current phase.
    pub delivered: u64,
    /// The last transaction's sender: (pc, rank, warp, lane).
    pub last_sender: Option<(u32, u32, u32, u32)>,
}

/// Why an mbarrier operation is wrong.
pub(crate) enum MbarFault {
    /// More arrivals than the count in one phase.
    Arrivals,
    /// Bytes beyond what the phase can expect: (phase, expected, arrived).
    Tx {
        phase: u32,
        expected: u64,
        arrived: u64,
    },
    /// Bytes sent to a barrier not initialised yet.
    Uninit,
}

impl Mbar {
    pub fn init(&mut self, count: u32) {
        *self = Mbar {
            init: true,
            count,
            pending: count,
            ..Mbar::default()
        };
    }

    /// Complete the phase if nothing is pending; returns whether it did.
    fn try_complete(&mut self) -> bool {
        if self.pending == 0 && self.tx == 0 {
            self.phase += 1;
            self.pending = self.count;
            self.expected = 0;
            self.delivered = 0;
            true
        } else {
            false
        }
    }

    /// One arrival, expecting `tx` more bytes first. Returns whether the phase completed.
    pub fn arrive(&mut self, tx: u32) -> Result<bool, MbarFault> {
        if !self.init {
            return Err(MbarFault::Uninit);
        }
        if self.pending == 0 {
            return Err(MbarFault::Arrivals);
        }
        self.tx += tx as i64;
        self.expected += tx as u64;
        self.pending -= 1;
        Ok(self.try_complete())
    }

    /// `bytes` of transactions complete. `declared` is the barrier's declared
    /// bytes per phase (0: not declared). Returns whether the phase completed.
    pub fn complete_tx(&mut self, bytes: u32, declared: u32) -> Result<bool, MbarFault> {
        if !self.init {
            return Err(MbarFault::Uninit);
        }
        let b = bytes as u64;
        let limit = self.expected.max(declared as u64);
        let all_arrived = self.pending == 0;
        if (all_arrived && b as i64 > self.tx) || (declared > 0 && self.delivered + b > limit) {
            return Err(MbarFault::Tx {
                phase: self.phase,
                expected: limit,
                arrived: self.delivered + b,
            });
        }
        self.tx -= b as i64;
        self.delivered += b;
        Ok(self.try_complete())
    }

    /// Whether phase `p` has completed.
    pub fn passed(&self, p: u32) -> bool {
        self.init && self.phase > p
    }
}

/// The cluster barrier (`barrier.cluster.arrive` / `wait`), counting threads.
/// Exited threads count as arrived, as on the GPU.
#[derive(Clone, Debug, Default)]
pub(crate) struct ClusterBar {
    /// Completed phases.
    pub phase: u32,
    /// Threads arrived in the current phase (not counting exited ones).
    pub arrived: u32,
    /// Threads that have exited.
    pub exited: u32,
    /// Threads of the cluster.
    pub total: u32,
}

impl ClusterBar {
    pub fn try_complete(&mut self) {
        if self.arrived + self.exited >= self.total {
            self.phase += 1;
            self.arrived = 0;
        }
    }
}

/// A named barrier (`bar.sync id, threads`) of a CTA, counting whole warps.
#[derive(Clone, Debug, Default)]
pub(crate) struct Named {
    /// Threads arrived in the current generation.
    pub arrived: u32,
    /// Thread count of the current generation (0: every live thread of the CTA).
    pub expected: u32,
    /// Completed generations.
    pub generation: u32,
}
