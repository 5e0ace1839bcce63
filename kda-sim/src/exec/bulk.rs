//! Bulk stores (`cp.async.bulk.global.shared::cta.bulk_group`), their
//! commit groups and `cp.async.bulk.wait_group[.read]`.
//!
//! A bulk store runs asynchronously: issuing it checks its addresses and
//! queues it; later it reads its shared source, and later still writes the
//! bytes to global memory. When is the scheduler's choice (a seeded run
//! retires queued steps at random between warp slices, a deterministic run
//! as late as allowed), bounded by the issuing thread's waits:
//! `wait_group.read n` finishes the reads of all but its `n` newest
//! committed groups, `wait_group n` their writes as well. Kernel exit
//! waits for nothing: whatever is still queued when every warp of the
//! cluster has exited completes then, as the GPU completes it. A kernel
//! that overwrites a source before the read, or reads a destination
//! before the write, thus sees stale bytes under some schedule, and the
//! race detector reports it under every schedule (`race` module).

use super::ldst::{bulk_global_byte, checked_shared, rd_idx};
use super::{Cluster, Warp, earlier_access, later_access, race_error, site};
use crate::decode::{Ins, Program};
use crate::memory::write_words;
use crate::race::GlobalConflict;
use kda_device::error::sim::{AccessKind, GlobalRace, SimError};

/// A queued bulk store.
pub(crate) struct Pending {
    /// Issuing warp (cluster index), lane and bulk group (per lane).
    gw: u32,
    lane: u32,
    group: u32,
    /// Source: CTA rank and byte offset in its shared memory.
    rank: u32,
    sbyte: usize,
    /// Destination: tensor and byte offset.
    t: u32,
    gbyte: usize,
    bytes: u32,
    /// The source's words once read.
    data: Option<Box<[u32]>>,
}

impl Pending {
    fn read(&mut self, cx_smem: &[u32]) {
        if self.data.is_none() {
            let w = self.sbyte / 4;
            self.data = Some(cx_smem[w..w + self.bytes as usize / 4].into());
        }
    }
}

/// Read the source of queued store `i` if not yet read, else write it out
/// and drop it.
pub(crate) fn step(cx: &mut Cluster<'_>, i: usize) {
    let p = &mut cx.bulk[i];
    if p.data.is_none() {
        p.read(&cx.ctas[p.rank as usize].smem);
    } else {
        let p = cx.bulk.swap_remove(i);
        finish(cx, p);
    }
}

fn finish(cx: &Cluster<'_>, mut p: Pending) {
    p.read(&cx.ctas[p.rank as usize].smem);
    let data = p.data.expect("read");
    write_words(cx.tensors[p.t as usize].mem, p.gbyte, p.bytes, &data);
}

/// Complete every queued store (every warp of the cluster has exited).
pub(crate) fn drain(cx: &mut Cluster<'_>) {
    // Reads first: a store's source is read before any later one's write.
    for i in 0..cx.bulk.len() {
        let p = &mut cx.bulk[i];
        p.read(&cx.ctas[p.rank as usize].smem);
    }
    for p in std::mem::take(&mut cx.bulk) {
        finish(cx, p);
    }
}

/// Run one op of the family.
pub(super) fn exec(
    prog: &Program,
    ins: &Ins,
    w: &mut Warp,
    cx: &mut Cluster<'_>,
) -> Result<(), SimError> {
    let k = &prog.kernel;
    let gw = w.rank * prog.warps + w.warp;
    let mut idx = [0i64; 8];
    match ins {
        Ins::BulkStore {
            sb,
            t,
            bytes,
            sidx,
            gidx,
        } => {
            let tv = &cx.tensors[*t as usize];
            let mut m = w.active;
            while m != 0 {
                let l = m.trailing_zeros() as usize;
                m &= m - 1;
                let gbyte =
                    bulk_global_byte(k, *t, tv, &w.regs, gidx, &mut idx, l, *bytes, || {
                        site(prog, w, cx, Some(l as u32))
                    })?;
                let i = rd_idx(&w.regs, *sidx, l);
                let sbyte = checked_shared(k, *sb, w.rank, i, *bytes, || {
                    site(prog, w, cx, Some(l as u32))
                })?;
                if cx.race.on {
                    check_global(prog, w, cx, *t, gbyte, *bytes, l as u32, AccessKind::Write)?;
                    if let Some(c) = cx.race.bulk_read(w.rank, gw, sbyte as u32, *bytes, w.pc) {
                        let kind = AccessKind::BulkRead {
                            group: cx.race.bulk_group(gw),
                        };
                        return Err(race_error(prog, w, cx, c, l as u32, kind));
                    }
                    let end = gbyte + *bytes as u64;
                    cx.race.bulk_dest(*t, gw, gbyte, end, w.pc);
                }
                cx.bulk.push(Pending {
                    gw,
                    lane: l as u32,
                    group: w.bulk_commits[l],
                    rank: w.rank,
                    sbyte,
                    t: *t,
                    gbyte: gbyte as usize,
                    bytes: *bytes,
                    data: None,
                });
            }
        }
        Ins::BulkCommit => {
            let mut m = w.active;
            while m != 0 {
                let l = m.trailing_zeros() as usize;
                m &= m - 1;
                w.bulk_commits[l] += 1;
            }
            if cx.race.on {
                cx.race.bulk_commit(gw);
            }
        }
        &Ins::BulkWait { n, read } => {
            let active = w.active;
            let mut i = 0;
            while i < cx.bulk.len() {
                let p = &cx.bulk[i];
                let covered = p.gw == gw
                    && active & (1 << p.lane) != 0
                    && p.group + n < w.bulk_commits[p.lane as usize];
                if !covered {
                    i += 1;
                } else if read {
                    let p = &mut cx.bulk[i];
                    p.read(&cx.ctas[p.rank as usize].smem);
                    i += 1;
                } else {
                    let p = cx.bulk.swap_remove(i);
                    finish(cx, p);
                }
            }
            if cx.race.on {
                cx.race.bulk_wait(gw, n, read);
            }
        }
        _ => unreachable!("not a bulk-store op"),
    }
    Ok(())
}

/// With the race detector on: a global access by lane `lane` of `w` of
/// `bytes` at byte `byte` of tensor `t` must not overlap a bulk store in
/// flight that it is not ordered after.
#[inline]
pub(super) fn check_global(
    prog: &Program,
    w: &Warp,
    cx: &Cluster<'_>,
    t: u32,
    byte: u64,
    bytes: u32,
    lane: u32,
    kind: AccessKind,
) -> Result<(), SimError> {
    let gw = w.rank * prog.warps + w.warp;
    match cx.race.global(t, gw, byte, byte + bytes as u64) {
        None => Ok(()),
        Some(c) => Err(global_race(prog, w, cx, t, c, lane, kind)),
    }
}

#[cold]
fn global_race(
    prog: &Program,
    w: &Warp,
    cx: &Cluster<'_>,
    t: u32,
    c: GlobalConflict,
    lane: u32,
    kind: AccessKind,
) -> SimError {
    let (er, ew) = cx.race.split(c.warp);
    let pc = c.pc as usize;
    SimError::GlobalRace(Box::new(GlobalRace {
        tensor: prog.kernel.tensors[kda_ir::Tensor::from_u32(t)]
            .name
            .clone(),
        start: c.start,
        end: c.end,
        earlier: earlier_access(
            prog,
            cx,
            pc,
            er,
            ew,
            AccessKind::BulkWrite { group: c.group },
        ),
        later: later_access(prog, w, cx, lane, kind),
    }))
}
