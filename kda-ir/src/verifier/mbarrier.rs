//! Mbarriers: a waited barrier can complete (something initialises, arrives
//! on, arms and fills it), expect_tx amounts fit the declaration, the bytes
//! sent per phase add up to the declared transaction bytes, and each role
//! waits on a barrier's phases in non-decreasing order.

use std::collections::{BTreeMap, BTreeSet};

use super::uniform::Uniformity;
use super::{Ctx, Layout};
use crate::entities::{Barrier, Inst, Region, Role};
use crate::kernel::Kernel;
use crate::op::Op;

pub(super) fn check(cx: &mut Ctx, layout: &Layout, uni: &Uniformity) {
    let uses = Uses::collect(cx.k, layout);
    completion(cx, &uses);
    completion_per_iteration(cx, layout, &uses);
    expect_tx(cx, &uses);
    transactions(cx, layout, uni, &uses);
    let mut last = BTreeMap::new();
    let body = cx.k.body;
    phases(cx, body, None, &mut last);
}

/// Every instruction that touches each barrier, in layout order.
#[derive(Default)]
struct Uses {
    inits: BTreeMap<Barrier, Vec<Inst>>,
    arrives: BTreeMap<Barrier, Vec<Inst>>,
    expects: BTreeMap<Barrier, Vec<Inst>>,
    sends: BTreeMap<Barrier, Vec<Inst>>,
    waits: BTreeMap<Barrier, Vec<Inst>>,
}

impl Uses {
    fn collect(k: &Kernel, layout: &Layout) -> Uses {
        let mut u = Uses::default();
        for &i in &layout.order {
            let (list, b) = match k.insts[i].op {
                Op::MbarInit { barrier } => (&mut u.inits, barrier),
                Op::MbarArrive { barrier, .. } | Op::MbarArriveRemote { barrier, .. } => {
                    (&mut u.arrives, barrier)
                }
                Op::MbarArriveExpectTx { barrier, .. } => {
                    u.arrives.entry(barrier).or_default().push(i);
                    (&mut u.expects, barrier)
                }
                Op::StAsync { barrier, .. } | Op::BulkCopy { barrier, .. } => {
                    (&mut u.sends, barrier)
                }
                Op::MbarWait { barrier, .. } | Op::MbarWaitParity { barrier, .. } => {
                    (&mut u.waits, barrier)
                }
                _ => continue,
            };
            list.entry(b).or_default().push(i);
        }
        u
    }

    fn has(map: &BTreeMap<Barrier, Vec<Inst>>, b: Barrier) -> bool {
        map.get(&b).is_some_and(|v| !v.is_empty())
    }
}

/// A barrier that is waited on must be able to complete a phase.
fn completion(cx: &mut Ctx, u: &Uses) {
    let k = cx.k;
    for (&b, waits) in &u.waits {
        let first = waits[0];
        let d = &k.barriers[b];
        let name = cx.barrier(b);
        if !Uses::has(&u.inits, b) {
            cx.error(
                first,
                format!("`mbarrier.wait` on {name}, which no `mbarrier.init` initialises; initialise it (then fence and sync the cluster) before any use"),
            );
        }
        if !Uses::has(&u.arrives, b) {
            cx.error(
                first,
                format!(
                    "`mbarrier.wait` on {name}, which nothing arrives on: a phase completes after {} arrivals (`mbarrier.arrive` or `mbarrier.arrive.expect_tx`)",
                    d.arrivals
                ),
            );
        }
        if d.tx_bytes > 0 && !Uses::has(&u.expects, b) {
            cx.error(
                first,
                format!(
                    "`mbarrier.wait` on {name}, which expects {} transaction bytes per phase but is never armed: add an `mbarrier.arrive.expect_tx`",
                    d.tx_bytes
                ),
            );
        }
        if d.tx_bytes > 0 && !Uses::has(&u.sends, b) {
            cx.error(
                first,
                format!(
                    "`mbarrier.wait` on {name}, which expects {} transaction bytes per phase, but no `st.async` or `cp.async.bulk` completes bytes on it",
                    d.tx_bytes
                ),
            );
        }
    }
}

/// A wait inside a loop waits for a new phase every iteration, so something
/// must complete the barrier inside a loop too: a barrier whose arrivals
/// and sends all sit outside loops completes a fixed number of phases while
/// the loop waits a runtime number of times.
fn completion_per_iteration(cx: &mut Ctx, layout: &Layout, u: &Uses) {
    let k = cx.k;
    for (&b, waits) in &u.waits {
        let Some(&w) = waits
            .iter()
            .find(|&&w| layout.innermost_loop(k, w).is_some())
        else {
            continue;
        };
        let completions: Vec<Inst> = [&u.arrives, &u.sends]
            .into_iter()
            .filter_map(|m| m.get(&b))
            .flatten()
            .copied()
            .collect();
        if completions.is_empty()
            || completions
                .iter()
                .any(|&c| layout.innermost_loop(k, c).is_some())
        {
            continue;
        }
        let at: Vec<String> = completions
            .iter()
            .map(|&c| k.insts[c].loc.to_string())
            .collect();
        let l = layout.innermost_loop(k, w).expect("found in a loop");
        cx.error(
            w,
            format!(
                "`mbarrier.wait` on {} runs in every iteration of {}, but every arrival and send that completes it is outside loops ({}): it completes a fixed number of phases while the loop waits a runtime number of times; complete it inside a loop with the same trip count",
                cx.barrier(b),
                cx.at(l),
                at.join("; ")
            ),
        );
    }
}

/// An arrival expects at most a phase's bytes; exactly them on a one-arrival barrier.
fn expect_tx(cx: &mut Ctx, u: &Uses) {
    let k = cx.k;
    for (&b, insts) in &u.expects {
        let d = &k.barriers[b];
        for &i in insts {
            let Op::MbarArriveExpectTx { bytes, .. } = k.insts[i].op else {
                continue;
            };
            let name = cx.barrier(b);
            if d.arrivals == 1 && bytes != d.tx_bytes {
                cx.error(
                    i,
                    format!(
                        "`mbarrier.arrive.expect_tx` expects {bytes} bytes, but {name} completes a phase on its single arrival, so it must expect exactly the declared {} bytes",
                        d.tx_bytes
                    ),
                );
            } else if bytes > d.tx_bytes {
                cx.error(
                    i,
                    format!(
                        "`mbarrier.arrive.expect_tx` expects {bytes} bytes, more than the {} bytes per phase {name} declares",
                        d.tx_bytes
                    ),
                );
            }
        }
    }
}

/// What the sends of one group provably add up to.
enum Amount {
    /// A byte total and how it is made up.
    Known(u64, Vec<String>),
    Unknown,
}

impl Amount {
    fn plus(self, other: Amount) -> Amount {
        match (self, other) {
            (Amount::Known(a, mut pa), Amount::Known(b, pb)) => {
                pa.extend(pb);
                Amount::Known(a + b, pa)
            }
            _ => Amount::Unknown,
        }
    }
}

struct Tally<'a, 'k> {
    k: &'k Kernel,
    layout: &'a Layout,
    uni: &'a Uniformity,
    cx: &'a Ctx<'k>,
    barrier: Barrier,
}

impl Tally<'_, '_> {
    /// Bytes sent into the barrier by `r`'s instructions (not those of loops:
    /// each loop is a group of its own), run by `threads` (described by `who`)
    /// under lane-divergent control flow if `div`.
    fn region(&self, r: Region, div: bool, threads: u32, who: &str) -> Amount {
        let k = self.k;
        let mut sum = Amount::Known(0, Vec::new());
        for &i in &k.regions[r].insts {
            let d = &k.insts[i];
            let add = match d.op {
                Op::StAsync { barrier, .. } if barrier == self.barrier => match d.args.get(1) {
                    Some(&v) if !div => {
                        let bytes = k.ty(v).bytes() as u64;
                        Amount::Known(
                            bytes * threads as u64,
                            vec![format!(
                                "`st.async` at {}: {bytes} bytes × {threads} threads of {who}",
                                d.loc
                            )],
                        )
                    }
                    _ => Amount::Unknown,
                },
                Op::BulkCopy { barrier, bytes, .. } if barrier == self.barrier => Amount::Known(
                    bytes as u64,
                    vec![format!("`cp.async.bulk` at {}: {bytes} bytes", d.loc)],
                ),
                Op::If { then, els } => {
                    if self.uni.control(k, i).is_some() {
                        self.region(then, true, threads, who)
                            .plus(self.region(els, true, threads, who))
                    } else {
                        match (
                            self.region(then, div, threads, who),
                            self.region(els, div, threads, who),
                        ) {
                            (Amount::Known(a, pa), Amount::Known(b, _)) if a == b => {
                                Amount::Known(a, pa)
                            }
                            _ => Amount::Unknown,
                        }
                    }
                }
                Op::InRole { role, body } => {
                    let rd = &k.roles[role];
                    self.region(
                        body,
                        div,
                        rd.threads,
                        &format!("role {}", self.cx.role(role)),
                    )
                }
                _ => Amount::Known(0, Vec::new()),
            };
            sum = sum.plus(add);
        }
        sum
    }

    /// The group of sends whose innermost loop is `group` (`None`: the kernel body).
    fn group(&self, group: Option<Inst>) -> Amount {
        let k = self.k;
        let Some(l) = group else {
            return self.region(k.body, false, k.launch.block, "the block");
        };
        let div =
            self.uni.control(k, l).is_some() || self.uni.divergence(k, self.layout, l).is_some();
        let (threads, who) = match self.layout.role_of(k, l) {
            Some(r) => (k.roles[r].threads, format!("role {}", self.cx.role(r))),
            None => (k.launch.block, "the block".to_string()),
        };
        k.insts[l]
            .op
            .regions()
            .into_iter()
            .fold(Amount::Known(0, Vec::new()), |acc, r| {
                acc.plus(self.region(r, div, threads, &who))
            })
    }
}

/// The bytes provably sent per phase equal the declared transaction bytes.
fn transactions(cx: &mut Ctx, layout: &Layout, uni: &Uniformity, u: &Uses) {
    let k = cx.k;
    let mut found = Vec::new();
    for (&b, sends) in &u.sends {
        let tally = Tally {
            k,
            layout,
            uni,
            cx: &*cx,
            barrier: b,
        };
        let groups: BTreeSet<Option<Inst>> =
            sends.iter().map(|&s| layout.innermost_loop(k, s)).collect();
        for g in groups {
            let Amount::Known(total, parts) = tally.group(g) else {
                continue;
            };
            let phases: BTreeSet<u32> = u
                .waits
                .get(&b)
                .into_iter()
                .flatten()
                .filter(|&&w| layout.innermost_loop(k, w) == g)
                .filter_map(|&w| match k.insts[w].op {
                    Op::MbarWait { phase, .. } => Some(phase),
                    _ => None,
                })
                .collect();
            let n = phases.len().max(1) as u64;
            let d = &k.barriers[b];
            let expected = n * d.tx_bytes as u64;
            if total == expected {
                continue;
            }
            let first = *sends
                .iter()
                .find(|&&s| layout.innermost_loop(k, s) == g)
                .expect("a group has a send");
            let per = if n == 1 {
                format!("{expected} bytes per phase")
            } else {
                format!("{n} phases × {} = {expected} bytes", d.tx_bytes)
            };
            let scope = match g {
                None => String::new(),
                Some(l) => format!(" per iteration of {}", cx.at(l)),
            };
            found.push((
                first,
                format!(
                    "transaction bytes of mbarrier {} do not add up: it expects {per} (declared at {}), but the sends into it add up to {total} bytes{scope} ({})",
                    cx.barrier(b),
                    d.loc,
                    parts.join("; ")
                ),
            ));
        }
    }
    for (i, msg) in found {
        cx.error(i, msg);
    }
}

/// Per (barrier, role) the last phase waited for; `None` role: the whole block.
type Last = BTreeMap<(Barrier, Option<Role>), u32>;

fn merge(into: &mut Last, from: Last) {
    for (key, p) in from {
        let e = into.entry(key).or_insert(p);
        *e = (*e).max(p);
    }
}

/// Waits of one role on one barrier name non-decreasing phases. Waiting for
/// a phase again is harmless (its parity has flipped and stays flipped until
/// the next phase completes), which lets mutually exclusive runtime branches
/// each wait for the same phase.
fn phases(cx: &mut Ctx, r: Region, role: Option<Role>, last: &mut Last) {
    let k = cx.k;
    for &i in &k.regions[r].insts {
        match k.insts[i].op {
            Op::MbarWait { barrier, phase } => {
                // Threads of `role` already waited where their role, or the whole block, did.
                let prev = last
                    .iter()
                    .filter(|&(&(b, rr), _)| {
                        b == barrier && (role.is_none() || rr.is_none() || rr == role)
                    })
                    .map(|(_, &p)| p)
                    .max();
                if let Some(p) = prev.filter(|&p| phase < p) {
                    cx.error(
                        i,
                        format!(
                            "`mbarrier.wait` waits for phase {phase} of {} after the same threads waited for phase {p}; a role waits on a barrier's phases in non-decreasing order (a parity wait cannot go back)",
                            cx.barrier(barrier)
                        ),
                    );
                }
                let e = last.entry((barrier, role)).or_insert(phase);
                *e = (*e).max(phase);
            }
            Op::InRole { role: inner, body } => {
                let mut s = last.clone();
                phases(cx, body, Some(inner), &mut s);
                merge(last, s);
            }
            ref op => {
                let mut out = last.clone();
                for sub in op.regions() {
                    let mut s = last.clone();
                    // Loop regions run in sequence; an if's branches are alternatives.
                    if matches!(op, Op::While { .. }) {
                        s = out.clone();
                    }
                    phases(cx, sub, role, &mut s);
                    merge(&mut out, s);
                }
                *last = out;
            }
        }
    }
}
