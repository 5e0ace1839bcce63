//! The one text form of the IR: dumps, verifier reports (with errors inline)
//! and filetests all use it; `parse.rs` reads it back.
//!
//! ```text
//! kernel demo block=64 cluster=2 early {
//!   tensor t0 "x": f32[sym0, 64] strides[64, 1] produced read align 16  ; @demo.rs:10:5
//!   role role0 "sender" 0..32
//!   shared buf0 "inbox": f32[32] align 16 roles(role1) guard(bar0)
//!   mbarrier bar0 "full": arrivals 1 tx 128 roles(role0, role1)
//!   v0:u32 = special tid  ; @demo.rs:20:13
//!   role role0 {
//!     ...
//!   }
//! }
//! ```

use std::fmt::{self, Write};

use crate::entities::{Inst, Region, Value};
use crate::kernel::{Access, ClusterPolicy, Dim, Kernel, Provenance};
use crate::op::Op;

/// Print a kernel.
pub fn write_kernel(k: &Kernel) -> String {
    write_annotated(k, &|_| Vec::new())
}

/// Print a kernel with extra comment lines after chosen instructions (used to
/// show verifier errors inline). Annotations keyed on `None` go on top.
pub fn write_annotated(k: &Kernel, notes: &dyn Fn(Option<Inst>) -> Vec<String>) -> String {
    let mut w = String::new();
    write_kernel_to(&mut w, k, notes).expect("writing to a String cannot fail");
    w
}

impl fmt::Display for Kernel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&write_kernel(self))
    }
}

fn dim(d: &Dim, k: &Kernel) -> String {
    match d {
        Dim::Const(c) => c.to_string(),
        Dim::Sym(s) => {
            let _ = k;
            s.to_string()
        }
    }
}

fn list<T>(xs: &[T], f: impl Fn(&T) -> String) -> String {
    xs.iter().map(f).collect::<Vec<_>>().join(", ")
}

fn write_kernel_to(
    w: &mut String,
    k: &Kernel,
    notes: &dyn Fn(Option<Inst>) -> Vec<String>,
) -> fmt::Result {
    for n in notes(None) {
        writeln!(w, ";! {n}")?;
    }
    write!(
        w,
        "kernel {} block={} cluster={}",
        k.name, k.launch.block, k.launch.cluster
    )?;
    if let Some(m) = k.launch.min_blocks_per_sm {
        write!(w, " min_blocks={m}")?;
    }
    if let Some(m) = k.max_regs {
        write!(w, " maxnreg={m}")?;
    }
    if k.launch.cluster_policy != ClusterPolicy::Default {
        write!(w, " cluster_policy={}", k.launch.cluster_policy.name())?;
    }
    if k.schedule.early {
        w.push_str(" early");
    }
    if k.schedule.trigger_at_entry {
        w.push_str(" trigger_at_entry");
    }
    if k.schedule.late_release {
        w.push_str(" late_release");
    }
    for (name, hinted) in k.schedule.tensor_hints() {
        for (n, t) in hinted.iter().enumerate() {
            write!(
                w,
                "{}{t}",
                if n == 0 {
                    format!(" {name}=")
                } else {
                    ",".into()
                }
            )?;
        }
    }
    if let Some(n) = k.schedule.wave {
        write!(w, " wave={n}")?;
    }
    writeln!(w, " {{")?;
    for (s, d) in k.syms.iter() {
        writeln!(w, "  sym {s} {:?}", d.name)?;
    }
    for (t, d) in k.tensors.iter() {
        let prov = match d.provenance {
            Provenance::Ready => "ready",
            Provenance::Produced => "produced",
        };
        let acc = match d.access {
            Access::Read => "read",
            Access::Write => "write",
            Access::ReadWrite => "readwrite",
        };
        writeln!(
            w,
            "  tensor {t} {:?}: {}[{}] strides[{}] {prov} {acc} align {}  ; @{}",
            d.name,
            d.dtype,
            list(&d.shape, |x| dim(x, k)),
            list(&d.strides, |x| dim(x, k)),
            d.align,
            d.loc
        )?;
    }
    for (s, d) in k.scalars.iter() {
        writeln!(w, "  scalar {s} {:?}: {}  ; @{}", d.name, d.ty, d.loc)?;
    }
    for (r, d) in k.roles.iter() {
        write!(w, "  role {r} {:?} {}..{}", d.name, d.first, d.end())?;
        if let Some(n) = d.regs {
            write!(w, " regs {n}")?;
        }
        writeln!(w, "  ; @{}", d.loc)?;
    }
    for (b, d) in k.buffers.iter() {
        write!(
            w,
            "  shared {b} {:?}: {}[{}] align {}",
            d.name, d.elem, d.len, d.align
        )?;
        if !d.roles.is_empty() {
            write!(w, " roles({})", list(&d.roles, |r| r.to_string()))?;
        }
        if let Some(g) = d.guard {
            write!(w, " guard({g})")?;
        }
        if let Some(t) = d.tile {
            write!(w, " tile({}, {}, {})", t.rows, t.cols, t.swizzle.name())?;
        }
        writeln!(w, "  ; @{}", d.loc)?;
    }
    for (b, d) in k.barriers.iter() {
        write!(
            w,
            "  mbarrier {b} {:?}: arrivals {} tx {}",
            d.name, d.arrivals, d.tx_bytes
        )?;
        if !d.roles.is_empty() {
            write!(w, " roles({})", list(&d.roles, |r| r.to_string()))?;
        }
        writeln!(w, "  ; @{}", d.loc)?;
    }
    write_region_body(w, k, k.body, 1, notes)?;
    writeln!(w, "}}")
}

fn indent(w: &mut String, depth: usize) {
    for _ in 0..depth {
        w.push_str("  ");
    }
}

fn vals(k: &Kernel, vs: &[Value]) -> String {
    let _ = k;
    list(vs, |v| v.to_string())
}

fn typed(k: &Kernel, vs: &[Value]) -> String {
    list(vs, |&v| format!("{v}:{}", k.ty(v)))
}

fn write_region_body(
    w: &mut String,
    k: &Kernel,
    r: Region,
    depth: usize,
    notes: &dyn Fn(Option<Inst>) -> Vec<String>,
) -> fmt::Result {
    for &i in &k.regions[r].insts {
        write_inst(w, k, i, depth, notes)?;
    }
    Ok(())
}

fn open_region(w: &mut String, k: &Kernel, r: Region) -> fmt::Result {
    let ps = &k.regions[r].params;
    if ps.is_empty() {
        writeln!(w, "{{")
    } else {
        writeln!(w, "|{}| {{", typed(k, ps))
    }
}

/// The op's mnemonic with its modifiers (`fma.ftz`, `cmp.lt`, `exp.fast`...),
/// from the op table.
pub fn mnemonic(op: &Op) -> String {
    op.mnemonic()
}

/// A barrier operand: `bar3`, or element `%v` of the ring of `n` starting
/// at it, `bar3[%v of n]` (the ring index is the op's last operand).
fn bar_ref(args: &[Value], b: crate::entities::Barrier, ring: u32) -> String {
    if ring == 0 {
        return b.to_string();
    }
    match args.last() {
        Some(v) => format!("{b}[{v} of {ring}]"),
        None => format!("{b}[<missing> of {ring}]"),
    }
}

fn write_inst(
    w: &mut String,
    k: &Kernel,
    i: Inst,
    depth: usize,
    notes: &dyn Fn(Option<Inst>) -> Vec<String>,
) -> fmt::Result {
    let d = &k.insts[i];
    let a = &d.args;
    if d.op == Op::Yield && a.is_empty() && notes(Some(i)).is_empty() {
        // An empty terminator is implied; the parser puts it back.
        return Ok(());
    }
    indent(w, depth);
    if !d.results.is_empty() {
        write!(w, "{} = ", typed(k, &d.results))?;
    }
    let m = mnemonic(&d.op);
    let idx = |xs: &[Value]| format!("[{}]", vals(k, xs));
    // Operands by position; a malformed instruction (the verifier reports it)
    // still prints.
    let at = |n: usize| {
        a.get(n)
            .map_or_else(|| "<missing>".to_string(), |v| v.to_string())
    };
    let from = |n: usize| &a[n.min(a.len())..];
    match &d.op {
        Op::IConst(c) => write!(w, "{m} {c}")?,
        Op::FConst(c) => write!(w, "{m} {c:?}")?,
        Op::Special(s) => write!(w, "{m} {}", s.name())?,
        Op::Param(s) => write!(w, "{m} {s}")?,
        Op::Extract(_) => write!(w, "{m} {}", vals(k, a))?,
        Op::LdGlobal { tensor, .. } => write!(w, "{m} {tensor}{}", idx(a))?,
        Op::StGlobal {
            tensor, predicated, ..
        } => {
            let n = a.len().saturating_sub(1 + *predicated as usize);
            write!(w, "{m} {tensor}{}, {}", idx(&a[..n]), at(n))?;
            if *predicated {
                write!(w, " if {}", at(n + 1))?;
            }
        }
        Op::AtomAdd { tensor } => {
            let n = a.len().saturating_sub(1);
            write!(w, "{m} {tensor}{}, {}", idx(&a[..n]), at(n))?;
        }
        Op::LdShared { buffer } => write!(w, "{m} {buffer}[{}]", at(0))?,
        Op::StShared { buffer } => write!(w, "{m} {buffer}[{}], {}", at(0), at(1))?,
        Op::MbarInit { barrier } => write!(w, "{m} {barrier}")?,
        Op::MbarArrive { barrier, ring } => write!(w, "{m} {}", bar_ref(a, *barrier, *ring))?,
        Op::MbarArriveRemote { barrier, ring } => {
            write!(w, "{m} {}, cta {}", bar_ref(a, *barrier, *ring), at(0))?
        }
        Op::MbarArriveExpectTx {
            barrier,
            bytes,
            ring,
        } => write!(w, "{m} {}, {bytes}", bar_ref(a, *barrier, *ring))?,
        Op::MbarWait { barrier, phase } => write!(w, "{m} {barrier}, phase {phase}")?,
        Op::MbarWaitParity { barrier, ring } => {
            write!(w, "{m} {}, {}", bar_ref(a, *barrier, *ring), at(0))?
        }
        Op::BarSync { id, threads } => write!(w, "{m} {id}, {threads}")?,
        Op::StAsync {
            buffer,
            barrier,
            ring,
        } => write!(
            w,
            "{m} {buffer}[{}], {}, cta {}, {}",
            at(0),
            at(1),
            at(2),
            bar_ref(a, *barrier, *ring)
        )?,
        Op::CpAsync { buffer, tensor } => {
            write!(w, "{m} {buffer}[{}], {tensor}{}", at(0), idx(from(1)))?
        }
        Op::CpAsyncWait(n) | Op::WgmmaWait(n) => write!(w, "{m} {n}")?,
        Op::Wgmma {
            a: ba,
            b: bb,
            n,
            scale_d,
        } => {
            write!(w, "{m} {n}, {ba}[{}], {bb}[{}]", at(0), at(1))?;
            if *scale_d {
                write!(w, ", acc({})", vals(k, from(2)))?;
            }
        }
        Op::SetMaxNReg { regs, .. } => write!(w, "{m} {regs}")?,
        Op::BulkCopy {
            buffer,
            tensor,
            barrier,
            bytes,
            ring,
            ..
        } => {
            let g = &a[1.min(a.len())..a.len().saturating_sub((*ring > 0) as usize).max(1)];
            write!(
                w,
                "{m} {buffer}[{}], {tensor}{}, {bytes}, {}",
                at(0),
                idx(g),
                bar_ref(a, *barrier, *ring)
            )?
        }
        Op::BulkStore {
            buffer,
            tensor,
            bytes,
            ..
        } => write!(
            w,
            "{m} {tensor}{}, {buffer}[{}], {bytes}",
            idx(&a[1.min(a.len())..]),
            at(0)
        )?,
        Op::BulkWait { n, .. } => write!(w, "{m} {n}")?,
        Op::If { then, els } => {
            write!(w, "{m} {} ", at(0))?;
            open_region(w, k, *then)?;
            write_region_body(w, k, *then, depth + 1, notes)?;
            indent(w, depth);
            write!(w, "}} else ")?;
            open_region(w, k, *els)?;
            write_region_body(w, k, *els, depth + 1, notes)?;
            indent(w, depth);
            write!(w, "}}")?;
        }
        Op::For { body } => {
            write!(w, "{m} {}..{} step {}", at(0), at(1), at(2))?;
            if a.len() > 3 {
                write!(w, " iter({})", vals(k, from(3)))?;
            }
            write!(w, " ")?;
            open_region(w, k, *body)?;
            write_region_body(w, k, *body, depth + 1, notes)?;
            indent(w, depth);
            write!(w, "}}")?;
        }
        Op::While { cond, body } => {
            write!(w, "{m} ({}) ", vals(k, a))?;
            open_region(w, k, *cond)?;
            write_region_body(w, k, *cond, depth + 1, notes)?;
            indent(w, depth);
            write!(w, "}} do ")?;
            open_region(w, k, *body)?;
            write_region_body(w, k, *body, depth + 1, notes)?;
            indent(w, depth);
            write!(w, "}}")?;
        }
        Op::InRole { role, body } => {
            write!(w, "{m} {role} ")?;
            open_region(w, k, *body)?;
            write_region_body(w, k, *body, depth + 1, notes)?;
            indent(w, depth);
            write!(w, "}}")?;
        }
        _ => {
            write!(w, "{m}")?;
            if !a.is_empty() {
                write!(w, " {}", vals(k, a))?;
            }
        }
    }
    writeln!(w, "  ; @{}", d.loc)?;
    for n in notes(Some(i)) {
        indent(w, depth);
        writeln!(w, ";! {n}")?;
    }
    Ok(())
}
