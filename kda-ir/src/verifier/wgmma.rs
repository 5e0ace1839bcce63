//! Warpgroup MMA: a wgmma op and its fence, commit and wait run in a role
//! that is a warpgroup (whole warpgroups: a multiple of 128 threads whose
//! first warp index is a multiple of 4); a wgmma's shape is legal, it takes
//! and produces N/2 f32 accumulators, and its operand buffers hold bf16
//! tiles ([`crate::wgmma::MmaTile`]) of 64 (A) and N (B) rows, sized and
//! aligned for their swizzle.
//!
//! Groups ([`groups`]): a forward walk over the region tree knows which wgmma
//! results may still be in flight (issued and not covered by a
//! `wgmma.wait_group`), and rejects any use of one other than as a later
//! wgmma's accumulator operand, or a `for` body yielding the accumulator it
//! chained into the loop parameter in place (same registers in PTX: a
//! pipelined loop may `wait_group 1` and chain into the next iteration; any
//! other yield, a loop's initial value or an `if` result is a copy, so a
//! read). A may-analysis: after an
//! `if`, what either branch left in flight; after a loop, what the body may
//! leave. What it cannot see (a
//! wait in a branch, counts it cannot follow) the simulator checks at run
//! time.

use std::collections::BTreeMap;

use super::{Ctx, Layout};
use crate::entities::{Buffer, Inst, Region, Value};
use crate::op::Op;
use crate::types::{Scalar, Type};
use crate::wgmma::legal_n;

pub(super) fn check(cx: &mut Ctx, layout: &Layout) {
    let k = cx.k;
    for &i in &layout.order {
        let op = &k.insts[i].op;
        if !matches!(
            op,
            Op::Wgmma { .. } | Op::WgmmaFence | Op::WgmmaCommit | Op::WgmmaWait(_)
        ) {
            continue;
        }
        let m = cx.mnemonic(i);
        match layout.role_of(k, i) {
            None => cx.error(
                i,
                format!(
                    "`{m}` runs outside any role; wgmma is issued by a warpgroup: run it in a role of whole warpgroups (128 threads starting at a multiple of 128)"
                ),
            ),
            Some(r) => {
                let d = &k.roles[r];
                if !d.first.is_multiple_of(128) || !d.threads.is_multiple_of(128) || d.threads == 0 {
                    let role = cx.role(r);
                    cx.error(
                        i,
                        format!(
                            "`{m}` runs in role {role} (threads {}..{}), which is not whole warpgroups: wgmma needs 4 warps whose first warp index is a multiple of 4 (threads a multiple of 128, starting at a multiple of 128)",
                            d.first,
                            d.end()
                        ),
                    );
                }
            }
        }
        let Op::Wgmma { a, b, n, scale_d } = *op else {
            continue;
        };
        if !legal_n(n) {
            cx.error(
                i,
                format!("`{m}` has shape m64n{n}k16; allowed: N a multiple of 8 in 8..=256"),
            );
            continue;
        }
        let d = &k.insts[i];
        let acc = (n / 2) as usize;
        let want = 2 + if scale_d { acc } else { 0 };
        if d.args.len() != want {
            let what = if scale_d {
                format!("the A and B columns and the {acc} f32 accumulators")
            } else {
                "the A and B columns (no accumulators without `acc`)".into()
            };
            cx.error(
                i,
                format!(
                    "`{m}` takes {what}: {want} operands, found {}",
                    d.args.len()
                ),
            );
        } else if let Some(&v) = d.args[2..].iter().find(|&&v| k.ty(v) != Type::F32) {
            let v = cx.value(v);
            cx.error(i, format!("`{m}` accumulators are f32, found {v}"));
        }
        if d.results.len() != acc {
            cx.error(
                i,
                format!(
                    "`{m}` has {acc} results (the f32 accumulators), found {}",
                    d.results.len()
                ),
            );
        } else if let Some(&v) = d.results.iter().find(|&&v| k.ty(v) != Type::F32) {
            let v = cx.value(v);
            cx.error(i, format!("`{m}` produces f32 accumulators, found {v}"));
        }
        operand(cx, i, a, "A", 64);
        operand(cx, i, b, "B", n);
    }
    if k.insts.values().any(|d| matches!(d.op, Op::Wgmma { .. })) {
        let mut g = Groups {
            cx,
            reported: Vec::new(),
        };
        g.region(k.body, &mut Pending::new(), false);
    }
}

/// wgmma results that may be in flight, each with the wgmma that made it
/// and its age: 0 while uncommitted, then the number of commits since (a
/// `wait_group n` retires ages above `n`).
type Pending = BTreeMap<Value, (Inst, u32)>;

/// What may be in flight after either of two paths: the younger age.
fn join(a: &mut Pending, b: &Pending) {
    for (v, &(i, age)) in b {
        a.entry(*v)
            .and_modify(|e| e.1 = e.1.min(age))
            .or_insert((i, age));
    }
}

struct Groups<'a, 'k> {
    cx: &'a mut Ctx<'k>,
    reported: Vec<Inst>,
}

impl Groups<'_, '_> {
    /// The values region `r` yields (none if it does not end in a yield).
    fn yields(&self, r: Region) -> Vec<Value> {
        let k = self.cx.k;
        match k.regions[r].insts.last() {
            Some(&y) if matches!(k.insts[y].op, Op::Yield) => k.insts[y].args.clone(),
            _ => Vec::new(),
        }
    }

    /// `to[j]` may be in flight when `from[j]` may (a carried or yielded
    /// accumulator stays in the same registers).
    fn carry(s: &mut Pending, to: &[Value], from: &[Value], src: &Pending) {
        for (&t, f) in to.iter().zip(from) {
            if let Some(&e) = src.get(f) {
                s.insert(t, e);
            }
        }
    }

    /// Walk region `r`. With `carries` (a `for` body), its yield passes an
    /// accumulator on where it stays in its registers: the yielded value is
    /// the result of a wgmma that chained into the matching loop parameter,
    /// used only there (the emitter gives result and parameter the same
    /// registers). Any other yield of a value in flight, a loop's initial
    /// value and an `if` result are copies, so reads.
    fn region(&mut self, r: Region, s: &mut Pending, carries: bool) {
        let k = self.cx.k;
        for &i in &k.regions[r].insts {
            let d = &k.insts[i];
            let reads: Vec<Value> = match d.op {
                // A chained accumulator is read in place only when it dies
                // here in this region (the emitter then gives the result its
                // registers); otherwise the emitter copies it first.
                Op::Wgmma { scale_d: true, .. } => d.args[2.min(d.args.len())..]
                    .iter()
                    .copied()
                    .filter(|&c| !dies_at(k, r, c))
                    .collect(),
                Op::Wgmma { .. } => Vec::new(),
                Op::Yield if carries => {
                    let params = &k.regions[r].params;
                    d.args
                        .iter()
                        .enumerate()
                        .filter(|&(j, &v)| !params.get(j + 1).is_some_and(|&p| in_place(k, v, p)))
                        .map(|(_, &v)| v)
                        .collect()
                }
                _ => d.args.clone(),
            };
            if let Some((&v, &(w, age))) = reads.iter().find_map(|a| s.get_key_value(a))
                && !self.reported.contains(&i)
            {
                self.reported.push(i);
                let m = self.cx.mnemonic(i);
                let at = &k.insts[w].loc;
                let v = self.cx.value(v);
                let why = if age == 0 {
                    "before a `wgmma.commit_group` and a `wgmma.wait_group` that covers it"
                } else {
                    "while its group may still be in flight: add a `wgmma.wait_group` that covers it first"
                };
                self.cx.error(
                    i,
                    format!("`{m}` reads {v}, an accumulator of the wgmma at {at}, {why}"),
                );
            }
            match d.op {
                Op::Wgmma { .. } => {
                    for &v in &d.results {
                        s.insert(v, (i, 0));
                    }
                }
                Op::WgmmaCommit => {
                    for e in s.values_mut() {
                        e.1 += 1;
                    }
                }
                Op::WgmmaWait(n) => s.retain(|_, e| e.1 == 0 || e.1 <= n),
                Op::For { body } => {
                    // Iteration one from the initial values, iteration two
                    // from what one yields as well; after the loop, what
                    // either leaves (or the initial values: no iteration).
                    let params = &k.regions[body].params;
                    let before = s.clone();
                    let mut first = before.clone();
                    self.region(body, &mut first, true);
                    let ys = self.yields(body);
                    let mut again = first.clone();
                    join(&mut again, &before);
                    Self::carry(&mut again, params.get(1..).unwrap_or(&[]), &ys, &first);
                    let mut second = again.clone();
                    self.region(body, &mut second, true);
                    join(s, &first);
                    join(s, &second);
                    // The results live in the parameters' registers.
                    Self::carry(s, &d.results, &ys, &first);
                    Self::carry(s, &d.results, &ys, &second);
                }
                Op::If { then, els } => {
                    // Exactly one branch runs.
                    let before = std::mem::take(s);
                    for r in [then, els] {
                        let mut inner = before.clone();
                        self.region(r, &mut inner, false);
                        join(s, &inner);
                    }
                }
                _ => {
                    // `while` (its carried values count as reads), `role`.
                    let regions = d.op.regions();
                    if regions.is_empty() {
                        continue;
                    }
                    let before = s.clone();
                    for r in regions {
                        let mut inner = before.clone();
                        self.region(r, &mut inner, false);
                        if matches!(d.op, Op::While { .. }) {
                            let mut again = inner.clone();
                            join(&mut again, &before);
                            self.region(r, &mut again, false);
                            join(&mut inner, &again);
                        }
                        join(s, &inner);
                    }
                }
            }
        }
    }
}

/// A wgmma operand buffer: a bf16 tile of `rows` rows, the buffer its size,
/// aligned for its swizzle.
fn operand(cx: &mut Ctx, i: crate::entities::Inst, b: Buffer, which: &str, rows: u32) {
    let k = cx.k;
    let d = &k.buffers[b];
    let m = cx.mnemonic(i);
    let name = cx.buffer(b);
    let Some(t) = d.tile else {
        return cx.error(
            i,
            format!("`{m}` reads {which} from {name}, which declares no tile layout (rows, K columns, swizzle): the compiler builds the matrix descriptor from it"),
        );
    };
    let mut errs = Vec::new();
    if d.elem != Scalar::BF16 {
        errs.push(format!(
            "its elements are {}, wgmma here takes bf16",
            d.elem
        ));
    }
    if let Err(e) = t.check() {
        errs.push(format!("its tile has {e}"));
    }
    if t.rows != rows {
        errs.push(format!(
            "its tile has {} rows, the {which} operand needs {rows}",
            t.rows
        ));
    }
    if d.len != t.rows * t.cols {
        errs.push(format!(
            "it holds {} elements, its {}x{} tile {}",
            d.len,
            t.rows,
            t.cols,
            t.rows * t.cols
        ));
    }
    let align = t.swizzle.align();
    if d.align < align {
        errs.push(format!(
            "it is aligned to {} bytes, a {} tile needs {align} (the swizzle pattern repeats every {align} bytes of address)",
            d.align,
            t.swizzle.name()
        ));
    }
    for e in errs {
        cx.error(i, format!("`{m}` reads {which} from {name}: {e}"));
    }
}

/// Whether yielding `v` into loop parameter `p` keeps it in its registers:
/// `v` is a result of a wgmma whose matching accumulator operand is `p`,
/// and `p` has no other use (with the wgmma in `p`'s region, the PTX
/// emitter's condition for giving them the same registers).
fn in_place(k: &crate::kernel::Kernel, v: Value, p: Value) -> bool {
    let crate::kernel::ValueDef::Result(w, n) = k.values[v].def else {
        return false;
    };
    let d = &k.insts[w];
    if !matches!(d.op, Op::Wgmma { scale_d: true, .. }) || d.args.get(2 + n as usize) != Some(&p) {
        return false;
    }
    let uses: usize = k
        .insts
        .values()
        .map(|d| d.args.iter().filter(|&&a| a == p).count())
        .sum();
    uses == 1
}

/// Whether `v` has one use and is defined in region `r` (a parameter of it
/// or a result of one of its instructions): used by a wgmma of `r`, its
/// registers may become the result's.
fn dies_at(k: &crate::kernel::Kernel, r: Region, v: Value) -> bool {
    let uses: usize = k
        .insts
        .values()
        .map(|d| d.args.iter().filter(|&&a| a == v).count())
        .sum();
    uses == 1
        && match k.values[v].def {
            crate::kernel::ValueDef::Param(p, _) => p == r,
            crate::kernel::ValueDef::Result(j, _) => k.regions[r].insts.contains(&j),
        }
}
