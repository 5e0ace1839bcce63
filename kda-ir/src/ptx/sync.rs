//! Barriers, fences and programmatic dependent launch: `mbarrier.*`,
//! `fence.*`, `barrier.cluster.*`, `bar.sync`, `griddepcontrol.*`.
//!
//! Cluster barriers and `bar.sync` use their `.aligned` forms (all lanes of
//! the warp execute the same instruction) only outside data-dependent
//! control flow: roles are warp-aligned, so a role body alone keeps warps
//! converged, but an `if` or a loop may not.

use crate::entities::{Barrier, Inst};

use super::PtxError;
use super::emitter::{Bank, Emitter, Reg};
use super::layout::MBARRIER_BYTES;

impl Emitter<'_> {
    /// The address of `b`, or with `at`, of element `at` of the ring
    /// starting at `b` (its barriers are consecutive 8-byte words).
    pub(super) fn barrier_addr_at(&mut self, b: Barrier, at: Option<Reg>) -> String {
        let smem = self
            .smem
            .expect("a kernel with mbarriers has a shared window");
        let off = self.layout.barriers[b];
        match at {
            None => format!("[{smem}+{off}]"),
            Some(ix) => {
                let a = self.new_reg(Bank::B32);
                self.ins(format!("mad.lo.u32 {a}, {ix}, {MBARRIER_BYTES}, {smem}"));
                format!("[{a}+{off}]")
            }
        }
    }

    fn barrier_addr(&mut self, b: Barrier) -> String {
        self.barrier_addr_at(b, None)
    }

    /// The ring index register of instruction `i` (its last operand), when
    /// its barrier is an element of a ring.
    pub(super) fn ring_at(&mut self, i: Inst, ring: u32) -> Option<Reg> {
        if ring == 0 {
            return None;
        }
        let d = &self.k.insts[i];
        let v = *d
            .args
            .last()
            .expect("the verifier checked the ring operand");
        let r = self.reg(v);
        Some(self.narrow32(r))
    }

    fn aligned(&self) -> &'static str {
        if self.divergent == 0 { ".aligned" } else { "" }
    }

    pub fn mbar_init(&mut self, b: Barrier) -> Result<(), PtxError> {
        let d = &self.k.barriers[b];
        // Bytes counted as arrivals: see `Emitter::sends_arrive`.
        let n = if self.counts_bytes[b] {
            d.arrivals + d.tx_bytes
        } else {
            d.arrivals
        };
        let addr = self.barrier_addr(b);
        self.ins(format!("mbarrier.init.shared::cta.b64 {addr}, {n}"));
        Ok(())
    }

    /// One arrival; with `tx`, it also raises the phase's expected bytes.
    pub fn mbar_arrive(
        &mut self,
        b: Barrier,
        at: Option<Reg>,
        tx: Option<u32>,
    ) -> Result<(), PtxError> {
        let addr = self.barrier_addr_at(b, at);
        match tx.filter(|_| !self.counts_bytes[b]) {
            Some(bytes) => self.ins(format!(
                "mbarrier.arrive.expect_tx.shared::cta.b64 _, {addr}, {bytes}"
            )),
            None => self.ins(format!("mbarrier.arrive.shared::cta.b64 _, {addr}")),
        }
        Ok(())
    }

    /// Spin on `try_wait.parity` until the phase with parity `phase & 1` completes.
    pub fn mbar_wait(&mut self, b: Barrier, phase: u32) -> Result<(), PtxError> {
        let addr = self.barrier_addr(b);
        self.spin_wait(b, addr, &(phase & 1).to_string());
        Ok(())
    }

    /// Spin on `try_wait.parity` with a register parity (loop-carried phase bits).
    pub fn mbar_wait_parity(
        &mut self,
        b: Barrier,
        at: Option<Reg>,
        parity: Reg,
    ) -> Result<(), PtxError> {
        let addr = self.barrier_addr_at(b, at);
        self.spin_wait(b, addr, &parity.to_string());
        Ok(())
    }

    /// The `try_wait.parity` loop on `addr` (barrier `b` or an element of its
    /// ring): acquiring at cluster scope where remote arrivals reach `b`
    /// ([`Emitter::cluster_acquire`]), else with the default `.acquire.cta`.
    fn spin_wait(&mut self, b: Barrier, addr: String, parity: &str) {
        let scope = if self.cluster_acquire[b] {
            ".acquire.cluster"
        } else {
            ""
        };
        let done = self.new_reg(Bank::Pred);
        let again = self.new_label("wait");
        self.label(&again);
        self.ins(format!(
            "mbarrier.try_wait.parity{scope}.shared::cta.b64 {done}, {addr}, {parity}"
        ));
        self.ins(format!("@!{done} bra {again}"));
    }

    pub fn fence_mbarrier_init(&mut self) -> Result<(), PtxError> {
        self.ins("fence.mbarrier_init.release.cluster");
        Ok(())
    }

    pub fn fence_proxy_async(&mut self) -> Result<(), PtxError> {
        self.ins("fence.proxy.async.shared::cta");
        Ok(())
    }

    pub fn cluster_arrive(&mut self, relaxed: bool) -> Result<(), PtxError> {
        let relaxed = if relaxed { ".relaxed" } else { "" };
        self.ins(format!("barrier.cluster.arrive{relaxed}{}", self.aligned()));
        Ok(())
    }

    pub fn cluster_wait(&mut self) -> Result<(), PtxError> {
        self.ins(format!("barrier.cluster.wait{}", self.aligned()));
        Ok(())
    }

    pub fn bar_sync(&mut self, id: u8, threads: u32) -> Result<(), PtxError> {
        if self.divergent == 0 {
            self.ins(format!("bar.sync {id}, {threads}"));
        } else {
            self.ins(format!("barrier.sync {id}, {threads}"));
        }
        Ok(())
    }

    pub fn griddep_wait(&mut self) -> Result<(), PtxError> {
        self.ins("griddepcontrol.wait");
        Ok(())
    }

    pub fn griddep_launch(&mut self) -> Result<(), PtxError> {
        self.ins("griddepcontrol.launch_dependents");
        Ok(())
    }
}
