//! Arithmetic on [`Val`]s: Rust's operators emit IR (`a + b` is an `add`),
//! with a comptime number on either side becoming a constant of the value's
//! type; math functions are methods (`x.exp()`, `x.fast_rsqrt()`); `fma`,
//! `select`. Comparisons (`==`, `<`...) and `&&`/`||` are rewritten by
//! `#[cluster_kernel]` into [`eq`](super::__rt::eq)-style calls that give a
//! `bool` on comptime values and a `Val<bool>` on runtime ones.

use std::ops;

use half::bf16;
use kda_ir::{BinOp, CmpOp, UnOp};

use super::trace::emit;
use super::val::{Cast, Elem, Operand, Ty, Val};

#[track_caller]
fn bin<T: Ty>(op: BinOp, a: Val<T>, b: Val<T>) -> Val<T> {
    let (a, b) = (a.value(), b.value());
    Val::from_value(emit(|bd| bd.bin(op, a, b)))
}

#[track_caller]
fn un<T: Ty>(op: UnOp, a: Val<T>) -> Val<T> {
    let a = a.value();
    Val::from_value(emit(|bd| bd.un(op, a)))
}

/// `$Tr`/`$TrA` for `Val<$t>` with `Val<$t>`, `$p` (the comptime number type
/// whose literals infer) and `Cast<_, $t>` on either side.
macro_rules! binop {
    ($Tr:ident $m:ident $TrA:ident $ma:ident $op:ident: $($t:ty => $p:ty),*) => {$(
        impl ops::$Tr for Val<$t> {
            type Output = Val<$t>;
            #[track_caller]
            fn $m(self, r: Val<$t>) -> Val<$t> {
                bin(BinOp::$op, self, r)
            }
        }
        impl ops::$Tr<$p> for Val<$t> {
            type Output = Val<$t>;
            #[track_caller]
            fn $m(self, r: $p) -> Val<$t> {
                let r = <$p as Operand<$t>>::val(r);
                bin(BinOp::$op, self, r)
            }
        }
        impl ops::$Tr<Val<$t>> for $p {
            type Output = Val<$t>;
            #[track_caller]
            fn $m(self, r: Val<$t>) -> Val<$t> {
                let l = <$p as Operand<$t>>::val(self);
                bin(BinOp::$op, l, r)
            }
        }
        impl<S: Ty> ops::$Tr<Cast<S, $t>> for Val<$t> {
            type Output = Val<$t>;
            #[track_caller]
            fn $m(self, r: Cast<S, $t>) -> Val<$t> {
                let r = r.val();
                bin(BinOp::$op, self, r)
            }
        }
        impl<S: Ty> ops::$Tr<Val<$t>> for Cast<S, $t> {
            type Output = Val<$t>;
            #[track_caller]
            fn $m(self, r: Val<$t>) -> Val<$t> {
                let l = self.val();
                bin(BinOp::$op, l, r)
            }
        }
        impl<S: Ty> ops::$Tr<$p> for Cast<S, $t> {
            type Output = Val<$t>;
            #[track_caller]
            fn $m(self, r: $p) -> Val<$t> {
                let l = self.val();
                let r = <$p as Operand<$t>>::val(r);
                bin(BinOp::$op, l, r)
            }
        }
        impl ops::$TrA for Val<$t> {
            #[track_caller]
            fn $ma(&mut self, r: Val<$t>) {
                *self = bin(BinOp::$op, *self, r);
            }
        }
        impl ops::$TrA<$p> for Val<$t> {
            #[track_caller]
            fn $ma(&mut self, r: $p) {
                let r = <$p as Operand<$t>>::val(r);
                *self = bin(BinOp::$op, *self, r);
            }
        }
        impl<S: Ty> ops::$TrA<Cast<S, $t>> for Val<$t> {
            #[track_caller]
            fn $ma(&mut self, r: Cast<S, $t>) {
                let r = r.val();
                *self = bin(BinOp::$op, *self, r);
            }
        }
    )*};
}

binop!(Add add AddAssign add_assign Add: f32 => f32, bf16 => f32, i32 => i32, u32 => u32, i64 => i64, u64 => u64);
binop!(Sub sub SubAssign sub_assign Sub: f32 => f32, bf16 => f32, i32 => i32, u32 => u32, i64 => i64, u64 => u64);
binop!(Mul mul MulAssign mul_assign Mul: f32 => f32, bf16 => f32, i32 => i32, u32 => u32, i64 => i64, u64 => u64);
binop!(Div div DivAssign div_assign Div: f32 => f32, bf16 => f32, i32 => i32, u32 => u32, i64 => i64, u64 => u64);
binop!(Rem rem RemAssign rem_assign Rem: i32 => i32, u32 => u32, i64 => i64, u64 => u64);
binop!(BitAnd bitand BitAndAssign bitand_assign And: i32 => i32, u32 => u32, i64 => i64, u64 => u64, bool => bool);
binop!(BitOr bitor BitOrAssign bitor_assign Or: i32 => i32, u32 => u32, i64 => i64, u64 => u64, bool => bool);
binop!(BitXor bitxor BitXorAssign bitxor_assign Xor: i32 => i32, u32 => u32, i64 => i64, u64 => u64, bool => bool);
binop!(Shl shl ShlAssign shl_assign Shl: i32 => i32, u32 => u32, i64 => i64, u64 => u64);
binop!(Shr shr ShrAssign shr_assign Shr: i32 => i32, u32 => u32, i64 => i64, u64 => u64);

macro_rules! unop {
    ($Tr:ident $m:ident $op:ident: $($t:ty),*) => {$(
        impl ops::$Tr for Val<$t> {
            type Output = Val<$t>;
            #[track_caller]
            fn $m(self) -> Val<$t> {
                un(UnOp::$op, self)
            }
        }
    )*};
}
unop!(Neg neg Neg: f32, bf16, i32, i64);
unop!(Not not Not: i32, u32, i64, u64, bool);

/// Methods of every numeric value.
impl<T: Elem> Val<T> {
    /// The smaller of two values (floats: the other one when one is NaN).
    #[track_caller]
    pub fn min(self, other: impl Operand<T>) -> Val<T> {
        let o = other.val();
        bin(BinOp::Min, self, o)
    }

    /// The larger of two values (floats: the other one when one is NaN).
    #[track_caller]
    pub fn max(self, other: impl Operand<T>) -> Val<T> {
        let o = other.val();
        bin(BinOp::Max, self, o)
    }

    /// `|x|`.
    #[track_caller]
    pub fn abs(self) -> Val<T> {
        un(UnOp::Abs, self)
    }

    /// `(self + by) % modulus` with both constants emitted first: ring
    /// arithmetic on ranks and stages (`rank.add_mod(1, cluster)` is the next
    /// CTA of the cluster).
    #[track_caller]
    pub fn add_mod(self, by: impl Operand<T>, modulus: impl Operand<T>) -> Val<T> {
        let by = by.val();
        let m = modulus.val();
        let s = bin(BinOp::Add, self, by);
        bin(BinOp::Rem, s, m)
    }
}

macro_rules! math {
    ($($(#[$doc:meta])* $name:ident $fast:ident => $op:ident),*) => {
        impl Val<f32> {$(
            $(#[$doc])*
            #[track_caller]
            pub fn $name(self) -> Val<f32> {
                un(UnOp::$op { fast: false }, self)
            }
            /// The approximate hardware instruction (subnormals flush to zero).
            #[track_caller]
            pub fn $fast(self) -> Val<f32> {
                un(UnOp::$op { fast: true }, self)
            }
        )*}
    };
}
math!(
    /// `e^x`, within 1 ulp.
    exp fast_exp => Exp,
    /// `2^x`, within 1 ulp.
    exp2 fast_exp2 => Exp2,
    /// `1 / sqrt(x)`, as `1 / sqrt.rn(x)`.
    rsqrt fast_rsqrt => Rsqrt,
    /// `1 / x`, correctly rounded.
    rcp fast_rcp => Rcp,
    /// `1 / (1 + e^-x)` with IEEE division.
    sigmoid fast_sigmoid => Sigmoid
);

impl Val<f32> {
    /// `sqrt(x)`, correctly rounded.
    #[track_caller]
    pub fn sqrt(self) -> Val<f32> {
        un(UnOp::Sqrt, self)
    }

    /// `log2(x)`, the approximate hardware instruction (`lg2.approx.ftz`:
    /// subnormals flush to zero, max relative error about 2^-22); there is
    /// no correctly rounded form. `ln(x)` is `x.fast_log2() * LN_2`.
    #[track_caller]
    pub fn fast_log2(self) -> Val<f32> {
        un(UnOp::Log2Approx, self)
    }
}

/// `a * b + c`, rounded once (IEEE).
#[track_caller]
pub fn fma(a: impl Operand<f32>, b: impl Operand<f32>, c: impl Operand<f32>) -> Val<f32> {
    fma_with(a, b, c, false)
}

/// `a * b + c`, rounded once, subnormal inputs and result flushed to zero.
#[track_caller]
pub fn fma_ftz(a: impl Operand<f32>, b: impl Operand<f32>, c: impl Operand<f32>) -> Val<f32> {
    fma_with(a, b, c, true)
}

/// `a * b + c` with flush-to-zero chosen by a comptime flag (`cfg.fast_math`).
#[track_caller]
pub fn fma_with(
    a: impl Operand<f32>,
    b: impl Operand<f32>,
    c: impl Operand<f32>,
    ftz: bool,
) -> Val<f32> {
    let (a, b, c) = (a.val().value(), b.val().value(), c.val().value());
    Val::from_value(emit(|bd| bd.fma(a, b, c, ftz)))
}

/// `if cond { a } else { b }` without a branch.
#[track_caller]
pub fn select<T: Ty>(cond: impl Operand<bool>, a: impl Operand<T>, b: impl Operand<T>) -> Val<T> {
    let (c, a, b) = (cond.val().value(), a.val().value(), b.val().value());
    Val::from_value(emit(|bd| bd.select(c, a, b)))
}

#[track_caller]
fn cmp<T: Ty>(op: CmpOp, a: Val<T>, b: Val<T>) -> Val<bool> {
    let (a, b) = (a.value(), b.value());
    Val::from_value(emit(|bd| bd.cmp(op, a, b)))
}

/// `==`/`!=` as rewritten by `#[cluster_kernel]`: `bool` for comptime
/// operands (any `PartialEq`), `Val<bool>` when either side is a `Val`.
pub trait KdaEq<Rhs: ?Sized> {
    /// `bool` when both sides are comptime, `Val<bool>` otherwise.
    type Output;
    /// `self == rhs`, or `self != rhs` when `ne`.
    #[track_caller]
    fn kda_eq(&self, rhs: &Rhs, ne: bool) -> Self::Output;
}

/// `<`, `<=`, `>`, `>=` as rewritten by `#[cluster_kernel]`.
pub trait KdaOrd<Rhs: ?Sized> {
    /// `bool` when both sides are comptime, `Val<bool>` otherwise.
    type Output;
    /// `self op rhs` for an ordering `op` (`Lt`, `Le`, `Gt`, `Ge`).
    #[track_caller]
    fn kda_cmp(&self, op: CmpOp, rhs: &Rhs) -> Self::Output;
}

impl<A: ?Sized + PartialEq<B>, B: ?Sized> KdaEq<B> for A {
    type Output = bool;
    fn kda_eq(&self, rhs: &B, ne: bool) -> bool {
        if ne { self != rhs } else { self == rhs }
    }
}

impl<A: ?Sized + PartialOrd<B>, B: ?Sized> KdaOrd<B> for A {
    type Output = bool;
    fn kda_cmp(&self, op: CmpOp, rhs: &B) -> bool {
        match op {
            CmpOp::Lt => self < rhs,
            CmpOp::Le => self <= rhs,
            CmpOp::Gt => self > rhs,
            CmpOp::Ge => self >= rhs,
            CmpOp::Eq => self == rhs,
            CmpOp::Ne => self != rhs,
        }
    }
}

/// One side of a comparison as a value.
trait Side<T: Ty> {
    #[track_caller]
    fn side(&self) -> Val<T>;
}
impl<T: Ty> Side<T> for Val<T> {
    fn side(&self) -> Val<T> {
        *self
    }
}
impl<S: Ty, T: Ty> Side<T> for Cast<S, T> {
    #[track_caller]
    fn side(&self) -> Val<T> {
        self.val()
    }
}

macro_rules! compare {
    ($($t:ty => $p:ty),*) => {$(
        impl Side<$t> for $p {
            #[track_caller]
            fn side(&self) -> Val<$t> {
                <$p as Operand<$t>>::val(*self)
            }
        }
        compare!(@pair Val<$t>, Val<$t>, $t, []);
        compare!(@pair Val<$t>, $p, $t, []);
        compare!(@pair $p, Val<$t>, $t, []);
        compare!(@pair Val<$t>, Cast<S, $t>, $t, [S: Ty]);
        compare!(@pair Cast<S, $t>, Val<$t>, $t, [S: Ty]);
        compare!(@pair Cast<S, $t>, $p, $t, [S: Ty]);
    )*};
    (@pair $a:ty, $b:ty, $t:ty, [$($g:tt)*]) => {
        impl<$($g)*> KdaEq<$b> for $a {
            type Output = Val<bool>;
            #[track_caller]
            fn kda_eq(&self, rhs: &$b, ne: bool) -> Val<bool> {
                let a = Side::<$t>::side(self);
                let b = Side::<$t>::side(rhs);
                cmp(if ne { CmpOp::Ne } else { CmpOp::Eq }, a, b)
            }
        }
        impl<$($g)*> KdaOrd<$b> for $a {
            type Output = Val<bool>;
            #[track_caller]
            fn kda_cmp(&self, op: CmpOp, rhs: &$b) -> Val<bool> {
                let a = Side::<$t>::side(self);
                let b = Side::<$t>::side(rhs);
                cmp(op, a, b)
            }
        }
    };
}
compare!(f32 => f32, bf16 => f32, i32 => i32, u32 => u32, i64 => i64, u64 => u64);

impl KdaEq<Val<bool>> for Val<bool> {
    type Output = Val<bool>;
    #[track_caller]
    fn kda_eq(&self, rhs: &Val<bool>, ne: bool) -> Val<bool> {
        cmp(if ne { CmpOp::Ne } else { CmpOp::Eq }, *self, *rhs)
    }
}

impl KdaEq<bool> for Val<bool> {
    type Output = Val<bool>;
    #[track_caller]
    fn kda_eq(&self, rhs: &bool, ne: bool) -> Val<bool> {
        let b = rhs.val();
        cmp(if ne { CmpOp::Ne } else { CmpOp::Eq }, *self, b)
    }
}

/// `&&`/`||` as rewritten by `#[cluster_kernel]`: short-circuit on comptime
/// `bool`s, `and`/`or` instructions (both sides evaluated) on `Val<bool>`.
pub trait KdaLogic<B> {
    /// `bool` when both sides are comptime, `Val<bool>` otherwise.
    type Output;
    /// `self || rhs()` when `or`, else `self && rhs()`; `rhs` is called only when
    /// the result depends on it (always, for a runtime `self`).
    #[track_caller]
    fn kda_logic(self, or: bool, rhs: impl FnOnce() -> B) -> Self::Output;
}

impl KdaLogic<bool> for bool {
    type Output = bool;
    fn kda_logic(self, or: bool, rhs: impl FnOnce() -> bool) -> bool {
        if or { self || rhs() } else { self && rhs() }
    }
}

impl<B: Operand<bool>> KdaLogic<B> for Val<bool> {
    type Output = Val<bool>;
    #[track_caller]
    fn kda_logic(self, or: bool, rhs: impl FnOnce() -> B) -> Val<bool> {
        let b = rhs().val();
        bin(if or { BinOp::Or } else { BinOp::And }, self, b)
    }
}

impl KdaLogic<Val<bool>> for bool {
    type Output = Val<bool>;
    #[track_caller]
    fn kda_logic(self, or: bool, rhs: impl FnOnce() -> Val<bool>) -> Val<bool> {
        // The comptime side decides unless the runtime side is needed.
        match (self, or) {
            (true, true) | (false, false) => self.val(),
            _ => rhs(),
        }
    }
}
