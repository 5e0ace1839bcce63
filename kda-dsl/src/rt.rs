//! What `#[cluster_kernel]` expansions call. Not a user API: the names and
//! signatures follow the macro.

use std::fmt::Display;

use kda_ir::{CmpOp, Dim, LaunchDecl, Provenance, Scalar};

pub use super::arith::{KdaEq, KdaLogic, KdaOrd};
pub use super::control::{Carry, CarryTuple, Cond, ForLoop, RangeEnd, if_else, range, while_loop};
pub use super::mem::{LoadHandle, LoadIndex, StoreMut, StoreRef, ix};
pub use super::sync::{Dest, bulk_copy, bulk_store, cp_async, in_role, send, send_lanes};
pub use super::trace::Trace;

use super::mem::{Regs, Shared, Tensor};
use super::sync::{Barrier, Barriers, Role};
use super::trace::emit;
use super::val::{Elem, Operand, Ty, Val};

/// A comptime count or extent given as any Rust integer.
#[track_caller]
pub fn count<X: TryInto<u32> + Copy + Display>(x: X, what: &str) -> u32 {
    match x.try_into() {
        Ok(v) => v,
        Err(_) => panic!("kda: {what} = {x} is not a count (0 to {})", u32::MAX),
    }
}

/// `min_blocks = n` (a count) or `= opt` (an `Option<u32>`: `None` for no bound).
pub trait MinBlocks {
    fn min_blocks(self) -> Option<u32>;
}
impl MinBlocks for Option<u32> {
    fn min_blocks(self) -> Option<u32> {
        self
    }
}
macro_rules! min_blocks_int {
    ($($t:ty),*) => {$(
        impl MinBlocks for $t {
            #[track_caller]
            fn min_blocks(self) -> Option<u32> {
                Some(count(self, "min_blocks"))
            }
        }
    )*};
}
min_blocks_int!(i32, u32, u64, usize);

#[track_caller]
pub fn min_blocks(m: impl MinBlocks) -> Option<u32> {
    m.min_blocks()
}

/// `LaunchDecl` from the attribute's `block`, `cluster` and `min_blocks`.
pub fn launch(block: u32, cluster: u32, min_blocks: Option<u32>) -> LaunchDecl {
    LaunchDecl {
        block,
        cluster,
        min_blocks_per_sm: min_blocks,
        cluster_policy: Default::default(),
    }
}

/// `early = ..`: ask the scheduler for the early schedule (ready loads hoisted
/// above the PDL wait, cluster waits sunk to the first DSMEM send).
pub fn early(flag: bool) {
    emit(|b| b.set_early(flag))
}

/// `trigger_at_entry = ..`: ask the scheduler to trigger dependent launches
/// at the kernel's entry instead of where the program calls `pdl_trigger()`.
pub fn trigger_at_entry(flag: bool) {
    emit(|b| b.set_trigger_at_entry(flag))
}

/// `cluster_policy = ..`: the cluster scheduling policy the runtime adds to
/// each launch (`kda_ir::LaunchDecl::cluster_policy`).
pub fn cluster_policy(policy: kda_ir::ClusterPolicy) {
    emit(|b| b.set_cluster_policy(policy))
}

/// `late_release = ..`: ask the scheduler to move each releasing
/// `cluster_arrive()` from where the program calls it past the loads'
/// consumers, to the thread's next write, signal or wait.
pub fn late_release(flag: bool) {
    emit(|b| b.set_late_release(flag))
}

/// `wave = n`: issue the row chains of `chains(..)` `n` at a time.
#[track_caller]
pub fn wave(n: u32) {
    assert!(
        n > 0,
        "kda: `wave = 0`: a wave issues at least one row chain (`chains(..)`); `wave = 1` issues them one at a time"
    );
    emit(|b| b.set_wave(n))
}

/// `#[evict_first(..)]` on a tensor parameter: ask the scheduler to give
/// every global access of `t` the L2 evict-first policy, or not.
pub fn evict_first(t: kda_ir::Tensor, on: bool) {
    emit(|b| b.set_evict_first(t, on))
}

/// `#[stage_through_shared(..)]` on a tensor parameter: ask the scheduler to
/// stage `t`'s ready data through shared memory (its tiles as bulk copies,
/// its early 16-byte loads as `cp.async`), or not.
pub fn stage_through_shared(t: kda_ir::Tensor, on: bool) {
    emit(|b| b.set_stage_through_shared(t, on))
}

/// `#[store_through_shared(..)]` on a tensor parameter: ask the scheduler
/// to store `t`'s tiles (`Tensor::tile_writer`) through a shared staging
/// ring, each as one bulk store, or not.
pub fn store_through_shared(t: kda_ir::Tensor, on: bool) {
    emit(|b| b.set_store_through_shared(t, on))
}

/// A symbolic extent or stride, bound at launch.
#[track_caller]
pub fn sym(name: &str) -> Dim {
    Dim::Sym(emit(|b| b.sym(name)))
}

/// A named symbol, created when a declared tensor first uses it.
pub struct LazySym {
    name: &'static str,
    dim: std::cell::Cell<Option<Dim>>,
}

impl LazySym {
    pub fn new(name: &'static str) -> LazySym {
        LazySym {
            name,
            dim: std::cell::Cell::new(None),
        }
    }

    #[track_caller]
    pub fn get(&self) -> Dim {
        if let Some(d) = self.dim.get() {
            return d;
        }
        let d = sym(self.name);
        self.dim.set(Some(d));
        d
    }
}

/// A `{expr}` extent or stride: an integer (known when traced), or an
/// `Option` of one (`None`: a symbol bound at launch, named after the
/// tensor's dimension).
pub trait IntoDim {
    #[track_caller]
    fn into_dim(self, name: &str) -> Dim;
}

macro_rules! into_dim {
    ($($t:ty),*) => {$(
        impl IntoDim for $t {
            #[track_caller]
            fn into_dim(self, _: &str) -> Dim {
                Dim::Const(count(self, "extent") as u64)
            }
        }
        impl IntoDim for Option<$t> {
            #[track_caller]
            fn into_dim(self, name: &str) -> Dim {
                match self {
                    Some(x) => x.into_dim(name),
                    None => sym(name),
                }
            }
        }
    )*};
}
into_dim!(i32, u32, u64, usize);

#[track_caller]
pub fn dim(x: impl IntoDim, name: &str) -> Dim {
    x.into_dim(name)
}

/// Declare a tensor parameter.
#[track_caller]
pub fn tensor<T: Elem, const R: usize>(
    name: &str,
    shape: [Dim; R],
    strides: [Dim; R],
    produced: bool,
    align: Option<u32>,
) -> Tensor<T, R> {
    let prov = if produced {
        Provenance::Produced
    } else {
        Provenance::Ready
    };
    let t = emit(|b| {
        b.tensor(
            name,
            T::SCALAR,
            &shape,
            &strides,
            prov,
            kda_ir::Access::Read,
        )
    });
    if let Some(a) = align {
        emit(|b| b.set_align(t, a));
    }
    Tensor::new(t)
}

/// The default strides: the innermost 1 (elements contiguous), every other
/// a symbol bound at launch (`<tensor>.stride<d>`), so row-padded and sliced
/// arguments work as they are.
#[track_caller]
pub fn default_strides<const R: usize>(name: &str) -> [Dim; R] {
    let mut out = [Dim::Const(1); R];
    for (d, s) in out.iter_mut().enumerate().take(R.saturating_sub(1)) {
        *s = sym(&format!("{name}.stride{d}"));
    }
    out
}

/// Declare a scalar parameter.
#[track_caller]
pub fn scalar(name: &str, ty: Scalar) -> kda_ir::ScalarParam {
    emit(|b| b.scalar(name, ty))
}

/// Read a scalar parameter (at kernel entry).
#[track_caller]
pub fn param<T: Elem>(s: kda_ir::ScalarParam) -> Val<T> {
    Val::from_value(emit(|b| b.param(s)))
}

/// `role!(first..end)`.
#[track_caller]
pub fn role(name: &str, first: u32, end: u32) -> Role {
    let threads = end
        .checked_sub(first)
        .unwrap_or_else(|| panic!("kda: role `{name}` range {first}..{end} is empty"));
    Role {
        id: emit(|b| b.role(name, first, threads)),
    }
}

/// `role!(first..end, regs = n)`: a role with a per-thread register budget.
#[track_caller]
pub fn role_regs(name: &str, first: u32, end: u32, regs: u32) -> Role {
    let r = role(name, first, end);
    emit(|b| b.set_regs(r.id, regs));
    r
}

/// `max_regs = n`: every warp starts with `n` registers per thread (`.maxnreg`).
pub fn max_regs(n: u32) {
    emit(|b| b.set_max_regs(n))
}

fn ids(roles: &[&Role]) -> Vec<kda_ir::Role> {
    roles.iter().map(|r| r.id).collect()
}

/// `mbarrier!(arrivals = .., tx = .., roles = [..])`.
#[track_caller]
pub fn mbarrier(name: &str, arrivals: u32, tx: u32, roles: &[&Role]) -> Barrier {
    let r = ids(roles);
    Barrier::new(emit(|b| b.mbarrier(name, arrivals, tx, &r)), tx)
}

/// `bars[i]` of a ring: element `i`, a comptime integer or a runtime `u32`.
#[track_caller]
pub fn bar_at(bars: &Barriers, i: impl super::sync::RingIndex) -> Barrier {
    bars.at(i)
}

/// `mbarrier!(.., released)`: its first wait passes at once.
#[track_caller]
pub fn mbarrier_released(name: &str, arrivals: u32, tx: u32, roles: &[&Role]) -> Barrier {
    let bar = mbarrier(name, arrivals, tx, roles);
    emit(|b| b.release(bar.id));
    bar
}

/// `mbarrier!(.., count = n [, released])`: a ring of `n` barriers
/// `name[0]`, `name[1]`, ... (consecutive, so a runtime index names one).
#[track_caller]
pub fn mbarriers(
    name: &str,
    n: u32,
    arrivals: u32,
    tx: u32,
    roles: &[&Role],
    released: bool,
) -> Barriers {
    let r = ids(roles);
    let mut first = None;
    for k in 0..n {
        let id = emit(|b| b.mbarrier(format!("{name}[{k}]"), arrivals, tx, &r));
        first.get_or_insert(id);
    }
    if let Some(f) = first {
        emit(|b| {
            b.declare_ring(f, n);
            if released {
                b.release(f);
            }
        });
    }
    Barriers::new(first, n, tx)
}

/// What `guard = ..` names: a barrier, or a ring (`guard = bars`: stage
/// `s` of the buffer, its first dimension, is filled through `bars[s]`).
pub trait Guard {
    fn guard_id(&self) -> Option<kda_ir::Barrier>;
}
impl Guard for Barrier {
    /// One barrier, or one element of a ring chosen by a comptime index
    /// (`guard = bars[1]`); a runtime element cannot guard a declaration.
    #[track_caller]
    fn guard_id(&self) -> Option<kda_ir::Barrier> {
        if self.ring.is_some() {
            panic!(
                "kda: `guard = bars[s]` needs a comptime element; a buffer staged over the ring is `guard = bars`"
            );
        }
        Some(self.id())
    }
}
impl Guard for Barriers {
    fn guard_id(&self) -> Option<kda_ir::Barrier> {
        self.first()
    }
}

/// `guard = g`.
pub fn guard<G: Guard>(g: &G) -> Option<kda_ir::Barrier> {
    g.guard_id()
}

/// `shared!([T; dims..], align = .., guard = .., roles = [..])`.
#[track_caller]
pub fn shared<T: Elem>(
    name: &str,
    dims: &[u32],
    align: u32,
    roles: &[&Role],
    guard: Option<Option<kda_ir::Barrier>>,
) -> Shared<T> {
    let r = ids(roles);
    let len: u32 = dims.iter().product();
    let g = guard.flatten();
    let id = emit(|b| b.shared(name, T::SCALAR, len, align, &r, g));
    Shared::new(id, dims)
}

/// `shared!([bf16; rows, k], swizzle = 0 | 32 | 64 | 128, ..)`: a K-major
/// wgmma operand tile (`rows × k` bf16, aligned for its swizzle). Its
/// `[[r, k]]` accesses go through the swizzled layout, and `wgmma` builds
/// its descriptors from it.
#[track_caller]
pub fn shared_tile<T: Elem>(
    name: &str,
    dims: &[u32],
    swizzle: u32,
    roles: &[&Role],
    guard: Option<Option<kda_ir::Barrier>>,
) -> Shared<T> {
    use kda_ir::wgmma::{MmaTile, Swizzle};
    assert!(
        T::SCALAR == kda_ir::Scalar::BF16 && dims.len() == 2,
        "kda: a shared buffer with `swizzle` is a wgmma operand tile: `[bf16; rows, k]`"
    );
    let swizzle = match swizzle {
        0 => Swizzle::None,
        32 => Swizzle::B32,
        64 => Swizzle::B64,
        128 => Swizzle::B128,
        s => panic!("kda: swizzle = {s}; allowed: 0, 32, 64, 128 (bytes)"),
    };
    let tile = MmaTile {
        rows: dims[0],
        cols: dims[1],
        swizzle,
    };
    if let Err(e) = tile.check() {
        panic!("kda: wgmma operand tile `{name}` has {e}");
    }
    let r = ids(roles);
    let g = guard.flatten();
    let id = emit(|b| {
        let id = b.shared(name, T::SCALAR, dims[0] * dims[1], swizzle.align(), &r, g);
        b.set_tile(id, tile);
        id
    });
    Shared::new(id, dims).as_tile()
}

/// `regs!([T; dims..])`.
pub fn regs<T: Ty>(dims: &[u32]) -> Regs<T> {
    let d: Vec<usize> = dims.iter().map(|&x| x as usize).collect();
    Regs::new(&d)
}

/// `regs!([T; dims..], fill = x)`.
#[track_caller]
pub fn regs_filled<T: Ty>(dims: &[u32], fill: impl Operand<T>) -> Regs<T> {
    let d: Vec<usize> = dims.iter().map(|&x| x as usize).collect();
    Regs::filled(&d, fill)
}

/// An element of `send!(buf[i] = [a, b, ..])`.
#[track_caller]
pub fn operand<T: Ty>(x: impl Operand<T>) -> Val<T> {
    x.val()
}

/// A plain `if` the macro proved comptime: its condition must be a `bool`.
pub fn comptime_cond(c: bool) -> bool {
    c
}

/// `a == b` / `a != b`.
#[track_caller]
pub fn eq<A: ?Sized + KdaEq<B>, B: ?Sized>(a: &A, b: &B) -> A::Output {
    a.kda_eq(b, false)
}
#[track_caller]
pub fn ne<A: ?Sized + KdaEq<B>, B: ?Sized>(a: &A, b: &B) -> A::Output {
    a.kda_eq(b, true)
}
#[track_caller]
pub fn lt<A: ?Sized + KdaOrd<B>, B: ?Sized>(a: &A, b: &B) -> A::Output {
    a.kda_cmp(CmpOp::Lt, b)
}
#[track_caller]
pub fn le<A: ?Sized + KdaOrd<B>, B: ?Sized>(a: &A, b: &B) -> A::Output {
    a.kda_cmp(CmpOp::Le, b)
}
#[track_caller]
pub fn gt<A: ?Sized + KdaOrd<B>, B: ?Sized>(a: &A, b: &B) -> A::Output {
    a.kda_cmp(CmpOp::Gt, b)
}
#[track_caller]
pub fn ge<A: ?Sized + KdaOrd<B>, B: ?Sized>(a: &A, b: &B) -> A::Output {
    a.kda_cmp(CmpOp::Ge, b)
}

/// `a && b`.
#[track_caller]
pub fn and<A: KdaLogic<B>, B>(a: A, b: impl FnOnce() -> B) -> A::Output {
    a.kda_logic(false, b)
}

/// `a || b`.
#[track_caller]
pub fn or<A: KdaLogic<B>, B>(a: A, b: impl FnOnce() -> B) -> A::Output {
    a.kda_logic(true, b)
}

/// A `for` loop over `iter` (comptime iterator or runtime range).
#[track_caller]
pub fn for_each<I: ForLoop, S: CarryTuple>(
    iter: I,
    state: &mut S,
    names: &[&str],
    f: impl FnMut(I::Item, &mut S),
) {
    iter.run(state, names, f)
}
