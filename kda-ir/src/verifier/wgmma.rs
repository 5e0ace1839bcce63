//! Warpgroup MMA: a wgmma op and its fence, commit and wait run in a role
//! that is a warpgroup (whole warpgroups: a multiple of 128 threads whose
//! first warp index is a multiple of 4); a wgmma's shape is legal, it takes
//! and produces N/2 f32 accumulators, and its operand buffers hold bf16
//! tiles ([`crate::wgmma::MmaTile`]) of 64 (A) and N (B) rows, sized and
//! aligned for their swizzle.

use super::{Ctx, Layout};
use crate::entities::Buffer;
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
