//! Register budgets: the kernel's starting register count (`.maxnreg`), the
//! roles' budgets (`setmaxnreg`) and the CTA's register file they share.
//!
//! `setmaxnreg` acts on a whole warpgroup (four warps, 128 threads from a
//! multiple of 128) and moves registers between the warpgroup and a pool per
//! CTA: `dec` returns them, `inc` takes them and blocks until the pool holds
//! enough. The pool starts empty (every warp holds the starting count), so
//! the budgets can all be met only if they add up to no more than the block
//! started with; more, and some `inc` waits forever.

use super::Ctx;
use super::signature::{MAX_REGS, MIN_REGS};
use super::structure::Layout;
use crate::entities::Role;
use crate::kernel::REGISTER_FILE;
use crate::loc::Loc;
use crate::op::Op;

/// Threads of a warpgroup: what one `setmaxnreg` resizes.
pub(crate) const WARPGROUP: u32 = 128;

/// The largest starting count: `.maxnreg` takes at most 255, and a multiple
/// of 8 (the allocation granularity) keeps the block's total exact.
const MAX_START: u32 = 248;

pub(super) fn check(cx: &mut Ctx, layout: &Layout) {
    start(cx);
    budgets(cx);
    pool(cx);
    ops(cx, layout);
}

/// The kernel's `.maxnreg`.
fn start(cx: &mut Ctx) {
    let k = cx.k;
    let Some(m) = k.max_regs else { return };
    let here = Loc::synthetic();
    if !(MIN_REGS..=MAX_START).contains(&m) || !m.is_multiple_of(8) {
        cx.decl_error(
            &here,
            format!(
                "maxnreg {m}; allowed: a multiple of 8 in {MIN_REGS}..={MAX_START} registers per thread"
            ),
        );
        return;
    }
    let l = &k.launch;
    let ctas = l.min_blocks_per_sm.unwrap_or(1).max(1);
    let need = u64::from(l.block) * u64::from(m) * u64::from(ctas);
    if need > u64::from(REGISTER_FILE) {
        let blocks = if ctas > 1 {
            format!(" × min_blocks {ctas}")
        } else {
            String::new()
        };
        cx.decl_error(
            &here,
            format!(
                "maxnreg {m} × {} threads{blocks} = {need} registers, more than the register file's {REGISTER_FILE}; the launch would fail (at most {} per thread)",
                l.block,
                crate::kernel::default_max_regs(l.block, l.min_blocks_per_sm)
            ),
        );
    }
}

/// Each budget: in range, on a warpgroup-aligned role, with a starting count.
fn budgets(cx: &mut Ctx) {
    let k = cx.k;
    for (r, d) in k.roles.iter() {
        let Some(regs) = d.regs else { continue };
        let name = cx.role(r);
        if !(MIN_REGS..=MAX_REGS).contains(&regs) || !regs.is_multiple_of(8) {
            cx.decl_error(
                &d.loc,
                format!(
                    "role {name} declares regs {regs}; allowed: a multiple of 8 in {MIN_REGS}..={MAX_REGS} registers per thread"
                ),
            );
        }
        if !d.first.is_multiple_of(WARPGROUP) || !d.threads.is_multiple_of(WARPGROUP) {
            cx.decl_error(
                &d.loc,
                format!(
                    "role {name} covers threads {}..{} and declares regs {regs}, but `setmaxnreg` resizes whole warpgroups: a role with a register budget starts at a multiple of 128 threads and covers a multiple of 128",
                    d.first,
                    d.end()
                ),
            );
        }
        if k.max_regs.is_none() {
            cx.decl_error(
                &d.loc,
                format!(
                    "role {name} declares regs {regs}, but the kernel declares no starting count (maxnreg): `setmaxnreg` needs it (ptxas ignores setmaxnreg without it)"
                ),
            );
        }
    }
}

/// The budgets, with the starting count for every thread outside a budgeted
/// role, fit in what the block starts with.
fn pool(cx: &mut Ctx) {
    let k = cx.k;
    let Some(m) = k.max_regs else { return };
    let budgeted: Vec<(Role, u32, u32)> = k
        .roles
        .iter()
        .filter_map(|(r, d)| d.regs.map(|regs| (r, d.threads, regs)))
        .collect();
    if budgeted.is_empty() {
        return;
    }
    let block = u64::from(k.launch.block);
    let covered: u64 = budgeted.iter().map(|&(_, t, _)| u64::from(t)).sum();
    let rest = block.saturating_sub(covered);
    let total: u64 = budgeted
        .iter()
        .map(|&(_, t, regs)| u64::from(t) * u64::from(regs))
        .sum::<u64>()
        + rest * u64::from(m);
    let have = block * u64::from(m);
    // A start past the register file is `start`'s error already.
    if total <= have || have > u64::from(REGISTER_FILE) {
        return;
    }
    let mut parts: Vec<String> = budgeted
        .iter()
        .map(|&(r, t, regs)| format!("role {} {t} × {regs}", cx.role(r)))
        .collect();
    if rest > 0 {
        parts.push(format!("{rest} other threads × {m}"));
    }
    let (r, _, _) = budgeted[budgeted.len() - 1];
    let loc = k.roles[r].loc.clone();
    cx.decl_error(
        &loc,
        format!(
            "register budgets add up to {total} registers ({}), more than the block's {have} ({block} threads × maxnreg {m}, at most {REGISTER_FILE}): `setmaxnreg.inc` takes registers the other warpgroups released and would wait forever",
            parts.join(" + ")
        ),
    );
}

/// Every `setmaxnreg`: once per budgeted role, at the top of a top-level
/// region of that role, moving from the starting count to the budget.
fn ops(cx: &mut Ctx, layout: &Layout) {
    let k = cx.k;
    let mut seen: Vec<Role> = Vec::new();
    for &i in &layout.order {
        let Op::SetMaxNReg { inc, regs } = k.insts[i].op else {
            continue;
        };
        let m = cx.mnemonic(i);
        let Some(role) = layout.role_of(k, i) else {
            cx.error(
                i,
                format!(
                    "`{m} {regs}` runs outside any role; it belongs at the top of the first region of a role that declares regs {regs}"
                ),
            );
            continue;
        };
        let d = &k.roles[role];
        match d.regs {
            None => cx.error(
                i,
                format!(
                    "`{m} {regs}` runs in role {}, which declares no register budget; declare it with regs {regs}",
                    cx.role(role)
                ),
            ),
            Some(b) if b != regs => cx.error(
                i,
                format!(
                    "`{m} {regs}` runs in role {}, which declares regs {b}",
                    cx.role(role)
                ),
            ),
            Some(_) => {}
        }
        if let Some(a) = layout
            .ancestors(i)
            .find(|&a| !matches!(k.insts[a].op, Op::InRole { .. }))
        {
            cx.error(
                i,
                format!(
                    "`{m}` inside {}: every warp of the warpgroup must execute it exactly once, converged; put it at the top of a role region at the kernel's top level",
                    cx.at(a)
                ),
            );
        } else if let Some(r) = layout.region[i] {
            let before = k.regions[r].insts.iter().take_while(|&&j| j != i);
            if let Some(&j) = before
                .clone()
                .find(|&&j| !k.insts[j].op.regions().is_empty())
            {
                cx.error(
                    i,
                    format!(
                        "`{m}` after {}: it must come before any control flow of its region, where the warpgroup is still converged",
                        cx.at(j)
                    ),
                );
            }
        }
        if seen.contains(&role) {
            cx.error(
                i,
                format!(
                    "role {} executes `setmaxnreg` a second time; its budget is set once, in its first region",
                    cx.role(role)
                ),
            );
        } else {
            seen.push(role);
        }
        if let Some(start) = k.max_regs {
            if regs == start {
                cx.error(
                    i,
                    format!(
                        "`{m} {regs}` sets the count every warp starts with (maxnreg {start}); a budget equal to it needs no `setmaxnreg`"
                    ),
                );
            } else if inc != (regs > start) {
                let (want, other) = if inc {
                    ("more", "dec")
                } else {
                    ("fewer", "inc")
                };
                cx.error(
                    i,
                    format!(
                        "`{m} {regs}` moves from the kernel's maxnreg {start}, so it needs {want} than {start} registers; use `setmaxnreg.{other} {regs}`"
                    ),
                );
            }
        }
    }
    for (r, d) in k.roles.iter() {
        if let (Some(regs), Some(start)) = (d.regs, k.max_regs)
            && regs != start
            && !seen.contains(&r)
        {
            cx.decl_error(
                &d.loc,
                format!(
                    "role {} declares regs {regs} but no region of it executes `setmaxnreg`: its warps would keep maxnreg {start} registers, which the other budgets counted on",
                    cx.role(r)
                ),
            );
        }
    }
}
