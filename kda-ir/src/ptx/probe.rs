//! CTA timeline probes (an emission option, not part of the program): when
//! [`EmitOptions::probes`](super::EmitOptions) is on, each warp's lane 0
//! writes timestamps into a device buffer whose address the host puts in the
//! module variable [`PROBE_SYMBOL`] (0: the probes write nothing). After
//! every instruction that waits (an mbarrier wait, the PDL wait, a cluster
//! or named barrier, a cp.async or bulk-copy wait) the warp records
//! `%clock64`, so the host sees when each wait of each warp completed, in
//! the real launch (graphs, PDL overlap), which a profiler replaying one
//! launch at a time does not show.
//!
//! # The buffer
//!
//! `W` warps per CTA, `S` sites, [`record_words`]`(S) = 5 + S` `u64` words
//! per record. The record of CTA `c` (`ctaid.x + nctaid.x · (ctaid.y +
//! nctaid.y · ctaid.z)`) and warp `w` starts at word `(c · W + w) · (5 + S)`:
//!
//! | word | value |
//! |---|---|
//! | 0 | `%smid \| 1 << 63` (bit 63: written) |
//! | 1, 2 | `%globaltimer`, `%clock64` at entry |
//! | 3, 4 | `%globaltimer`, `%clock64` at the end of the kernel |
//! | 5 + s | `%clock64` when lane 0 last passed site `s` (0: never) |
//!
//! The probes cost one 64-bit register held through the kernel (the
//! record's address, 0 in lanes other than 0), a predicate and a store per
//! site: the probed build can have more registers than the plain one, which
//! the host should report beside the figures.

use std::fmt::Write;

use crate::entities::Inst;
use crate::loc::Loc;
use crate::op::Op;

use super::emitter::{Bank, Emitter, Reg};
use super::{PtxError, annotate};

/// The module-scope `.global .u64` holding the probe buffer's address.
pub const PROBE_SYMBOL: &str = "kda_probes";

/// Words of a record before the sites (smid, entry timer and clock, exit
/// timer and clock).
pub const HEADER_WORDS: usize = 5;

/// `u64` words per (CTA, warp) record for `sites` sites, `None` on overflow.
pub fn record_words(sites: usize) -> Option<usize> {
    sites.checked_add(HEADER_WORDS)
}

/// One probed instruction: what waited, and where in the DSL source.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProbeSite {
    /// The instruction as the PTX annotations print it (e.g.
    /// `mbarrier.wait.parity b2 "decay_full"`).
    pub what: String,
    /// The DSL location of the wait.
    pub loc: Loc,
}

/// Whether the emitter records a probe right after `op` (the instructions
/// that wait).
pub fn waits(op: &Op) -> bool {
    matches!(
        op,
        Op::MbarWait { .. }
            | Op::MbarWaitParity { .. }
            | Op::ClusterWait
            | Op::BarSync { .. }
            | Op::GridDepWait
            | Op::CpAsyncWait(_)
            | Op::BulkWait { .. }
    )
}

/// The probe state of one emission.
pub(super) struct Probes {
    /// This thread's record address (0 unless lane 0 and a buffer is set).
    addr: Reg,
    /// Sites in the order their stores were emitted.
    sites: Vec<ProbeSite>,
    /// The waits counted before the body was lowered, which fixed the
    /// record size.
    expected: usize,
}

impl Probes {
    /// The sites, once the body is lowered: every wait lowered once must
    /// have matched the count the record size was fixed from.
    pub(super) fn finish(self) -> Result<Vec<ProbeSite>, PtxError> {
        if self.sites.len() != self.expected {
            return Err(PtxError {
                loc: Loc::synthetic(),
                msg: format!(
                    "probes: {} sites emitted, {} waits counted",
                    self.sites.len(),
                    self.expected
                ),
            });
        }
        Ok(self.sites)
    }
}

/// Word offset of a record field, as a byte offset.
fn byte(word: usize) -> usize {
    word * 8
}

impl Emitter<'_> {
    /// The entry timestamps, read before anything else of the kernel (the
    /// prologue's parameter loads and the probe buffer's address would
    /// delay them); [`Emitter::probe_entry`] stores them.
    pub(super) fn probe_clocks(&mut self) -> (Reg, Reg) {
        let (gt, clk) = (self.new_reg(Bank::B64), self.new_reg(Bank::B64));
        self.comment("probes: entry timestamps, first");
        self.ins(format!("mov.u64 {gt}, %globaltimer"));
        self.ins(format!("mov.u64 {clk}, %clock64"));
        (gt, clk)
    }

    /// Compute the record address and write the entry words (`clocks`:
    /// [`Emitter::probe_clocks`]); called at the end of the prologue.
    pub(super) fn probe_entry(&mut self, (gt, clk): (Reg, Reg)) {
        self.comment("probes: this warp's record address (0: no buffer, or not lane 0)");
        let addr = self.new_reg(Bank::B64);
        let cta = self.new_reg(Bank::B32);
        let t = self.new_reg(Bank::B32);
        let n = self.new_reg(Bank::B32);
        let lane = self.new_reg(Bank::B32);
        let p = self.new_reg(Bank::Pred);
        let smid = self.new_reg(Bank::B32);
        let wide = self.new_reg(Bank::B64);
        let warps = self.k.launch.block.div_ceil(32);
        self.ins(format!("ld.global.u64 {addr}, [{PROBE_SYMBOL}]"));
        // cta = ctaid.x + nctaid.x * (ctaid.y + nctaid.y * ctaid.z)
        self.ins(format!("mov.u32 {cta}, %ctaid.z"));
        self.ins(format!("mov.u32 {n}, %nctaid.y"));
        self.ins(format!("mov.u32 {t}, %ctaid.y"));
        self.ins(format!("mad.lo.u32 {cta}, {cta}, {n}, {t}"));
        self.ins(format!("mov.u32 {n}, %nctaid.x"));
        self.ins(format!("mov.u32 {t}, %ctaid.x"));
        self.ins(format!("mad.lo.u32 {cta}, {cta}, {n}, {t}"));
        // record = cta * warps + tid / 32, in u64 from here on
        self.ins(format!("mov.u32 {t}, %tid.x"));
        self.ins(format!("shr.u32 {t}, {t}, 5"));
        self.ins(format!("mul.wide.u32 {wide}, {cta}, {warps}"));
        let wt = self.new_reg(Bank::B64);
        self.ins(format!("cvt.u64.u32 {wt}, {t}"));
        self.ins(format!("add.u64 {wide}, {wide}, {wt}"));
        let expected = self.probe_count();
        let words = record_words(expected).unwrap_or(usize::MAX);
        self.ins(format!("mul.lo.u64 {wide}, {wide}, {}", byte(words)));
        self.ins(format!("add.u64 {wide}, {addr}, {wide}"));
        self.ins(format!("mov.u32 {lane}, %laneid"));
        self.ins(format!("setp.eq.u32 {p}, {lane}, 0"));
        let nz = self.new_reg(Bank::Pred);
        self.ins(format!("setp.ne.u64 {nz}, {addr}, 0"));
        self.ins(format!("and.pred {p}, {p}, {nz}"));
        self.ins(format!("selp.b64 {addr}, {wide}, 0, {p}"));
        self.ins(format!("mov.u32 {smid}, %smid"));
        let s64 = self.new_reg(Bank::B64);
        self.ins(format!("cvt.u64.u32 {s64}, {smid}"));
        self.ins(format!("or.b64 {s64}, {s64}, {}", 1u64 << 63));
        self.ins_if(Some(p), format!("st.global.u64 [{addr}], {s64}"));
        self.ins_if(Some(p), format!("st.global.u64 [{addr}+{}], {gt}", byte(1)));
        self.ins_if(
            Some(p),
            format!("st.global.u64 [{addr}+{}], {clk}", byte(2)),
        );
        self.probes = Some(Probes {
            addr,
            sites: Vec::new(),
            expected,
        });
    }

    /// After a waiting instruction: record when this warp passed it.
    pub(super) fn probe_site(&mut self, i: Inst) {
        let Some(probes) = &self.probes else { return };
        let (addr, site) = (probes.addr, probes.sites.len());
        let what = annotate::inst_line(self.k, i);
        let clk = self.new_reg(Bank::B64);
        let p = self.new_reg(Bank::Pred);
        self.comment(&format!("probe {site}: passed `{what}`"));
        self.ins(format!("mov.u64 {clk}, %clock64"));
        self.ins(format!("setp.ne.u64 {p}, {addr}, 0"));
        self.ins_if(
            Some(p),
            format!(
                "st.global.u64 [{addr}+{}], {clk}",
                byte(HEADER_WORDS + site)
            ),
        );
        let loc = self.k.insts[i].loc.clone();
        if let Some(probes) = &mut self.probes {
            probes.sites.push(ProbeSite { what, loc });
        }
    }

    /// Before the kernel's `ret`: the exit words.
    pub(super) fn probe_exit(&mut self) {
        let Some(probes) = &self.probes else { return };
        let addr = probes.addr;
        let (gt, clk, p) = (
            self.new_reg(Bank::B64),
            self.new_reg(Bank::B64),
            self.new_reg(Bank::Pred),
        );
        self.comment("probes: exit");
        self.ins(format!("mov.u64 {gt}, %globaltimer"));
        self.ins(format!("mov.u64 {clk}, %clock64"));
        self.ins(format!("setp.ne.u64 {p}, {addr}, 0"));
        self.ins_if(Some(p), format!("st.global.u64 [{addr}+{}], {gt}", byte(3)));
        self.ins_if(
            Some(p),
            format!("st.global.u64 [{addr}+{}], {clk}", byte(4)),
        );
    }

    /// The number of sites the body will have: every waiting instruction
    /// reached from the body (the record size is fixed before the body is
    /// lowered).
    fn probe_count(&self) -> usize {
        let k = self.k;
        let mut n = 0;
        k.walk(|i, _| n += usize::from(waits(&k.insts[i].op)));
        n
    }
}

/// The module-scope declaration of the probe buffer's address.
pub(super) fn declaration(w: &mut String) {
    let _ = writeln!(w, ".global .align 8 .u64 {PROBE_SYMBOL} = 0;\n");
}
