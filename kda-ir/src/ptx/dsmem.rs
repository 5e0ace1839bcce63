//! DSMEM and asynchronous copies: `st.async` into a cluster peer's buffer
//! (completing bytes on the peer's mbarrier), arrivals on a peer's mbarrier
//! (`mbarrier.arrive.remote`), `cp.async.cg` 16-byte copies
//! with their commit/wait groups, and `cp.async.bulk` global -> shared
//! completing on an mbarrier.

use crate::entities::{Barrier, Buffer, Inst, Tensor};
use crate::op::CachePolicy;
use crate::types::Scalar;

use super::PtxError;
use super::emitter::{Bank, Emitter, Reg, brace};
use super::layout::MBARRIER_BYTES;

impl Emitter<'_> {
    /// `mapa` the local element and barrier addresses to CTA `cta`'s, then
    /// one `st.async` of 4, 8 or 16 bytes (in a one-CTA cluster, a local
    /// store and a barrier operation instead: see below). With `at` the
    /// barrier is element `at` of the ring from `bar`: its local address is
    /// `base + 8·at` (as for every ring op), mapped like a single barrier's.
    pub fn st_async(
        &mut self,
        i: Inst,
        buf: Buffer,
        (bar, at): (Barrier, Option<Reg>),
    ) -> Result<(), PtxError> {
        let d = &self.k.insts[i];
        let (idx, v, cta) = (d.args[0], d.args[1], d.args[2]);
        let ty = self.k.ty(v);
        if ty.elem == Scalar::Bool || ![4, 8, 16].contains(&ty.bytes()) {
            return Err(self.err(i, format!("st.async moves 4, 8 or 16 bytes, not a {ty}")));
        }
        let (local, off) = self.shared_addr_parts(buf, idx);
        let l_elem = if off == 0 {
            local
        } else {
            let r = self.new_reg(Bank::B32);
            self.ins(format!("add.u32 {r}, {local}, {off}"));
            r
        };
        let l_bar = self.barrier_reg(bar, at);
        let regs = self.regs(v);
        if self.k.launch.cluster == 1 {
            // A one-CTA cluster: `st.async` wants a real cluster (the
            // sanitizer flags it), so store locally and release the store
            // to the waiter through the barrier (`Emitter::sends_arrive`):
            // an arrival counting the bytes, or, on a barrier bulk copies
            // also complete, a fence and `complete_tx`.
            let (vec, elem, src) = self.store_operands(ty.elem, regs);
            self.ins(format!("st.shared{vec}.{elem} [{l_elem}], {src}"));
            if self.counts_bytes[bar] {
                self.ins(format!(
                    "mbarrier.arrive.release.cta.shared::cta.b64 _, [{l_bar}], {}",
                    ty.bytes()
                ));
            } else {
                self.ins("fence.acq_rel.cta");
                self.ins(format!(
                    "mbarrier.complete_tx.relaxed.cta.shared::cta.b64 [{l_bar}], {}",
                    ty.bytes()
                ));
            }
            return Ok(());
        }
        let cta = self.reg(cta);
        let cta = self.narrow32(cta);
        let (r_elem, r_bar) = (self.new_reg(Bank::B32), self.new_reg(Bank::B32));
        self.ins(format!(
            "mapa.shared::cluster.u32 {r_elem}, {l_elem}, {cta}"
        ));
        self.ins(format!("mapa.shared::cluster.u32 {r_bar}, {l_bar}, {cta}"));
        let (vec, elem, src) = self.store_operands(ty.elem, regs);
        self.ins(format!(
            "st.async.shared::cluster.mbarrier::complete_tx::bytes{vec}.{elem} [{r_elem}], {src}, [{r_bar}]"
        ));
        Ok(())
    }

    /// This CTA's shared address of `bar` (with `at`, of element `at` of the
    /// ring from `bar`) in a register, for `mapa` to map to a peer's.
    fn barrier_reg(&mut self, bar: Barrier, at: Option<Reg>) -> Reg {
        let smem = self
            .smem
            .expect("a kernel with mbarriers has a shared window");
        let l_bar = self.new_reg(Bank::B32);
        match at {
            None => self.ins(format!(
                "add.u32 {l_bar}, {smem}, {}",
                self.layout.barriers[bar]
            )),
            Some(ix) => {
                let base = self.new_reg(Bank::B32);
                self.ins(format!("mad.lo.u32 {base}, {ix}, {MBARRIER_BYTES}, {smem}"));
                self.ins(format!(
                    "add.u32 {l_bar}, {base}, {}",
                    self.layout.barriers[bar]
                ));
            }
        }
        l_bar
    }

    /// One arrival on `bar` (element `at` of its ring) of CTA `cta` (the
    /// instruction's first operand): `mapa` the local address to the
    /// peer's, then a releasing arrive at cluster scope, so this thread's
    /// reads of the stage the barrier releases are ordered before the
    /// peer's next writes into it (its wait acquires at cluster scope: see
    /// [`Emitter::remote_arrived`]). In a one-CTA cluster the only rank is
    /// this CTA's, and the arrival is local.
    pub fn mbar_arrive_remote(
        &mut self,
        i: Inst,
        (bar, at): (Barrier, Option<Reg>),
    ) -> Result<(), PtxError> {
        let cta = self.k.insts[i].args[0];
        if self.k.launch.cluster == 1 {
            return self.mbar_arrive(bar, at, None);
        }
        let l_bar = self.barrier_reg(bar, at);
        let cta = self.reg(cta);
        let cta = self.narrow32(cta);
        let r_bar = self.new_reg(Bank::B32);
        self.ins(format!("mapa.shared::cluster.u32 {r_bar}, {l_bar}, {cta}"));
        self.ins(format!(
            "mbarrier.arrive.release.cluster.shared::cluster.b64 _, [{r_bar}]"
        ));
        Ok(())
    }

    /// The vector suffix, element type and source operand of a store of
    /// `regs` (a value of `elem`s): f32 and 64-bit lanes as they are, other
    /// types packed into 32-bit words.
    fn store_operands(
        &mut self,
        elem: Scalar,
        regs: Vec<super::emitter::Reg>,
    ) -> (&'static str, &'static str, String) {
        let (ty, ops) = match elem {
            Scalar::F32 => ("f32", regs),
            Scalar::I64 | Scalar::U64 => ("b64", regs),
            s => ("b32", self.words32(s, &regs)),
        };
        let vec = match ops.len() {
            1 => "",
            2 => ".v2",
            _ => ".v4",
        };
        let src = if ops.len() == 1 {
            ops[0].to_string()
        } else {
            brace(&ops)
        };
        (vec, ty, src)
    }

    pub fn cp_async(&mut self, i: Inst, buf: Buffer, t: Tensor) -> Result<(), PtxError> {
        let d = &self.k.insts[i];
        let dst = self.shared_addr(buf, d.args[0]);
        let src = self.global_addr(i, t, &d.args[1..])?;
        self.ins(format!("cp.async.cg.shared.global {dst}, [{src}], 16"));
        Ok(())
    }

    pub fn cp_async_commit(&mut self) -> Result<(), PtxError> {
        self.ins("cp.async.commit_group");
        Ok(())
    }

    pub fn cp_async_wait(&mut self, n: u32) -> Result<(), PtxError> {
        self.ins(format!("cp.async.wait_group {n}"));
        Ok(())
    }

    pub fn bulk_copy(
        &mut self,
        i: Inst,
        buf: Buffer,
        t: Tensor,
        (bar, at): (Barrier, Option<Reg>),
        bytes: u32,
        policy: CachePolicy,
    ) -> Result<(), PtxError> {
        if bytes == 0 || !bytes.is_multiple_of(16) {
            return Err(self.err(
                i,
                format!("a bulk copy moves a positive multiple of 16 bytes, not {bytes}"),
            ));
        }
        let d = &self.k.insts[i];
        let g = &d.args[1..d.args.len() - at.is_some() as usize];
        let dst = self.shared_addr(buf, d.args[0]);
        let src = self.global_addr(i, t, g)?;
        let bar_addr = self.barrier_addr_at(bar, at);
        let (hint, pol) = match (policy, self.evict_first) {
            (CachePolicy::EvictFirst, Some(p)) => (".L2::cache_hint", format!(", {p}")),
            _ => ("", String::new()),
        };
        self.ins(format!(
            "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes{hint} {dst}, [{src}], {bytes}, {bar_addr}{pol}"
        ));
        Ok(())
    }

    pub fn bulk_store(
        &mut self,
        i: Inst,
        buf: Buffer,
        t: Tensor,
        bytes: u32,
        policy: CachePolicy,
    ) -> Result<(), PtxError> {
        if bytes == 0 || !bytes.is_multiple_of(16) {
            return Err(self.err(
                i,
                format!("a bulk store moves a positive multiple of 16 bytes, not {bytes}"),
            ));
        }
        let d = &self.k.insts[i];
        let src = self.shared_addr(buf, d.args[0]);
        let dst = self.global_addr(i, t, &d.args[1..])?;
        let (hint, pol) = match (policy, self.evict_first) {
            (CachePolicy::EvictFirst, Some(p)) => (".L2::cache_hint", format!(", {p}")),
            _ => ("", String::new()),
        };
        self.ins(format!(
            "cp.async.bulk.global.shared::cta.bulk_group{hint} [{dst}], {src}, {bytes}{pol}"
        ));
        Ok(())
    }
}
