//! Roles, mbarriers, cluster barriers, fences, DSMEM sends, async copies and
//! programmatic dependent launch.

use std::fmt;

use kda_ir::{CachePolicy, Loc};

use super::mem::{IntoIx, Ix, Shared, SharedIndex, Tensor, TensorIndex};
use super::trace::{emit, emit_at, lend, structured};
use super::val::{Elem, Operand, Val};

/// A named, warp-aligned range of the block's threads (declared with `role!`).
#[derive(Copy, Clone)]
pub struct Role {
    pub(crate) id: kda_ir::Role,
}

impl fmt::Debug for Role {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Role({})", self.id)
    }
}

impl Role {
    /// The IR role.
    pub fn id(self) -> kda_ir::Role {
        self.id
    }
}

/// Run `body`'s code only in `role`'s threads (what `in_role!(role, { .. })` expands to).
#[track_caller]
pub fn in_role<R>(role: &Role, body: impl FnOnce() -> R) -> R {
    let loc = Loc::caller();
    let mut out = None;
    structured(&loc, |b| {
        b.in_role(role.id, |b| {
            out = Some(lend(b, &loc, body));
        })
    });
    out.expect("kda: role body traced")
}

/// An mbarrier in shared memory (declared with `mbarrier!`): its arrival count
/// and the transaction bytes it expects per phase are part of its declaration.
/// `bars[s]` of a ring (`mbarrier!(.., count = n)`) with a runtime `s` is a
/// `Barrier` too: its ops name element `s` at run time.
#[derive(Copy, Clone)]
pub struct Barrier {
    pub(crate) id: kda_ir::Barrier,
    tx: u32,
    /// Element `at` of the ring of `len` barriers from `id`.
    pub(crate) ring: Option<(u32, kda_ir::Value)>,
}

impl fmt::Debug for Barrier {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.ring {
            None => write!(f, "Barrier({}, tx {})", self.id, self.tx),
            Some((n, at)) => write!(f, "Barrier({}[{at} of {n}], tx {})", self.id, self.tx),
        }
    }
}

impl Barrier {
    pub(crate) fn new(id: kda_ir::Barrier, tx: u32) -> Barrier {
        Barrier { id, tx, ring: None }
    }

    /// The IR barrier (of a runtime ring element: the ring's first).
    pub fn id(self) -> kda_ir::Barrier {
        self.id
    }

    /// The transaction bytes it expects per phase.
    pub fn tx_bytes(self) -> u32 {
        self.tx
    }

    /// `mbarrier.init` with the declared arrival count (one thread).
    #[track_caller]
    pub fn init(self) {
        if self.ring.is_some() {
            panic!(
                "kda: initialise a ring's mbarriers by comptime index (`for b in bars {{ b.init() }}`), not `bars[runtime]`"
            );
        }
        emit(|b| b.mbarrier_init(self.id))
    }

    /// One arrival.
    #[track_caller]
    pub fn arrive(self) {
        match self.ring {
            None => emit(|b| b.mbarrier_arrive(self.id)),
            Some((n, at)) => emit(|b| b.mbarrier_arrive_at(self.id, n, at)),
        }
    }

    /// One arrival on this barrier of the cluster's CTA `rank` (comptime or
    /// runtime; this CTA's own rank works too): how the consumers of a ring
    /// stage that another CTA fills release it to that CTA's producer
    /// (`empty[s].arrive_on(peer)`; the producer waits on its own
    /// `empty[s]`). `mapa` + `mbarrier.arrive.release.cluster`: this thread's
    /// reads before it happen before the producer's writes after its wait,
    /// which acquires at cluster scope. Counts as one arrival of the
    /// destination's phase; the destination must have initialised the
    /// barrier and passed a cluster barrier after, as for `send!`.
    #[track_caller]
    pub fn arrive_on(self, rank: impl IntoIx) {
        let cta = rank.ix().value();
        match self.ring {
            None => emit(|b| b.mbarrier_arrive_remote(self.id, cta)),
            Some((n, at)) => emit(|b| b.mbarrier_arrive_remote_at(self.id, n, at, cta)),
        }
    }

    /// One arrival that expects the declared transaction bytes of this phase.
    #[track_caller]
    pub fn arm(self) {
        self.arrive_expect_tx(self.tx)
    }

    /// One arrival that expects `bytes` of this phase's transactions.
    #[track_caller]
    pub fn arrive_expect_tx(self, bytes: u32) {
        match self.ring {
            None => emit(|b| b.mbarrier_arrive_expect_tx(self.id, bytes)),
            Some((n, at)) => emit(|b| b.mbarrier_arrive_expect_tx_at(self.id, n, at, bytes)),
        }
    }

    /// Wait for the next phase this role has not waited for (the parity is
    /// tracked for you, as loop-carried state inside runtime loops).
    #[track_caller]
    pub fn wait(self) {
        match self.ring {
            None => emit(|b| b.wait(self.id)),
            Some((n, at)) => emit(|b| b.wait_at(self.id, n, at)),
        }
    }

    /// Wait for an explicit phase (0, 1, ...: parity `phase & 1`).
    #[track_caller]
    pub fn wait_phase(self, phase: u32) {
        if self.ring.is_some() {
            panic!(
                "kda: `wait_phase` names a comptime phase, which a runtime ring element does not have; use `wait()`"
            );
        }
        emit(|b| b.wait_phase(self.id, phase))
    }
}

/// A ring of mbarriers (`mbarrier!(.., count = n)`): `n` barriers with one
/// declaration, consecutive in shared memory. `bars[k]` with a comptime `k`
/// is one of them; `bars[s]` with a runtime `s: u32` names element `s` at
/// run time, and the phases of all elements are tracked together.
#[derive(Copy, Clone)]
pub struct Barriers {
    first: Option<kda_ir::Barrier>,
    n: u32,
    tx: u32,
}

impl fmt::Debug for Barriers {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Barriers({:?} x {}, tx {})", self.first, self.n, self.tx)
    }
}

impl Barriers {
    pub(crate) fn new(first: Option<kda_ir::Barrier>, n: u32, tx: u32) -> Barriers {
        Barriers { first, n, tx }
    }

    /// Number of barriers in the ring (its `count`).
    pub fn len(self) -> usize {
        self.n as usize
    }

    /// Whether the ring has no barriers (`count = 0`).
    pub fn is_empty(self) -> bool {
        self.n == 0
    }

    /// The first barrier (the ring's base in the IR).
    pub fn first(self) -> Option<kda_ir::Barrier> {
        self.first
    }

    /// Element `k` (comptime), if there is one.
    pub fn get(self, k: usize) -> Option<Barrier> {
        let first = self.first?;
        (k < self.n as usize).then(|| {
            Barrier::new(
                kda_ir::Barrier::from_u32(first.as_u32() + k as u32),
                self.tx,
            )
        })
    }

    /// Element `s`: a comptime integer or a runtime `u32`/`i32`.
    #[track_caller]
    pub fn at(self, s: impl RingIndex) -> Barrier {
        s.element(self)
    }

    /// Every element in order, as comptime-indexed barriers.
    pub fn iter(self) -> impl Iterator<Item = Barrier> {
        (0..self.len()).filter_map(move |k| self.get(k))
    }
}

impl IntoIterator for Barriers {
    type Item = Barrier;
    type IntoIter = Box<dyn Iterator<Item = Barrier>>;
    fn into_iter(self) -> Self::IntoIter {
        Box::new(self.iter())
    }
}

impl IntoIterator for &Barriers {
    type Item = Barrier;
    type IntoIter = Box<dyn Iterator<Item = Barrier>>;
    fn into_iter(self) -> Self::IntoIter {
        Box::new((*self).iter())
    }
}

/// What indexes a [`Barriers`] ring.
pub trait RingIndex {
    /// The element of `bars` this index names. A comptime index past the ring
    /// panics at trace time.
    #[track_caller]
    fn element(self, bars: Barriers) -> Barrier;
}

macro_rules! ring_index_int {
    ($($t:ty),*) => {$(
        impl RingIndex for $t {
            #[track_caller]
            fn element(self, bars: Barriers) -> Barrier {
                let k = usize::try_from(self).ok();
                match k.and_then(|k| bars.get(k)) {
                    Some(b) => b,
                    None => panic!("kda: mbarrier index {self} past a ring of {}", bars.n),
                }
            }
        }
    )*};
}
ring_index_int!(usize, u32, i32, u64, i64);

impl RingIndex for Val<u32> {
    #[track_caller]
    fn element(self, bars: Barriers) -> Barrier {
        let Some(first) = bars.first else {
            panic!("kda: a runtime index into an empty ring of mbarriers");
        };
        Barrier {
            id: first,
            tx: bars.tx,
            ring: Some((bars.n, self.value())),
        }
    }
}

impl RingIndex for Val<i32> {
    #[track_caller]
    fn element(self, bars: Barriers) -> Barrier {
        let v = emit(|b| b.cvt(self.value(), kda_ir::Type::U32));
        Val::<u32>::from_value(v).element(bars)
    }
}

impl<I: RingIndex> super::mem::LoadHandle<I> for Barriers {
    type Output = Barrier;
    #[track_caller]
    fn __kda_load(self, i: I) -> Barrier {
        i.element(self)
    }
}

/// `griddepcontrol.wait`: the preceding launch's writes are visible after it.
#[track_caller]
pub fn pdl_wait() {
    emit(|b| b.pdl_wait())
}

/// `griddepcontrol.launch_dependents`: let the next launch in the stream start.
#[track_caller]
pub fn pdl_trigger() {
    emit(|b| b.pdl_launch_dependents())
}

/// `barrier.cluster.arrive` (release: orders this thread's earlier writes,
/// such as mbarrier initialisation, before peers pass their wait).
#[track_caller]
pub fn cluster_arrive() {
    emit(|b| b.cluster_arrive(false))
}

/// `barrier.cluster.arrive.relaxed` (no ordering; pair with a fence).
#[track_caller]
pub fn cluster_arrive_relaxed() {
    emit(|b| b.cluster_arrive(true))
}

/// `barrier.cluster.wait`: every thread of the cluster has arrived.
#[track_caller]
pub fn cluster_wait() {
    emit(|b| b.cluster_wait())
}

/// `cluster_arrive(); cluster_wait();`.
#[track_caller]
pub fn cluster_sync() {
    emit(|b| {
        b.cluster_arrive(false);
        b.cluster_wait();
    })
}

/// `fence.mbarrier_init.release.cluster`: make initialised mbarriers visible
/// to the cluster.
#[track_caller]
pub fn fence_mbarrier_init() {
    emit(|b| b.fence_mbarrier_init())
}

/// `fence.proxy.async.shared::cta`: order generic-proxy shared writes before
/// async-proxy accesses.
#[track_caller]
pub fn fence_proxy_async() {
    emit(|b| b.fence_proxy_async())
}

/// `bar.sync id, threads`: a named barrier among `threads` threads.
#[track_caller]
pub fn bar_sync(id: u8, threads: u32) {
    emit(|b| b.bar_sync(id, threads))
}

/// `cp.async.commit_group`.
#[track_caller]
pub fn cp_async_commit() {
    emit(|b| b.cp_async_commit())
}

/// `cp.async.wait_group n`: at most `n` committed groups still in flight.
#[track_caller]
pub fn cp_async_wait(n: u32) {
    emit(|b| b.cp_async_wait(n))
}

/// `cp.async.bulk.commit_group`: close this thread's open group of bulk
/// stores (`bulk_store!`).
#[track_caller]
pub fn bulk_commit() {
    emit(|b| b.bulk_commit())
}

/// `cp.async.bulk.wait_group n`: at most `n` of this thread's committed
/// bulk-store groups still in flight; the others' bytes are in global memory.
#[track_caller]
pub fn bulk_wait(n: u32) {
    emit(|b| b.bulk_wait(n, false))
}

/// `cp.async.bulk.wait_group.read n`: at most `n` of this thread's committed
/// bulk-store groups still reading their shared sources; the others'
/// sources may be overwritten (their global writes may still be in flight).
#[track_caller]
pub fn bulk_wait_read(n: u32) {
    emit(|b| b.bulk_wait(n, true))
}

/// The destination CTA(s) of a DSMEM send.
#[derive(Copy, Clone, Debug)]
pub enum Dest {
    /// One cluster rank.
    One(Ix),
    /// Every CTA of the cluster (one `st.async` per rank).
    All,
}

impl Dest {
    /// The CTA of cluster rank `rank` (comptime or runtime).
    pub fn one(rank: impl IntoIx) -> Dest {
        Dest::One(rank.ix())
    }
}

/// `st.async` of `v` into `buf[i]` of the CTA(s) `to`, completing `size(v)`
/// transaction bytes of their `bar` (what `send!` expands to). One element:
/// a vector is written as an array literal (`send_lanes`), so the macro sees
/// every send's size.
#[track_caller]
pub fn send<T: Elem>(
    buf: &Shared<T>,
    i: impl SharedIndex,
    v: impl Operand<T>,
    to: Dest,
    bar: &Barrier,
) {
    let e = buf.element(i);
    let v = v.val().value();
    send_value(buf, e, v, to, bar)
}

/// `send!(buf[i] = [a, b, c, d], ..)`: one vector of consecutive elements.
#[track_caller]
pub fn send_lanes<T: Elem, const N: usize>(
    buf: &Shared<T>,
    i: impl SharedIndex,
    lanes: [Val<T>; N],
    to: Dest,
    bar: &Barrier,
) where
    [T; N]: super::val::Ty,
{
    let e = buf.element(i);
    let v = super::val::pack(lanes).value();
    send_value(buf, e, v, to, bar)
}

#[track_caller]
fn send_value<T: Elem>(
    buf: &Shared<T>,
    e: kda_ir::Value,
    v: kda_ir::Value,
    to: Dest,
    bar: &Barrier,
) {
    // A runtime ring element (`completes = bars[s]`): element `s` of the
    // destination CTA's ring.
    let loc = Loc::caller();
    let one = |cta: kda_ir::Value| match bar.ring {
        None => emit_at(&loc, |b| b.st_async(buf.id, e, v, cta, bar.id)),
        Some((n, at)) => emit_at(&loc, |b| b.st_async_at(buf.id, e, v, cta, (bar.id, n, at))),
    };
    match to {
        Dest::One(rank) => one(rank.value()),
        Dest::All => {
            for rank in 0..super::trace::cluster_size() {
                one(Ix::Const(rank as i64).value())
            }
        }
    }
}

/// `cp.async.bulk` of `bytes` from `src[gi..]` into `dst[si..]`, completing
/// them on `bar` (what `bulk_copy!` expands to). A byte copy: the element
/// types may differ.
#[track_caller]
pub fn bulk_copy<T: Elem, U: Elem, const R: usize>(
    dst: &Shared<T>,
    si: impl SharedIndex,
    src: &Tensor<U, R>,
    gi: impl TensorIndex<R>,
    bytes: u32,
    bar: &Barrier,
    evict_first: bool,
) {
    let s = dst.element(si);
    let mut g = Vec::with_capacity(R);
    for i in gi.indices() {
        g.push(i.value());
    }
    let policy = if evict_first {
        CachePolicy::EvictFirst
    } else {
        CachePolicy::Normal
    };
    match bar.ring {
        None => emit(|b| b.bulk_copy(dst.id, s, src.id, &g, bytes, bar.id, policy)),
        Some((n, at)) => {
            emit(|b| b.bulk_copy_at(dst.id, s, src.id, &g, bytes, (bar.id, n, at), policy))
        }
    }
}

/// `cp.async.bulk.global.shared::cta.bulk_group` of `bytes` from
/// `src[si..]` into `dst[gi..]`, in this thread's open bulk group (what
/// `bulk_store!` expands to). A byte copy: the element types may differ.
#[track_caller]
pub fn bulk_store<T: Elem, U: Elem, const R: usize>(
    dst: &Tensor<U, R>,
    gi: impl TensorIndex<R>,
    src: &Shared<T>,
    si: impl SharedIndex,
    bytes: u32,
    evict_first: bool,
) {
    let mut g = Vec::with_capacity(R);
    for i in gi.indices() {
        g.push(i.value());
    }
    let s = src.element(si);
    let policy = if evict_first {
        CachePolicy::EvictFirst
    } else {
        CachePolicy::Normal
    };
    emit(|b| b.bulk_store(dst.id, &g, src.id, s, bytes, policy))
}

/// 16-byte `cp.async.cg` from `src[gi..]` into `dst[si..]` (what `cp_async!`
/// expands to). A byte copy: the element types may differ.
#[track_caller]
pub fn cp_async<T: Elem, U: Elem, const R: usize>(
    dst: &Shared<T>,
    si: impl SharedIndex,
    src: &Tensor<U, R>,
    gi: impl TensorIndex<R>,
) {
    let s = dst.element(si);
    let mut g = Vec::with_capacity(R);
    for i in gi.indices() {
        g.push(i.value());
    }
    emit(|b| b.cp_async(dst.id, s, src.id, &g))
}
