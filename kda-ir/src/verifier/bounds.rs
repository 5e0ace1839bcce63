//! Static bounds of shared-memory and DSMEM accesses: an interval analysis
//! over the SSA values that feed an index.
//!
//! Each integer value gets a range `lo..=hi` from its definition: constants,
//! `tid` (the enclosing role's threads, else the block), `laneid`, the
//! cluster rank, a `for` loop's induction variable, and `+ - *`, shifts,
//! `/ %` by constants, `&` masks, `min`/`max`, `cvt`, `select` of those.
//! Enclosing `if` conditions that compare a value with a constant narrow it
//! (`if tid < 32`). A range is *exact* when both ends are reached by some
//! thread or iteration that runs the access (e.g. `tid & 31` over a warp,
//! `4 * iv + 3` over a constant loop), not merely an over-approximation.
//!
//! An access is an error when its element range is exact and leaves the
//! buffer, or when even its lowest element lies past the end: every
//! execution is out of bounds. Over-approximations that might overrun
//! (a loaded index, a parameter, a condition the analysis cannot follow)
//! are not reported: the simulator checks those at run time.
//!
//! Checked: `ld.shared`, `st.shared` and `st.async` (element index plus the
//! value's lanes; `st.async` also its destination rank against the cluster,
//! as `mbarrier.arrive.remote` its),
//! `cp.async` (16 bytes) and `cp.async.bulk` (its bytes into the buffer,
//! and out of the tensor when its extents and strides are constants).

use std::collections::{HashMap, HashSet};

use super::{Ctx, Layout};
use crate::entities::{Buffer, Inst, Tensor, Value};
use crate::kernel::{Dim, Kernel, ValueDef};
use crate::op::{BinOp, CmpOp, Op, Special, UnOp};
use crate::types::Scalar;

/// Sources a range depends on: the thread, the CTA, one bit per loop.
const THREAD: u64 = 1;
const CTA: u64 = 2;
/// A value the analysis does not follow may depend on anything.
const ANY: u64 = u64::MAX;
/// Value chains deeper than this are not followed (a range past it is unknown).
const MAX_DEPTH: u32 = 200;

#[derive(Copy, Clone, Debug, PartialEq)]
struct Range {
    lo: i128,
    hi: i128,
    /// Both ends are reached.
    exact: bool,
    /// Every value in between is reached too.
    contig: bool,
    src: u64,
}

impl Range {
    fn exact(lo: i128, hi: i128, src: u64) -> Range {
        Range {
            lo,
            hi,
            exact: true,
            contig: true,
            src,
        }
    }
    fn approx(lo: i128, hi: i128, src: u64) -> Range {
        Range {
            lo,
            hi,
            exact: false,
            contig: false,
            src,
        }
    }
    fn single(self) -> Option<i128> {
        (self.exact && self.lo == self.hi).then_some(self.lo)
    }
}

/// The values of an integer type, or `None` for other types.
fn type_range(s: Scalar) -> Option<(i128, i128)> {
    Some(match s {
        Scalar::I32 => (i32::MIN.into(), i32::MAX.into()),
        Scalar::U32 => (0, u32::MAX.into()),
        Scalar::I64 => (i64::MIN.into(), i64::MAX.into()),
        Scalar::U64 => (0, u64::MAX.into()),
        _ => return None,
    })
}

/// What an enclosing condition says about the access.
enum Constraint {
    /// `value` (depending on `src`) lies in `lo..=hi`.
    Narrow {
        value: Value,
        lo: i128,
        hi: i128,
        src: u64,
    },
    /// Something the analysis cannot express, depending on these sources.
    Opaque(u64),
}

struct Eval<'k> {
    k: &'k Kernel,
    layout: &'k Layout,
    /// `tid`'s range at the access: its role's threads, else the block.
    tid: (i128, i128),
    narrow: HashMap<Value, (i128, i128, u64)>,
    /// Sources of the enclosing conditions the analysis cannot follow.
    opaque: u64,
    memo: HashMap<Value, Option<Range>>,
    /// Values the last evaluations went through.
    used: HashSet<Value>,
}

impl Eval<'_> {
    fn top(&self, v: Value) -> Range {
        let (lo, hi) = type_range(self.k.ty(v).elem).unwrap_or((i128::MIN, i128::MAX));
        Range::approx(lo, hi, ANY)
    }

    /// The range of `v` at the access, `None` when no thread gets there.
    fn range(&mut self, v: Value, depth: u32) -> Option<Range> {
        if let Some(&r) = self.memo.get(&v) {
            return r;
        }
        self.used.insert(v);
        let r = if depth > MAX_DEPTH || !self.k.values.get(v).is_some_and(|d| d.ty.is_scalar()) {
            Some(self.top(v))
        } else {
            self.define(v, depth).and_then(|r| self.narrowed(v, r))
        };
        self.memo.insert(v, r);
        r
    }

    fn narrowed(&self, v: Value, r: Range) -> Option<Range> {
        let Some(&(lo, hi, _)) = self.narrow.get(&v) else {
            return Some(r);
        };
        let (nlo, nhi) = (r.lo.max(lo), r.hi.min(hi));
        if nlo > nhi {
            return None;
        }
        let kept = nlo == r.lo && nhi == r.hi;
        let exact = r.exact && (r.contig || kept);
        Some(Range {
            lo: nlo,
            hi: nhi,
            exact,
            contig: exact && r.contig,
            src: r.src,
        })
    }

    fn define(&mut self, v: Value, depth: u32) -> Option<Range> {
        let k = self.k;
        let ty = k.ty(v).elem;
        let Some((tlo, thi)) = type_range(ty) else {
            return Some(self.top(v));
        };
        let fit = |r: Range| {
            if r.lo < tlo || r.hi > thi {
                // Wraps: any value of the type.
                Range::approx(tlo, thi, r.src)
            } else {
                r
            }
        };
        let (i, n) = match k.values[v].def {
            ValueDef::Result(i, n) => (i, n),
            ValueDef::Param(region, 0) => {
                let owner = self.layout.owner.get(region).copied().flatten();
                return match owner {
                    Some(f) if matches!(k.insts[f].op, Op::For { body } if body == region) => {
                        self.induction(f, depth)
                    }
                    _ => Some(self.top(v)),
                };
            }
            ValueDef::Param(..) => return Some(self.top(v)),
        };
        let d = &k.insts[i];
        if n != 0 {
            return Some(self.top(v));
        }
        let arg = |this: &mut Self, n: usize| match d.args.get(n) {
            Some(&a) => this.range(a, depth + 1),
            None => Some(this.top(v)),
        };
        Some(match d.op {
            Op::IConst(c) => {
                let c = if ty.is_signed() {
                    i128::from(c)
                } else {
                    i128::from(c as u64) & thi
                };
                Range::exact(c, c, 0)
            }
            Op::Special(Special::ThreadIdx) => Range::exact(self.tid.0, self.tid.1, THREAD),
            Op::Special(Special::LaneId) => {
                let (lo, hi) = self.tid;
                if hi - lo >= 31 {
                    Range::exact(0, 31, THREAD)
                } else if lo / 32 == hi / 32 {
                    Range::exact(lo % 32, hi % 32, THREAD)
                } else {
                    Range::approx(0, 31, THREAD)
                }
            }
            Op::Special(Special::ClusterRank) => {
                Range::exact(0, i128::from(k.launch.cluster.max(1)) - 1, CTA)
            }
            Op::Special(Special::BlockIdx(_)) => Range::approx(0, i32::MAX.into(), 0),
            Op::Special(Special::GridDim(_)) => Range::approx(1, i32::MAX.into(), 0),
            Op::Param(_) => Range::approx(tlo, thi, 0),
            Op::Bin(op) => {
                let a = arg(self, 0)?;
                let b = arg(self, 1)?;
                fit(binary(op, a, b, (tlo, thi)))
            }
            Op::Un(UnOp::Neg) => {
                let a = arg(self, 0)?;
                fit(Range {
                    lo: -a.hi,
                    hi: -a.lo,
                    ..a
                })
            }
            Op::Cvt => {
                let a = arg(self, 0)?;
                if a.lo >= tlo && a.hi <= thi {
                    a
                } else {
                    Range::approx(tlo, thi, a.src)
                }
            }
            Op::Select => {
                let c = arg(self, 0)?;
                match (arg(self, 1), arg(self, 2)) {
                    (Some(a), Some(b)) => {
                        Range::approx(a.lo.min(b.lo), a.hi.max(b.hi), a.src | b.src | c.src)
                    }
                    (Some(a), None) | (None, Some(a)) => a,
                    (None, None) => return None,
                }
            }
            _ => self.top(v),
        })
    }

    /// A `for` loop's induction variable.
    fn induction(&mut self, f: Inst, depth: u32) -> Option<Range> {
        let k = self.k;
        let d = &k.insts[f];
        let bit = 4u64 << (f.as_u32() % 62);
        let (Some(&lo), Some(&hi), Some(&step)) = (d.args.first(), d.args.get(1), d.args.get(2))
        else {
            return Some(Range::approx(i128::MIN, i128::MAX, ANY));
        };
        let (lo, hi, step) = (
            self.range(lo, depth + 1)?,
            self.range(hi, depth + 1)?,
            self.range(step, depth + 1)?,
        );
        if step.lo < 1 {
            return Some(Range::approx(i128::MIN, i128::MAX, ANY));
        }
        let src = bit | lo.src | hi.src | step.src;
        Some(match (lo.single(), hi.single(), step.single()) {
            (Some(l), Some(h), Some(s)) => {
                if l >= h {
                    return None;
                }
                let last = l + (h - 1 - l) / s * s;
                Range {
                    lo: l,
                    hi: last,
                    exact: true,
                    contig: s == 1,
                    src,
                }
            }
            _ if lo.lo > hi.hi - 1 => return None,
            _ => Range::approx(lo.lo, hi.hi - 1, src),
        })
    }

    /// What a condition holding `truth` says.
    fn constrain(&mut self, c: Value, truth: bool, out: &mut Vec<Constraint>, depth: u32) {
        let k = self.k;
        let opaque = |this: &mut Self, out: &mut Vec<Constraint>| {
            let src = this.range(c, depth + 1).map_or(ANY, |r| r.src);
            out.push(Constraint::Opaque(src));
        };
        let ValueDef::Result(i, 0) = k.values[c].def else {
            return out.push(Constraint::Opaque(ANY));
        };
        if depth > MAX_DEPTH {
            return out.push(Constraint::Opaque(ANY));
        }
        let d = &k.insts[i];
        match (&d.op, d.args.as_slice()) {
            (Op::Bin(BinOp::And), &[a, b]) if truth => {
                self.constrain(a, true, out, depth + 1);
                self.constrain(b, true, out, depth + 1);
            }
            (Op::Bin(BinOp::Or), &[a, b]) if !truth => {
                self.constrain(a, false, out, depth + 1);
                self.constrain(b, false, out, depth + 1);
            }
            (Op::Un(UnOp::Not), &[a]) => self.constrain(a, !truth, out, depth + 1),
            (&Op::Cmp(op), &[x, y]) => {
                let (rx, ry) = (self.range(x, depth + 1), self.range(y, depth + 1));
                let op = if truth { op } else { negate(op) };
                let src = |r: Option<Range>| r.map_or(ANY, |r| r.src);
                let narrow = match (rx.and_then(Range::single), ry.and_then(Range::single)) {
                    (_, Some(cy)) => bound(op, cy).map(|b| (x, b, src(rx))),
                    (Some(cx), None) => bound(flip(op), cx).map(|b| (y, b, src(ry))),
                    _ => None,
                };
                match narrow {
                    Some((value, (lo, hi), src)) => {
                        out.push(Constraint::Narrow { value, lo, hi, src })
                    }
                    None => opaque(self, out),
                }
            }
            _ => opaque(self, out),
        }
    }
}

fn negate(op: CmpOp) -> CmpOp {
    match op {
        CmpOp::Eq => CmpOp::Ne,
        CmpOp::Ne => CmpOp::Eq,
        CmpOp::Lt => CmpOp::Ge,
        CmpOp::Le => CmpOp::Gt,
        CmpOp::Gt => CmpOp::Le,
        CmpOp::Ge => CmpOp::Lt,
    }
}

/// `c op x` as `x op' c`.
fn flip(op: CmpOp) -> CmpOp {
    match op {
        CmpOp::Lt => CmpOp::Gt,
        CmpOp::Le => CmpOp::Ge,
        CmpOp::Gt => CmpOp::Lt,
        CmpOp::Ge => CmpOp::Le,
        o => o,
    }
}

/// The values `x` may take when `x op c` holds (`ne` says nothing a range can hold).
fn bound(op: CmpOp, c: i128) -> Option<(i128, i128)> {
    match op {
        CmpOp::Eq => Some((c, c)),
        CmpOp::Ne => None,
        CmpOp::Lt => Some((i128::MIN, c - 1)),
        CmpOp::Le => Some((i128::MIN, c)),
        CmpOp::Gt => Some((c + 1, i128::MAX)),
        CmpOp::Ge => Some((c, i128::MAX)),
    }
}

/// `2^k - 1` masks.
fn low_mask(m: i128) -> bool {
    m >= 0 && (m + 1) & m == 0
}

fn binary(op: BinOp, a: Range, b: Range, (tlo, thi): (i128, i128)) -> Range {
    let src = a.src | b.src;
    let top = Range::approx(tlo, thi, src);
    // Two ends reached together: independent sources, or one side fixed.
    let joint =
        a.exact && b.exact && (a.src & b.src == 0 || a.single().is_some() || b.single().is_some());
    let (x, c) = match (a.single(), b.single()) {
        (_, Some(c)) => (a, Some(c)),
        (Some(c), None)
            if matches!(
                op,
                BinOp::Add | BinOp::Mul | BinOp::And | BinOp::Min | BinOp::Max
            ) =>
        {
            (b, Some(c))
        }
        _ => (a, None),
    };
    let scale = |x: Range, c: i128| -> Option<Range> {
        let (p, q) = (x.lo.checked_mul(c)?, x.hi.checked_mul(c)?);
        Some(Range {
            lo: p.min(q),
            hi: p.max(q),
            exact: x.exact,
            contig: x.contig && (c == 1 || c == -1 || x.lo == x.hi),
            src: x.src,
        })
    };
    let r = match op {
        BinOp::Add => {
            a.lo.checked_add(b.lo)
                .zip(a.hi.checked_add(b.hi))
                .map(|(lo, hi)| Range {
                    lo,
                    hi,
                    exact: joint,
                    contig: joint && a.contig && b.contig,
                    src,
                })
        }
        BinOp::Sub => {
            a.lo.checked_sub(b.hi)
                .zip(a.hi.checked_sub(b.lo))
                .map(|(lo, hi)| Range {
                    lo,
                    hi,
                    exact: joint,
                    contig: joint && a.contig && b.contig,
                    src,
                })
        }
        BinOp::Mul => match c {
            Some(c) => scale(x, c),
            None => {
                let ps = [a.lo * b.lo, a.lo * b.hi, a.hi * b.lo, a.hi * b.hi];
                let fits = [a.lo, a.hi, b.lo, b.hi]
                    .iter()
                    .all(|v| v.unsigned_abs() < 1 << 64);
                fits.then(|| {
                    Range::approx(
                        ps.iter().copied().min().unwrap_or(tlo),
                        ps.iter().copied().max().unwrap_or(thi),
                        src,
                    )
                })
            }
        },
        BinOp::Shl => match b.single() {
            Some(s) if (0..64).contains(&s) => scale(a, 1 << s),
            _ => None,
        },
        BinOp::Shr | BinOp::Div if a.lo >= 0 => {
            let d = match (op, b.single()) {
                (BinOp::Shr, Some(s)) if (0..64).contains(&s) => Some(1i128 << s),
                (BinOp::Div, Some(c)) if c > 0 => Some(c),
                _ => None,
            };
            Some(match d {
                Some(d) => Range {
                    lo: a.lo / d,
                    hi: a.hi / d,
                    ..a
                },
                None => Range::approx(0, a.hi, src),
            })
        }
        BinOp::Rem => match b.single() {
            Some(c) if c > 0 && a.lo >= 0 => Some(if a.hi < c {
                a
            } else if a.exact && a.contig && a.hi - a.lo + 1 >= c {
                Range::exact(0, c - 1, a.src)
            } else {
                Range::approx(0, a.hi.min(c - 1), a.src)
            }),
            Some(c) if c > 0 => Some(Range::approx(-(c - 1), c - 1, a.src)),
            _ => None,
        },
        BinOp::And => match c {
            Some(m) if m >= 0 => Some(if x.lo >= 0 && low_mask(m) && x.hi <= m {
                x
            } else if low_mask(m) && x.exact && x.contig && x.hi - x.lo >= m {
                Range::exact(0, m, x.src)
            } else {
                Range::approx(0, if x.lo >= 0 { x.hi.min(m) } else { m }, x.src)
            }),
            _ if a.lo >= 0 && b.lo >= 0 => Some(Range::approx(0, a.hi.min(b.hi), src)),
            _ => None,
        },
        BinOp::Or | BinOp::Xor if a.lo >= 0 && b.lo >= 0 => {
            let hi = a.hi.max(b.hi);
            let bits = 128 - hi.leading_zeros();
            Some(Range::approx(0, (1i128 << bits) - 1, src))
        }
        BinOp::Min | BinOp::Max => {
            let (lo, hi) = if op == BinOp::Min {
                (a.lo.min(b.lo), a.hi.min(b.hi))
            } else {
                (a.lo.max(b.lo), a.hi.max(b.hi))
            };
            let exact = c.is_some() && x.exact;
            Some(Range {
                lo,
                hi,
                exact,
                contig: exact && x.contig,
                src,
            })
        }
        _ => None,
    };
    r.unwrap_or(top)
}

/// Check every shared and DSMEM access whose index range is known.
pub(super) fn check(cx: &mut Ctx, layout: &Layout) {
    let k = cx.k;
    rings(cx, layout);
    for &i in &layout.order {
        let d = &k.insts[i];
        let peer = match d.op {
            Op::StAsync { .. } => d.args.get(2).map(|&v| (v, "sends to")),
            Op::MbarArriveRemote { .. } => d.args.first().map(|&v| (v, "arrives on")),
            _ => None,
        };
        if let Some((cta, verb)) = peer {
            peer_rank(cx, layout, i, cta, verb);
        }
        let lanes = |n: usize| d.args.get(n).map_or(1, |&v| i128::from(k.ty(v).lanes));
        let (buffer, count, what) = match d.op {
            Op::LdShared { buffer } => {
                let n = d.results.first().map_or(1, |&v| i128::from(k.ty(v).lanes));
                (buffer, n, "reads")
            }
            Op::StShared { buffer } => (buffer, lanes(1), "writes"),
            Op::StAsync { buffer, .. } => (buffer, lanes(1), "sends into"),
            Op::CpAsync { buffer, .. } => {
                let e = k.buffers.get(buffer).map_or(16, |b| b.elem.bytes());
                (buffer, i128::from(16 / e.max(1)), "copies into")
            }
            Op::BulkCopy { buffer, bytes, .. } | Op::BulkStore { buffer, bytes, .. } => {
                let e = k.buffers.get(buffer).map_or(1, |b| b.elem.bytes());
                (buffer, i128::from(bytes / e.max(1)).max(1), "copies into")
            }
            _ => continue,
        };
        let Some(&idx) = d.args.first() else { continue };
        let mut ev = Eval::at(k, layout, i);
        let Some(r) = ev.index(idx) else { continue };
        let Some(bd) = k.buffers.get(buffer) else {
            continue;
        };
        let len = i128::from(bd.len);
        let (first, last) = (r.lo, r.hi.saturating_add(count - 1));
        let over = (r.exact && (first < 0 || last >= len)) || r.lo + count > len || r.hi < 0;
        let m = cx.mnemonic(i);
        if over {
            let at = if r.lo == r.hi {
                format!("{}", r.lo)
            } else {
                format!("{}..={}", r.lo, r.hi)
            };
            let elems = if count > 1 {
                format!(" ({count} elements at index {at})")
            } else {
                String::new()
            };
            let what = match d.op {
                Op::BulkCopy { tensor, bytes, .. } => {
                    format!("copies {bytes} bytes from {} into", cx.tensor(tensor))
                }
                Op::CpAsync { tensor, .. } => {
                    format!("copies 16 bytes from {} into", cx.tensor(tensor))
                }
                Op::BulkStore { tensor, bytes, .. } => {
                    format!("stores {bytes} bytes into {} from", cx.tensor(tensor))
                }
                _ => what.to_string(),
            };
            let why = if r.exact && r.lo == r.hi {
                format!("index {} is {}", cx.value(idx), r.lo)
            } else if r.exact {
                format!(
                    "index {} reaches both {} and {} (each on some thread or iteration)",
                    cx.value(idx),
                    r.lo,
                    r.hi
                )
            } else {
                format!(
                    "index {} lies in {at} on every path, outside the buffer",
                    cx.value(idx)
                )
            };
            cx.error(
                i,
                format!(
                    "`{m}` {what} {} ({}[{len}]) at elements {first}..={last}{elems}, past its {len} elements: {why}",
                    cx.buffer(buffer),
                    bd.elem,
                ),
            );
        }
        if let Op::BulkCopy { tensor, bytes, .. } | Op::BulkStore { tensor, bytes, .. } = d.op {
            bulk_source(cx, layout, i, buffer, tensor, bytes);
        }
    }
}

/// The destination rank `cta` of a DSMEM op (`st.async`,
/// `mbarrier.arrive.remote`) lies in the cluster: a rank past it names no
/// CTA's shared memory.
fn peer_rank(cx: &mut Ctx, layout: &Layout, i: Inst, cta: Value, verb: &str) {
    let k = cx.k;
    let Some(r) = Eval::at(k, layout, i).index(cta) else {
        return;
    };
    let n = i128::from(k.launch.cluster);
    if (r.exact && (r.lo < 0 || r.hi >= n)) || r.lo >= n || r.hi < 0 {
        let m = cx.mnemonic(i);
        cx.error(
            i,
            format!(
                "`{m}` {verb} CTA ranks {}..={} ({}), but the cluster has {n} CTAs (ranks 0..={})",
                r.lo,
                r.hi,
                cx.value(cta),
                n - 1
            ),
        );
    }
}

/// A ring op (`barN[%s of K]`: arrive, expect_tx, parity wait, bulk copy,
/// `st.async`) names an element below `K`: an index past the ring is
/// another barrier's (or a buffer's) word.
fn rings(cx: &mut Ctx, layout: &Layout) {
    let k = cx.k;
    for &i in &layout.order {
        let d = &k.insts[i];
        let Some((first, ring)) = d.op.barrier() else {
            continue;
        };
        if ring == 0 {
            continue;
        }
        let Some(&s) = d.args.last() else { continue };
        let mut ev = Eval::at(k, layout, i);
        let Some(r) = ev.index(s) else { continue };
        let n = i128::from(ring);
        if (r.exact && (r.lo < 0 || r.hi >= n)) || r.lo >= n || r.hi < 0 {
            let at = if r.lo == r.hi {
                format!("{}", r.lo)
            } else {
                format!("{}..={}", r.lo, r.hi)
            };
            cx.error(
                i,
                format!(
                    "`{}` names element {at} ({}) of the ring of {ring} mbarriers from {}, past its last element {}: the address base + 8·{at} is another barrier's or a buffer's",
                    cx.mnemonic(i),
                    cx.value(s),
                    cx.barrier(first),
                    ring - 1
                ),
            );
        }
    }
}

/// A bulk copy reads (a bulk store writes) `bytes` contiguous bytes from the
/// tensor's element at its indices: with constant extents and strides the
/// last one must be an element of the tensor.
fn bulk_source(cx: &mut Ctx, layout: &Layout, i: Inst, buffer: Buffer, tensor: Tensor, bytes: u32) {
    let k = cx.k;
    let Some(td) = k.tensors.get(tensor) else {
        return;
    };
    let rank = td.shape.len();
    let d = &k.insts[i];
    let (Some(idx), true) = (d.args.get(1..1 + rank), td.strides.len() == rank) else {
        return;
    };
    let consts: Option<Vec<(i128, i128)>> = td
        .shape
        .iter()
        .zip(&td.strides)
        .map(|(n, s)| match (*n, *s) {
            (Dim::Const(n), Dim::Const(s)) => Some((i128::from(n), i128::from(s))),
            _ => None,
        })
        .collect();
    let Some(consts) = consts else { return };
    if consts.iter().any(|&(n, _)| n == 0) {
        return;
    }
    let mut ev = Eval::at(k, layout, i);
    let mut ranges = Vec::new();
    for &v in idx {
        match ev.index(v) {
            Some(r) => ranges.push(r),
            None => return,
        }
    }
    let count = i128::from(bytes / td.dtype.bytes().max(1)).max(1);
    let end: i128 = consts.iter().map(|&(n, s)| (n - 1) * s).sum();
    let lo_off: i128 = ranges
        .iter()
        .zip(&consts)
        .map(|(r, &(_, s))| r.lo * s)
        .sum();
    let hi_off: i128 = ranges
        .iter()
        .zip(&consts)
        .map(|(r, &(_, s))| r.hi * s)
        .sum();
    let independent = ranges.iter().enumerate().all(|(n, a)| {
        ranges[n + 1..]
            .iter()
            .all(|b| a.src & b.src == 0 || a.single().is_some() || b.single().is_some())
    });
    let exact = ranges.iter().all(|r| r.exact) && independent;
    let (first, last) = (lo_off, hi_off + count - 1);
    let over = (exact && (first < 0 || last > end)) || lo_off + count - 1 > end;
    if over {
        let m = cx.mnemonic(i);
        let msg = if matches!(d.op, Op::BulkStore { .. }) {
            format!(
                "`{m}` stores {bytes} bytes from {} into {}: it writes the tensor's elements {first}..={last} (offsets through its constant strides), past its last element {end}",
                cx.buffer(buffer),
                cx.tensor(tensor),
            )
        } else {
            format!(
                "`{m}` copies {bytes} bytes from {} into {}: it reads the tensor's elements {first}..={last} (offsets through its constant strides), past its last element {end}",
                cx.tensor(tensor),
                cx.buffer(buffer),
            )
        };
        cx.error(i, msg);
    }
}

impl<'k> Eval<'k> {
    /// The evaluator at access `i`: its role's threads and what its
    /// enclosing conditions say.
    fn at(k: &'k Kernel, layout: &'k Layout, i: Inst) -> Eval<'k> {
        let block = (0, i128::from(k.launch.block.max(1)) - 1);
        let role = layout.role_of(k, i).and_then(|r| k.roles.get(r));
        let tid = role.map_or(block, |r| {
            (
                i128::from(r.first),
                i128::from(r.end()).max(i128::from(r.first) + 1) - 1,
            )
        });
        let mut ev = Eval {
            k,
            layout,
            opaque: 0,
            tid,
            narrow: HashMap::new(),
            memo: HashMap::new(),
            used: HashSet::new(),
        };
        let mut cs = Vec::new();
        let mut cur = i;
        for a in layout.ancestors(i) {
            let held = layout.region[cur];
            match k.insts[a].op {
                Op::If { then, .. } => {
                    if let Some(&c) = k.insts[a].args.first() {
                        ev.constrain(c, held == Some(then), &mut cs, 0);
                    }
                }
                Op::While { .. } => cs.push(Constraint::Opaque(ANY)),
                _ => {}
            }
            cur = a;
        }
        ev.memo.clear();
        ev.used.clear();
        let mut opaque = 0;
        for c in cs {
            match c {
                Constraint::Narrow { value, lo, hi, src } => {
                    let e = ev
                        .narrow
                        .entry(value)
                        .or_insert((i128::MIN, i128::MAX, src));
                    *e = (e.0.max(lo), e.1.min(hi), src);
                }
                Constraint::Opaque(src) => opaque |= src,
            }
        }
        ev.opaque = opaque;
        ev
    }

    /// The range of an index at the access, `None` when no thread gets
    /// there. It is exact only if no enclosing condition restricts which
    /// threads or iterations run the access in a way the range ignores: one
    /// the analysis cannot follow, or a narrowed value the index does not go
    /// through, on a source the index depends on.
    fn index(&mut self, v: Value) -> Option<Range> {
        self.memo.clear();
        self.used.clear();
        let mut r = self.range(v, 0)?;
        let unseen = self
            .narrow
            .iter()
            .filter(|(n, _)| !self.used.contains(n))
            .fold(0, |acc, (_, &(_, _, src))| acc | src);
        if (self.opaque | unseen) & r.src != 0 {
            r.exact = false;
            r.contig = false;
        }
        Some(r)
    }
}
