//! Structured control flow on the active mask: `if` / `else`, `for` and
//! `while` loops and role regions push the mask to restore on a stack of
//! [`Frame`]s and run only the lanes that take the branch, jumping over a
//! region no lane runs; their yields and loop-carried values are masked
//! register moves. `exit` retires the warp from the barriers it counts in.

use kda_ir::Scalar;

use super::{Cluster, Frame, Next, Warp, lane_mask};
use crate::decode::{Copies, Ins, Num};
use crate::numeric::{get_elem, set_elem};
/// Run one op of the family.
#[inline(always)]
pub(super) fn exec(ins: &Ins, w: &mut Warp, cx: &mut Cluster<'_>) -> Next {
    if !w.wg_open.is_empty() || !w.wg_groups.is_empty() {
        super::wgmma::carry(ins, w);
    }
    let active = w.active;
    let regs = &mut w.regs;
    match ins {
        &Ins::IfBegin { c, else_pc } => {
            let cm = lane_mask(regs, c);
            let (t, e) = (active & cm, active & !cm);
            w.stack.push(Frame {
                saved: active,
                other: e,
            });
            if t != 0 {
                w.active = t;
            } else {
                w.pc = else_pc;
                return Next::Jump;
            }
        }
        &Ins::Else { end_pc } => {
            let e = w.stack.last().expect("if frame").other;
            w.active = e;
            if e == 0 {
                w.pc = end_pc;
                return Next::Jump;
            }
        }
        Ins::Move { copies } => do_copies(regs, &mut w.scratch, copies, active),
        Ins::PopMask => w.active = w.stack.pop().expect("mask frame").saved,
        &Ins::ForInit {
            ty,
            iv,
            lo,
            ref copies,
        } => {
            w.stack.push(Frame {
                saved: active,
                other: 0,
            });
            let words = if matches!(ty, Num::I32 | Num::U32) {
                1
            } else {
                2
            };
            let c = Copies {
                moves: Box::new([(iv, lo, words)]),
                parallel: false,
            };
            do_copies(regs, &mut w.scratch, &c, active);
            do_copies(regs, &mut w.scratch, copies, active);
        }
        &Ins::ForHead {
            ty,
            iv,
            hi,
            exit_pc,
        } => {
            let m = active & below(regs, ty, iv, hi);
            w.active = m;
            if m == 0 {
                w.pc = exit_pc;
                return Next::Jump;
            }
        }
        &Ins::ForNext {
            ty,
            iv,
            step,
            ref copies,
            head_pc,
        } => {
            do_copies(regs, &mut w.scratch, copies, active);
            iv_step(regs, ty, iv, step, active);
            w.pc = head_pc;
            return Next::Jump;
        }
        Ins::ForExit { copies } => {
            let saved = w.stack.pop().expect("loop frame").saved;
            w.active = saved;
            do_copies(&mut w.regs, &mut w.scratch, copies, saved);
        }
        Ins::WhileInit { copies } => {
            w.stack.push(Frame {
                saved: active,
                other: 0,
            });
            do_copies(regs, &mut w.scratch, copies, active);
        }
        &Ins::WhileCond {
            c,
            ref to_body,
            ref to_res,
            exit_pc,
        } => {
            let cm = lane_mask(regs, c);
            let (stay, leave) = (active & cm, active & !cm);
            if leave != 0 {
                do_copies(regs, &mut w.scratch, to_res, leave);
            }
            w.active = stay;
            if stay == 0 {
                w.pc = exit_pc;
                return Next::Jump;
            }
            do_copies(&mut w.regs, &mut w.scratch, to_body, stay);
        }
        &Ins::WhileNext {
            ref copies,
            head_pc,
        } => {
            do_copies(regs, &mut w.scratch, copies, active);
            w.pc = head_pc;
            return Next::Jump;
        }
        &Ins::RoleBegin { ref masks, end_pc } => {
            w.stack.push(Frame {
                saved: active,
                other: 0,
            });
            let m = active & masks[w.warp as usize];
            w.active = m;
            if m == 0 {
                w.pc = end_pc;
                return Next::Jump;
            }
        }
        Ins::Exit => {
            exit_warp(w, cx);
            return Next::Exit;
        }
        _ => unreachable!("not a control-flow op"),
    }
    Next::Step
}

/// Masked register moves.
fn do_copies(regs: &mut [u32], scratch: &mut [u32], c: &Copies, mask: u32) {
    let copy = |regs: &mut [u32], dst: usize, src: usize| {
        if mask == u32::MAX {
            let x: [u32; 32] = regs[src..src + 32].try_into().expect("32 lanes");
            regs[dst..dst + 32].copy_from_slice(&x);
        } else {
            let mut m = mask;
            while m != 0 {
                let l = m.trailing_zeros() as usize;
                m &= m - 1;
                regs[dst + l] = regs[src + l];
            }
        }
    };
    if c.parallel {
        let mut at = 0;
        for &(_, s, w) in c.moves.iter() {
            let n = w as usize * 32;
            scratch[at..at + n].copy_from_slice(&regs[s as usize * 32..s as usize * 32 + n]);
            at += n;
        }
        let mut at = 0;
        for &(d, _, w) in c.moves.iter() {
            for i in 0..w as usize {
                let dst = (d as usize + i) * 32;
                let mut m = mask;
                while m != 0 {
                    let l = m.trailing_zeros() as usize;
                    m &= m - 1;
                    regs[dst + l] = scratch[at + i * 32 + l];
                }
            }
            at += w as usize * 32;
        }
    } else {
        for &(d, s, w) in c.moves.iter() {
            for i in 0..w as usize {
                copy(regs, (d as usize + i) * 32, (s as usize + i) * 32);
            }
        }
    }
}

/// Lanes where an index-typed iv is below `hi`.
fn below(regs: &[u32], ty: Num, iv: u32, hi: u32) -> u32 {
    let mut m = 0u32;
    for l in 0..32 {
        let lt = match ty {
            Num::I32 => (regs[iv as usize * 32 + l] as i32) < (regs[hi as usize * 32 + l] as i32),
            Num::U32 => regs[iv as usize * 32 + l] < regs[hi as usize * 32 + l],
            Num::I64 => {
                (get_elem(regs, iv, Scalar::I64, 0, l) as i64)
                    < (get_elem(regs, hi, Scalar::I64, 0, l) as i64)
            }
            _ => get_elem(regs, iv, Scalar::U64, 0, l) < get_elem(regs, hi, Scalar::U64, 0, l),
        };
        m |= (lt as u32) << l;
    }
    m
}

fn iv_step(regs: &mut [u32], ty: Num, iv: u32, step: u32, mask: u32) {
    let mut m = mask;
    while m != 0 {
        let l = m.trailing_zeros() as usize;
        m &= m - 1;
        match ty {
            Num::I32 | Num::U32 => {
                let s = regs[step as usize * 32 + l];
                let i = &mut regs[iv as usize * 32 + l];
                *i = i.wrapping_add(s);
            }
            _ => {
                let x = get_elem(regs, iv, Scalar::U64, 0, l).wrapping_add(get_elem(
                    regs,
                    step,
                    Scalar::U64,
                    0,
                    l,
                ));
                set_elem(regs, iv, Scalar::U64, 0, l, x);
            }
        }
    }
}

/// Account for a warp's exit: its threads count as arrived at the cluster
/// barrier and leave `bar.sync` barriers that wait for every live thread.
fn exit_warp(w: &mut Warp, cx: &mut Cluster<'_>) {
    w.done = true;
    if cx.race.on {
        let gw = cx.race.gw(w.rank, w.warp);
        cx.race.exit(w.rank, gw);
    }
    let n = w.lanes.count_ones();
    let cb = &mut cx.cbar;
    cb.exited += n;
    if w.cl_mask != 0 && w.cl_phase == cb.phase {
        cb.arrived -= w.cl_mask.count_ones();
    }
    let phase = cb.phase;
    cb.try_complete();
    if cx.race.on && cx.cbar.phase != phase {
        cx.race.complete_cluster();
    }
    let cta = &mut cx.ctas[w.rank as usize];
    cta.live -= n;
    let live = cta.live;
    for (id, nb) in cta.named.iter_mut().enumerate() {
        if nb.arrived > 0 && nb.expected == 0 && nb.arrived >= live {
            nb.arrived = 0;
            nb.generation += 1;
            if cx.race.on {
                cx.race.complete_named(w.rank, id as u8);
            }
        }
    }
}
