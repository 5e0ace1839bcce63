//! Ordering: what must already have happened on the same threads when a read
//! or a send runs. Produced tensors are read after `pdl.wait`, guarded buffers
//! (also by a bulk store, which reads its source) after a wait on their
//! guard, DSMEM sends after the cluster barrier that follows the target
//! barrier's initialisation, and a bulk store or a wgmma (async proxy) after
//! a `fence.proxy.async` that follows every `st.shared` (generic proxy) into
//! its source which may precede it on these threads ([`fences`]).
//!
//! A forward walk over the region tree carries the facts established so far
//! (see the module doc of the verifier for how they flow through regions).

use std::collections::{BTreeMap, BTreeSet};

use super::{Ctx, Layout};
use crate::entities::{Barrier, Buffer, Inst, Region, Role};
use crate::kernel::Provenance;
use crate::op::Op;

pub(super) fn check(cx: &mut Ctx, layout: &Layout) {
    let k = cx.k;
    let mut first_init = BTreeMap::new();
    for &i in &layout.order {
        if let Op::MbarInit { barrier } = k.insts[i].op {
            first_init
                .entry(barrier)
                .or_insert(layout.pos(i).expect("in layout"));
        }
    }
    let mut w = Walk {
        cx,
        layout,
        first_init,
    };
    let mut s = State::default();
    w.region(k.body, &mut s);
    fences(cx);
}

/// Bulk stores read their shared source through the async proxy, which does
/// not see the generic proxy's `st.shared` writes unless a
/// `fence.proxy.async` orders them first: every `st.shared` into a bulk
/// store's source that may precede the store on the same threads (earlier
/// in program order, or in an earlier iteration of a loop around both) must
/// be followed by a fence before the store. A may-analysis: the buffers
/// written since the last fence on some path, iterated to a fixed point
/// over loops. Writes by other threads ordered by a barrier are covered by
/// those threads' own code (the usual shape: every writer fences, then the
/// barrier, then one thread stores).
fn fences(cx: &mut Ctx) {
    let k = cx.k;
    let sources: BTreeSet<Buffer> = k
        .insts
        .values()
        .flat_map(|d| match d.op {
            Op::BulkStore { buffer, .. } => vec![buffer],
            Op::Wgmma { a, b, .. } => vec![a, b],
            _ => vec![],
        })
        .collect();
    if sources.is_empty() {
        return;
    }
    let mut f = Fences {
        cx,
        sources,
        report: true,
        reported: BTreeSet::new(),
    };
    // Each loop is iterated to its fixed point silently, then walked once
    // more reporting (`Fences::looped`).
    f.region(k.body, &mut FenceState::default());
}

/// Unfenced written buffers, here and per role (from the role regions run).
#[derive(Clone, Default, PartialEq)]
struct FenceState {
    here: BTreeMap<Buffer, Inst>,
    roles: BTreeMap<Role, BTreeMap<Buffer, Inst>>,
}

fn union(a: &mut BTreeMap<Buffer, Inst>, b: &BTreeMap<Buffer, Inst>) {
    for (k, v) in b {
        a.entry(*k).or_insert(*v);
    }
}

impl FenceState {
    fn union(&mut self, o: &FenceState) {
        union(&mut self.here, &o.here);
        for (r, b) in &o.roles {
            union(self.roles.entry(*r).or_default(), b);
        }
    }
}

struct Fences<'a, 'k> {
    cx: &'a mut Ctx<'k>,
    sources: BTreeSet<Buffer>,
    report: bool,
    reported: BTreeSet<Inst>,
}

impl Fences<'_, '_> {
    fn region(&mut self, r: Region, s: &mut FenceState) {
        let k = self.cx.k;
        for &i in &k.regions[r].insts {
            match k.insts[i].op {
                Op::StShared { buffer } if self.sources.contains(&buffer) => {
                    s.here.insert(buffer, i);
                }
                Op::FenceProxyAsync => s.here.clear(),
                Op::BulkStore { .. } | Op::Wgmma { .. } => {
                    for buffer in k.insts[i].op.buffers() {
                        if let Some(&w) = s.here.get(&buffer)
                            && self.report
                            && self.reported.insert(i)
                        {
                            let m = self.cx.mnemonic(i);
                            let at = &k.insts[w].loc;
                            let what = if matches!(k.insts[i].op, Op::Wgmma { .. }) {
                                "the wgmma"
                            } else {
                                "the bulk store"
                            };
                            let msg = format!(
                                "`{m}` reads {} through the async proxy after an `st.shared` into it (at {at}) with no `fence.proxy.async` between them on these threads: {what} may read the old bytes; add `fence.proxy.async` after the writes (before the barrier that orders them before the {})",
                                self.cx.buffer(buffer),
                                if what == "the wgmma" {
                                    "wgmma"
                                } else {
                                    "store"
                                }
                            );
                            self.cx.error(i, msg);
                        }
                    }
                }
                Op::If { then, els } => {
                    let (mut a, mut b) = (s.clone(), s.clone());
                    self.region(then, &mut a);
                    self.region(els, &mut b);
                    a.union(&b);
                    *s = a;
                }
                Op::For { body } => self.looped(&[body], s),
                Op::While { cond, body } => {
                    self.region(cond, s);
                    self.looped(&[body, cond], s);
                }
                Op::InRole { role, body } => {
                    let mut inner = s.clone();
                    if let Some(f) = s.roles.get(&role) {
                        union(&mut inner.here, f);
                    }
                    self.region(body, &mut inner);
                    s.roles = inner.roles;
                    s.roles.insert(role, inner.here);
                }
                _ => {}
            }
        }
    }

    /// A loop body (regions run in order per iteration), run zero or more
    /// times: its entry state grows by its exit state until it is stable.
    fn looped(&mut self, body: &[Region], s: &mut FenceState) {
        let report = self.report;
        self.report = false;
        let mut entry = s.clone();
        loop {
            let mut t = entry.clone();
            for &r in body {
                self.region(r, &mut t);
            }
            let mut next = entry.clone();
            next.union(&t);
            if next == entry {
                break;
            }
            entry = next;
        }
        self.report = report;
        let mut t = entry.clone();
        for &r in body {
            self.region(r, &mut t);
        }
        entry.union(&t);
        *s = entry;
    }
}

/// What the threads running here have passed on every path.
#[derive(Clone, Default)]
struct Facts {
    pdl: bool,
    /// The latest `cluster.wait` (by layout position) passed.
    cluster: Option<usize>,
    waited: BTreeSet<Barrier>,
}

impl Facts {
    /// What holds after either of two paths.
    fn meet(&self, o: &Facts) -> Facts {
        Facts {
            pdl: self.pdl && o.pdl,
            cluster: self.cluster.zip(o.cluster).map(|(a, b)| a.min(b)),
            waited: self.waited.intersection(&o.waited).copied().collect(),
        }
    }

    /// What holds after both.
    fn join(&self, o: &Facts) -> Facts {
        Facts {
            pdl: self.pdl || o.pdl,
            cluster: self.cluster.max(o.cluster),
            waited: self.waited.union(&o.waited).copied().collect(),
        }
    }
}

/// Facts of the threads running here, and of each role's threads from the
/// role regions they ran.
#[derive(Clone, Default)]
struct State {
    here: Facts,
    roles: BTreeMap<Role, Facts>,
}

impl State {
    fn meet(&self, o: &State) -> State {
        State {
            here: self.here.meet(&o.here),
            roles: self
                .roles
                .iter()
                .filter_map(|(r, f)| o.roles.get(r).map(|g| (*r, f.meet(g))))
                .collect(),
        }
    }
}

struct Walk<'a, 'k> {
    cx: &'a mut Ctx<'k>,
    layout: &'a Layout,
    first_init: BTreeMap<Barrier, usize>,
}

impl Walk<'_, '_> {
    fn region(&mut self, r: Region, s: &mut State) {
        let k = self.cx.k;
        for &i in &k.regions[r].insts {
            let m = self.cx.mnemonic(i);
            match k.insts[i].op {
                Op::LdGlobal { tensor, .. }
                | Op::AtomAdd { tensor }
                | Op::CpAsync { tensor, .. }
                | Op::BulkCopy { tensor, .. }
                    if k.tensors[tensor].provenance == Provenance::Produced && !s.here.pdl =>
                {
                    let msg = format!(
                        "`{m}` reads {}, which the preceding launch produces, before `pdl.wait`; wait for the preceding launch first (only ready tensors may be read before the wait)",
                        self.cx.tensor(tensor)
                    );
                    self.cx.error(i, msg);
                }
                Op::LdShared { buffer } | Op::BulkStore { buffer, .. } => {
                    if let Some(g) = k.buffers[buffer].guard
                        && !s.here.waited.contains(&g)
                    {
                        let msg = format!(
                            "`{m}` reads {}, which {} guards, before these threads wait on that barrier; add an `mbarrier.wait` on it first, on every path in this role",
                            self.cx.buffer(buffer),
                            self.cx.barrier(g)
                        );
                        self.cx.error(i, msg);
                    }
                }
                Op::StAsync { barrier, .. } | Op::MbarArriveRemote { barrier, .. } => {
                    let (does, to) = match k.insts[i].op {
                        Op::StAsync { .. } => ("completes bytes on", "sends to"),
                        _ => ("arrives on", "arrives on"),
                    };
                    match self.first_init.get(&barrier) {
                        None => {
                            let msg = format!(
                                "`{m}` {does} {} of a peer CTA, but no `mbarrier.init` initialises that barrier",
                                self.cx.barrier(barrier)
                            );
                            self.cx.error(i, msg);
                        }
                        Some(&init) if s.here.cluster.is_none_or(|c| c < init) => {
                            let at = &k.insts[self.layout.order[init]].loc;
                            let msg = format!(
                                "`{m}` {to} {} of a peer CTA before a `cluster.wait` that follows its `mbarrier.init` (at {at}); the peer's barrier may not be initialised yet: pass `cluster.arrive` and `cluster.wait` after the init first",
                                self.cx.barrier(barrier)
                            );
                            self.cx.error(i, msg);
                        }
                        Some(_) => {}
                    }
                }
                _ => {}
            }
            match k.insts[i].op {
                Op::GridDepWait => s.here.pdl = true,
                Op::MbarWait { barrier, .. } | Op::MbarWaitParity { barrier, .. } => {
                    s.here.waited.insert(barrier);
                }
                Op::ClusterWait => s.here.cluster = s.here.cluster.max(self.layout.pos(i)),
                Op::If { then, els } => {
                    let (mut a, mut b) = (s.clone(), s.clone());
                    self.region(then, &mut a);
                    self.region(els, &mut b);
                    *s = a.meet(&b);
                }
                Op::For { body } => self.region(body, &mut s.clone()),
                Op::While { cond, body } => {
                    // The condition runs at least once; the body may not run.
                    self.region(cond, s);
                    self.region(body, &mut s.clone());
                }
                Op::InRole { role, body } => {
                    let mut inner = s.clone();
                    if let Some(f) = s.roles.get(&role) {
                        inner.here = inner.here.join(f);
                    }
                    self.region(body, &mut inner);
                    s.roles = inner.roles;
                    s.roles.insert(role, inner.here);
                }
                _ => {}
            }
        }
    }
}
