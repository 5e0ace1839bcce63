//! Arrivals per phase: an mbarrier declared with `arrivals = k` completes a
//! phase after exactly `k` arrivals, so the arrivals that reach it must add
//! up to `k` per phase its waiters wait for. Too few and the phase never
//! completes (the waiters hang); too many and the surplus completes (part
//! of) the next phase early, so a later wait passes before its data arrived.
//!
//! Arrivals are counted per thread: an `mbarrier.arrive[.expect_tx]` counts
//! once for each thread that runs it. Which threads run it follows the
//! region tree: a role's threads inside its region, the block outside, and
//! under an `if` whose condition is a function of the thread index alone
//! (constants, `tid`, `laneid` and integer arithmetic and comparisons of
//! them: `lane == 0`, `tid < 64`, `tid / 32 == 1`) exactly the threads for
//! which it holds, evaluated thread by thread; `elect` picks one lane of
//! each warp. A warp-uniform condition the verifier cannot evaluate counts
//! what its branches count when they agree; otherwise (and under other
//! lane-varying conditions) the total is unknown and not checked.
//!
//! A remote arrival (`mbarrier.arrive.remote`) lands on the barrier of the
//! CTA its destination rank names. Every CTA of the cluster runs the same
//! code, so the arrivals each CTA's barrier receives are counted from the
//! destination evaluated for every (rank, thread) pair: when every CTA
//! receives the same number (a ring between peers: `rank ^ 1`,
//! `(rank + 1) % C`) that number counts like local arrivals; when they
//! differ (all consumers release rank 0's barrier) or the destination is a
//! runtime value, which CTAs wait is not known here and the total is not
//! checked (the simulator reports a phase that never completes, or an
//! arrival past the count).
//!
//! As with transaction bytes, the arrivals are grouped by their innermost
//! loop (or the kernel body), a ring is one barrier (its first element: the
//! balance is per iteration of one element), and a group's phases are the
//! distinct phases its `mbarrier.wait`s name, at least one. A loop's group
//! is checked per iteration; the kernel body's group is skipped when it
//! also holds parity waits on the barrier (their phase is a runtime value).
//! Barriers nothing waits on are not checked.

use std::collections::{BTreeMap, BTreeSet};

use super::uniform::Uniformity;
use super::{Ctx, Layout};
use crate::entities::{Barrier, Inst, Region, Value};
use crate::kernel::{Kernel, ValueDef};
use crate::op::{BinOp, CmpOp, Op, Special, UnOp};
use crate::types::Scalar;

/// Threads per CTA the launch check accepts (`decls.rs`).
const MAX_BLOCK: u32 = 1024;

pub(super) fn check(cx: &mut Ctx, layout: &Layout, uni: &Uniformity) {
    let k = cx.k;
    // Arrivals are counted thread by thread: only for a block the launch
    // check accepts (at most 1024 threads; a larger one is already an error
    // there, and counting 2^32 threads hung the IR fuzz target).
    if k.launch.block == 0 || k.launch.block > MAX_BLOCK {
        return;
    }
    // Arrivals and waits per barrier (a ring: its first element), in layout order.
    let mut arrives: BTreeMap<Barrier, Vec<Inst>> = BTreeMap::new();
    let mut waits: BTreeMap<Barrier, Vec<Inst>> = BTreeMap::new();
    for &i in &layout.order {
        match k.insts[i].op {
            Op::MbarArrive { barrier, .. }
            | Op::MbarArriveExpectTx { barrier, .. }
            | Op::MbarArriveRemote { barrier, .. } => arrives.entry(barrier).or_default().push(i),
            Op::MbarWait { barrier, .. } | Op::MbarWaitParity { barrier, .. } => {
                waits.entry(barrier).or_default().push(i)
            }
            _ => {}
        }
    }
    let mut found = Vec::new();
    for (&b, list) in &arrives {
        let Some(ws) = waits.get(&b) else { continue };
        let Some(decl) = k.barriers.get(b) else {
            continue;
        };
        let mut counter = Counter {
            k,
            uni,
            cx: &*cx,
            barrier: b,
            hot: list.iter().flat_map(|&a| layout.ancestors(a)).collect(),
            groups: BTreeMap::new(),
        };
        let all: Vec<u32> = (0..k.launch.block).collect();
        let body = counter.region(k.body, Some(&all), "the block");
        counter.groups.insert(None, body);
        let groups: BTreeSet<Option<Inst>> =
            list.iter().map(|&a| layout.innermost_loop(k, a)).collect();
        for g in groups {
            let Some(Count::Known(total, parts)) = counter.groups.remove(&g) else {
                continue;
            };
            let here: Vec<Inst> = ws
                .iter()
                .copied()
                .filter(|&w| layout.innermost_loop(k, w) == g)
                .collect();
            if g.is_none()
                && here
                    .iter()
                    .any(|&w| matches!(k.insts[w].op, Op::MbarWaitParity { .. }))
            {
                continue;
            }
            let mut phases: BTreeMap<u32, Inst> = BTreeMap::new();
            for &w in &here {
                if let Op::MbarWait { phase, .. } = k.insts[w].op {
                    phases.entry(phase).or_insert(w);
                }
            }
            let n = phases.len().max(1) as u64;
            let per = decl.arrivals as u64;
            let expected = n * per;
            if total == expected {
                continue;
            }
            let first = *list
                .iter()
                .find(|&&a| layout.innermost_loop(k, a) == g)
                .expect("a group has an arrival");
            let due = if n == 1 {
                String::new()
            } else {
                let at: Vec<String> = phases
                    .iter()
                    .map(|(p, &w)| format!("phase {p} at {}", k.insts[w].loc))
                    .collect();
                format!(
                    ", and its waiters wait for {n} phases ({}), so {n} × {per} = {expected} are due",
                    at.join(", ")
                )
            };
            let scope = match g {
                None => String::new(),
                Some(l) => format!(" per iteration of {}", cx.at(l)),
            };
            let how = if total < expected {
                "the phase never completes and its waiters hang"
            } else {
                "the surplus completes the next phase early, so a later wait passes before its data arrived"
            };
            found.push((
                first,
                format!(
                    "arrivals on mbarrier {} do not add up: it completes a phase after {per} arrivals (declared at {}){due}, but {total} arrive{scope} ({}); {how}",
                    operand(cx, first),
                    decl.loc,
                    parts.join("; ")
                ),
            ));
        }
    }
    for (i, msg) in found {
        cx.error(i, msg);
    }
}

/// The barrier operand of `i` as the text form writes it, with its name:
/// `bar0 "full"`, `bar0[v9 of 2] "full"`.
fn operand(cx: &Ctx, i: Inst) -> String {
    let k = cx.k;
    let d = &k.insts[i];
    match d.op.barrier() {
        Some((b, ring)) if ring > 0 => {
            let name = k
                .barriers
                .get(b)
                .map_or(String::new(), |d| format!(" {:?}", d.name));
            match d.args.last() {
                Some(s) => format!("{b}[{s} of {ring}]{name}"),
                None => cx.barrier(b),
            }
        }
        Some((b, _)) => cx.barrier(b),
        None => String::new(),
    }
}

/// What the arrivals of one group provably add up to.
enum Count {
    /// A total and how it is made up.
    Known(u64, Vec<String>),
    Unknown,
}

impl Count {
    fn zero() -> Count {
        Count::Known(0, Vec::new())
    }

    fn plus(self, other: Count) -> Count {
        match (self, other) {
            (Count::Known(a, mut pa), Count::Known(b, pb)) => {
                pa.extend(pb);
                Count::Known(a + b, pa)
            }
            _ => Count::Unknown,
        }
    }
}

struct Counter<'a, 'k> {
    k: &'k Kernel,
    uni: &'a Uniformity,
    cx: &'a Ctx<'k>,
    barrier: Barrier,
    /// The region ops that hold an arrival on the barrier: the others count
    /// none and are not walked.
    hot: BTreeSet<Inst>,
    /// Each loop's per-iteration count (by the loop instruction).
    groups: BTreeMap<Option<Inst>, Count>,
}

impl Counter<'_, '_> {
    /// The arrivals `r`'s instructions make (not those of loops, each a group
    /// of its own), run by the threads `active` (`None`: not known).
    fn region(&mut self, r: Region, active: Option<&[u32]>, who: &str) -> Count {
        let k = self.k;
        let mut sum = Count::zero();
        for &i in &k.regions[r].insts {
            let d = &k.insts[i];
            if !d.op.regions().is_empty() && !self.hot.contains(&i) {
                continue;
            }
            let add = match d.op {
                Op::MbarArrive { barrier, .. } | Op::MbarArriveExpectTx { barrier, .. }
                    if barrier == self.barrier =>
                {
                    match active {
                        Some(t) => {
                            let n = t.len() as u64;
                            let threads = if n == 1 { "thread" } else { "threads" };
                            Count::Known(
                                n,
                                vec![format!(
                                    "`{}` at {}: {n} {threads} of {who}",
                                    d.op.mnemonic(),
                                    d.loc
                                )],
                            )
                        }
                        None => Count::Unknown,
                    }
                }
                Op::MbarArriveRemote { barrier, .. } if barrier == self.barrier => match active {
                    Some(t) => self.remote(i, t, who),
                    None => Count::Unknown,
                },
                Op::If { then, els } => {
                    let cond = d.args.first().copied();
                    match (active, cond.and_then(|c| self.split(c, active))) {
                        (_, Some((yes, no))) => {
                            let a = self.region(then, Some(&yes), who);
                            a.plus(self.region(els, Some(&no), who))
                        }
                        _ if self.uni.control(k, i).is_some() => {
                            let a = self.region(then, None, who);
                            a.plus(self.region(els, None, who))
                        }
                        (active, None) => {
                            match (
                                self.region(then, active, who),
                                self.region(els, active, who),
                            ) {
                                (Count::Known(a, pa), Count::Known(b, _)) if a == b => {
                                    Count::Known(a, pa)
                                }
                                _ => Count::Unknown,
                            }
                        }
                    }
                }
                Op::For { .. } | Op::While { .. } => {
                    let inner = if self.uni.control(k, i).is_some() {
                        None
                    } else {
                        active
                    };
                    let mut c = Count::zero();
                    for sub in d.op.regions() {
                        c = c.plus(self.region(sub, inner, who));
                    }
                    self.groups.insert(Some(i), c);
                    Count::zero()
                }
                Op::InRole { role, body } => {
                    let rd = &k.roles[role];
                    let (lo, hi) = (rd.first, rd.first.saturating_add(rd.threads));
                    let mine: Option<Vec<u32>> = active.map(|t| {
                        t.iter()
                            .copied()
                            .filter(|&t| (lo..hi).contains(&t))
                            .collect()
                    });
                    let who = format!("role {}", self.cx.role(role));
                    self.region(body, mine.as_deref(), &who)
                }
                _ => Count::zero(),
            };
            sum = sum.plus(add);
        }
        sum
    }

    /// The arrivals remote arrival `i`, run by the threads `active` of every
    /// CTA, makes on each CTA's barrier, when that is the same number for
    /// every CTA.
    fn remote(&self, i: Inst, active: &[u32], who: &str) -> Count {
        let k = self.k;
        let d = &k.insts[i];
        let Some(&cta) = d.args.first() else {
            return Count::Unknown;
        };
        let n = k.launch.cluster.max(1);
        if n > super::decls::MAX_CLUSTER {
            // Reported by the declaration check; not walked rank by rank.
            return Count::Unknown;
        }
        let mut landed = vec![0u64; n as usize];
        for rank in 0..n {
            for &t in active {
                match eval(k, cta, (t, Some(rank)), 0) {
                    Some(to) if (0..i128::from(n)).contains(&to) => landed[to as usize] += 1,
                    _ => return Count::Unknown,
                }
            }
        }
        let each = landed[0];
        if landed.iter().any(|&x| x != each) {
            return Count::Unknown;
        }
        let threads = if active.len() == 1 {
            "thread"
        } else {
            "threads"
        };
        Count::Known(
            each,
            vec![format!(
                "`{}` at {}: {each} from {} {threads} of {who} in the cluster's CTAs",
                d.op.mnemonic(),
                d.loc,
                active.len()
            )],
        )
    }

    /// The threads of `active` for which `cond` holds and those for which it
    /// does not, when that can be told thread by thread.
    fn split(&self, cond: Value, active: Option<&[u32]>) -> Option<(Vec<u32>, Vec<u32>)> {
        let active = active?;
        let k = self.k;
        if let ValueDef::Result(e, 0) = k.values.get(cond)?.def
            && matches!(k.insts[e].op, Op::ElectSync)
        {
            // One lane of each warp that runs it: the lowest active one.
            let mut yes = Vec::new();
            let mut no = Vec::new();
            let mut warp = None;
            for &t in active {
                if warp != Some(t / 32) {
                    warp = Some(t / 32);
                    yes.push(t);
                } else {
                    no.push(t);
                }
            }
            return Some((yes, no));
        }
        let mut yes = Vec::new();
        let mut no = Vec::new();
        for &t in active {
            if eval(k, cond, (t, None), 0)? != 0 {
                yes.push(t);
            } else {
                no.push(t);
            }
        }
        Some((yes, no))
    }
}

/// Wrap `x` to the integer (or bool) type `s`.
fn wrap(x: i128, s: Scalar) -> Option<i128> {
    Some(match s {
        Scalar::Bool => (x != 0) as i128,
        Scalar::U32 => x & 0xffff_ffff,
        Scalar::I32 => x as i32 as i128,
        Scalar::U64 => x & 0xffff_ffff_ffff_ffff,
        Scalar::I64 => x as i64 as i128,
        Scalar::F32 | Scalar::BF16 => return None,
    })
}

/// The value of `v` in thread `tid` (of the CTA of cluster rank `rank`, when
/// given), when it depends on the thread index (and that rank) and
/// constants only.
fn eval(k: &Kernel, v: Value, (tid, rank): (u32, Option<u32>), depth: u32) -> Option<i128> {
    if depth > 64 {
        return None;
    }
    let vd = k.values.get(v)?;
    let ty = vd.ty;
    if !ty.is_scalar() {
        return None;
    }
    let ValueDef::Result(i, 0) = vd.def else {
        return None;
    };
    let d = k.insts.get(i)?;
    let arg = |n: usize| -> Option<i128> { eval(k, *d.args.get(n)?, (tid, rank), depth + 1) };
    let x = match d.op {
        Op::IConst(c) => c as i128,
        Op::Special(Special::ThreadIdx) => tid as i128,
        Op::Special(Special::LaneId) => (tid % 32) as i128,
        Op::Special(Special::ClusterRank) => rank? as i128,
        Op::Bin(op) => {
            let (a, b) = (arg(0)?, arg(1)?);
            let bits = ty.elem.bytes() as i128 * 8;
            match op {
                BinOp::Add => a + b,
                BinOp::Sub => a - b,
                BinOp::Mul => a.checked_mul(b)?,
                BinOp::Div if b != 0 => a / b,
                BinOp::Rem if b != 0 => a % b,
                BinOp::Div | BinOp::Rem => return None,
                BinOp::Min => a.min(b),
                BinOp::Max => a.max(b),
                BinOp::And => a & b,
                BinOp::Or => a | b,
                BinOp::Xor => a ^ b,
                BinOp::Shl if (0..bits).contains(&b) => a << b,
                BinOp::Shr if (0..bits).contains(&b) => a >> b,
                BinOp::Shl | BinOp::Shr => return None,
            }
        }
        Op::Cmp(op) => {
            let (a, b) = (arg(0)?, arg(1)?);
            (match op {
                CmpOp::Eq => a == b,
                CmpOp::Ne => a != b,
                CmpOp::Lt => a < b,
                CmpOp::Le => a <= b,
                CmpOp::Gt => a > b,
                CmpOp::Ge => a >= b,
            }) as i128
        }
        Op::Un(UnOp::Not) => {
            let a = arg(0)?;
            if ty.elem == Scalar::Bool {
                (a == 0) as i128
            } else {
                !a
            }
        }
        Op::Un(UnOp::Neg) => -arg(0)?,
        Op::Select => {
            if arg(0)? != 0 {
                arg(1)?
            } else {
                arg(2)?
            }
        }
        Op::Cvt => {
            let src = k.ty(*d.args.first()?).elem;
            if !src.is_int() && src != Scalar::Bool {
                return None;
            }
            arg(0)?
        }
        _ => return None,
    };
    wrap(x, ty.elem)
}
