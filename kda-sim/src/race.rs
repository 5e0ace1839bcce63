//! The race detector: vector clocks per warp and shadow state per granule of
//! shared memory, checked on every shared access of a simulated cluster.
//!
//! The simulator executes every access at once, so a kernel that reads data
//! before the wait that covers it still computes the right answer under
//! every interleaving. This module decides instead whether the access is
//! *ordered* after the accesses it conflicts with, as the hardware requires:
//!
//! * every warp of the cluster is an actor with a vector clock (FastTrack
//!   style). A release (mbarrier arrive, `st.async` complete-tx, `bar.sync`
//!   arrival, cluster-barrier arrive, exit) publishes the warp's clock to the
//!   barrier and then advances the warp's own entry; an acquire (a wait that
//!   passes) joins the barrier's published clock into the warp's;
//! * every mbarrier of every CTA is an actor too, whose clock counts its
//!   completed phases. An asynchronous write (`st.async`, `cp.async.bulk`)
//!   is stamped with the barrier and the phase whose transaction count it
//!   belongs to: it is visible to a warp once that warp's clock holds the
//!   phase's completion, i.e. after a wait on the phase (or anything ordered
//!   after such a wait). Barrier clocks accumulate, so a wait on a phase
//!   also covers the phases before it;
//! * every warp's `cp.async` queue is an actor whose clock counts the groups
//!   `cp.async.wait_group` has completed; a `cp.async` write is stamped with
//!   the group it is committed in;
//! * every warp's bulk-store queue is two actors: one whose clock counts
//!   the bulk groups whose shared sources `cp.async.bulk.wait_group.read`
//!   has seen read, one counting the groups `cp.async.bulk.wait_group` has
//!   seen written to global memory. A bulk store reads its source as that
//!   first actor (a later write of the source conflicts unless ordered
//!   after a `wait_group.read` covering the store) and writes its global
//!   destination as the second: the destinations in flight are kept per
//!   tensor, and a global access of the same kernel (load, store, copy)
//!   overlapping one conflicts unless ordered after a `wait_group` covering it;
//! * each shadow granule (2 bytes, or 4 when the kernel has no 2-byte shared
//!   access) holds the last write's stamp and the reads since: one read
//!   stamp, or a read set when unordered warps read it. A read conflicts
//!   with a write it is not ordered after; a write with any earlier write or
//!   read it is not ordered after. Asynchronous writes are checked against
//!   the earlier accesses with the issuing warp's clock.
//!
//! Lanes of one warp are not told apart (the simulator runs them in
//! lockstep, one instruction at a time).

/// No actor / no read.
const NONE: u32 = u32::MAX;
/// `r_warp` flag: the granule's reads are in read set `r_warp & !SET`.
const SET: u32 = 1 << 31;

/// Shadow state of one granule of a CTA's shared memory.
#[derive(Copy, Clone)]
struct Gran {
    /// Actor of the last write (a warp, a barrier, a `cp.async` queue) or NONE.
    w_actor: u32,
    /// The write's clock: visible to a warp whose clock for `w_actor` is at least this.
    w_clock: u32,
    w_pc: u32,
    /// The warp (cluster index) that issued the write.
    w_warp: u32,
    /// The last reader (NONE, a warp, or SET | read set).
    r_warp: u32,
    r_clock: u32,
    r_pc: u32,
}

const EMPTY: Gran = Gran {
    w_actor: NONE,
    w_clock: 0,
    w_pc: 0,
    w_warp: 0,
    r_warp: NONE,
    r_clock: 0,
    r_pc: 0,
};

/// What an access conflicts with.
#[derive(Copy, Clone, Debug)]
pub(crate) enum Prior {
    /// A write by a warp (plain `st.shared`).
    Write,
    /// An asynchronous write completing a phase of an mbarrier of CTA `rank`.
    Async { rank: u32, bar: u32, phase: u32 },
    /// A `cp.async` in commit group `group` of its warp.
    CpAsync { group: u32 },
    /// A read.
    Read,
    /// A bulk store's read of its source, in bulk group `group` of its warp.
    BulkRead { group: u32 },
}

/// A conflict found by a check: bytes `start..end` of CTA `rank`'s shared
/// memory, against the earlier access of warp `warp` (cluster index) at `pc`.
#[derive(Copy, Clone, Debug)]
pub(crate) struct Conflict {
    pub rank: u32,
    pub start: u32,
    pub end: u32,
    pub pc: u32,
    pub warp: u32,
    pub prior: Prior,
}

/// The stamp an access puts on the bytes it writes.
#[derive(Copy, Clone, Debug)]
pub(crate) enum Stamp {
    /// A plain write by the issuing warp.
    Plain,
    /// An asynchronous write counted in phase `phase` of mbarrier `bar` of CTA `rank`.
    Async { rank: u32, bar: u32, phase: u32 },
    /// A `cp.async` of the issuing warp (in its open commit group).
    CpAsync,
}

/// Race-detector state of one cluster run.
#[derive(Default)]
pub(crate) struct Race {
    pub on: bool,
    /// Warps per CTA, CTAs, warps of the cluster, mbarriers per CTA, actors.
    warps: u32,
    nw: usize,
    nb: usize,
    na: usize,
    gran: u32,
    /// Clock of warp `t`: `vc[t * na..][..na]`.
    vc: Vec<u32>,
    /// Per mbarrier (rank * nb + bar): published clocks so far and at the last completion.
    bar_rel: Vec<u32>,
    bar_done: Vec<u32>,
    /// Per named barrier (rank * 16 + id).
    named_rel: Vec<u32>,
    named_done: Vec<u32>,
    cl_rel: Vec<u32>,
    cl_done: Vec<u32>,
    /// `cp.async` groups committed per warp.
    commits: Vec<u32>,
    /// Bulk groups committed per warp.
    bulk_commits: Vec<u32>,
    /// Bulk-store destinations in flight, per tensor.
    inflight: Vec<Vec<InFlight>>,
    shadow: Vec<Vec<Gran>>,
    /// Read sets: (clock, pc) per warp, clock 0 for none.
    sets: Vec<Vec<(u32, u32)>>,
    free_sets: Vec<u32>,
    /// Per mbarrier: completed phases a wait has acquired, whether any wait
    /// passed, and the completed count after the last phase that carried
    /// transaction bytes.
    pub acquired: Vec<u32>,
    pub waited: Vec<bool>,
    pub tx_done: Vec<u32>,
}

impl Race {
    pub fn new(on: bool, ctas: u32, warps: u32, barriers: usize, smem: u32, gran: u32) -> Race {
        let nw = (ctas * warps) as usize;
        let nb = barriers;
        let nbt = ctas as usize * nb;
        let na = nw + nbt + 3 * nw;
        let sz = |n: usize| if on { n } else { 0 };
        Race {
            on,
            warps,
            nw,
            nb,
            na,
            gran,
            vc: vec![0; sz(nw * na)],
            bar_rel: vec![0; sz(nbt * na)],
            bar_done: vec![0; sz(nbt * na)],
            named_rel: vec![0; sz(ctas as usize * 16 * na)],
            named_done: vec![0; sz(ctas as usize * 16 * na)],
            cl_rel: vec![0; sz(na)],
            cl_done: vec![0; sz(na)],
            commits: vec![0; sz(nw)],
            bulk_commits: vec![0; sz(nw)],
            inflight: vec![],
            shadow: (0..ctas)
                .map(|_| vec![EMPTY; sz(smem.div_ceil(gran) as usize)])
                .collect(),
            sets: vec![],
            free_sets: vec![],
            acquired: vec![0; sz(nbt)],
            waited: vec![false; sz(nbt)],
            tx_done: vec![0; sz(nbt)],
        }
    }

    /// Back to the start of a cluster run.
    pub fn reset(&mut self) {
        if !self.on {
            return;
        }
        self.vc.fill(0);
        for t in 0..self.nw {
            self.vc[t * self.na + t] = 1;
        }
        for v in [
            &mut self.bar_rel,
            &mut self.bar_done,
            &mut self.named_rel,
            &mut self.named_done,
            &mut self.cl_rel,
            &mut self.cl_done,
            &mut self.commits,
            &mut self.bulk_commits,
            &mut self.acquired,
            &mut self.tx_done,
        ] {
            v.fill(0);
        }
        self.waited.fill(false);
        self.inflight.iter_mut().for_each(Vec::clear);
        for s in self.shadow.iter_mut() {
            s.fill(EMPTY);
        }
        self.free_sets = (0..self.sets.len() as u32).collect();
    }

    /// The cluster index of warp `warp` of CTA `rank`.
    #[inline(always)]
    pub fn gw(&self, rank: u32, warp: u32) -> u32 {
        rank * self.warps + warp
    }

    /// The CTA rank and warp of a cluster warp index.
    pub fn split(&self, gw: u32) -> (u32, u32) {
        (gw / self.warps, gw % self.warps)
    }

    fn bar_actor(&self, rank: u32, bar: u32) -> usize {
        self.nw + rank as usize * self.nb + bar as usize
    }

    fn cpq_actor(&self, t: u32) -> usize {
        self.nw + self.bar_count() + t as usize
    }

    /// Warp `t`'s bulk-store queue as the reader of sources.
    fn bqr_actor(&self, t: u32) -> usize {
        self.nw + self.bar_count() + self.nw + t as usize
    }

    /// Warp `t`'s bulk-store queue as the writer of destinations.
    fn bqw_actor(&self, t: u32) -> usize {
        self.nw + self.bar_count() + 2 * self.nw + t as usize
    }

    /// The issuing warp and the kind of a read recorded by `actor` at
    /// `clock` (`nw` warps, `nbt` barrier actors).
    fn reader(nw: usize, nbt: usize, actor: u32, clock: u32) -> (u32, Prior) {
        let a = actor as usize;
        if a < nw {
            (actor, Prior::Read)
        } else {
            let t = (a - nw - nbt - nw) as u32;
            (t, Prior::BulkRead { group: clock - 1 })
        }
    }

    fn bar_count(&self) -> usize {
        self.acquired.len()
    }

    /// Read `bytes` at byte `byte` of CTA `rank`'s shared memory by warp `t`.
    #[inline]
    pub fn read(&mut self, rank: u32, t: u32, byte: u32, bytes: u32, pc: u32) -> Option<Conflict> {
        let now = self.vc[t as usize * self.na + t as usize];
        self.read_as(rank, t, t, now, byte, bytes, pc)
    }

    /// A bulk store issued by warp `t` reads its source, `bytes` at byte
    /// `byte` of CTA `rank`'s shared memory: ordered after what `t`'s clock
    /// covers, recorded as a read of `t`'s bulk queue in its open group.
    pub fn bulk_read(
        &mut self,
        rank: u32,
        t: u32,
        byte: u32,
        bytes: u32,
        pc: u32,
    ) -> Option<Conflict> {
        let a = self.bqr_actor(t) as u32;
        let clock = self.bulk_commits[t as usize] + 1;
        self.read_as(rank, t, a, clock, byte, bytes, pc)
    }

    /// A read checked with warp `t`'s clock, recorded as actor `who`'s at `now`.
    #[inline]
    fn read_as(
        &mut self,
        rank: u32,
        tw: u32,
        who: u32,
        now: u32,
        byte: u32,
        bytes: u32,
        pc: u32,
    ) -> Option<Conflict> {
        let t = who;
        let (g0, g1) = (byte / self.gran, (byte + bytes).div_ceil(self.gran));
        let na = self.na;
        let vc = &self.vc[tw as usize * na..][..na];
        let sh = &mut self.shadow[rank as usize];
        for g in g0..g1 {
            let s = &mut sh[g as usize];
            if s.w_actor != NONE && vc[s.w_actor as usize] < s.w_clock {
                let s = *s;
                return Some(self.write_conflict(rank, g, g1, s));
            }
            if s.r_warp == t || s.r_warp == NONE {
                (s.r_warp, s.r_clock, s.r_pc) = (t, now, pc);
            } else if s.r_warp & SET != 0 {
                self.sets[(s.r_warp & !SET) as usize][t as usize] = (now, pc);
            } else if s.r_clock <= vc[s.r_warp as usize] {
                (s.r_warp, s.r_clock, s.r_pc) = (t, now, pc);
            } else {
                let i = match self.free_sets.pop() {
                    Some(i) => {
                        self.sets[i as usize].fill((0, 0));
                        i
                    }
                    None => {
                        self.sets.push(vec![(0, 0); self.na]);
                        self.sets.len() as u32 - 1
                    }
                };
                let set = &mut self.sets[i as usize];
                set[s.r_warp as usize] = (s.r_clock, s.r_pc);
                set[t as usize] = (now, pc);
                s.r_warp = SET | i;
            }
        }
        None
    }

    #[cold]
    fn write_conflict(&self, rank: u32, g: u32, g1: u32, s: Gran) -> Conflict {
        let sh = &self.shadow[rank as usize];
        let mut e = g + 1;
        while e < g1 && {
            let n = &sh[e as usize];
            (n.w_actor, n.w_clock, n.w_pc) == (s.w_actor, s.w_clock, s.w_pc)
        } {
            e += 1;
        }
        let prior = if (s.w_actor as usize) < self.nw {
            Prior::Write
        } else if (s.w_actor as usize) < self.nw + self.bar_count() {
            let i = s.w_actor as usize - self.nw;
            Prior::Async {
                rank: (i / self.nb) as u32,
                bar: (i % self.nb) as u32,
                phase: s.w_clock - 1,
            }
        } else {
            Prior::CpAsync {
                group: s.w_clock - 1,
            }
        };
        Conflict {
            rank,
            start: g * self.gran,
            end: e * self.gran,
            pc: s.w_pc,
            warp: s.w_warp,
            prior,
        }
    }

    /// Write `bytes` at byte `byte` of CTA `rank`'s shared memory, issued by
    /// warp `t` (whose clock orders it after earlier accesses), stamped `stamp`.
    #[inline]
    pub fn write(
        &mut self,
        rank: u32,
        t: u32,
        byte: u32,
        bytes: u32,
        pc: u32,
        stamp: Stamp,
    ) -> Option<Conflict> {
        let (g0, g1) = (byte / self.gran, (byte + bytes).div_ceil(self.gran));
        let (actor, clock) = match stamp {
            Stamp::Plain => (t as usize, self.vc[t as usize * self.na + t as usize]),
            Stamp::Async { rank, bar, phase } => (self.bar_actor(rank, bar), phase + 1),
            Stamp::CpAsync => (self.cpq_actor(t), self.commits[t as usize] + 1),
        };
        let (na, nw, nbt) = (self.na, self.nw, self.bar_count());
        let vc = &self.vc[t as usize * na..][..na];
        let sh = &mut self.shadow[rank as usize];
        for g in g0..g1 {
            let s = &mut sh[g as usize];
            if s.w_actor != NONE && vc[s.w_actor as usize] < s.w_clock {
                let s = *s;
                return Some(self.write_conflict(rank, g, g1, s));
            }
            if s.r_warp != NONE {
                if s.r_warp & SET != 0 {
                    let i = s.r_warp & !SET;
                    let set = &self.sets[i as usize];
                    if let Some(u) = (0..self.na).find(|&u| set[u].0 > vc[u]) {
                        let (rank, start, pc) = (rank, g * self.gran, set[u].1);
                        let (warp, prior) = Self::reader(nw, nbt, u as u32, set[u].0);
                        return Some(Conflict {
                            rank,
                            start,
                            end: start + self.gran,
                            pc,
                            warp,
                            prior,
                        });
                    }
                    self.free_sets.push(i);
                } else if s.r_clock > vc[s.r_warp as usize] {
                    let start = g * self.gran;
                    let (warp, prior) = Self::reader(nw, nbt, s.r_warp, s.r_clock);
                    return Some(Conflict {
                        rank,
                        start,
                        end: start + self.gran,
                        pc: s.r_pc,
                        warp,
                        prior,
                    });
                }
            }
            *s = Gran {
                w_actor: actor as u32,
                w_clock: clock,
                w_pc: pc,
                w_warp: t,
                ..EMPTY
            };
        }
        None
    }

    /// Warp `t` advances its own clock: what it does next is not covered by
    /// what it has released so far.
    #[inline]
    pub fn tick(&mut self, t: u32) {
        self.vc[t as usize * self.na + t as usize] += 1;
    }

    fn join(dst: &mut [u32], src: &[u32]) {
        for (d, s) in dst.iter_mut().zip(src) {
            *d = (*d).max(*s);
        }
    }

    /// Warp `t` releases its clock to mbarrier `bar` of CTA `rank` (an
    /// arrival, or a transaction the warp's `st.async` completes).
    pub fn release_bar(&mut self, rank: u32, bar: u32, t: u32) {
        let (na, i) = (self.na, rank as usize * self.nb + bar as usize);
        Self::join(
            &mut self.bar_rel[i * na..][..na],
            &self.vc[t as usize * na..][..na],
        );
    }

    /// Mbarrier `bar` of CTA `rank` completed a phase and has now completed
    /// `completed`; `had_tx`: the phase carried transaction bytes.
    pub fn complete_bar(&mut self, rank: u32, bar: u32, completed: u32, had_tx: bool) {
        let (na, i) = (self.na, rank as usize * self.nb + bar as usize);
        let a = self.bar_actor(rank, bar);
        let rel = &mut self.bar_rel[i * na..][..na];
        rel[a] = completed;
        self.bar_done[i * na..][..na].copy_from_slice(rel);
        if had_tx {
            self.tx_done[i] = completed;
        }
    }

    /// Warp `t` passed a wait on mbarrier `bar` of CTA `rank`, which has completed `completed` phases.
    pub fn acquire_bar(&mut self, rank: u32, bar: u32, t: u32, completed: u32) {
        let (na, i) = (self.na, rank as usize * self.nb + bar as usize);
        Self::join(
            &mut self.vc[t as usize * na..][..na],
            &self.bar_done[i * na..][..na],
        );
        self.acquired[i] = self.acquired[i].max(completed);
        self.waited[i] = true;
    }

    /// Warp `t` arrives at named barrier `id` of its CTA `rank`.
    pub fn release_named(&mut self, rank: u32, id: u8, t: u32) {
        let (na, i) = (self.na, rank as usize * 16 + id as usize);
        Self::join(
            &mut self.named_rel[i * na..][..na],
            &self.vc[t as usize * na..][..na],
        );
    }

    /// Named barrier `id` of CTA `rank` completed a generation.
    pub fn complete_named(&mut self, rank: u32, id: u8) {
        let (na, i) = (self.na, rank as usize * 16 + id as usize);
        let (rel, done) = (&self.named_rel[i * na..][..na], &mut self.named_done);
        done[i * na..][..na].copy_from_slice(rel);
    }

    /// Warp `t` passes named barrier `id` of its CTA.
    pub fn acquire_named(&mut self, rank: u32, id: u8, t: u32) {
        let (na, i) = (self.na, rank as usize * 16 + id as usize);
        Self::join(
            &mut self.vc[t as usize * na..][..na],
            &self.named_done[i * na..][..na],
        );
    }

    /// Warp `t` arrives at the cluster barrier.
    pub fn release_cluster(&mut self, t: u32) {
        let na = self.na;
        Self::join(&mut self.cl_rel, &self.vc[t as usize * na..][..na]);
    }

    /// The cluster barrier completed a phase.
    pub fn complete_cluster(&mut self) {
        self.cl_done.copy_from_slice(&self.cl_rel);
    }

    /// Warp `t` passes the cluster barrier.
    pub fn acquire_cluster(&mut self, t: u32) {
        let na = self.na;
        Self::join(&mut self.vc[t as usize * na..][..na], &self.cl_done);
    }

    /// Warp `t` exits: what it did is released to the barriers that count
    /// exited threads as arrived (the cluster barrier, its CTA's named barriers).
    pub fn exit(&mut self, rank: u32, t: u32) {
        self.release_cluster(t);
        for id in 0..16 {
            self.release_named(rank, id, t);
        }
    }

    /// The commit group warp `t`'s next `cp.async` belongs to.
    pub fn group(&self, t: u32) -> u32 {
        self.commits[t as usize]
    }

    /// Warp `t` commits its open `cp.async` group.
    pub fn commit(&mut self, t: u32) {
        self.commits[t as usize] += 1;
    }

    /// Warp `t` waits until at most `n` of its committed groups are pending.
    pub fn wait_group(&mut self, t: u32, n: u32) {
        let a = self.cpq_actor(t);
        let done = self.commits[t as usize].saturating_sub(n);
        let c = &mut self.vc[t as usize * self.na + a];
        *c = (*c).max(done);
    }

    /// The bulk group warp `t`'s next bulk store belongs to.
    pub fn bulk_group(&self, t: u32) -> u32 {
        self.bulk_commits[t as usize]
    }

    /// Warp `t` commits its open bulk group.
    pub fn bulk_commit(&mut self, t: u32) {
        self.bulk_commits[t as usize] += 1;
    }

    /// Warp `t` passed `cp.async.bulk.wait_group[.read] n`: the sources of
    /// all but its `n` newest committed groups have been read (and, without
    /// `read`, their destinations written).
    pub fn bulk_wait(&mut self, t: u32, n: u32, read: bool) {
        let done = self.bulk_commits[t as usize].saturating_sub(n);
        let mut actors = vec![self.bqr_actor(t)];
        if !read {
            actors.push(self.bqw_actor(t));
        }
        for a in actors {
            let c = &mut self.vc[t as usize * self.na + a];
            *c = (*c).max(done);
        }
    }

    /// Warp `t` issued a bulk store writing bytes `start..end` of tensor
    /// `tensor` (in its open group).
    pub fn bulk_dest(&mut self, tensor: u32, t: u32, start: u64, end: u64, pc: u32) {
        let ti = tensor as usize;
        if self.inflight.len() <= ti {
            self.inflight.resize_with(ti + 1, Vec::new);
        }
        let group = self.bulk_commits[t as usize];
        let actor = self.bqw_actor(t) as u32;
        self.inflight[ti].push(InFlight {
            start,
            end,
            actor,
            clock: group + 1,
            warp: t,
            pc,
        });
    }

    /// A global access by warp `t` of bytes `start..end` of tensor `tensor`:
    /// the first bulk-store destination in flight it overlaps and is not
    /// ordered after (the store's warp, pc, group and the overlap).
    #[inline]
    pub fn global(&self, tensor: u32, t: u32, start: u64, end: u64) -> Option<GlobalConflict> {
        let list = self.inflight.get(tensor as usize)?;
        if list.is_empty() {
            return None;
        }
        let vc = &self.vc[t as usize * self.na..][..self.na];
        list.iter()
            .find(|f| f.start < end && start < f.end && vc[f.actor as usize] < f.clock)
            .map(|f| GlobalConflict {
                start: f.start.max(start),
                end: f.end.min(end),
                warp: f.warp,
                pc: f.pc,
                group: f.clock - 1,
            })
    }
}

/// A bulk store's destination in flight.
struct InFlight {
    start: u64,
    end: u64,
    /// The issuing warp's write-queue actor and the clock that covers it.
    actor: u32,
    clock: u32,
    warp: u32,
    pc: u32,
}

/// A global access overlapping a bulk store's destination it is not ordered after.
#[derive(Copy, Clone, Debug)]
pub(crate) struct GlobalConflict {
    /// Overlapping bytes of the tensor.
    pub start: u64,
    pub end: u64,
    /// The store's warp (cluster index) and pc.
    pub warp: u32,
    pub pc: u32,
    /// Its bulk group.
    pub group: u32,
}
