//! Warpgroup MMA. The simulator runs each warp of the warpgroup on its own:
//! a warp's `wgmma.mma_async` computes its 16 rows of the 64×N result (rows
//! `16·(warp % 4) ..`), reading A and B from shared memory through the
//! matrix descriptors the compiler builds ([`kda_ir::wgmma::descriptor`],
//! swizzle included), and writes its lanes' accumulators at once.
//!
//! Summation order: each element is `f32(c + Σ_{k<16} a_k·b_k)` with the
//! 16 products and `c` summed in f64 and rounded once to f32, as
//! `mma.sync` is simulated. bf16 products are exact in f32; the f64 sum is
//! exact unless the terms span more than 53 bits of exponent range, so the
//! one rounding is the only error (the hardware adds in an unspecified
//! order with at least f32 precision: results may differ by a few ulp).
//!
//! Groups: accumulators issued since the last commit form the open group;
//! `commit_group` closes it; `wait_group n` retires all but the newest `n`
//! groups. An instruction that reads an accumulator of a group not yet
//! retired (other than the next wgmma's accumulator operand) is an error,
//! and so is an `st.shared` by any thread of the CTA into the bytes a wgmma
//! of a group not yet retired reads (the hardware may still be reading
//! them; the simulator read them at issue). A value a loop or an `if`
//! carries on (its yield, a loop's initial value) stays in flight in its
//! new slot: [`carry`].

use kda_ir::wgmma::{acc_coord, descriptor};

use super::ldst::rd_idx;
use super::{Cluster, Warp, race_error, site};
use crate::decode::{Ins, Program, WgmmaIns};
use crate::numeric::bf16_to_f32;
use kda_device::error::sim::{AccessKind, SimError};

pub(super) fn exec(
    prog: &Program,
    ins: &Ins,
    w: &mut Warp,
    cx: &mut Cluster<'_>,
) -> Result<(), SimError> {
    match ins {
        Ins::WgCommit => {
            let open = std::mem::take(&mut w.wg_open);
            w.wg_groups.push_back(open);
            w.wg_committed += 1;
        }
        Ins::WgWait { n } => {
            while w.wg_groups.len() > *n as usize {
                w.wg_groups.pop_front();
            }
            let done = w.wg_committed.saturating_sub(u64::from(*n));
            let (rank, warp) = (w.rank, w.warp);
            cx.wg_reads
                .retain(|p| !(p.rank == rank && p.warp == warp && p.group < done));
        }
        Ins::WgUse { slots } => {
            let pending =
                |s: &u32| w.wg_open.contains(s) || w.wg_groups.iter().any(|g| g.contains(s));
            if slots.iter().any(pending) {
                let committed = w
                    .wg_groups
                    .iter()
                    .any(|g| slots.iter().any(|s| g.contains(s)));
                let msg = if committed {
                    "reads a wgmma accumulator whose group may still be in flight: add a `wgmma.wait_group` that covers its group before the read"
                } else {
                    "reads a wgmma accumulator before its group is committed and waited for: add `wgmma.commit_group` and `wgmma.wait_group` before the read"
                };
                return Err(SimError::Wgmma {
                    msg: msg.into(),
                    site: Box::new(site(prog, w, cx, None)),
                });
            }
        }
        Ins::Wgmma(x) => mma(prog, x, w, cx)?,
        _ => unreachable!("not a wgmma op"),
    }
    Ok(())
}

fn mma(prog: &Program, x: &WgmmaIns, w: &mut Warp, cx: &mut Cluster<'_>) -> Result<(), SimError> {
    // `.sync.aligned`: the K columns are warpgroup-uniform; read lane 0's.
    let ka = rd_idx(&w.regs, x.ka, 0);
    let kb = rd_idx(&w.regs, x.kb, 0);
    let fail = |w: &Warp, cx: &Cluster<'_>, msg: String| SimError::Wgmma {
        msg,
        site: Box::new(site(prog, w, cx, None)),
    };
    for (k, t, which) in [(ka, x.ta, "A"), (kb, x.tb, "B")] {
        if k < 0 || k % 16 != 0 || k + 16 > i64::from(t.cols) {
            return Err(fail(
                w,
                cx,
                format!(
                    "wgmma reads {which} at K column {k}: the tile ({t}) has columns 0..{}, read in slices of 16 starting at a multiple of 16",
                    t.cols
                ),
            ));
        }
    }
    let da = descriptor(x.ta, x.a.base, ka as u32);
    let db = descriptor(x.tb, x.b.base, kb as u32);
    let n = x.n as usize;
    let wq = w.warp % 4;
    let gw = w.rank * prog.warps + w.warp;
    let pc = w.pc;
    // This warp's 16 rows of A and all N rows of B, as f32.
    let smem = &cx.ctas[w.rank as usize].smem;
    let half = |byte: u32| {
        let word = smem[byte as usize / 4];
        if byte & 2 == 0 {
            word & 0xffff
        } else {
            word >> 16
        }
    };
    let mut a = [[0f32; 16]; 16];
    let mut b = vec![[0f32; 16]; n];
    let mut reads = Vec::new();
    let span = |r: &[u32]| {
        let lo = r.iter().copied().min().unwrap_or(0);
        (lo, r.iter().copied().max().map_or(lo, |m| m + 2))
    };
    for (r, row) in a.iter_mut().enumerate() {
        for (k, v) in row.iter_mut().enumerate() {
            let at = da.element(16 * wq + r as u32, k as u32);
            *v = bf16_to_f32(half(at));
            reads.push(at);
        }
    }
    for (r, row) in b.iter_mut().enumerate() {
        for (k, v) in row.iter_mut().enumerate() {
            let at = db.element(r as u32, k as u32);
            *v = bf16_to_f32(half(at));
            reads.push(at);
        }
    }
    let a_reads = 16 * 16;
    let (alo, ahi) = span(&reads[..a_reads]);
    let (blo, bhi) = span(&reads[a_reads..]);
    let spans = [(x.a.buf, alo, ahi), (x.b.buf, blo, bhi)];
    if cx.race.on {
        for at in reads {
            if let Some(c) = cx.race.read(w.rank, gw, at, 2, pc) {
                return Err(race_error(prog, w, cx, c, 0, AccessKind::Read));
            }
        }
    }
    // All lanes' results first: a result may take the slot of an
    // accumulator operand that dies here.
    let mut out = vec![0u32; 32 * (n / 2)];
    for l in 0..32usize {
        for i in 0..n / 2 {
            let (row, col) = acc_coord(32 * wq + l as u32, i as u32);
            let c = match &x.c {
                Some(c) => f32::from_bits(w.regs[c[i] as usize * 32 + l]),
                None => 0.0,
            };
            let mut s = f64::from(c);
            let ar = &a[row as usize - 16 * wq as usize];
            let br = &b[col as usize];
            for k in 0..16 {
                s += f64::from(ar[k]) * f64::from(br[k]);
            }
            out[i * 32 + l] = (s as f32).to_bits();
        }
    }
    for (i, &d) in x.d.iter().enumerate() {
        w.regs[d as usize * 32..d as usize * 32 + 32].copy_from_slice(&out[i * 32..i * 32 + 32]);
    }
    w.wg_open.extend(x.d.iter().copied());
    for (buf, lo, hi) in spans {
        cx.wg_reads.push(PendingRead {
            rank: w.rank,
            warp: w.warp,
            group: w.wg_committed,
            buf,
            lo,
            hi,
            pc,
        });
    }
    Ok(())
}

/// Shared bytes `lo..hi` of buffer `buf` that a wgmma of `warp` (in CTA
/// `rank`, at `pc`) read for its group number `group`.
#[derive(Clone, Debug)]
pub(crate) struct PendingRead {
    rank: u32,
    warp: u32,
    group: u64,
    buf: u32,
    lo: u32,
    hi: u32,
    pc: u32,
}

/// An `st.shared` of `bytes` at `byte` by lane `lane` of `w`: an error when
/// a wgmma whose group is not yet waited for reads those bytes.
#[cold]
pub(super) fn check_write(
    prog: &Program,
    w: &Warp,
    cx: &Cluster<'_>,
    byte: u32,
    bytes: u32,
    lane: u32,
) -> Result<(), SimError> {
    let hit = cx
        .wg_reads
        .iter()
        .find(|p| p.rank == w.rank && byte < p.hi && byte + bytes > p.lo);
    let Some(p) = hit else {
        return Ok(());
    };
    let name = &prog.kernel.buffers[kda_ir::Buffer::from_u32(p.buf)].name;
    Err(SimError::Wgmma {
        msg: format!(
            "writes shared buffer `{name}` while the wgmma at {} (warp {}) may still be reading it: wait for its group (`wgmma.wait_group`) before overwriting an operand",
            prog.loc_of(p.pc as usize),
            p.warp
        ),
        site: Box::new(site(prog, w, cx, Some(lane))),
    })
}

/// Before a control op's register copies: each destination whose source is
/// an accumulator still in flight joins the source's group (a carried
/// accumulator keeps its registers in PTX).
#[cold]
pub(super) fn carry(ins: &Ins, w: &mut Warp) {
    let copies: Vec<&crate::decode::Copies> = match ins {
        Ins::Move { copies }
        | Ins::ForInit { copies, .. }
        | Ins::ForNext { copies, .. }
        | Ins::ForExit { copies }
        | Ins::WhileInit { copies }
        | Ins::WhileNext { copies, .. } => vec![copies],
        Ins::WhileCond {
            to_body, to_res, ..
        } => vec![to_body, to_res],
        _ => return,
    };
    for c in copies {
        for &(dst, src, _) in c.moves.iter() {
            if w.wg_open.contains(&src) {
                w.wg_open.push(dst);
            } else if let Some(g) = w.wg_groups.iter_mut().find(|g| g.contains(&src)) {
                g.push(dst);
            }
        }
    }
}
