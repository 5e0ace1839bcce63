//! Runtime values: [`Val<T>`] is one SSA value of the kernel being traced,
//! typed by a Rust marker (`Val<f32>`, `Val<u32>`, `Val<bool>`, `Val<bf16>`,
//! vectors `Val<[f32; 4]>`). Plain Rust numbers are comptime constants; they
//! become `iconst`/`fconst` instructions where an operation needs them
//! ([`Operand`]).

use std::fmt;
use std::marker::PhantomData;

use half::bf16;
use kda_ir::{Op, Scalar, Type, Value};

use super::trace::emit;

/// A type a [`Val`] can have: a scalar [`Elem`] or a vector `[E; 2|4|8]`.
pub trait Ty: Copy + 'static {
    /// The IR type of a `Val<Self>`.
    const TYPE: Type;
}

/// A scalar element type: `f32`, `bf16`, `i32`, `u32`, `i64`, `u64`, `bool`.
pub trait Elem: Ty {
    /// The IR scalar type of the element.
    const SCALAR: Scalar;
}

macro_rules! elem {
    ($($t:ty => $s:ident),*) => {$(
        impl Ty for $t {
            const TYPE: Type = Type::scalar(Scalar::$s);
        }
        impl Elem for $t {
            const SCALAR: Scalar = Scalar::$s;
        }
    )*};
}
elem!(f32 => F32, bf16 => BF16, i32 => I32, u32 => U32, i64 => I64, u64 => U64, bool => Bool);

impl<E: Elem> Ty for [E; 2] {
    const TYPE: Type = Type::vec(E::SCALAR, 2);
}
impl<E: Elem> Ty for [E; 4] {
    const TYPE: Type = Type::vec(E::SCALAR, 4);
}
impl<E: Elem> Ty for [E; 8] {
    const TYPE: Type = Type::vec(E::SCALAR, 8);
}

/// One runtime value of type `T` in the kernel being traced.
pub struct Val<T: Ty> {
    v: Value,
    _t: PhantomData<T>,
}

impl<T: Ty> Clone for Val<T> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<T: Ty> Copy for Val<T> {}

impl<T: Ty> fmt::Debug for Val<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Val<{}>({})", T::TYPE, self.v)
    }
}

impl<T: Ty> Val<T> {
    /// Wrap an IR value whose type is `T` (for code that mixes the DSL and the
    /// builder API).
    pub fn from_value(v: Value) -> Val<T> {
        Val { v, _t: PhantomData }
    }

    /// The IR value.
    pub fn value(self) -> Value {
        self.v
    }
}

/// What an operation accepts where it needs a `Val<T>`: the value itself, a
/// comptime Rust number (emitted as a constant), or a lazy [`Cast`].
pub trait Operand<T: Ty> {
    /// The operand as a value; a comptime number emits its constant here.
    #[track_caller]
    fn val(self) -> Val<T>;
}

impl<T: Ty> Operand<T> for Val<T> {
    fn val(self) -> Val<T> {
        self
    }
}

/// Materialise a comptime number (or pass a value through): `val(0.0f32)`.
#[track_caller]
pub fn val<T: Ty>(x: impl Operand<T>) -> Val<T> {
    x.val()
}

#[track_caller]
pub(crate) fn iconst<T: Ty>(v: i64) -> Val<T> {
    Val::from_value(emit(|b| b.iconst(T::TYPE, v)))
}

#[track_caller]
pub(crate) fn fconst<T: Ty>(v: f64) -> Val<T> {
    Val::from_value(emit(|b| b.push(Op::FConst(v), &[], &[T::TYPE])[0]))
}

#[track_caller]
fn fit<X: TryInto<i64> + Copy + fmt::Display>(x: X, min: i64, max: i64, ty: &str) -> i64 {
    match x.try_into() {
        Ok(v) if (min..=max).contains(&v) => v,
        _ => panic!("kda: constant {x} does not fit `{ty}`"),
    }
}

macro_rules! int_operands {
    ($($t:ty: $min:expr, $max:expr);*) => {$(
        int_operands!(@one $t, $min, $max, i32, u32, i64, u64, usize);
    )*};
    (@one $t:ty, $min:expr, $max:expr, $($src:ty),*) => {$(
        impl Operand<$t> for $src {
            #[track_caller]
            fn val(self) -> Val<$t> {
                iconst(fit(self, $min, $max, stringify!($t)))
            }
        }
    )*};
}
int_operands!(
    i32: i32::MIN as i64, i32::MAX as i64;
    u32: 0, u32::MAX as i64;
    i64: i64::MIN, i64::MAX;
    u64: 0, i64::MAX
);

impl Operand<f32> for f32 {
    #[track_caller]
    fn val(self) -> Val<f32> {
        fconst(self as f64)
    }
}
impl Operand<f32> for f64 {
    #[track_caller]
    fn val(self) -> Val<f32> {
        fconst(self as f32 as f64)
    }
}
impl Operand<bf16> for bf16 {
    #[track_caller]
    fn val(self) -> Val<bf16> {
        fconst(self.to_f64())
    }
}
impl Operand<bf16> for f32 {
    #[track_caller]
    fn val(self) -> Val<bf16> {
        fconst(bf16::from_f32(self).to_f64())
    }
}
impl Operand<bf16> for f64 {
    #[track_caller]
    fn val(self) -> Val<bf16> {
        fconst(bf16::from_f64(self).to_f64())
    }
}
impl Operand<bool> for bool {
    #[track_caller]
    fn val(self) -> Val<bool> {
        iconst(self as i64)
    }
}

/// A conversion `S -> T` that is emitted (`cvt`) where the value is used, so
/// `fma(x, 2.0, rank.cast::<f32>())` emits its operands in argument order.
/// Use it like a `Val<T>` in arithmetic and as an operand; `.val()` emits it.
pub struct Cast<S: Ty, T: Ty> {
    src: Val<S>,
    _t: PhantomData<T>,
}

impl<S: Ty, T: Ty> Clone for Cast<S, T> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<S: Ty, T: Ty> Copy for Cast<S, T> {}

impl<S: Ty, T: Ty> fmt::Debug for Cast<S, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Cast<{} -> {}>({})", S::TYPE, T::TYPE, self.src.v)
    }
}

impl<S: Ty, T: Ty> Cast<S, T> {
    /// Emit the conversion now.
    #[track_caller]
    pub fn val(self) -> Val<T> {
        Operand::val(self)
    }
}

impl<S: Ty, T: Ty> Operand<T> for Cast<S, T> {
    #[track_caller]
    fn val(self) -> Val<T> {
        let src = self.src.v;
        Val::from_value(emit(|b| b.cvt(src, T::TYPE)))
    }
}

impl<S: Ty> Val<S> {
    /// Numeric conversion (`cvt`): float -> int truncates and saturates; int
    /// -> float and f32 -> bf16 round to nearest even. Lazy: see [`Cast`].
    pub fn cast<T: Ty>(self) -> Cast<S, T> {
        Cast {
            src: self,
            _t: PhantomData,
        }
    }

    /// Reinterpret the bits as `T` (same size).
    #[track_caller]
    pub fn bitcast<T: Ty>(self) -> Val<T> {
        let v = self.v;
        Val::from_value(emit(|b| b.bitcast(v, T::TYPE)))
    }
}

/// A vector of `N` lanes from `N` scalars.
#[track_caller]
pub fn pack<E: Elem, const N: usize>(lanes: [Val<E>; N]) -> Val<[E; N]>
where
    [E; N]: Ty,
{
    let vs: Vec<Value> = lanes.iter().map(|l| l.v).collect();
    Val::from_value(emit(|b| b.pack(&vs)))
}

impl<E: Elem, const N: usize> Val<[E; N]>
where
    [E; N]: Ty,
{
    /// Lane `i` (comptime, any integer type) of a vector.
    #[track_caller]
    pub fn lane<I: TryInto<usize> + Copy + fmt::Display>(self, i: I) -> Val<E> {
        let i = match i.try_into() {
            Ok(i) if i < N => i,
            _ => panic!("kda: lane {i} of a {N}-lane vector"),
        };
        let v = self.v;
        Val::from_value(emit(|b| b.extract(v, i as u8)))
    }

    /// Every lane, in order.
    #[track_caller]
    pub fn lanes(self) -> [Val<E>; N] {
        let mut out = [Val::from_value(self.v); N];
        for (i, o) in out.iter_mut().enumerate() {
            *o = self.lane(i);
        }
        out
    }
}
