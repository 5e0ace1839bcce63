//! Control flow. `#[cluster_kernel]` turns each `if`/`for`/`while` whose
//! condition or range it cannot prove comptime into a call here; the call
//! looks at the *type*: a `bool` or a Rust iterator runs the body at trace
//! time (unrolling), a `Val<bool>` or a range with `Val` bounds emits an IR
//! `if`/`for`/`while` region.
//!
//! Locals the body assigns (the macro lists them) are the region's carried
//! state ([`Carry`]): their values flow in as the region's inputs and out as
//! its results, so `x = x + 1` inside a runtime `if` makes `x` the `if`'s
//! result afterwards. Comptime parts of the state must come out the same on
//! every path.

use std::cell::RefCell;
use std::fmt;
use std::marker::PhantomData;
use std::ops::Range;

use kda_ir::{Loc, Value};

use super::mem::{IntoIx, Ix, Shared, Tensor};
use super::sync::{Barrier, Role};
use super::trace::{emit_at, lend, structured};
use super::val::{Elem, Ty, Val};

/// A condition: a comptime `bool` or a runtime `Val<bool>`.
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not a condition",
    label = "a kernel `if`/`while` needs a comptime `bool` or a runtime `Val<bool>`"
)]
pub trait Cond {
    /// Whether the condition is a runtime value (decided by the type).
    const RUNTIME: bool;
    /// The comptime `bool`, or the runtime value to branch on.
    #[track_caller]
    fn decide(self) -> Decided;
}

/// A condition, decided.
pub enum Decided {
    Comptime(bool),
    Runtime(Value),
}

impl Cond for bool {
    const RUNTIME: bool = false;
    fn decide(self) -> Decided {
        Decided::Comptime(self)
    }
}

impl Cond for Val<bool> {
    const RUNTIME: bool = true;
    fn decide(self) -> Decided {
        Decided::Runtime(self.value())
    }
}

/// State that flows through runtime control flow: its runtime values become
/// region inputs and results; its comptime parts must agree on every path.
#[diagnostic::on_unimplemented(
    message = "`{Self}` cannot be assigned inside runtime control flow",
    label = "assigned inside an `if`/`for`/`while` on a runtime value",
    note = "locals assigned there must be `Val`s, register arrays, DSL handles, comptime numbers that \
            end up equal on every path, or tuples, arrays, `Vec`s and `Option`s of these"
)]
pub trait Carry: Clone {
    /// The runtime values, in a fixed order.
    fn values(&self, out: &mut Vec<Value>);
    /// A copy with the runtime values replaced, in the same order.
    fn with_values(&self, it: &mut dyn Iterator<Item = Value>) -> Self;
    /// Same shape and equal comptime parts.
    fn agrees(&self, other: &Self) -> bool;
}

impl<T: Ty> Carry for Val<T> {
    fn values(&self, out: &mut Vec<Value>) {
        out.push(self.value());
    }
    fn with_values(&self, it: &mut dyn Iterator<Item = Value>) -> Self {
        Val::from_value(it.next().expect("kda: carried values"))
    }
    fn agrees(&self, _: &Self) -> bool {
        true
    }
}

macro_rules! comptime_carry {
    ($($t:ty),*) => {$(
        impl Carry for $t {
            fn values(&self, _: &mut Vec<Value>) {}
            fn with_values(&self, _: &mut dyn Iterator<Item = Value>) -> Self {
                self.clone()
            }
            fn agrees(&self, other: &Self) -> bool {
                self == other
            }
        }
    )*};
}
comptime_carry!(
    bool,
    u8,
    u16,
    u32,
    u64,
    usize,
    i8,
    i16,
    i32,
    i64,
    isize,
    f32,
    f64,
    char,
    String,
    &'static str
);

macro_rules! handle_carry {
    ($([$($g:tt)*] $t:ty),*) => {$(
        impl<$($g)*> Carry for $t {
            fn values(&self, _: &mut Vec<Value>) {}
            fn with_values(&self, _: &mut dyn Iterator<Item = Value>) -> Self {
                *self
            }
            fn agrees(&self, other: &Self) -> bool {
                self.id == other.id
            }
        }
    )*};
}
handle_carry!([] Barrier, [] Role, [T: Elem] Shared<T>, [T: Elem, const R: usize] Tensor<T, R>);

impl<T: Carry> Carry for Option<T> {
    fn values(&self, out: &mut Vec<Value>) {
        if let Some(x) = self {
            x.values(out)
        }
    }
    fn with_values(&self, it: &mut dyn Iterator<Item = Value>) -> Self {
        self.as_ref().map(|x| x.with_values(it))
    }
    fn agrees(&self, other: &Self) -> bool {
        match (self, other) {
            (Some(a), Some(b)) => a.agrees(b),
            (None, None) => true,
            _ => false,
        }
    }
}

impl<T: Carry> Carry for Vec<T> {
    fn values(&self, out: &mut Vec<Value>) {
        self.iter().for_each(|x| x.values(out))
    }
    fn with_values(&self, it: &mut dyn Iterator<Item = Value>) -> Self {
        self.iter().map(|x| x.with_values(it)).collect()
    }
    fn agrees(&self, other: &Self) -> bool {
        self.len() == other.len() && self.iter().zip(other).all(|(a, b)| a.agrees(b))
    }
}

impl<T: Carry, const N: usize> Carry for [T; N] {
    fn values(&self, out: &mut Vec<Value>) {
        self.iter().for_each(|x| x.values(out))
    }
    fn with_values(&self, it: &mut dyn Iterator<Item = Value>) -> Self {
        let mut out = self.clone();
        for x in out.iter_mut() {
            *x = x.with_values(it);
        }
        out
    }
    fn agrees(&self, other: &Self) -> bool {
        self.iter().zip(other).all(|(a, b)| a.agrees(b))
    }
}

/// The carried locals of one region, as the macro passes them: a tuple, one
/// component per local; [`CarryTuple::disagreement`] names the first local
/// whose shape or comptime value differs between paths.
pub trait CarryTuple: Carry {
    /// The position of the first component that does not [`Carry::agrees`] with
    /// `other`'s, or `None` when all agree.
    fn disagreement(&self, other: &Self) -> Option<usize>;
}

macro_rules! tuple_carry {
    ($(($($n:tt $t:ident),*))*) => {$(
        impl<$($t: Carry),*> Carry for ($($t,)*) {
            #[allow(unused_variables)]
            fn values(&self, out: &mut Vec<Value>) {
                $(self.$n.values(out);)*
            }
            #[allow(unused_variables, clippy::unused_unit)]
            fn with_values(&self, it: &mut dyn Iterator<Item = Value>) -> Self {
                ($(self.$n.with_values(it),)*)
            }
            #[allow(unused_variables)]
            fn agrees(&self, other: &Self) -> bool {
                true $(&& self.$n.agrees(&other.$n))*
            }
        }
        impl<$($t: Carry),*> CarryTuple for ($($t,)*) {
            #[allow(unused_variables)]
            fn disagreement(&self, other: &Self) -> Option<usize> {
                $(if !self.$n.agrees(&other.$n) { return Some($n); })*
                None
            }
        }
    )*};
}
tuple_carry! {
    ()
    (0 A)
    (0 A, 1 B)
    (0 A, 1 B, 2 C)
    (0 A, 1 B, 2 C, 3 D)
    (0 A, 1 B, 2 C, 3 D, 4 E)
    (0 A, 1 B, 2 C, 3 D, 4 E, 5 F)
    (0 A, 1 B, 2 C, 3 D, 4 E, 5 F, 6 G)
    (0 A, 1 B, 2 C, 3 D, 4 E, 5 F, 6 G, 7 H)
    (0 A, 1 B, 2 C, 3 D, 4 E, 5 F, 6 G, 7 H, 8 I)
    (0 A, 1 B, 2 C, 3 D, 4 E, 5 F, 6 G, 7 H, 8 I, 9 J)
    (0 A, 1 B, 2 C, 3 D, 4 E, 5 F, 6 G, 7 H, 8 I, 9 J, 10 K)
    (0 A, 1 B, 2 C, 3 D, 4 E, 5 F, 6 G, 7 H, 8 I, 9 J, 10 K, 11 L)
}

fn names_at(names: &[&str], i: Option<usize>) -> String {
    match i.and_then(|i| names.get(i)) {
        Some(n) => format!("`{n}`"),
        None => "a result".to_string(),
    }
}

/// A runtime `if` (or a comptime one the macro could not prove comptime).
/// `f(branch, state)` runs the user's then (`true`) or else (`false`) block
/// with the carried locals.
#[track_caller]
pub fn if_else<C: Cond, S: CarryTuple, R: Carry>(
    cond: C,
    state: &mut S,
    names: &[&str],
    f: impl FnMut(bool, &mut S) -> R,
) -> R {
    let loc = Loc::caller();
    let mut f = f;
    let c = match cond.decide() {
        Decided::Comptime(b) => return f(b, state),
        Decided::Runtime(c) => c,
    };
    let f = RefCell::new(f);
    let init = state.clone();
    let outs: RefCell<Vec<(R, S)>> = RefCell::new(Vec::new());
    let branch = |b: &mut kda_ir::Builder, which: bool| {
        lend(b, &loc, || {
            let mut s = init.clone();
            let r = (f.borrow_mut())(which, &mut s);
            let mut ys = Vec::new();
            r.values(&mut ys);
            s.values(&mut ys);
            outs.borrow_mut().push((r, s));
            ys
        })
    };
    let results = structured(&loc, |b| {
        b.if_else(c, |b| branch(b, true), |b| branch(b, false))
    });
    let mut outs = outs.into_inner();
    let (r_else, s_else) = outs.pop().expect("kda: else branch traced");
    let (r_then, s_then) = outs.pop().expect("kda: then branch traced");
    if !r_then.agrees(&r_else) {
        panic!("kda: the branches of the runtime `if` at {loc} yield values of different shapes");
    }
    if let Some(i) = s_then.disagreement(&s_else) {
        panic!(
            "kda: the branches of the runtime `if` at {loc} leave {} different (a different shape, \
             or a comptime value that differs between the branches)",
            names_at(names, Some(i))
        );
    }
    let mut it = results.into_iter();
    let r = r_then.with_values(&mut it);
    *state = s_then.with_values(&mut it);
    r
}

/// A range with runtime bounds: `lo..hi` stepping by `step`; a `for` over it
/// is an IR `for` region.
pub struct RtRange<T: Ty> {
    lo: Ix,
    hi: Ix,
    step: Ix,
    _t: PhantomData<T>,
}

impl<T: Ty> Clone for RtRange<T> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<T: Ty> Copy for RtRange<T> {}

impl<T: Ty> fmt::Debug for RtRange<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "RtRange<{}>({:?}..{:?} step {:?})",
            T::TYPE,
            self.lo,
            self.hi,
            self.step
        )
    }
}

impl<T: Ty> RtRange<T> {
    fn new(lo: Ix, hi: Ix) -> Self {
        RtRange {
            lo,
            hi,
            step: Ix::Const(1),
            _t: PhantomData,
        }
    }

    /// Every `step`-th value (comptime step).
    pub fn step_by(self, step: usize) -> RtRange<T> {
        assert!(step > 0, "kda: a range step must be positive");
        RtRange {
            step: Ix::Const(step as i64),
            ..self
        }
    }
}

/// The bounds of a range in a kernel `for`: both comptime (a Rust range) or
/// either runtime (an [`RtRange`]).
pub trait RangeEnd<Lo> {
    /// `Range<T>` when both bounds are comptime, [`RtRange<T>`] otherwise.
    type Range;
    /// `lo..hi`.
    fn range(lo: Lo, hi: Self) -> Self::Range;
}

macro_rules! range_ends {
    ($($t:ty),*) => {$(
        impl RangeEnd<$t> for $t {
            type Range = Range<$t>;
            fn range(lo: $t, hi: $t) -> Range<$t> {
                lo..hi
            }
        }
        impl RangeEnd<$t> for Val<$t> {
            type Range = RtRange<$t>;
            fn range(lo: $t, hi: Val<$t>) -> RtRange<$t> {
                RtRange::new(lo.ix(), hi.ix())
            }
        }
        impl RangeEnd<Val<$t>> for $t {
            type Range = RtRange<$t>;
            fn range(lo: Val<$t>, hi: $t) -> RtRange<$t> {
                RtRange::new(lo.ix(), hi.ix())
            }
        }
        impl RangeEnd<Val<$t>> for Val<$t> {
            type Range = RtRange<$t>;
            fn range(lo: Val<$t>, hi: Val<$t>) -> RtRange<$t> {
                RtRange::new(lo.ix(), hi.ix())
            }
        }
    )*};
}
range_ends!(i32, u32, i64, u64);

macro_rules! comptime_range_ends {
    ($($t:ty),*) => {$(
        impl RangeEnd<$t> for $t {
            type Range = Range<$t>;
            fn range(lo: $t, hi: $t) -> Range<$t> {
                lo..hi
            }
        }
    )*};
}
comptime_range_ends!(usize, isize, u8, u16, i8, i16);

/// `lo..hi` in a kernel `for` whose bounds may be runtime values.
pub fn range<Lo, Hi: RangeEnd<Lo>>(lo: Lo, hi: Hi) -> Hi::Range {
    Hi::range(lo, hi)
}

/// What a kernel `for` iterates: any Rust iterator (unrolled at trace time) or
/// an [`RtRange`] (an IR loop).
pub trait ForLoop {
    /// What the body receives each iteration: the iterator's item, or `Val<T>` for
    /// an [`RtRange<T>`].
    type Item;
    /// Run `f` once per item over the carried `state` (the macro passes the
    /// locals' `names` for diagnostics). A comptime iterator calls `f` at trace
    /// time; an [`RtRange`] traces `f` once as the body of an IR `for`, whose
    /// results become `state` afterwards.
    #[track_caller]
    fn run<S: CarryTuple>(self, state: &mut S, names: &[&str], f: impl FnMut(Self::Item, &mut S));
}

impl<I: IntoIterator> ForLoop for I {
    type Item = I::Item;
    fn run<S: CarryTuple>(self, state: &mut S, _: &[&str], mut f: impl FnMut(I::Item, &mut S)) {
        for x in self {
            f(x, state)
        }
    }
}

impl<T: Ty> ForLoop for RtRange<T> {
    type Item = Val<T>;
    #[track_caller]
    fn run<S: CarryTuple>(self, state: &mut S, names: &[&str], f: impl FnMut(Val<T>, &mut S)) {
        let loc = Loc::caller();
        // Bounds in order lo, hi, step; comptime ones become constants of T.
        let bound = |i: Ix| match i {
            Ix::Val(v) => v,
            Ix::Const(c) => emit_at(&loc, |b| b.iconst(T::TYPE, c)),
        };
        let (lo, hi, step) = (bound(self.lo), bound(self.hi), bound(self.step));
        let mut inits = Vec::new();
        state.values(&mut inits);
        let template = state.clone();
        let f = RefCell::new(f);
        let out: RefCell<Option<S>> = RefCell::new(None);
        let results = structured(&loc, |b| {
            b.for_(lo, hi, step, &inits, |b, iv, carried| {
                lend(b, &loc, || {
                    let mut s = template.with_values(&mut carried.iter().copied());
                    (f.borrow_mut())(Val::from_value(iv), &mut s);
                    let mut ys = Vec::new();
                    s.values(&mut ys);
                    *out.borrow_mut() = Some(s);
                    ys
                })
            })
        });
        let after = out.into_inner().expect("kda: loop body traced");
        if let Some(i) = template.disagreement(&after) {
            panic!(
                "kda: the body of the runtime `for` at {loc} changes {} (its shape, or a comptime \
                 value, which cannot change from one iteration to the next)",
                names_at(names, Some(i))
            );
        }
        *state = template.with_values(&mut results.into_iter());
    }
}

/// A kernel `while`: a comptime condition loops at trace time, a runtime one
/// is an IR `while` region.
#[track_caller]
pub fn while_loop<S: CarryTuple, C: Cond>(
    state: &mut S,
    names: &[&str],
    mut cond: impl FnMut(&S) -> C,
    mut body: impl FnMut(&mut S),
) {
    if !C::RUNTIME {
        loop {
            match cond(state).decide() {
                Decided::Comptime(true) => body(state),
                _ => return,
            }
        }
    }
    let loc = Loc::caller();
    let mut inits = Vec::new();
    state.values(&mut inits);
    let template = state.clone();
    let out: RefCell<Option<S>> = RefCell::new(None);
    let results = structured(&loc, |b| {
        b.while_(
            &inits,
            |b, carried| {
                lend(b, &loc, || {
                    let s = template.with_values(&mut carried.iter().copied());
                    match cond(&s).decide() {
                        Decided::Runtime(c) => c,
                        Decided::Comptime(_) => unreachable!("a runtime condition type"),
                    }
                })
            },
            |b, carried| {
                lend(b, &loc, || {
                    let mut s = template.with_values(&mut carried.iter().copied());
                    body(&mut s);
                    let mut ys = Vec::new();
                    s.values(&mut ys);
                    *out.borrow_mut() = Some(s);
                    ys
                })
            },
        )
    });
    let after = out.into_inner().expect("kda: loop body traced");
    if let Some(i) = template.disagreement(&after) {
        panic!(
            "kda: the body of the runtime `while` at {loc} changes {} (its shape, or a comptime value)",
            names_at(names, Some(i))
        );
    }
    *state = template.with_values(&mut results.into_iter());
}
