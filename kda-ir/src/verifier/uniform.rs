//! Warp uniformity: which values vary across the lanes of a warp (a taint
//! analysis to a fixed point through region parameters and results), which
//! instructions run under lane-divergent control flow, and the rule that warp
//! collectives never do.

use cranelift_entity::SecondaryMap;

use super::{Ctx, Layout};
use crate::entities::{Inst, Region, Value};
use crate::kernel::{Kernel, ValueDef};
use crate::op::{BinOp, Op, ShflMode, Special};

/// The lane-varying values of a kernel.
pub(crate) struct Uniformity {
    /// For each lane-varying value, the instruction its variation comes from.
    varying: SecondaryMap<Value, Option<Inst>>,
}

impl Uniformity {
    pub fn compute(k: &Kernel, layout: &Layout) -> Uniformity {
        let mut u = Uniformity {
            varying: SecondaryMap::new(),
        };
        loop {
            let mut changed = false;
            for &i in &layout.order {
                changed |= u.step(k, i);
            }
            if !changed {
                return u;
            }
        }
    }

    /// Where `v`'s variation across lanes comes from; `None` if warp-uniform.
    pub fn origin(&self, v: Value) -> Option<Inst> {
        self.varying[v]
    }

    /// The innermost `if`/`for`/`while` around `i` whose control varies across
    /// lanes, with the varying value it depends on.
    pub fn divergence(&self, k: &Kernel, layout: &Layout, i: Inst) -> Option<(Inst, Value)> {
        layout
            .ancestors(i)
            .find_map(|a| self.control(k, a).map(|v| (a, v)))
    }

    /// The lane-varying value that steers region op `a`, if any.
    pub fn control(&self, k: &Kernel, a: Inst) -> Option<Value> {
        let d = &k.insts[a];
        match d.op {
            Op::If { .. } => d
                .args
                .first()
                .copied()
                .filter(|&c| self.varying[c].is_some()),
            Op::For { .. } => d
                .args
                .iter()
                .take(3)
                .copied()
                .find(|&c| self.varying[c].is_some()),
            Op::While { cond, .. } => yields(k, cond)
                .first()
                .copied()
                .filter(|&c| self.varying[c].is_some()),
            _ => None,
        }
    }

    fn mark(&mut self, v: Value, from: Option<Inst>) -> bool {
        match from {
            Some(o) if self.varying[v].is_none() => {
                self.varying[v] = Some(o);
                true
            }
            _ => false,
        }
    }

    fn any(&self, vs: &[Value]) -> Option<Inst> {
        vs.iter().find_map(|&v| self.varying[v])
    }

    /// Propagate through one instruction; true if anything changed.
    fn step(&mut self, k: &Kernel, i: Inst) -> bool {
        let d = &k.insts[i];
        let (a, r) = (&d.args, &d.results);
        let mut ch = false;
        match &d.op {
            Op::Special(Special::ThreadIdx | Special::LaneId)
            | Op::ElectSync
            | Op::Mma16816
            | Op::Wgmma { .. }
            | Op::Shfl(ShflMode::Bfly) => {
                for &v in r {
                    ch |= self.mark(v, Some(i));
                }
            }
            Op::Shfl(ShflMode::Idx) => {
                let from = a.get(1).and_then(|&l| self.varying[l]);
                for &v in r {
                    ch |= self.mark(v, from);
                }
            }
            Op::Bin(b) if warp_index(k, *b, a) => {}
            Op::If { then, els } => {
                let cond = a.first().and_then(|&c| self.varying[c]);
                let (yt, ye) = (yields(k, *then), yields(k, *els));
                for (n, &v) in r.iter().enumerate() {
                    let from = cond
                        .or_else(|| yt.get(n).and_then(|&y| self.varying[y]))
                        .or_else(|| ye.get(n).and_then(|&y| self.varying[y]));
                    ch |= self.mark(v, from);
                }
            }
            Op::For { body } => {
                let bounds = self.any(&a[..a.len().min(3)]);
                let params = &k.regions[*body].params;
                let ys = yields(k, *body);
                if let Some(&iv) = params.first() {
                    ch |= self.mark(iv, bounds);
                }
                for n in 0..a.len().saturating_sub(3) {
                    let from = bounds
                        .or(self.varying[a[3 + n]])
                        .or_else(|| ys.get(n).and_then(|&y| self.varying[y]));
                    if let Some(&p) = params.get(1 + n) {
                        ch |= self.mark(p, from);
                    }
                    if let Some(&v) = r.get(n) {
                        ch |= self.mark(v, from);
                    }
                }
            }
            Op::While { cond, body } => {
                let (cp, bp) = (&k.regions[*cond].params, &k.regions[*body].params);
                let (cy, by) = (yields(k, *cond), yields(k, *body));
                let c = cy.first().and_then(|&c| self.varying[c]);
                for n in 0..a.len() {
                    let into_cond =
                        self.varying[a[n]].or_else(|| by.get(n).and_then(|&y| self.varying[y]));
                    if let Some(&p) = cp.get(n) {
                        ch |= self.mark(p, into_cond);
                    }
                    let out = c.or_else(|| cy.get(1 + n).and_then(|&y| self.varying[y]));
                    if let Some(&p) = bp.get(n) {
                        ch |= self.mark(p, out);
                    }
                    if let Some(&v) = r.get(n) {
                        ch |= self.mark(v, out);
                    }
                }
            }
            // Everything else (arithmetic, loads at an index...) varies with its operands.
            _ => {
                let from = self.any(a);
                for &v in r {
                    ch |= self.mark(v, from);
                }
            }
        }
        ch
    }
}

/// The values a region's final `yield` passes on.
fn yields(k: &Kernel, r: Region) -> &[Value] {
    match k.regions[r].insts.last() {
        Some(&y) if k.insts[y].op == Op::Yield => &k.insts[y].args,
        _ => &[],
    }
}

fn defining_op(k: &Kernel, v: Value) -> Option<&Op> {
    match k.values[v].def {
        ValueDef::Result(i, _) => k.insts.get(i).map(|d| &d.op),
        ValueDef::Param(..) => None,
    }
}

/// `tid / 32k`, `tid >> (5+)`, `tid & ~31`: the warp index, uniform across a
/// warp because warps are aligned 32-thread ranges of `tid`.
fn warp_index(k: &Kernel, b: BinOp, a: &[Value]) -> bool {
    let [x, y] = a[..] else { return false };
    let is_tid = |v: Value| matches!(defining_op(k, v), Some(Op::Special(Special::ThreadIdx)));
    let constant = |v: Value| match defining_op(k, v) {
        Some(Op::IConst(c)) => Some(*c),
        _ => None,
    };
    match b {
        BinOp::Div => is_tid(x) && constant(y).is_some_and(|c| c > 0 && c % 32 == 0),
        BinOp::Shr => is_tid(x) && constant(y).is_some_and(|c| (5..32).contains(&c)),
        BinOp::And => {
            (is_tid(x) && constant(y).is_some_and(|c| c & 31 == 0))
                || (is_tid(y) && constant(x).is_some_and(|c| c & 31 == 0))
        }
        _ => false,
    }
}

/// Warp collectives run only in warp-uniform control flow.
pub(super) fn check(cx: &mut Ctx, layout: &Layout, uni: &Uniformity) {
    let k = cx.k;
    for &i in &layout.order {
        if !k.insts[i].op.is_collective() {
            continue;
        }
        let Some((c, v)) = uni.divergence(k, layout, i) else {
            continue;
        };
        let how = match k.insts[c].op {
            Op::If { .. } => "branches on",
            Op::For { .. } => "has a bound",
            _ => "loops while",
        };
        let source = uni.origin(v).map_or_else(String::new, |o| {
            format!(" (it comes from {})", describe(k, o))
        });
        let m = cx.mnemonic(i);
        cx.error(
            i,
            format!(
                "`{m}` is a warp collective under thread-divergent control flow: {} {how} {v}, which varies across the lanes of a warp{source}; collectives need warp-uniform control flow (conditions on constants, parameters, block or cluster indices or the warp index, or a role region)",
                cx.at(c)
            ),
        );
    }
}

/// `` `special tid` at lib.rs:48:17 ``.
pub(super) fn describe(k: &Kernel, i: Inst) -> String {
    let d = &k.insts[i];
    let what = match d.op {
        Op::Special(Special::ThreadIdx) => "special tid".to_string(),
        Op::Special(Special::LaneId) => "special laneid".to_string(),
        ref op => crate::write::mnemonic(op),
    };
    format!("`{what}` at {}", d.loc)
}
