//! The KdaSplit kernel, traced into kda-ir.
//!
//! One cluster of `C` CTAs handles one (head, request); each CTA has 160
//! threads: the `state` role (128 threads, warps 0–3) runs the conv, the L2
//! norms, the delta rule on its `rows = 128 / C` value rows and the gated
//! RMSNorm of the tokens it owns; the `gate` role (warp 4) projects F_B for
//! its rows' key features and multicasts the decays to every CTA over DSMEM.
//!
//! The program is written once. PDL waits sit right before each role's first
//! read of a *produced* tensor and cluster waits right after mbarrier setup;
//! the scheduler derives the seed's `early` schedules from that (see
//! `kda_ir::pipeline`): early 0 moves the PDL wait to the entry, early >= 1
//! hoists ready loads above it and sinks each role's cluster wait to its
//! first DSMEM send.

mod gate;
mod layout;
mod ops;
mod state;

pub use layout::{Dtypes, Params, Strides};

use kda_ir::{Builder, CmpOp, Kernel, LaunchDecl, Type, Value};

use crate::config::KdaConfig;

/// Threads of the state role (one per value / key / channel of the head).
pub const STATE_THREADS: u32 = 128;
/// Threads per CTA: the state role and one gate warp.
pub const BLOCK: u32 = 160;

/// Per-request slot resolution (spec §2), read from ready tensors.
pub(crate) struct Slots {
    /// Slot the state is read from (padding when <= 0).
    pub read: Value,
    /// Slot of the conv state (read and rewritten in place).
    pub conv: Value,
    /// Tap offset `accepted - 1` (0 for T = 1).
    pub offset: Value,
    /// Write slot of each token.
    pub writes: Vec<Value>,
}

/// Build KdaSplit for one configuration and argument dtypes, every stride
/// bound at launch.
pub fn build(cfg: &KdaConfig, dtypes: &Dtypes) -> Kernel {
    build_for(cfg, dtypes, &Strides::default())
}

/// Build KdaSplit with the strides known now baked in as constants (the
/// runner passes the call's actual strides: fewer parameters, cheaper
/// addressing).
pub fn build_for(cfg: &KdaConfig, dtypes: &Dtypes, strides: &Strides) -> Kernel {
    let occupancy = cfg.schedule.occupancy;
    let mut b = Builder::new(
        "kda_split",
        LaunchDecl {
            block: BLOCK,
            cluster: cfg.cluster(),
            min_blocks_per_sm: (occupancy > 0).then_some(occupancy),
        },
    );
    b.set_early(cfg.early());
    let p = Params::declare(&mut b, cfg, dtypes, strides);
    let t = cfg.tokens;

    if cfg.trigger_at_entry() {
        b.pdl_launch_dependents();
    }
    let request = b.block_idx(2);
    let slots = resolve_slots(&mut b, cfg, &p, request);
    let zero = b.i32(0);
    let padding = b.cmp(CmpOp::Le, slots.read, zero);
    b.if_else(
        padding,
        |b| {
            // Padding: zero outputs (CTA 0), nothing else written.
            b.in_role(p.state_role, |b| {
                b.pdl_wait();
                let rank = b.cluster_rank();
                let z = b.u32(0);
                let first = b.cmp(CmpOp::Eq, rank, z);
                b.if_(first, |b| {
                    let head = b.block_idx(1);
                    let tid = b.thread_idx();
                    let channel = channel(b, head, tid);
                    let zero = b.push(kda_ir::Op::FConst(0.0), &[], &[Type::BF16])[0];
                    for tok in 0..t {
                        let row = token_row(b, request, t, tok);
                        b.st_global(p.output, &[row, channel], zero, None, Default::default());
                    }
                });
            });
            if !cfg.trigger_at_entry() {
                b.pdl_launch_dependents();
            }
            vec![]
        },
        |b| {
            let barriers = layout::Barriers::declare(b, cfg, &p);
            state::state_role(b, cfg, &p, &barriers, &slots, request);
            gate::gate_role(b, cfg, &p, &barriers, request);
            vec![]
        },
    );
    b.finish()
}

/// Slot resolution (spec §2); `slots` and `accepted` are ready at launch.
fn resolve_slots(b: &mut Builder, cfg: &KdaConfig, p: &Params, request: Value) -> Slots {
    if cfg.tokens == 1 {
        let slot = b.ld_global(p.slots, &[request], Type::I32, Default::default());
        let offset = b.u32(0);
        return Slots {
            read: slot,
            conv: slot,
            offset,
            writes: vec![slot],
        };
    }
    let accepted = p.accepted.expect("T > 1 kernels take `accepted`");
    let acc = b.ld_global(accepted, &[request], Type::I32, Default::default());
    let one = b.i32(1);
    let off = b.sub(acc, one);
    let offset = b.bitcast(off, Type::U32);
    let read = b.ld_global(p.slots, &[request, offset], Type::I32, Default::default());
    let z = b.u32(0);
    let conv = b.ld_global(p.slots, &[request, z], Type::I32, Default::default());
    let writes = (0..cfg.tokens)
        .map(|tok| {
            let c = b.u32(tok);
            b.ld_global(p.slots, &[request, c], Type::I32, Default::default())
        })
        .collect();
    Slots {
        read,
        conv,
        offset,
        writes,
    }
}

/// `head * 128 + i`: a channel of this head.
pub(crate) fn channel(b: &mut Builder, head: Value, i: Value) -> Value {
    let d = b.u32(128);
    let base = b.mul(head, d);
    b.add(base, i)
}

/// Activation row of token `tok` of `request`: `request * T + tok`.
pub(crate) fn token_row(b: &mut Builder, request: Value, tokens: u32, tok: u32) -> Value {
    let tt = b.u32(tokens);
    let base = b.mul(request, tt);
    let o = b.u32(tok);
    b.add(base, o)
}
