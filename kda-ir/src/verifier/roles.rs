//! Roles: warp-aligned, disjoint thread ranges within the block; role regions
//! are not nested in other roles; buffers and barriers declared for some roles
//! are touched only by them.

use super::{Ctx, Layout};
use crate::entities::{Inst, Role};
use crate::op::Op;

pub(super) fn check(cx: &mut Ctx, layout: &Layout) {
    bounds(cx);
    nesting(cx, layout);
    ownership(cx, layout);
}

fn bounds(cx: &mut Ctx) {
    let k = cx.k;
    let block = k.launch.block;
    for (r, d) in k.roles.iter() {
        let name = cx.role(r);
        let (first, end) = (d.first, d.end());
        if d.threads == 0 {
            cx.decl_error(
                &d.loc,
                format!("role {name} has no threads; allowed: a positive multiple of 32"),
            );
        } else if first % 32 != 0 || d.threads % 32 != 0 {
            cx.decl_error(
                &d.loc,
                format!(
                    "role {name} covers threads {first}..{end}, which is not warp-aligned; its first thread and thread count must be multiples of 32"
                ),
            );
        }
        if end > block {
            cx.decl_error(
                &d.loc,
                format!(
                    "role {name} covers threads {first}..{end}, beyond the block of {block} threads"
                ),
            );
        }
        for (o, od) in k.roles.iter().take_while(|&(o, _)| o < r) {
            if first < od.end() && od.first < end && d.threads > 0 && od.threads > 0 {
                cx.decl_error(
                    &d.loc,
                    format!(
                        "role {name} (threads {first}..{end}) overlaps role {} (threads {}..{}); roles are disjoint thread ranges",
                        cx.role(o),
                        od.first,
                        od.end()
                    ),
                );
            }
        }
    }
}

fn nesting(cx: &mut Ctx, layout: &Layout) {
    let k = cx.k;
    for &i in &layout.order {
        let Op::InRole { role, .. } = k.insts[i].op else {
            continue;
        };
        if let Some(outer) = layout.role_of(k, i)
            && outer != role
        {
            cx.error(
                i,
                format!(
                    "the region of role {} is nested in the region of role {}; roles are disjoint, so it would never run (only the same role may be nested)",
                    cx.role(role),
                    cx.role(outer)
                ),
            );
        }
    }
}

fn ownership(cx: &mut Ctx, layout: &Layout) {
    let k = cx.k;
    for &i in &layout.order {
        let op = &k.insts[i].op;
        let (buffers, barrier) = (op.buffers(), op.barrier().map(|(b, _)| b));
        if buffers.is_empty() && barrier.is_none() {
            continue;
        }
        let here = layout.role_of(k, i);
        for b in buffers {
            let what = format!("shared buffer {}", cx.buffer(b));
            owned(cx, i, here, &k.buffers[b].roles, &what);
        }
        if let Some(b) = barrier {
            let what = format!("mbarrier {}", cx.barrier(b));
            owned(cx, i, here, &k.barriers[b].roles, &what);
        }
    }
}

/// `i`, running in role `here`, touches `what`, declared for `roles`.
fn owned(cx: &mut Ctx, i: Inst, here: Option<Role>, roles: &[Role], what: &str) {
    if roles.is_empty() || here.is_some_and(|r| roles.contains(&r)) {
        return;
    }
    let allowed = roles
        .iter()
        .map(|&r| cx.role(r))
        .collect::<Vec<_>>()
        .join(", ");
    let runs = match here {
        None => "outside any role".to_string(),
        Some(r) => format!("in role {}", cx.role(r)),
    };
    let m = cx.mnemonic(i);
    cx.error(
        i,
        format!("`{m}` touches {what}, which is declared for roles ({allowed}); this runs {runs}: move it into a region of one of those roles"),
    );
}
