//! The short form of a verifier report: for each error, the failing
//! instruction with its source line, the headers of the regions that enclose
//! it and a few neighbours in its own region. A whole kernel printed after
//! the one useful line buried it (hundreds of lines for a real kernel); the
//! full listing stays in [`VerifierErrors::listing`] and is written to
//! `KDA_DUMP` by the pipeline.
//!
//! [`VerifierErrors::listing`]: super::VerifierErrors::listing

use std::collections::HashMap;
use std::fmt::Write as _;

use super::{Layout, VerifierError};
use crate::entities::Inst;
use crate::kernel::Kernel;
use crate::write;

/// Neighbours shown on each side of the failing instruction.
const CONTEXT: usize = 2;
/// Errors shown with their context; the rest are listed by message only.
const SHOWN: usize = 8;

/// Marks the end of each instruction's text in the annotated listing.
const MARK: &str = "\u{1}kda-inst ";

/// The first printed line of every instruction in the layout (the whole line
/// for a plain op, the header for a region op), read off the one text form
/// so the excerpt shows exactly what a dump shows.
fn first_lines(k: &Kernel, layout: &Layout) -> HashMap<Inst, String> {
    let marked = write::write_annotated(k, &|at| match at {
        Some(i) => vec![format!("{MARK}{}", i.as_u32())],
        None => Vec::new(),
    });
    let decls = k.syms.len()
        + k.tensors.len()
        + k.scalars.len()
        + k.roles.len()
        + k.buffers.len()
        + k.barriers.len();
    // Instruction starts come in pre-order; closing lines start with `}`.
    let starts = marked
        .lines()
        .skip(1 + decls)
        .filter(|l| {
            let t = l.trim_start();
            !t.starts_with(";!") && !t.starts_with('}')
        })
        .map(str::to_string);
    let mut lines = HashMap::new();
    let mut n = 0;
    for (&i, line) in layout.order.iter().zip(starts) {
        lines.insert(i, line);
        n += 1;
    }
    if n != layout.order.len() {
        // The printer and this reader disagree: show messages only.
        lines.clear();
    }
    lines
}

/// The errors with their context, each error under its instruction.
pub(super) fn excerpt(k: &Kernel, layout: Option<&Layout>, errors: &[VerifierError]) -> String {
    let mut s = String::new();
    let lines = layout.map(|l| (l, first_lines(k, l)));
    for (n, e) in errors.iter().enumerate() {
        if n == SHOWN {
            let _ = writeln!(s, "... and {} more errors", errors.len() - SHOWN);
            break;
        }
        s.push('\n');
        let ctx = match (&lines, e.inst) {
            (Some((l, text)), Some(i)) if text.contains_key(&i) => Some((l, text, i)),
            _ => None,
        };
        let Some((l, text, i)) = ctx else {
            let _ = writeln!(s, ";! error: {}  ; @{}", e.msg, e.loc);
            continue;
        };
        // The enclosing region ops, outermost first, as their header lines.
        let mut outer: Vec<Inst> = l.ancestors(i).collect();
        outer.reverse();
        for &a in &outer {
            let _ = writeln!(s, "{}", text[&a]);
        }
        let siblings: Vec<Inst> = match l.region[i] {
            Some(r) => k.regions[r].insts.clone(),
            None => vec![i],
        };
        let at = siblings.iter().position(|&x| x == i).unwrap_or(0);
        let from = at.saturating_sub(CONTEXT);
        let to = (at + CONTEXT + 1).min(siblings.len());
        let indent: String = text[&i]
            .chars()
            .take_while(|c| *c == ' ')
            .collect::<String>();
        if from > 0 {
            let _ = writeln!(s, "{indent}...");
        }
        for &x in &siblings[from..to] {
            if let Some(line) = text.get(&x) {
                let _ = writeln!(s, "{line}");
            }
            if x == i {
                let _ = writeln!(s, "{indent};! error: {}", e.msg);
            }
        }
        if to < siblings.len() {
            let _ = writeln!(s, "{indent}...");
        }
    }
    s
}
