//! The one-line IR text of an instruction for the PTX source comments: the
//! printer's mnemonic and operands, with a structured op shown as its header.

use crate::entities::{Inst, Value};
use crate::kernel::Kernel;
use crate::op::{Op, Special};
use crate::write::mnemonic;

fn list(vs: &[Value]) -> String {
    vs.iter()
        .map(|v| v.to_string())
        .collect::<Vec<_>>()
        .join(", ")
}

/// The printer's spelling of a special register.
fn special(s: Special) -> String {
    let xyz = |d: u8| ["x", "y", "z"][d.min(2) as usize];
    match s {
        Special::ThreadIdx => "tid".into(),
        Special::BlockIdx(d) => format!("ctaid.{}", xyz(d)),
        Special::GridDim(d) => format!("nctaid.{}", xyz(d)),
        Special::ClusterRank => "cluster_rank".into(),
        Special::LaneId => "laneid".into(),
    }
}

pub(super) fn inst_line(k: &Kernel, i: Inst) -> String {
    let d = &k.insts[i];
    let a = &d.args;
    let mut s = String::new();
    if !d.results.is_empty() {
        let rs: Vec<String> = d
            .results
            .iter()
            .map(|&v| format!("{v}:{}", k.ty(v)))
            .collect();
        s.push_str(&rs.join(", "));
        s.push_str(" = ");
    }
    s.push_str(&mnemonic(&d.op));
    let ops = match &d.op {
        Op::IConst(c) => c.to_string(),
        Op::FConst(c) => format!("{c:?}"),
        Op::Special(sp) => special(*sp),
        Op::Param(p) => format!("{p} {:?}", k.scalars[*p].name),
        Op::LdGlobal { tensor, .. } => format!("{tensor}[{}]", list(a)),
        Op::StGlobal {
            tensor, predicated, ..
        } => {
            let n = a.len() - 1 - *predicated as usize;
            let p = if *predicated {
                format!(" if {}", a[n + 1])
            } else {
                String::new()
            };
            format!("{tensor}[{}], {}{p}", list(&a[..n]), a[n])
        }
        Op::AtomAdd { tensor } => {
            let n = a.len() - 1;
            format!("{tensor}[{}], {}", list(&a[..n]), a[n])
        }
        Op::LdShared { buffer } => format!("{buffer}[{}]", a[0]),
        Op::StShared { buffer } => format!("{buffer}[{}], {}", a[0], a[1]),
        Op::MbarInit { barrier } => barrier.to_string(),
        Op::MbarArrive { barrier, ring: 0 } => barrier.to_string(),
        Op::MbarArrive { barrier, ring } => format!("{barrier}[{} of {ring}]", a[0]),
        Op::MbarArriveRemote { barrier, ring: 0 } => format!("{barrier}, cta {}", a[0]),
        Op::MbarArriveRemote { barrier, ring } => {
            format!("{barrier}[{} of {ring}], cta {}", a[1], a[0])
        }
        Op::MbarArriveExpectTx {
            barrier,
            bytes,
            ring: 0,
        } => format!("{barrier}, {bytes}"),
        Op::MbarArriveExpectTx {
            barrier,
            bytes,
            ring,
        } => format!("{barrier}[{} of {ring}], {bytes}", a[0]),
        Op::MbarWait { barrier, phase } => format!("{barrier}, phase {phase}"),
        Op::MbarWaitParity { barrier, ring: 0 } => format!("{barrier}, {}", a[0]),
        Op::MbarWaitParity { barrier, ring } => {
            format!("{barrier}[{} of {ring}], {}", a[1], a[0])
        }
        Op::BarSync { id, threads } => format!("{id}, {threads}"),
        Op::StAsync {
            buffer,
            barrier,
            ring: 0,
        } => {
            format!("{buffer}[{}], {}, cta {}, {barrier}", a[0], a[1], a[2])
        }
        Op::StAsync {
            buffer,
            barrier,
            ring,
        } => format!(
            "{buffer}[{}], {}, cta {}, {barrier}[{} of {ring}]",
            a[0], a[1], a[2], a[3]
        ),
        Op::CpAsync { buffer, tensor } => {
            format!("{buffer}[{}], {tensor}[{}]", a[0], list(&a[1..]))
        }
        Op::CpAsyncWait(n) | Op::WgmmaWait(n) => n.to_string(),
        Op::Wgmma {
            a: ba,
            b: bb,
            n,
            scale_d,
        } => {
            let acc = if *scale_d { ", acc" } else { ", zero" };
            format!("m64n{n}k16, {ba}[k {}], {bb}[k {}]{acc}", a[0], a[1])
        }
        Op::SetMaxNReg { regs, .. } => regs.to_string(),
        Op::BulkCopy {
            buffer,
            tensor,
            barrier,
            bytes,
            ring,
            ..
        } => {
            let (g, bar) = if *ring == 0 {
                (&a[1..], barrier.to_string())
            } else {
                let n = a.len() - 1;
                (&a[1..n], format!("{barrier}[{} of {ring}]", a[n]))
            };
            format!("{buffer}[{}], {tensor}[{}], {bytes}, {bar}", a[0], list(g))
        }
        Op::BulkStore {
            buffer,
            tensor,
            bytes,
            ..
        } => {
            format!("{tensor}[{}], {buffer}[{}], {bytes}", list(&a[1..]), a[0])
        }
        Op::BulkWait { n, .. } => n.to_string(),
        Op::For { .. } => {
            let mut f = format!("{}..{} step {}", a[0], a[1], a[2]);
            if a.len() > 3 {
                f.push_str(&format!(" iter({})", list(&a[3..])));
            }
            f
        }
        Op::While { .. } => format!("({})", list(a)),
        Op::InRole { role, .. } => {
            let r = &k.roles[*role];
            match r.regs {
                Some(n) => format!("{role} {:?} {}..{} regs {n}", r.name, r.first, r.end()),
                None => format!("{role} {:?} {}..{}", r.name, r.first, r.end()),
            }
        }
        _ => list(a),
    };
    if !ops.is_empty() {
        s.push(' ');
        s.push_str(&ops);
    }
    s
}
