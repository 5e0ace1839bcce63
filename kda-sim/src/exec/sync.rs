//! Synchronisation: mbarrier init / arrive / wait, the cluster barrier,
//! named barriers (`bar.sync`) and the PDL wait. Fences,
//! `griddepcontrol.launch_dependents` and `__syncwarp` decode to `Nop`:
//! every access takes effect when it runs, so there is nothing left for
//! them to order; `cp.async` commit / wait only feed the race detector.
//! With the race detector on, arrivals release the warp's clock to the
//! barrier and passing waits acquire it (`race` module).
//! A wait that cannot pass returns [`Next::Block`] and is retried when the
//! warp runs again; misuse the hardware would not report (re-init in use,
//! lapped phases, arrivals past the count) is an error naming the barrier.

use super::ldst::rd_idx;
use super::{Cluster, Next, Warp, bar_name, misuse, ring_elem, site};
use crate::decode::{Ins, Program};
use crate::mbarrier::MbarFault;
use kda_device::error::sim::SimError;

/// Run one op of the family.
#[inline(always)]
pub(super) fn exec(
    prog: &Program,
    ins: &Ins,
    w: &mut Warp,
    cx: &mut Cluster<'_>,
) -> Result<Next, SimError> {
    let k = &prog.kernel;
    let active = w.active;
    let gw = w.rank * prog.warps + w.warp;
    match ins {
        &Ins::MbarInit { bar } => {
            let count = k.barriers[kda_ir::Barrier::from_u32(bar)].arrivals;
            let mb = &mut cx.ctas[w.rank as usize].mbar[bar as usize];
            if mb.init && (mb.phase > 0 || mb.pending != mb.count || mb.tx != 0) {
                let msg = format!(
                    "mbarrier.init on mbarrier `{}` of CTA rank {} while it is in use (phase {}, {} of {} arrivals, \
                     {} tx bytes pending)",
                    bar_name(k, bar),
                    w.rank,
                    mb.phase,
                    mb.count - mb.pending,
                    mb.count,
                    mb.tx
                );
                return Err(misuse(prog, w, cx, None, msg));
            }
            mb.init(count);
        }
        &Ins::MbarArrive { bar, tx, ring, cta } => {
            let mut released = (u32::MAX, u32::MAX);
            let nctas = cx.ctas.len() as u32;
            // Each active lane's barrier (ring element) and CTA first: a
            // phase completing while a later lane of the warp arrives on the
            // same barrier is misuse, while a later lane arriving on another
            // barrier (another ring element, another CTA's) is not.
            let mut lanes = [(0u32, 0u32, 0u32); 32];
            let mut n_lanes = 0;
            let mut m = active;
            while m != 0 {
                let l = m.trailing_zeros();
                m &= m - 1;
                let bar = ring_elem(prog, w, cx, bar, ring, l as usize)?;
                // A remote arrival lands on the barrier of the lane's
                // destination CTA, releasing the lane's earlier accesses
                // to the waiters there.
                let rank = match cta {
                    None => w.rank,
                    Some(c) => {
                        let r = rd_idx(&w.regs, c, l as usize);
                        if r < 0 || r >= i64::from(nctas) {
                            return Err(SimError::BadPeer {
                                rank: r,
                                cluster: nctas,
                                site: Box::new(site(prog, w, cx, Some(l))),
                            });
                        }
                        let r = r as u32;
                        // The peer's shared memory (its barrier) is there
                        // only while it runs: on the GPU an arrival after
                        // its exit is undefined, which a cluster barrier
                        // between the two rules out.
                        if r != w.rank && cx.ctas[r as usize].live == 0 {
                            let msg = format!(
                                "arrive on mbarrier `{}` of CTA rank {r}, which has exited: its shared \
                                 memory is gone; pass a cluster barrier (arrived on by the arriving threads, \
                                 waited on by the peer) before the peer exits",
                                bar_name(k, bar)
                            );
                            return Err(misuse(prog, w, cx, Some(l), msg));
                        }
                        r
                    }
                };
                lanes[n_lanes] = (l, rank, bar);
                n_lanes += 1;
            }
            let lanes = &lanes[..n_lanes];
            for (n, &(l, rank, bar)) in lanes.iter().enumerate() {
                if cx.race.on && released != (rank, bar) {
                    cx.race.release_bar(rank, bar, gw);
                    released = (rank, bar);
                }
                let mb = &mut cx.ctas[rank as usize].mbar[bar as usize];
                let (ph, count) = (mb.phase, mb.count);
                let had_tx = mb.expected + tx as u64 > 0 || mb.delivered > 0;
                let res = mb.arrive(tx);
                if let Ok(true) = res
                    && cx.race.on
                {
                    cx.race.complete_bar(rank, bar, ph + 1, had_tx);
                }
                match res {
                    Ok(true)
                        if lanes[n + 1..]
                            .iter()
                            .any(|&(_, r, b)| (r, b) == (rank, bar)) =>
                    {
                        let msg = format!(
                            "{} lanes arrive at once on mbarrier `{}` of CTA rank {} whose count is {count}: \
                             phase {ph} completes and the other lanes arrive on phase {}",
                            active.count_ones(),
                            bar_name(k, bar),
                            rank,
                            ph + 1
                        );
                        return Err(misuse(prog, w, cx, Some(l), msg));
                    }
                    Ok(_) => {}
                    Err(MbarFault::Uninit) => {
                        let msg = format!(
                            "arrive on mbarrier `{}` of CTA rank {} before it is initialised",
                            bar_name(k, bar),
                            rank
                        );
                        return Err(misuse(prog, w, cx, Some(l), msg));
                    }
                    Err(_) => {
                        let msg = format!(
                            "more arrivals than the count {count} in phase {ph} of mbarrier `{}` of CTA rank {}",
                            bar_name(k, bar),
                            rank
                        );
                        return Err(misuse(prog, w, cx, Some(l), msg));
                    }
                }
            }
            if cx.race.on {
                cx.race.tick(gw);
            }
        }
        &Ins::MbarWait { bar, phase } => {
            let mb = &cx.ctas[w.rank as usize].mbar[bar as usize];
            if mb.init && mb.phase > phase + 1 {
                let msg = format!(
                    "wait on phase {phase} of mbarrier `{}` of CTA rank {}, which has already completed phase {}: \
                     a parity wait would wait for phase {} instead",
                    bar_name(k, bar),
                    w.rank,
                    mb.phase - 1,
                    phase + 2
                );
                return Err(misuse(prog, w, cx, None, msg));
            }
            if !mb.passed(phase) {
                return Ok(Next::Block);
            }
            if cx.race.on {
                let done = mb.phase;
                cx.race.acquire_bar(w.rank, bar, gw, done);
            }
        }
        &Ins::MbarWaitParity { bar, parity, ring } => {
            let mut m = active;
            while m != 0 {
                let l = m.trailing_zeros() as usize;
                m &= m - 1;
                let b = ring_elem(prog, w, cx, bar, ring, l)?;
                let p = rd_idx(&w.regs, parity, l) as u32 & 1;
                let mb = &cx.ctas[w.rank as usize].mbar[b as usize];
                // The hardware's parity test: the phase with parity `p` has
                // completed once the current phase's parity differs (so on
                // a fresh barrier a wait for parity 1 passes at once).
                if !mb.init || mb.phase & 1 == p {
                    return Ok(Next::Block);
                }
            }
            if cx.race.on {
                let mut m = active;
                let mut acquired = u32::MAX;
                while m != 0 {
                    let l = m.trailing_zeros() as usize;
                    m &= m - 1;
                    let b = ring_elem(prog, w, cx, bar, ring, l)?;
                    if b != acquired {
                        let done = cx.ctas[w.rank as usize].mbar[b as usize].phase;
                        cx.race.acquire_bar(w.rank, b, gw, done);
                        acquired = b;
                    }
                }
            }
        }
        Ins::Nop => {}
        Ins::CpCommit => {
            if cx.race.on {
                cx.race.commit(gw);
            }
        }
        &Ins::CpWait { n } => {
            if cx.race.on {
                cx.race.wait_group(gw, n);
            }
        }
        Ins::PdlWait => w.pdl_waited = true,
        Ins::ClusterArrive => {
            if w.cl_mask & active != 0 {
                let msg = "barrier.cluster.arrive again before barrier.cluster.wait".to_string();
                return Err(misuse(prog, w, cx, None, msg));
            }
            w.cl_mask |= active;
            w.cl_phase = cx.cbar.phase;
            cx.cbar.arrived += active.count_ones();
            if cx.race.on {
                cx.race.release_cluster(gw);
                cx.race.tick(gw);
            }
            let phase = cx.cbar.phase;
            cx.cbar.try_complete();
            if cx.race.on && cx.cbar.phase != phase {
                cx.race.complete_cluster();
            }
        }
        Ins::ClusterWait => {
            if active & !w.cl_mask != 0 {
                let msg =
                    "barrier.cluster.wait without a preceding barrier.cluster.arrive".to_string();
                return Err(misuse(prog, w, cx, None, msg));
            }
            if cx.cbar.phase <= w.cl_phase {
                return Ok(Next::Block);
            }
            w.cl_mask &= !active;
            if cx.race.on {
                cx.race.acquire_cluster(gw);
            }
        }
        &Ins::BarSync { id, threads } => {
            let cta = &mut cx.ctas[w.rank as usize];
            let live = cta.live;
            let nb = &mut cta.named[id as usize];
            match w.bar_wait {
                Some((i, g)) if i == id => {
                    if nb.generation == g {
                        return Ok(Next::Block);
                    }
                    w.bar_wait = None;
                    if cx.race.on {
                        cx.race.acquire_named(w.rank, id, gw);
                    }
                }
                _ => {
                    if nb.arrived == 0 {
                        nb.expected = threads;
                    }
                    nb.arrived += w.lanes.count_ones();
                    let need = if nb.expected == 0 { live } else { nb.expected };
                    if cx.race.on {
                        cx.race.release_named(w.rank, id, gw);
                        cx.race.tick(gw);
                    }
                    if nb.arrived >= need {
                        nb.arrived = 0;
                        nb.generation += 1;
                        if cx.race.on {
                            cx.race.complete_named(w.rank, id);
                            cx.race.acquire_named(w.rank, id, gw);
                        }
                    } else {
                        w.bar_wait = Some((id, nb.generation));
                        return Ok(Next::Block);
                    }
                }
            }
        }
        &Ins::SetMaxNReg { inc, regs } => {
            let cta = &mut cx.ctas[w.rank as usize];
            let lanes = u64::from(w.lanes.count_ones());
            let (now, to) = (u64::from(w.nreg), u64::from(regs));
            if inc {
                let need = to.saturating_sub(now) * lanes;
                if cta.reg_pool < need {
                    return Ok(Next::Block);
                }
                cta.reg_pool -= need;
            } else {
                cta.reg_pool += now.saturating_sub(to) * lanes;
            }
            w.nreg = regs;
        }
        _ => unreachable!("not a synchronisation op"),
    }
    Ok(Next::Step)
}
