//! The module around the kernel body: header, entry signature with its
//! launch directives, register declarations and the prologue that loads the
//! parameters every op shares (tensor bases, symbols, the shared window, the
//! warp index, the L2 policy).

use std::fmt::Write;

use crate::entities::{ScalarParam, Sym, Tensor};
use crate::kernel::{ClusterPolicy, Kernel};
use crate::loc::Loc;
use crate::op::CachePolicy;
use crate::types::Scalar;

use super::emitter::{Bank, Emitter};
use super::{PTX_VERSION, PtxError, TARGET};

/// The dynamic shared-memory window.
const SMEM: &str = "kda_smem";

fn ident(s: &str) -> String {
    s.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

pub(super) fn tensor_param(k: &Kernel, t: Tensor) -> String {
    format!("{t}_{}", ident(&k.tensors[t].name))
}

pub(super) fn scalar_param(k: &Kernel, s: ScalarParam) -> String {
    format!("{s}_{}", ident(&k.scalars[s].name))
}

fn sym_param(k: &Kernel, s: Sym) -> String {
    format!("{s}_{}", ident(&k.syms[s].name))
}

/// The `.param` type of a scalar parameter (`bool` travels as a `u32`).
pub(super) fn scalar_param_type(s: Scalar) -> &'static str {
    match s {
        Scalar::Bool | Scalar::U32 => ".u32",
        Scalar::I32 => ".s32",
        Scalar::I64 => ".s64",
        Scalar::U64 => ".u64",
        Scalar::F32 => ".f32",
        Scalar::BF16 => ".b16",
    }
}

fn valid_ident(s: &str) -> bool {
    let mut cs = s.chars();
    matches!(cs.next(), Some(c) if c.is_ascii_alphabetic() || c == '_')
        && cs.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '$')
}

impl Emitter<'_> {
    /// Values every op may need, computed once at entry (ptxas sinks or
    /// rematerialises what is used late).
    pub fn prologue(&mut self) -> Result<(), PtxError> {
        let k = self.k;
        if !valid_ident(&k.name) {
            return Err(PtxError {
                loc: Loc::synthetic(),
                msg: format!("kernel name `{}` is not a PTX identifier", k.name),
            });
        }
        self.comment("prologue: tensor bases, symbols, shared window, warp index");
        for t in k.tensors.keys() {
            let r = self.new_reg(Bank::B64);
            self.ins(format!("ld.param.u64 {r}, [{}]", tensor_param(k, t)));
            self.ins(format!("cvta.to.global.u64 {r}, {r}"));
            self.tensor_base[t] = Some(r);
        }
        for s in k.syms.keys() {
            let r = self.new_reg(Bank::B64);
            self.ins(format!("ld.param.u64 {r}, [{}]", sym_param(k, s)));
            self.sym_reg[s] = Some(r);
        }
        if self.layout.bytes > 0 {
            let r = self.new_reg(Bank::B32);
            self.ins(format!("mov.u32 {r}, {SMEM}"));
            self.smem = Some(r);
        }
        if !k.roles.is_empty() {
            let tid = self.new_reg(Bank::B32);
            let warp = self.new_reg(Bank::B32);
            self.ins(format!("mov.u32 {tid}, %tid.x"));
            self.ins(format!("shr.u32 {warp}, {tid}, 5"));
            self.tid = Some(tid);
            self.warp = Some(warp);
        }
        let mut evict = false;
        k.walk(|i, _| {
            evict |= k.insts[i].op.cache_policy() == Some(CachePolicy::EvictFirst);
        });
        if evict {
            let r = self.new_reg(Bank::B64);
            self.ins(format!(
                "createpolicy.fractional.L2::evict_first.b64 {r}, 1.0"
            ));
            self.evict_first = Some(r);
        }
        Ok(())
    }

    pub fn ret(&mut self) {
        self.reset_loc();
        self.comment("end of kernel");
        self.ins("ret");
    }

    /// The whole module: header, entry, register declarations, body.
    pub fn module(&mut self) -> String {
        let k = self.k;
        let body = self.take_body();
        let mut w = String::new();
        let l = &k.launch;
        let _ = writeln!(w, "//\n// kda-ir: kernel `{}`", k.name);
        let _ = writeln!(
            w,
            "// params: tensors (u64 global pointers), scalars, symbols (u64), in that order"
        );
        let _ = writeln!(w, "// dynamic shared memory: {} bytes", self.layout.bytes);
        for (b, off) in self.layout.buffers.iter() {
            let d = &k.buffers[b];
            let _ = writeln!(w, "//   +{off:<6} {b} {:?}: {}[{}]", d.name, d.elem, d.len);
        }
        for (b, off) in self.layout.barriers.iter() {
            let _ = writeln!(w, "//   +{off:<6} {b} {:?}: mbarrier", k.barriers[b].name);
        }
        let _ = writeln!(
            w,
            "//\n.version {PTX_VERSION}\n.target {TARGET}\n.address_size 64\n"
        );
        if self.layout.bytes > 0 {
            // The window is as aligned as its most aligned buffer (a
            // 128-byte swizzled wgmma tile needs 1024).
            let align = k.buffers.values().map(|d| d.align).fold(128, u32::max);
            let _ = writeln!(w, ".extern .shared .align {align} .b8 {SMEM}[];\n");
        }
        if self.probes.is_some() {
            super::probe::declaration(&mut w);
        }
        let mut params = Vec::new();
        for (t, d) in k.tensors.iter() {
            let align = match d.align.max(d.dtype.bytes()) {
                a if a.is_power_of_two() => a,
                _ => d.dtype.bytes(),
            };
            params.push(format!(
                ".param .u64 .ptr.global.align {align} {}",
                tensor_param(k, t)
            ));
        }
        for (s, d) in k.scalars.iter() {
            params.push(format!(
                ".param {} {}",
                scalar_param_type(d.ty),
                scalar_param(k, s)
            ));
        }
        for s in k.syms.keys() {
            params.push(format!(".param .u64 {}", sym_param(k, s)));
        }
        // PTX has no directive for the cluster scheduling policy: the runtime
        // adds it to each launch; the comment keeps it visible to readers.
        if l.cluster_policy != ClusterPolicy::Default {
            let _ = writeln!(
                w,
                "// cluster scheduling policy: {} (a launch attribute the runtime adds)",
                l.cluster_policy.name()
            );
        }
        let _ = writeln!(w, ".visible .entry {}(", k.name);
        let _ = writeln!(w, "\t{}", params.join(",\n\t"));
        let _ = writeln!(w, ")");
        let _ = writeln!(w, ".reqntid {}, 1, 1", l.block);
        // Cluster-scope instructions (st.async, mapa, barrier.cluster) need a
        // cluster launch even when the cluster is one CTA.
        if l.cluster > 1 || uses_cluster(k) {
            let _ = writeln!(
                w,
                ".explicitcluster\n.reqnctapercluster {}, 1, 1",
                l.cluster
            );
        }
        if let Some(m) = l.min_blocks_per_sm {
            let _ = writeln!(w, ".minnctapersm {m}");
        }
        // The starting register count, which `setmaxnreg` moves from (ptxas
        // ignores setmaxnreg in a kernel without it).
        if let Some(m) = k.max_regs {
            let _ = writeln!(w, ".maxnreg {m}");
        }
        let _ = writeln!(w, "{{");
        for (bank, n) in self.reg_counts() {
            let _ = writeln!(w, "\t.reg {} %{}<{n}>;", bank.decl_type(), bank.prefix());
        }
        w.push('\n');
        w.push_str(&body);
        let _ = writeln!(w, "}}");
        w
    }
}

/// Whether the kernel uses any cluster-scope operation.
fn uses_cluster(k: &crate::kernel::Kernel) -> bool {
    use crate::op::{Op, Special};
    k.insts.values().any(|d| {
        matches!(
            d.op,
            Op::ClusterArrive { .. }
                | Op::ClusterWait
                | Op::StAsync { .. }
                | Op::MbarArriveRemote { .. }
                | Op::Special(Special::ClusterRank)
        )
    })
}
