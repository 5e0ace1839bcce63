//! Memory accesses: global loads and stores, shared loads and stores,
//! DSMEM `st.async` (completing transaction bytes on the peer's mbarrier),
//! `cp.async` and bulk copies (completing them on the local one). Each
//! active lane's address is bounds- and alignment-checked: a fault, a DSMEM
//! peer outside the cluster or more transaction bytes than a phase expects
//! is an error naming what was accessed and the lane. With PDL checking on,
//! so is a read of a `produced` tensor before the warp's
//! `griddepcontrol.wait`.

use kda_ir::Scalar;

use super::{Cluster, Warp, bar_name, lane_mask, misuse, race_error, ring_elem, site};
use crate::decode::{Idx, Ins, Program, ShBuf};
use crate::mbarrier::MbarFault;
use crate::memory::{TensorView, fetch_add_word, read_words, write_words};
use crate::race::Stamp;
use kda_device::error::sim::AccessKind;
use kda_device::error::sim::{Misaligned, OutOfBounds, SimError, Site, Space, TxOverflow};

/// Run one op of the family.
#[inline(always)]
pub(super) fn exec(
    prog: &Program,
    ins: &Ins,
    w: &mut Warp,
    cx: &mut Cluster<'_>,
) -> Result<(), SimError> {
    let k = &prog.kernel;
    let active = w.active;
    let nctas = cx.ctas.len() as u32;
    let mut idx = [0i64; 8];
    let mut tmp = [0u32; 4];
    let regs = &mut w.regs;
    let gw = w.rank * prog.warps + w.warp;
    match ins {
        Ins::LdGlobal {
            t,
            d,
            idx: ix,
            bytes,
        } => {
            let tv = &cx.tensors[*t as usize];
            if cx.check_pdl && prog.produced[*t as usize] && !w.pdl_waited {
                return Err(produced_early(k, *t, site(prog, w, cx, None)));
            }
            let elems = (*bytes / tv.dtype_bytes).max(1) as u64;
            let nw = (*bytes as usize).div_ceil(4);
            let mut m = active;
            while m != 0 {
                let l = m.trailing_zeros() as usize;
                m &= m - 1;
                let byte = global_byte(k, *t, tv, &w.regs, ix, &mut idx, l, elems, *bytes, || {
                    site(prog, w, cx, Some(l as u32))
                })?;
                if cx.race.on {
                    let kind = AccessKind::Read;
                    super::bulk::check_global(prog, w, cx, *t, byte, *bytes, l as u32, kind)?;
                }
                read_words(tv.mem, byte as usize, *bytes, &mut tmp[..nw]);
                for (i, &v) in tmp[..nw].iter().enumerate() {
                    w.regs[(*d as usize + i) * 32 + l] = v;
                }
            }
        }
        Ins::StGlobal {
            t,
            v,
            idx: ix,
            bytes,
            pred,
        } => {
            let tv = &cx.tensors[*t as usize];
            let elems = (*bytes / tv.dtype_bytes).max(1) as u64;
            let nw = (*bytes as usize).div_ceil(4);
            let mut m = active;
            if let Some(p) = pred {
                m &= lane_mask(regs, *p);
            }
            while m != 0 {
                let l = m.trailing_zeros() as usize;
                m &= m - 1;
                let byte = global_byte(k, *t, tv, &w.regs, ix, &mut idx, l, elems, *bytes, || {
                    site(prog, w, cx, Some(l as u32))
                })?;
                if cx.race.on {
                    let kind = AccessKind::Write;
                    super::bulk::check_global(prog, w, cx, *t, byte, *bytes, l as u32, kind)?;
                }
                for (i, x) in tmp[..nw].iter_mut().enumerate() {
                    *x = w.regs[(*v as usize + i) * 32 + l];
                }
                write_words(tv.mem, byte as usize, *bytes, &tmp[..nw]);
            }
        }
        Ins::AtomAdd { t, d, v, idx: ix } => {
            // The active lanes' read-modify-writes, one at a time in lane
            // order (one of the orders the hardware may pick): each lane gets
            // the value the lanes before it left.
            let tv = &cx.tensors[*t as usize];
            if cx.check_pdl && prog.produced[*t as usize] && !w.pdl_waited {
                return Err(produced_early(k, *t, site(prog, w, cx, None)));
            }
            let mut m = active;
            while m != 0 {
                let l = m.trailing_zeros() as usize;
                m &= m - 1;
                let byte = global_byte(k, *t, tv, &w.regs, ix, &mut idx, l, 1, 4, || {
                    site(prog, w, cx, Some(l as u32))
                })?;
                if cx.race.on {
                    let kind = AccessKind::Write;
                    super::bulk::check_global(prog, w, cx, *t, byte, 4, l as u32, kind)?;
                }
                // One host atomic: clusters run on several host threads, and
                // a load-then-store here handed two CTAs the same ticket.
                let old = fetch_add_word(tv.mem, byte as usize, w.regs[*v as usize * 32 + l]);
                w.regs[*d as usize * 32 + l] = old;
            }
        }
        &Ins::LdShared {
            sb,
            d,
            idx: ix,
            bytes,
        } => {
            let nw = (bytes as usize).div_ceil(4);
            let cta = &cx.ctas[w.rank as usize];
            let mut m = active;
            while m != 0 {
                let l = m.trailing_zeros() as usize;
                m &= m - 1;
                let i = rd_idx(&w.regs, ix, l);
                let byte = checked_shared(k, sb, w.rank, i, bytes, || {
                    site(prog, w, cx, Some(l as u32))
                })?;
                if cx.race.on
                    && let Some(c) = cx.race.read(w.rank, gw, byte as u32, bytes, w.pc)
                {
                    return Err(race_error(prog, w, cx, c, l as u32, AccessKind::Read));
                }
                smem_read(&cta.smem, byte, bytes, &mut tmp);
                for (j, &v) in tmp[..nw].iter().enumerate() {
                    w.regs[(d as usize + j) * 32 + l] = v;
                }
            }
        }
        &Ins::StShared {
            sb,
            v,
            idx: ix,
            bytes,
        } => {
            let nw = (bytes as usize).div_ceil(4);
            let mut m = active;
            while m != 0 {
                let l = m.trailing_zeros() as usize;
                m &= m - 1;
                let i = rd_idx(&w.regs, ix, l);
                let byte = checked_shared(k, sb, w.rank, i, bytes, || {
                    site(prog, w, cx, Some(l as u32))
                })?;
                for (j, x) in tmp[..nw].iter_mut().enumerate() {
                    *x = w.regs[(v as usize + j) * 32 + l];
                }
                if cx.race.on
                    && let Some(c) =
                        cx.race
                            .write(w.rank, gw, byte as u32, bytes, w.pc, Stamp::Plain)
                {
                    return Err(race_error(prog, w, cx, c, l as u32, AccessKind::Write));
                }
                if !cx.wg_reads.is_empty() {
                    super::wgmma::check_write(prog, w, cx, byte as u32, bytes, l as u32)?;
                }
                smem_write(&mut cx.ctas[w.rank as usize].smem, byte, bytes, &tmp);
            }
        }
        &Ins::StAsync {
            sb,
            bar,
            idx: ix,
            v,
            cta: peer,
            bytes,
            ring,
        } => {
            let nw = (bytes as usize).div_ceil(4);
            // Ring elements agree in bytes (the verifier checks).
            let declared = k.barriers[kda_ir::Barrier::from_u32(bar)].tx_bytes;
            let first = bar;
            // Barriers this instruction completed a phase of: (rank, barrier, phase bytes).
            let mut completed: [(u32, u32, u64); 4] = [(u32::MAX, u32::MAX, 0); 4];
            let mut ncompleted = 0;
            let mut released = (u32::MAX, u32::MAX);
            let mut m = active;
            while m != 0 {
                let l = m.trailing_zeros() as usize;
                m &= m - 1;
                let r = rd_idx(&w.regs, peer, l);
                if r < 0 || r >= nctas as i64 {
                    return Err(SimError::BadPeer {
                        rank: r,
                        cluster: nctas,
                        site: Box::new(site(prog, w, cx, Some(l as u32))),
                    });
                }
                let r = r as u32;
                let bar = ring_elem(prog, w, cx, first, ring, l)?;
                let i = rd_idx(&w.regs, ix, l);
                let byte =
                    checked_shared(k, sb, r, i, bytes, || site(prog, w, cx, Some(l as u32)))?;
                for (j, x) in tmp[..nw].iter_mut().enumerate() {
                    *x = w.regs[(v as usize + j) * 32 + l];
                }
                if cx.race.on {
                    let phase = cx.ctas[r as usize].mbar[bar as usize].phase;
                    let stamp = Stamp::Async {
                        rank: r,
                        bar,
                        phase,
                    };
                    if let Some(c) = cx.race.write(r, gw, byte as u32, bytes, w.pc, stamp) {
                        let kind = AccessKind::AsyncWrite {
                            barrier: bar_name(k, bar).to_string(),
                            rank: r,
                            phase,
                        };
                        return Err(race_error(prog, w, cx, c, l as u32, kind));
                    }
                    if released != (r, bar) {
                        cx.race.release_bar(r, bar, gw);
                        released = (r, bar);
                    }
                }
                smem_write(&mut cx.ctas[r as usize].smem, byte, bytes, &tmp);
                if let Some(&(_, _, done)) = completed[..ncompleted]
                    .iter()
                    .find(|c| (c.0, c.1) == (r, bar))
                {
                    let rest = peers_to(&w.regs, peer, m | 1 << l, r) as u64 * bytes as u64;
                    let phase = cx.ctas[r as usize].mbar[bar as usize].phase - 1;
                    return Err(tx_overflow(
                        k,
                        bar,
                        r,
                        phase,
                        done,
                        done + rest,
                        site(prog, w, cx, Some(l as u32)),
                    ));
                }
                let mb = &mut cx.ctas[r as usize].mbar[bar as usize];
                mb.last_sender = Some((w.pc, w.rank, w.warp, l as u32));
                let before = mb.delivered + bytes as u64;
                match mb.complete_tx(bytes, declared) {
                    Ok(true) => {
                        if cx.race.on {
                            let done = cx.ctas[r as usize].mbar[bar as usize].phase;
                            cx.race.complete_bar(r, bar, done, true);
                        }
                        if ncompleted < completed.len() {
                            completed[ncompleted] = (r, bar, before);
                            ncompleted += 1;
                        }
                    }
                    Ok(false) => {}
                    Err(MbarFault::Tx {
                        phase,
                        expected,
                        arrived,
                    }) => {
                        let rest = peers_to(&w.regs, peer, m, r) as u64 * bytes as u64;
                        return Err(tx_overflow(
                            k,
                            bar,
                            r,
                            phase,
                            expected,
                            arrived + rest,
                            site(prog, w, cx, Some(l as u32)),
                        ));
                    }
                    Err(_) => {
                        let msg = format!(
                            "st.async completes {bytes} bytes on mbarrier `{}` of CTA rank {r} before that barrier \
                             is initialised (send only after the cluster barrier that follows mbarrier.init)",
                            bar_name(k, bar)
                        );
                        return Err(misuse(prog, w, cx, Some(l as u32), msg));
                    }
                }
            }
            if cx.race.on {
                cx.race.tick(gw);
            }
        }
        Ins::CpAsync { sb, t, sidx, gidx } => {
            if cx.check_pdl && prog.produced[*t as usize] && !w.pdl_waited {
                return Err(produced_early(k, *t, site(prog, w, cx, None)));
            }
            let tv = &cx.tensors[*t as usize];
            let elems = (16 / tv.dtype_bytes).max(1) as u64;
            let mut m = active;
            while m != 0 {
                let l = m.trailing_zeros() as usize;
                m &= m - 1;
                let gbyte = global_byte(k, *t, tv, &w.regs, gidx, &mut idx, l, elems, 16, || {
                    site(prog, w, cx, Some(l as u32))
                })?;
                if cx.race.on {
                    let kind = AccessKind::Read;
                    super::bulk::check_global(prog, w, cx, *t, gbyte, 16, l as u32, kind)?;
                }
                let i = rd_idx(&w.regs, *sidx, l);
                let byte =
                    checked_shared(k, *sb, w.rank, i, 16, || site(prog, w, cx, Some(l as u32)))?;
                if cx.race.on
                    && let Some(c) =
                        cx.race
                            .write(w.rank, gw, byte as u32, 16, w.pc, Stamp::CpAsync)
                {
                    let kind = AccessKind::CpAsync {
                        group: cx.race.group(gw),
                    };
                    return Err(race_error(prog, w, cx, c, l as u32, kind));
                }
                read_words(tv.mem, gbyte as usize, 16, &mut tmp);
                smem_write(&mut cx.ctas[w.rank as usize].smem, byte, 16, &tmp);
            }
        }
        Ins::Bulk {
            sb,
            t,
            bar,
            bytes,
            sidx,
            gidx,
            ring,
        } => {
            if cx.check_pdl && prog.produced[*t as usize] && !w.pdl_waited {
                return Err(produced_early(k, *t, site(prog, w, cx, None)));
            }
            let tv = &cx.tensors[*t as usize];
            let declared = k.barriers[kda_ir::Barrier::from_u32(*bar)].tx_bytes;
            let mut m = active;
            while m != 0 {
                let l = m.trailing_zeros() as usize;
                m &= m - 1;
                let gbyte =
                    bulk_global_byte(k, *t, tv, &w.regs, gidx, &mut idx, l, *bytes, || {
                        site(prog, w, cx, Some(l as u32))
                    })?;
                if cx.race.on {
                    let kind = AccessKind::Read;
                    super::bulk::check_global(prog, w, cx, *t, gbyte, *bytes, l as u32, kind)?;
                }
                let i = rd_idx(&w.regs, *sidx, l);
                let byte = checked_shared(k, *sb, w.rank, i, *bytes, || {
                    site(prog, w, cx, Some(l as u32))
                })?;
                let smem = &mut cx.ctas[w.rank as usize].smem;
                for j in 0..*bytes as usize / 4 {
                    read_words(tv.mem, gbyte as usize + 4 * j, 4, &mut tmp[..1]);
                    smem[byte / 4 + j] = tmp[0];
                }
                let bar = &ring_elem(prog, w, cx, *bar, *ring, l)?;
                if cx.race.on {
                    let phase = cx.ctas[w.rank as usize].mbar[*bar as usize].phase;
                    let stamp = Stamp::Async {
                        rank: w.rank,
                        bar: *bar,
                        phase,
                    };
                    if let Some(c) = cx.race.write(w.rank, gw, byte as u32, *bytes, w.pc, stamp) {
                        let kind = AccessKind::AsyncWrite {
                            barrier: bar_name(k, *bar).to_string(),
                            rank: w.rank,
                            phase,
                        };
                        return Err(race_error(prog, w, cx, c, l as u32, kind));
                    }
                }
                let mb = &mut cx.ctas[w.rank as usize].mbar[*bar as usize];
                mb.last_sender = Some((w.pc, w.rank, w.warp, l as u32));
                match mb.complete_tx(*bytes, declared) {
                    Ok(true) => {
                        if cx.race.on {
                            let done = cx.ctas[w.rank as usize].mbar[*bar as usize].phase;
                            cx.race.complete_bar(w.rank, *bar, done, true);
                        }
                    }
                    Ok(false) => {}
                    Err(MbarFault::Tx {
                        phase,
                        expected,
                        arrived,
                    }) => {
                        return Err(tx_overflow(
                            k,
                            *bar,
                            w.rank,
                            phase,
                            expected,
                            arrived,
                            site(prog, w, cx, Some(l as u32)),
                        ));
                    }
                    Err(_) => {
                        let msg = format!(
                            "cp.async.bulk completes bytes on mbarrier `{}` of CTA rank {} before it is initialised",
                            bar_name(k, *bar),
                            w.rank
                        );
                        return Err(misuse(prog, w, cx, Some(l as u32), msg));
                    }
                }
            }
        }
        _ => unreachable!("not a memory op"),
    }
    Ok(())
}

#[inline(always)]
pub(super) fn rd_idx(regs: &[u32], i: Idx, l: usize) -> i64 {
    let w = regs[i.slot as usize * 32 + l];
    match i.kind {
        Scalar::I32 => w as i32 as i64,
        Scalar::I64 | Scalar::U64 => {
            (w as u64 | (regs[(i.slot as usize + 1) * 32 + l] as u64) << 32) as i64
        }
        _ => w as i64,
    }
}

/// Shared memory words of a CTA: read / write `bytes` at an aligned byte offset.
#[inline]
fn smem_read(smem: &[u32], byte: usize, bytes: u32, o: &mut [u32]) {
    if bytes == 2 {
        let w = smem[byte / 4];
        o[0] = if byte & 2 == 0 { w & 0xffff } else { w >> 16 };
    } else {
        let n = bytes as usize / 4;
        o[..n].copy_from_slice(&smem[byte / 4..byte / 4 + n]);
    }
}

#[inline]
fn smem_write(smem: &mut [u32], byte: usize, bytes: u32, v: &[u32]) {
    if bytes == 2 {
        let w = &mut smem[byte / 4];
        *w = if byte & 2 == 0 {
            (*w & 0xffff_0000) | (v[0] & 0xffff)
        } else {
            (*w & 0xffff) | (v[0] << 16)
        };
    } else {
        let n = bytes as usize / 4;
        smem[byte / 4..byte / 4 + n].copy_from_slice(&v[..n]);
    }
}

/// Lanes of `mask` whose peer index is `rank`.
fn peers_to(regs: &[u32], peer: Idx, mask: u32, rank: u32) -> u32 {
    let mut n = 0;
    let mut m = mask;
    while m != 0 {
        let l = m.trailing_zeros() as usize;
        m &= m - 1;
        n += (rd_idx(regs, peer, l) == rank as i64) as u32;
    }
    n
}

enum SharedFault {
    Bounds,
    Align,
}

/// Byte offset in the CTA's shared memory of element `i` of a buffer.
#[inline(always)]
fn shared_byte(sb: ShBuf, i: i64, bytes: u32) -> Result<usize, SharedFault> {
    let off = i.wrapping_mul(sb.eb as i64);
    if i < 0 || off + bytes as i64 > sb.size as i64 {
        return Err(SharedFault::Bounds);
    }
    let byte = sb.base as usize + off as usize;
    if !byte.is_multiple_of(bytes.min(16) as usize) {
        return Err(SharedFault::Align);
    }
    Ok(byte)
}

#[cold]
/// The byte offset of element `i` of shared buffer `sb` for an access of
/// `bytes`, or the out-of-bounds or misalignment error naming the buffer
/// (`site` is only built for the error).
pub(super) fn checked_shared(
    k: &kda_ir::Kernel,
    sb: ShBuf,
    rank: u32,
    i: i64,
    bytes: u32,
    site: impl FnOnce() -> Site,
) -> Result<usize, SimError> {
    shared_byte(sb, i, bytes).map_err(|e| shared_fault(k, sb, rank, i, bytes, e, site()))
}

fn shared_fault(
    k: &kda_ir::Kernel,
    sb: ShBuf,
    rank: u32,
    i: i64,
    bytes: u32,
    e: SharedFault,
    site: Site,
) -> SimError {
    let decl = &k.buffers[kda_ir::Buffer::from_u32(sb.buf)];
    match e {
        SharedFault::Bounds => SimError::OutOfBounds(Box::new(OutOfBounds {
            space: Space::Shared { rank },
            name: decl.name.clone(),
            index: vec![i],
            extent: vec![decl.len as i64],
            elems: (bytes / decl.elem.bytes()).max(1) as u64,
            site,
        })),
        SharedFault::Align => SimError::Misaligned(Box::new(Misaligned {
            space: Space::Shared { rank },
            name: decl.name.clone(),
            byte_offset: sb.base as u64 + (i * sb.eb as i64) as u64,
            align: bytes.min(16),
            site,
        })),
    }
}

/// Lane `l`'s byte offset into tensor `t` for an access of `align` bytes
/// (`elems` elements) at the indices in `ix`, bounds- and alignment-checked.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
fn global_byte(
    k: &kda_ir::Kernel,
    t: u32,
    tv: &TensorView<'_>,
    regs: &[u32],
    ix: &[Idx],
    idx: &mut [i64; 8],
    l: usize,
    elems: u64,
    align: u32,
    site: impl Fn() -> Site,
) -> Result<u64, SimError> {
    let at = |idx: &[i64]| tv.offset(idx, elems);
    checked_global_byte(k, t, tv, regs, ix, idx, l, elems, align, at, site)
}

/// The byte offset in tensor `t` of a bulk copy of `bytes` at lane `l`'s
/// index (`ix`, read into `idx`), checked against the tensor's span and for
/// the 16-byte alignment bulk copies need.
#[allow(clippy::too_many_arguments)]
pub(super) fn bulk_global_byte(
    k: &kda_ir::Kernel,
    t: u32,
    tv: &TensorView<'_>,
    regs: &[u32],
    ix: &[Idx],
    idx: &mut [i64; 8],
    l: usize,
    bytes: u32,
    site: impl Fn() -> Site,
) -> Result<u64, SimError> {
    let elems = (bytes / tv.dtype_bytes) as u64;
    let at = |idx: &[i64]| tv.bulk_offset(idx, bytes as u64);
    checked_global_byte(k, t, tv, regs, ix, idx, l, elems, 16, at, site)
}

/// Both of the above: read lane `l`'s indices, find the element offset with
/// `at` (`None`: out of bounds, reported with `elems`), check `align`.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
fn checked_global_byte(
    k: &kda_ir::Kernel,
    t: u32,
    tv: &TensorView<'_>,
    regs: &[u32],
    ix: &[Idx],
    idx: &mut [i64; 8],
    l: usize,
    elems: u64,
    align: u32,
    at: impl Fn(&[i64]) -> Option<u64>,
    site: impl Fn() -> Site,
) -> Result<u64, SimError> {
    for (i, &x) in ix.iter().enumerate() {
        idx[i] = rd_idx(regs, x, l);
    }
    let r = ix.len();
    let Some(off) = at(&idx[..r]) else {
        return Err(global_oob(k, t, &idx[..r], tv, elems, site()));
    };
    let byte = off * tv.dtype_bytes as u64;
    if !byte.is_multiple_of(align as u64) {
        return Err(misaligned_global(k, t, byte, align, site()));
    }
    Ok(byte)
}

#[cold]
pub(super) fn global_oob(
    k: &kda_ir::Kernel,
    t: u32,
    idx: &[i64],
    tv: &TensorView<'_>,
    elems: u64,
    site: Site,
) -> SimError {
    SimError::OutOfBounds(Box::new(OutOfBounds {
        space: Space::Global,
        name: k.tensors[kda_ir::Tensor::from_u32(t)].name.clone(),
        index: idx.to_vec(),
        extent: tv.shape.clone(),
        elems,
        site,
    }))
}

#[cold]
pub(super) fn misaligned_global(
    k: &kda_ir::Kernel,
    t: u32,
    byte: u64,
    align: u32,
    site: Site,
) -> SimError {
    SimError::Misaligned(Box::new(Misaligned {
        space: Space::Global,
        name: k.tensors[kda_ir::Tensor::from_u32(t)].name.clone(),
        byte_offset: byte,
        align,
        site,
    }))
}

#[cold]
fn produced_early(k: &kda_ir::Kernel, t: u32, site: Site) -> SimError {
    SimError::ProducedBeforeWait {
        tensor: k.tensors[kda_ir::Tensor::from_u32(t)].name.clone(),
        site: Box::new(site),
    }
}

#[cold]
fn tx_overflow(
    k: &kda_ir::Kernel,
    bar: u32,
    rank: u32,
    phase: u32,
    expected: u64,
    arrived: u64,
    site: Site,
) -> SimError {
    SimError::TxOverflow(Box::new(TxOverflow {
        barrier: bar_name(k, bar).to_string(),
        rank,
        phase,
        expected,
        arrived,
        site,
    }))
}
