//! Warp scheduling within one cluster.
//!
//! Deterministic by default: warps in order (CTA rank, then warp), each run
//! until it blocks or exits, then the next; passes repeat until every warp
//! has exited. With a seed, every pass visits the warps in a random order and
//! runs each for a random slice of 1..=`max_slice` instructions, so
//! different seeds interleave the warps' memory accesses differently (a kernel
//! whose result depends on the interleaving has a race).
//!
//! With a seed and `hold_back`, one CTA of the cluster picked at random (one
//! warp when the cluster has a single CTA) is not scheduled until no other
//! warp can make progress (all exited or blocked); then it is released for
//! the rest of the cluster's run. Its early accesses thus come after its
//! peers' late ones unless a barrier orders them.
//!
//! A pass in which no warp executes an instruction is a deadlock: every
//! unfinished warp is reported with the barrier it waits on.

use crate::decode::{Ins, Program};
use crate::exec::{self, Cluster, Cta, Stop, Warp};
use crate::mbarrier::{ClusterBar, Mbar, Named};
use crate::memory::TensorView;
use crate::options::SimOptions;
use crate::race::Race;
use kda_device::error::sim::{
    AtExit, BarrierAtExit, BlockedWarp, Deadlock, SimError, Site, TxOverflow, WaitOn,
};

/// SplitMix64: a tiny, good-enough generator for interleavings.
pub(crate) struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed)
    }
    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
}

/// Per-host-thread state reused from one cluster to the next.
pub(crate) struct Runner {
    warps: Vec<Warp>,
    ctas: Vec<Cta>,
    order: Vec<usize>,
    race: Race,
}

/// What one launch gives every cluster.
pub(crate) struct LaunchCtx<'a> {
    pub prog: &'a Program,
    pub tensors: &'a [TensorView<'a>],
    pub params: &'a [[u32; 2]],
    pub grid: [u32; 3],
    pub check_pdl: bool,
    pub opts: &'a SimOptions,
}

impl Runner {
    pub fn new(prog: &Program, race_check: bool) -> Runner {
        let c = prog.kernel.launch.cluster.max(1);
        let mut warps = vec![];
        for r in 0..c {
            for w in 0..prog.warps {
                warps.push(Warp::new(prog, r, w));
            }
        }
        let smem_words = prog.layout.bytes.div_ceil(4) as usize;
        let ctas = (0..c)
            .map(|_| Cta {
                smem: vec![0; smem_words],
                mbar: vec![Mbar::default(); prog.kernel.barriers.len()],
                named: Default::default(),
                block: [0; 3],
                live: 0,
                reg_pool: 0,
            })
            .collect();
        let gran = if prog.min_shared_access < 4 { 2 } else { 4 };
        let race = Race::new(
            race_check,
            c,
            prog.warps,
            prog.kernel.barriers.len(),
            prog.layout.bytes,
            gran,
        );
        Runner {
            order: (0..warps.len()).collect(),
            warps,
            ctas,
            race,
        }
    }

    /// Run cluster `index` whose CTAs have the given `%ctaid`s (by rank).
    /// Returns the number of warp-instructions executed.
    pub fn run_cluster(
        &mut self,
        lx: &LaunchCtx<'_>,
        index: u32,
        blocks: &[[u32; 3]],
    ) -> Result<u64, SimError> {
        let prog = lx.prog;
        let block_threads = prog.kernel.launch.block;
        for (r, cta) in self.ctas.iter_mut().enumerate() {
            cta.smem.fill(0);
            cta.mbar.iter_mut().for_each(|m| *m = Mbar::default());
            cta.named = std::array::from_fn(|_| Named::default());
            cta.block = blocks[r];
            cta.live = block_threads;
            cta.reg_pool = 0;
        }
        let start = prog.kernel.max_regs.unwrap_or(0);
        for w in self.warps.iter_mut() {
            let rank = w.rank;
            w.reset(rank);
            w.nreg = start;
        }
        // Each cluster's interleaving depends only on the seed and its index,
        // not on the clusters this host thread ran before.
        for (i, o) in self.order.iter_mut().enumerate() {
            *o = i;
        }
        self.race.reset();
        let mut cx = Cluster {
            ctas: std::mem::take(&mut self.ctas),
            cbar: ClusterBar {
                total: block_threads * blocks.len() as u32,
                ..ClusterBar::default()
            },
            tensors: lx.tensors,
            params: lx.params,
            grid: lx.grid,
            index,
            check_pdl: lx.check_pdl,
            race: std::mem::take(&mut self.race),
            bulk: Vec::new(),
            wg_reads: Vec::new(),
        };
        let res = self.schedule(lx, &mut cx);
        self.ctas = cx.ctas;
        self.race = cx.race;
        res
    }

    fn schedule(&mut self, lx: &LaunchCtx<'_>, cx: &mut Cluster<'_>) -> Result<u64, SimError> {
        let prog = lx.prog;
        let opts = lx.opts;
        let mut rng = opts
            .seed
            .map(|s| Rng::new(s ^ (cx.index as u64).wrapping_mul(0xd1b5_4a32_d192_ed03)));
        let cluster = prog.kernel.launch.cluster.max(1);
        let mut held = match rng.as_mut() {
            Some(r) if opts.hold_back && cluster > 1 => Held::Rank(r.below(cluster as u64) as u32),
            Some(r) if opts.hold_back && self.warps.len() > 1 => {
                Held::Warp(r.below(self.warps.len() as u64) as usize)
            }
            _ => Held::Nothing,
        };
        let mut steps = 0u64;
        loop {
            let mut progress = false;
            let mut alive = 0;
            if let Some(r) = rng.as_mut() {
                for i in (1..self.order.len()).rev() {
                    let j = r.below(i as u64 + 1) as usize;
                    self.order.swap(i, j);
                }
            }
            for oi in 0..self.order.len() {
                let wi = self.order[oi];
                let w = &mut self.warps[wi];
                if w.done {
                    continue;
                }
                if held.holds(wi, w.rank) {
                    alive += 1;
                    continue;
                }
                let left = opts.max_steps.saturating_sub(steps).max(1);
                let budget = match rng.as_mut() {
                    Some(r) => (1 + r.below(opts.max_slice.max(1) as u64)).min(left),
                    None => left,
                };
                let (n, stop) = exec::run(prog, w, cx, budget)?;
                steps += n;
                // Bulk stores in flight advance at the seeded schedule's
                // choice (a deterministic run leaves them to the waits).
                if let Some(r) = rng.as_mut()
                    && !cx.bulk.is_empty()
                    && r.below(3) == 0
                {
                    let i = r.below(cx.bulk.len() as u64) as usize;
                    exec::bulk::step(cx, i);
                }
                progress |= n > 0;
                if stop != Stop::Done {
                    alive += 1;
                } else if cx.race.on && cx.ctas[w.rank as usize].live == 0 {
                    check_exit(prog, w, cx)?;
                }
                if steps >= opts.max_steps && stop != Stop::Done {
                    return Err(SimError::StepLimit {
                        kernel: prog.kernel.name.clone(),
                        cluster: cx.index,
                        limit: opts.max_steps,
                    });
                }
            }
            if alive == 0 {
                break;
            }
            if !progress {
                if held != Held::Nothing {
                    // Nobody else can move: release the held warps.
                    held = Held::Nothing;
                    continue;
                }
                return Err(self.deadlock(prog, cx));
            }
        }
        // Kernel exit does not wait for bulk stores: the GPU completes them.
        exec::bulk::drain(cx);
        check_leftover_tx(prog, cx)?;
        Ok(steps)
    }

    fn deadlock(&self, prog: &Program, cx: &Cluster<'_>) -> SimError {
        let k = &prog.kernel;
        let mut blocked = vec![];
        for w in self.warps.iter().filter(|w| !w.done) {
            let pc = w.pc as usize;
            let cta = &cx.ctas[w.rank as usize];
            let wait = match prog.code[pc] {
                Ins::MbarWait { bar, phase } => {
                    let m = &cta.mbar[bar as usize];
                    WaitOn::Mbarrier {
                        name: k.barriers[kda_ir::Barrier::from_u32(bar)].name.clone(),
                        barrier: bar,
                        phase,
                        initialized: m.init,
                        completed: m.phase,
                        arrivals_expected: m.count,
                        arrivals_done: m.count - m.pending,
                        tx_expected: m.expected,
                        tx_arrived: m.delivered,
                        tx_pending: m.tx,
                    }
                }
                Ins::MbarWaitParity { bar, ring, .. } => {
                    // The first active lane's barrier names the wait.
                    let l = w.active.trailing_zeros().min(31) as usize;
                    let bar = match ring {
                        Some(r) => bar + (w.regs[r.at.slot as usize * 32 + l]).min(r.len - 1),
                        None => bar,
                    };
                    let m = &cta.mbar[bar as usize];
                    WaitOn::Mbarrier {
                        name: k.barriers[kda_ir::Barrier::from_u32(bar)].name.clone(),
                        barrier: bar,
                        phase: m.phase,
                        initialized: m.init,
                        completed: m.phase,
                        arrivals_expected: m.count,
                        arrivals_done: m.count - m.pending,
                        tx_expected: m.expected,
                        tx_arrived: m.delivered,
                        tx_pending: m.tx,
                    }
                }
                Ins::ClusterWait => WaitOn::Cluster {
                    phase: cx.cbar.phase,
                    arrived: cx.cbar.arrived + cx.cbar.exited,
                    expected: cx.cbar.total,
                },
                Ins::BarSync { id, threads } => {
                    let nb = &cta.named[id as usize];
                    WaitOn::Named {
                        id,
                        arrived: nb.arrived,
                        expected: if threads == 0 { cta.live } else { threads },
                    }
                }
                Ins::SetMaxNReg { regs, .. } => WaitOn::Registers {
                    holds: w.nreg,
                    wants: regs,
                    pool: cta.reg_pool,
                },
                _ => unreachable!("a warp only blocks on a wait"),
            };
            blocked.push(BlockedWarp {
                block: cta.block,
                rank: w.rank,
                warp: w.warp,
                lanes: w.active,
                wait,
                loc: prog.loc_of(pc).clone(),
                role: prog.role_name(pc, w.warp),
            });
        }
        SimError::Deadlock(Box::new(Deadlock {
            kernel: k.name.clone(),
            cluster: cx.index,
            ctas: cx.ctas.iter().map(|c| c.block).collect(),
            blocked,
        }))
    }
}

/// The warps `hold_back` keeps off the schedule.
#[derive(Copy, Clone, PartialEq)]
enum Held {
    Nothing,
    /// Every warp of this CTA rank.
    Rank(u32),
    /// This warp (index into the runner's warps).
    Warp(usize),
}

impl Held {
    fn holds(self, index: usize, rank: u32) -> bool {
        match self {
            Held::Nothing => false,
            Held::Rank(r) => r == rank,
            Held::Warp(i) => i == index,
        }
    }
}

/// The last warp of a CTA exited (`w`): none of the CTA's mbarriers may
/// still expect transaction bytes, and on a barrier the CTA waits on, no
/// phase that delivered bytes may have completed after the last wait.
fn check_exit(prog: &Program, w: &Warp, cx: &Cluster<'_>) -> Result<(), SimError> {
    let k = &prog.kernel;
    let cta = &cx.ctas[w.rank as usize];
    let nb = cta.mbar.len();
    for (b, m) in cta.mbar.iter().enumerate() {
        let i = w.rank as usize * nb + b;
        let issue = if m.init && m.tx > 0 {
            AtExit::TxIncoming {
                phase: m.phase,
                expected: m.expected,
                arrived: m.delivered,
            }
        } else if cx.race.waited[i] && cx.race.tx_done[i] > cx.race.acquired[i] {
            AtExit::Unwaited {
                phase: cx.race.tx_done[i] - 1,
            }
        } else {
            continue;
        };
        let decl = &k.barriers[kda_ir::Barrier::from_u32(b as u32)];
        let pc = w.pc as usize;
        return Err(SimError::AtExit(Box::new(BarrierAtExit {
            barrier: decl.name.clone(),
            rank: w.rank,
            issue,
            site: Site {
                loc: prog.loc_of(pc).clone(),
                op: "exit",
                cluster: cx.index,
                block: cta.block,
                rank: w.rank,
                warp: w.warp,
                lane: None,
            },
            decl: decl.loc.clone(),
        })));
    }
    Ok(())
}

/// Bytes that reached a barrier beyond anything its phase expected, found
/// when every warp has exited (the surplus sits in a phase nobody armed).
fn check_leftover_tx(prog: &Program, cx: &Cluster<'_>) -> Result<(), SimError> {
    let k = &prog.kernel;
    for (r, cta) in cx.ctas.iter().enumerate() {
        for (b, m) in cta.mbar.iter().enumerate() {
            if m.init && m.tx < 0 {
                let decl = &k.barriers[kda_ir::Barrier::from_u32(b as u32)];
                return Err(SimError::TxOverflow(Box::new(TxOverflow {
                    barrier: decl.name.clone(),
                    rank: r as u32,
                    phase: m.phase,
                    expected: m.expected,
                    arrived: m.delivered,
                    site: match m.last_sender {
                        Some((pc, sr, sw, sl)) => Site {
                            loc: prog.loc_of(pc as usize).clone(),
                            op: prog.op_name(pc as usize),
                            cluster: cx.index,
                            block: cx.ctas[sr as usize].block,
                            rank: sr,
                            warp: sw,
                            lane: Some(sl),
                        },
                        None => Site {
                            loc: decl.loc.clone(),
                            op: "mbarrier",
                            cluster: cx.index,
                            block: cta.block,
                            rank: r as u32,
                            warp: 0,
                            lane: None,
                        },
                    },
                })));
            }
        }
    }
    Ok(())
}
