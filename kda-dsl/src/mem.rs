//! Memory: global tensors (kernel parameters), shared buffers and register
//! arrays, and the index conversions they share.
//!
//! `#[cluster_kernel]` rewrites `t[[i, j]]` into [`LoadHandle::__kda_load`] and
//! `t[[i, j]] = v` into `__kda_store`, which are implemented here for the
//! DSL's handles and, for any other indexable Rust value, fall back to Rust's
//! own indexing (cloning the element), so comptime arrays and `Vec`s of
//! values index as usual.

use std::fmt;
use std::marker::PhantomData;
use std::ops::{Index, IndexMut};

use kda_ir::{Buffer, CachePolicy, Type, Value};

use super::control::Carry;
use super::trace::emit;
use super::val::{Elem, Operand, Ty, Val};

/// One index: a comptime number or a runtime integer value.
#[derive(Copy, Clone, Debug)]
pub enum Ix {
    /// A comptime index.
    Const(i64),
    /// A runtime index: an integer value of any of `u32`, `i32`, `u64`, `i64`.
    Val(Value),
}

/// Anything usable as an index: Rust integers (comptime) and integer `Val`s.
#[diagnostic::on_unimplemented(
    message = "`{Self}` cannot index kernel memory",
    label = "expected an integer: a comptime number or a `Val<u32>`/`Val<i32>`/`Val<u64>`/`Val<i64>`"
)]
pub trait IntoIx {
    /// The index, comptime or runtime.
    fn ix(self) -> Ix;
}

impl IntoIx for Ix {
    fn ix(self) -> Ix {
        self
    }
}

macro_rules! ix_int {
    ($($t:ty),*) => {$(
        impl IntoIx for $t {
            fn ix(self) -> Ix {
                Ix::Const(self as i64)
            }
        }
        impl IntoIx for Val<$t> {
            fn ix(self) -> Ix {
                Ix::Val(self.value())
            }
        }
    )*};
}
ix_int!(i32, u32, i64, u64);

macro_rules! ix_const {
    ($($t:ty),*) => {$(
        impl IntoIx for $t {
            fn ix(self) -> Ix {
                Ix::Const(self as i64)
            }
        }
    )*};
}
ix_const!(usize, isize, u8, u16, i8, i16);

/// An index (used by the macro on the elements of `t[[a, b]]`, whose types may differ).
pub fn ix(i: impl IntoIx) -> Ix {
    i.ix()
}

impl Ix {
    /// The index as an IR value (a comptime index becomes a `u32` constant, or
    /// `i32`/`i64` when it does not fit).
    #[track_caller]
    pub fn value(self) -> Value {
        match self {
            Ix::Val(v) => v,
            Ix::Const(c) => {
                let ty = if (0..=u32::MAX as i64).contains(&c) {
                    Type::U32
                } else if (i32::MIN as i64..0).contains(&c) {
                    Type::I32
                } else {
                    Type::I64
                };
                emit(|b| b.iconst(ty, c))
            }
        }
    }

    #[track_caller]
    fn comptime(self, what: &str) -> usize {
        match self {
            Ix::Const(c) if c >= 0 => c as usize,
            Ix::Const(c) => panic!("kda: negative index {c} into {what}"),
            Ix::Val(_) => {
                panic!("kda: {what} is indexed with comptime numbers only, not runtime values")
            }
        }
    }
}

#[track_caller]
fn values<const R: usize>(ix: [Ix; R]) -> Vec<Value> {
    let mut out = Vec::with_capacity(R);
    for i in ix {
        out.push(i.value());
    }
    out
}

/// The index of a `Tensor<_, R>` access: `[i, j]` (one per dimension), or a
/// bare integer for a 1-D tensor.
pub trait TensorIndex<const R: usize> {
    /// One index per dimension, outermost first.
    fn indices(self) -> [Ix; R];
}
impl<I: IntoIx, const R: usize> TensorIndex<R> for [I; R] {
    fn indices(self) -> [Ix; R] {
        self.map(IntoIx::ix)
    }
}
impl<I: IntoIx> TensorIndex<1> for I {
    fn indices(self) -> [Ix; 1] {
        [self.ix()]
    }
}

/// The index of a shared-buffer access: an element index, or one index per
/// declared dimension (row-major).
pub trait SharedIndex {
    /// One index, or one per declared dimension (outermost first).
    fn indices(self) -> Vec<Ix>;
}
impl<I: IntoIx> SharedIndex for I {
    fn indices(self) -> Vec<Ix> {
        vec![self.ix()]
    }
}
impl<I: IntoIx, const R: usize> SharedIndex for [I; R] {
    fn indices(self) -> Vec<Ix> {
        self.map(IntoIx::ix).to_vec()
    }
}

/// `x[i]` in value position on a DSL handle (tensor, shared buffer), as
/// rewritten by `#[cluster_kernel]`. Handles take `self` by value, so method
/// resolution finds this before [`LoadIndex`].
pub trait LoadHandle<I> {
    /// What the access yields: a `Val<T>` for a tensor or shared buffer, a
    /// [`Barrier`](crate::Barrier) for a ring of mbarriers.
    type Output;
    /// Emit the load of element `i` (or pick the indexed handle).
    #[track_caller]
    fn __kda_load(self, i: I) -> Self::Output;
}

/// `x[i]` in value position on any other indexable Rust value (register
/// arrays, arrays, `Vec`s): Rust's indexing, cloning the element.
pub trait LoadIndex<I> {
    /// The element type of the indexed Rust value.
    type Output;
    /// `self[i].clone()`.
    #[track_caller]
    fn __kda_load(&self, i: I) -> Self::Output;
}

impl<C: ?Sized + Index<I>, I> LoadIndex<I> for C
where
    C::Output: Clone + Sized,
{
    type Output = C::Output;
    #[track_caller]
    fn __kda_load(&self, i: I) -> C::Output {
        self[i].clone()
    }
}

/// `x[i] = v` on a DSL handle (tensor, shared buffer), as rewritten by `#[cluster_kernel]`.
pub trait StoreRef<I, V> {
    /// Emit the store of `v` into element `i`.
    #[track_caller]
    fn __kda_store(&self, i: I, v: V);
}

/// `x[i] = v` on a register array or any `IndexMut` Rust value.
pub trait StoreMut<I, V> {
    /// `self[i] = v`: a register array rebinds the element, no instruction.
    #[track_caller]
    fn __kda_store(&mut self, i: I, v: V);
}

impl<C: ?Sized + IndexMut<I>, I> StoreMut<I, C::Output> for C
where
    C::Output: Sized,
{
    fn __kda_store(&mut self, i: I, v: C::Output) {
        self[i] = v;
    }
}

/// What a store or send writes: one element (`Val<T>` or a comptime number),
/// or a vector `Val<[T; N]>` of consecutive elements.
pub trait StoreValue<T: Elem> {
    /// The value to write, emitting a comptime number as a constant of `T`.
    #[track_caller]
    fn stored(self) -> Value;
}
impl<T: Elem> StoreValue<T> for Val<T> {
    fn stored(self) -> Value {
        self.value()
    }
}
impl<S: Ty, T: Elem> StoreValue<T> for super::val::Cast<S, T> {
    #[track_caller]
    fn stored(self) -> Value {
        self.val().value()
    }
}
macro_rules! store_prims {
    ($($p:ty),*) => {$(
        impl<T: Elem> StoreValue<T> for $p
        where
            $p: Operand<T>,
        {
            #[track_caller]
            fn stored(self) -> Value {
                self.val().value()
            }
        }
    )*};
}
store_prims!(f32, f64, half::bf16, i32, u32, i64, u64, usize, bool);
impl<T: Elem, const N: usize> StoreValue<T> for Val<[T; N]>
where
    [T; N]: Ty,
{
    fn stored(self) -> Value {
        self.value()
    }
}

// ---- global tensors

/// A global tensor parameter: elements `T`, `R` dimensions.
pub struct Tensor<T: Elem, const R: usize> {
    pub(crate) id: kda_ir::Tensor,
    policy: CachePolicy,
    _t: PhantomData<T>,
}

impl<T: Elem, const R: usize> Clone for Tensor<T, R> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<T: Elem, const R: usize> Copy for Tensor<T, R> {}

impl<T: Elem, const R: usize> fmt::Debug for Tensor<T, R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Tensor<{}, {R}>({})", T::SCALAR, self.id)
    }
}

impl<T: Elem, const R: usize> Tensor<T, R> {
    pub(crate) fn new(id: kda_ir::Tensor) -> Self {
        Tensor {
            id,
            policy: CachePolicy::Normal,
            _t: PhantomData,
        }
    }

    /// The IR tensor.
    pub fn id(self) -> kda_ir::Tensor {
        self.id
    }

    /// The same tensor with L2 evict-first loads and stores (streamed data
    /// that should not displace reused lines).
    pub fn evict_first(self) -> Self {
        Tensor {
            policy: CachePolicy::EvictFirst,
            ..self
        }
    }

    #[track_caller]
    fn load_ty<V: Ty>(self, i: impl TensorIndex<R>) -> Val<V> {
        let idx = values(i.indices());
        let (t, p) = (self.id, self.policy);
        Val::from_value(emit(|b| b.ld_global(t, &idx, V::TYPE, p)))
    }

    /// Load one element (`t[[i, j]]` is the same).
    #[track_caller]
    pub fn load(self, i: impl TensorIndex<R>) -> Val<T> {
        self.load_ty(i)
    }

    /// Load 2 consecutive elements of the innermost dimension.
    #[track_caller]
    pub fn load2(self, i: impl TensorIndex<R>) -> Val<[T; 2]>
    where
        [T; 2]: Ty,
    {
        self.load_ty(i)
    }

    /// Load 4 consecutive elements of the innermost dimension.
    #[track_caller]
    pub fn load4(self, i: impl TensorIndex<R>) -> Val<[T; 4]>
    where
        [T; 4]: Ty,
    {
        self.load_ty(i)
    }

    /// Load 8 consecutive elements of the innermost dimension.
    #[track_caller]
    pub fn load8(self, i: impl TensorIndex<R>) -> Val<[T; 8]>
    where
        [T; 8]: Ty,
    {
        self.load_ty(i)
    }

    /// Store one element or a vector of consecutive elements (`t[[i, j]] = v`).
    #[track_caller]
    pub fn store(self, i: impl TensorIndex<R>, v: impl StoreValue<T>) {
        self.store_pred(i, v, None)
    }

    /// Store only where `pred` holds (predicated, no branch).
    #[track_caller]
    pub fn store_if(self, i: impl TensorIndex<R>, v: impl StoreValue<T>, pred: impl Operand<bool>) {
        let idx = i.indices();
        let v = v.stored();
        let p = pred.val().value();
        self.store_pred(idx, Val::<T>::from_value(v), Some(p))
    }

    #[track_caller]
    fn store_pred(self, i: impl TensorIndex<R>, v: impl StoreValue<T>, pred: Option<Value>) {
        let idx = values(i.indices());
        let v = v.stored();
        let (t, p) = (self.id, self.policy);
        emit(|b| b.st_global(t, &idx, v, pred, p))
    }
}

/// The elements [`Tensor::atomic_add`] works on: 32-bit integers.
pub trait AtomicElem: Elem {}
impl AtomicElem for u32 {}
impl AtomicElem for i32 {}

impl<T: AtomicElem, const R: usize> Tensor<T, R> {
    /// Add `v` to one element in one indivisible read-modify-write
    /// (`atom.global.add`, relaxed, GPU scope) and return the element's value
    /// before the add. Adds from any threads of any CTAs never race with
    /// each other; all threads see them in one order, so a counter handed
    /// out this way gives every caller a distinct ticket (a persistent
    /// kernel's work queue). Wrapping, like the hardware.
    #[track_caller]
    pub fn atomic_add(self, i: impl TensorIndex<R>, v: impl Operand<T>) -> Val<T> {
        let idx = values(i.indices());
        let v = v.val().value();
        let t = self.id;
        Val::from_value(emit(|b| b.atom_add(t, &idx, v)))
    }
}

impl<T: Elem, const R: usize, I: TensorIndex<R>> LoadHandle<I> for Tensor<T, R> {
    type Output = Val<T>;
    #[track_caller]
    fn __kda_load(self, i: I) -> Val<T> {
        self.load(i)
    }
}

impl<T: Elem, const R: usize, I: TensorIndex<R>, V: StoreValue<T>> StoreRef<I, V> for Tensor<T, R> {
    #[track_caller]
    fn __kda_store(&self, i: I, v: V) {
        self.store(i, v)
    }
}

// ---- shared buffers

/// A shared-memory buffer of the CTA (declared with `shared!`).
pub struct Shared<T: Elem> {
    pub(crate) id: Buffer,
    dims: [u32; 4],
    rank: u8,
    /// A wgmma operand tile: `[[r, k]]` goes through its swizzled layout.
    tile: bool,
    _t: PhantomData<T>,
}

impl<T: Elem> Clone for Shared<T> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<T: Elem> Copy for Shared<T> {}

impl<T: Elem> fmt::Debug for Shared<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "Shared<{}>({}, {:?})",
            T::SCALAR,
            self.id,
            &self.dims[..self.rank as usize]
        )
    }
}

impl<T: Elem> Shared<T> {
    pub(crate) fn new(id: Buffer, dims: &[u32]) -> Self {
        assert!(
            (1..=4).contains(&dims.len()),
            "kda: shared buffers have 1 to 4 dimensions"
        );
        let mut d = [1; 4];
        d[..dims.len()].copy_from_slice(dims);
        Shared {
            id,
            dims: d,
            rank: dims.len() as u8,
            tile: false,
            _t: PhantomData,
        }
    }

    /// The same buffer, marked a wgmma operand tile.
    pub(crate) fn as_tile(self) -> Self {
        Shared { tile: true, ..self }
    }

    /// Whether the buffer is a wgmma operand tile (`swizzle = ..`).
    pub fn is_tile(self) -> bool {
        self.tile
    }

    /// The IR buffer.
    pub fn id(self) -> Buffer {
        self.id
    }

    /// The element index of `i` (row-major over the declared dimensions).
    #[track_caller]
    pub(crate) fn element(self, i: impl SharedIndex) -> Value {
        let ix = i.indices();
        let rank = self.rank as usize;
        if self.tile && ix.len() == 2 {
            // The swizzled layout (MmaTile::offset), in u32 arithmetic.
            let u32_of = |i: Ix| {
                let v = i.value();
                if emit(|b| b.ty(v)) == kda_ir::Type::U32 {
                    v
                } else {
                    emit(|b| b.cvt(v, kda_ir::Type::U32))
                }
            };
            let (r, k) = (u32_of(ix[0]), u32_of(ix[1]));
            let id = self.id;
            return emit(|b| b.tile_index(id, r, k));
        }
        if ix.len() == 1 {
            return ix[0].value();
        }
        assert!(
            ix.len() == rank,
            "kda: {} indices into a {rank}-dimensional shared buffer",
            ix.len()
        );
        // Fold the comptime part; emit the runtime terms in order.
        let mut konst = 0i64;
        let mut acc: Option<Value> = None;
        for (d, i) in ix.iter().enumerate() {
            let stride: i64 = self.dims[d + 1..rank].iter().map(|&x| x as i64).product();
            match *i {
                Ix::Const(c) => konst += c * stride,
                Ix::Val(v) => {
                    let term = if stride == 1 {
                        v
                    } else {
                        let ty = emit(|b| b.ty(v));
                        let s = emit(|b| b.iconst(ty, stride));
                        emit(|b| b.mul(v, s))
                    };
                    acc = Some(match acc {
                        None => term,
                        Some(a) => emit(|b| b.add(a, term)),
                    });
                }
            }
        }
        match acc {
            None => Ix::Const(konst).value(),
            Some(a) if konst == 0 => a,
            Some(a) => {
                let ty = emit(|b| b.ty(a));
                let k = emit(|b| b.iconst(ty, konst));
                emit(|b| b.add(a, k))
            }
        }
    }

    #[track_caller]
    fn load_ty<V: Ty>(self, i: impl SharedIndex) -> Val<V> {
        let e = self.element(i);
        let id = self.id;
        Val::from_value(emit(|b| b.ld_shared(id, e, V::TYPE)))
    }

    /// Load one element (`s[i]` is the same).
    #[track_caller]
    pub fn load(self, i: impl SharedIndex) -> Val<T> {
        self.load_ty(i)
    }

    /// Load 2 consecutive elements.
    #[track_caller]
    pub fn load2(self, i: impl SharedIndex) -> Val<[T; 2]>
    where
        [T; 2]: Ty,
    {
        self.load_ty(i)
    }

    /// Load 4 consecutive elements.
    #[track_caller]
    pub fn load4(self, i: impl SharedIndex) -> Val<[T; 4]>
    where
        [T; 4]: Ty,
    {
        self.load_ty(i)
    }

    /// Store one element or a vector of consecutive elements (`s[i] = v`).
    #[track_caller]
    pub fn store(self, i: impl SharedIndex, v: impl StoreValue<T>) {
        let e = self.element(i);
        let v = v.stored();
        let id = self.id;
        emit(|b| b.st_shared(id, e, v))
    }
}

impl<T: Elem, I: SharedIndex> LoadHandle<I> for Shared<T> {
    type Output = Val<T>;
    #[track_caller]
    fn __kda_load(self, i: I) -> Val<T> {
        self.load(i)
    }
}

impl<T: Elem, I: SharedIndex, V: StoreValue<T>> StoreRef<I, V> for Shared<T> {
    #[track_caller]
    fn __kda_store(&self, i: I, v: V) {
        self.store(i, v)
    }
}

// ---- register arrays

/// A register array with a comptime shape (declared with `regs!`), indexed
/// with comptime indices only: each element is one SSA value, so reading an
/// element never emits an instruction. Elements start unset; reading one
/// before it is written panics at trace time.
#[derive(Clone)]
pub struct Regs<T: Ty> {
    dims: Vec<usize>,
    vals: Vec<Option<Val<T>>>,
}

impl<T: Ty> fmt::Debug for Regs<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Regs<{}>{:?}", T::TYPE, self.dims)
    }
}

impl<T: Ty> Regs<T> {
    /// Registers holding `vals`, one dimension.
    pub(crate) fn from_vals(vals: Vec<Val<T>>) -> Regs<T> {
        Regs {
            dims: vec![vals.len()],
            vals: vals.into_iter().map(Some).collect(),
        }
    }

    /// Unset registers of the given shape.
    pub fn new(dims: &[usize]) -> Regs<T> {
        let n = dims.iter().product();
        Regs {
            dims: dims.to_vec(),
            vals: vec![None; n],
        }
    }

    /// Registers of the given shape, all holding `fill`.
    #[track_caller]
    pub fn filled(dims: &[usize], fill: impl Operand<T>) -> Regs<T> {
        let v = fill.val();
        let n = dims.iter().product();
        Regs {
            dims: dims.to_vec(),
            vals: vec![Some(v); n],
        }
    }

    /// The shape.
    pub fn dims(&self) -> &[usize] {
        &self.dims
    }

    /// Number of elements.
    pub fn len(&self) -> usize {
        self.vals.len()
    }

    /// Whether the shape has no elements (some dimension is 0).
    pub fn is_empty(&self) -> bool {
        self.vals.is_empty()
    }

    #[track_caller]
    fn flat(&self, ix: &[usize]) -> usize {
        if ix.len() == 1 && self.dims.len() != 1 {
            assert!(
                ix[0] < self.vals.len(),
                "kda: register index {} out of {}",
                ix[0],
                self.vals.len()
            );
            return ix[0];
        }
        assert!(
            ix.len() == self.dims.len(),
            "kda: {} indices into registers of shape {:?}",
            ix.len(),
            self.dims
        );
        let mut k = 0;
        for (d, (&i, &n)) in ix.iter().zip(&self.dims).enumerate() {
            assert!(
                i < n,
                "kda: register index {i} out of {n} in dimension {d} of shape {:?}",
                self.dims
            );
            k = k * n + i;
        }
        k
    }

    #[track_caller]
    fn get(&self, ix: &[usize]) -> &Val<T> {
        let k = self.flat(ix);
        match &self.vals[k] {
            Some(v) => v,
            None => panic!(
                "kda: register {ix:?} of shape {:?} read before it was written",
                self.dims
            ),
        }
    }

    #[track_caller]
    fn set(&mut self, ix: &[usize], v: Val<T>) {
        let k = self.flat(ix);
        self.vals[k] = Some(v);
    }

    /// Every element in row-major order (unset ones are skipped).
    pub fn values(&self) -> impl Iterator<Item = Val<T>> + '_ {
        self.vals.iter().flatten().copied()
    }
}

impl<T: Ty> Index<usize> for Regs<T> {
    type Output = Val<T>;
    #[track_caller]
    fn index(&self, i: usize) -> &Val<T> {
        self.get(&[i])
    }
}

impl<T: Ty, const N: usize> Index<[usize; N]> for Regs<T> {
    type Output = Val<T>;
    #[track_caller]
    fn index(&self, i: [usize; N]) -> &Val<T> {
        self.get(&i)
    }
}

impl<T: Ty, const N: usize> Index<[Ix; N]> for Regs<T> {
    type Output = Val<T>;
    #[track_caller]
    fn index(&self, i: [Ix; N]) -> &Val<T> {
        let ix: Vec<usize> = i.iter().map(|i| i.comptime("a register array")).collect();
        self.get(&ix)
    }
}

impl<T: Ty, V: Operand<T>> StoreMut<usize, V> for Regs<T> {
    #[track_caller]
    fn __kda_store(&mut self, i: usize, v: V) {
        let v = v.val();
        self.set(&[i], v)
    }
}

impl<T: Ty, V: Operand<T>, const N: usize> StoreMut<[usize; N], V> for Regs<T> {
    #[track_caller]
    fn __kda_store(&mut self, i: [usize; N], v: V) {
        let v = v.val();
        self.set(&i, v)
    }
}

impl<T: Ty, V: Operand<T>, const N: usize> StoreMut<[Ix; N], V> for Regs<T> {
    #[track_caller]
    fn __kda_store(&mut self, i: [Ix; N], v: V) {
        let v = v.val();
        let mut ix = [0; N];
        for (o, i) in ix.iter_mut().zip(i) {
            *o = i.comptime("a register array");
        }
        self.set(&ix, v)
    }
}

impl<T: Ty> Carry for Regs<T> {
    fn values(&self, out: &mut Vec<Value>) {
        out.extend(self.vals.iter().flatten().map(|v| v.value()));
    }
    fn with_values(&self, it: &mut dyn Iterator<Item = Value>) -> Self {
        let vals = self
            .vals
            .iter()
            .map(|v| v.map(|_| Val::from_value(it.next().expect("kda: carried values"))))
            .collect();
        Regs {
            dims: self.dims.clone(),
            vals,
        }
    }
    fn agrees(&self, other: &Self) -> bool {
        self.dims == other.dims
            && self
                .vals
                .iter()
                .zip(&other.vals)
                .all(|(a, b)| a.is_some() == b.is_some())
    }
}
