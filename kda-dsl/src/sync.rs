//! Roles, mbarriers, cluster barriers, fences, DSMEM sends, async copies and
//! programmatic dependent launch.

use std::fmt;

use kda_ir::{CachePolicy, Loc};

use super::mem::{IntoIx, Ix, Shared, SharedIndex, Tensor, TensorIndex};
use super::trace::{emit, lend, structured};
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
#[derive(Copy, Clone)]
pub struct Barrier {
    pub(crate) id: kda_ir::Barrier,
    tx: u32,
}

impl fmt::Debug for Barrier {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Barrier({}, tx {})", self.id, self.tx)
    }
}

impl Barrier {
    pub(crate) fn new(id: kda_ir::Barrier, tx: u32) -> Barrier {
        Barrier { id, tx }
    }

    /// The IR barrier.
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
        emit(|b| b.mbarrier_init(self.id))
    }

    /// One arrival.
    #[track_caller]
    pub fn arrive(self) {
        emit(|b| b.mbarrier_arrive(self.id))
    }

    /// One arrival that expects the declared transaction bytes of this phase.
    #[track_caller]
    pub fn arm(self) {
        emit(|b| b.mbarrier_arrive_expect_tx(self.id, self.tx))
    }

    /// One arrival that expects `bytes` of this phase's transactions.
    #[track_caller]
    pub fn arrive_expect_tx(self, bytes: u32) {
        emit(|b| b.mbarrier_arrive_expect_tx(self.id, bytes))
    }

    /// Wait for the next phase this role has not waited for (the parity is
    /// tracked for you).
    #[track_caller]
    pub fn wait(self) {
        emit(|b| b.wait(self.id))
    }

    /// Wait for an explicit phase (0, 1, ...: parity `phase & 1`).
    #[track_caller]
    pub fn wait_phase(self, phase: u32) {
        emit(|b| b.wait_phase(self.id, phase))
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

/// The destination CTA(s) of a DSMEM send.
#[derive(Copy, Clone, Debug)]
pub enum Dest {
    /// One cluster rank.
    One(Ix),
    /// Every CTA of the cluster (one `st.async` per rank).
    All,
}

impl Dest {
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
    match to {
        Dest::One(rank) => {
            let cta = rank.value();
            emit(|b| b.st_async(buf.id, e, v, cta, bar.id))
        }
        Dest::All => {
            for rank in 0..super::trace::cluster_size() {
                let cta = Ix::Const(rank as i64).value();
                emit(|b| b.st_async(buf.id, e, v, cta, bar.id))
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
    emit(|b| b.bulk_copy(dst.id, s, src.id, &g, bytes, bar.id, policy))
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
