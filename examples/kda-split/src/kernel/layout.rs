//! KdaSplit's declarations: its tensor and scalar parameters (spec §1.1, in
//! argument order), its shared buffers and its mbarriers, and the mbarrier
//! setup that precedes the cluster barrier.

use kda_ir::{
    Access, Barrier, BinOp, Buffer, Builder, CmpOp, Dim, Provenance, Role, Scalar, ScalarParam,
    Tensor, Value,
};

use crate::config::KdaConfig;

use super::{BLOCK, STATE_THREADS};

/// Element types of the arguments the spec leaves generic (converted to f32
/// at first use).
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct Dtypes {
    pub weights: Scalar,
    pub bias: Scalar,
    pub beta: Scalar,
    pub gate: Scalar,
    pub norm_weight: Scalar,
}

impl Default for Dtypes {
    fn default() -> Self {
        Dtypes {
            weights: Scalar::BF16,
            bias: Scalar::BF16,
            beta: Scalar::BF16,
            gate: Scalar::BF16,
            norm_weight: Scalar::BF16,
        }
    }
}

/// Element strides known when the kernel is built (the call's actual
/// layout), by argument name. Known strides become constants in the PTX;
/// the others are bound at launch. `bind_syms` rejects a launch whose
/// tensors do not have the strides the kernel was built for.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Strides(pub Vec<(String, Vec<u64>)>);

impl Strides {
    fn get(&self, name: &str) -> Option<&[u64]> {
        self.0
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, s)| s.as_slice())
    }
}

/// The kernel's parameters and roles.
pub struct Params {
    pub x: Tensor,
    pub weights: Tensor,
    pub bias: Tensor,
    pub conv_state: Tensor,
    pub raw_gate: Tensor,
    pub beta: Tensor,
    pub a_log: Tensor,
    pub dt_bias: Tensor,
    pub slots: Tensor,
    pub state: Tensor,
    pub output: Tensor,
    pub gate: Tensor,
    pub norm_weight: Tensor,
    pub f_b_weight: Tensor,
    pub accepted: Option<Tensor>,
    pub lower_bound: ScalarParam,
    pub scale: ScalarParam,
    pub eps: ScalarParam,
    pub state_role: Role,
    pub gate_role: Role,
}

impl Params {
    pub fn declare(b: &mut Builder, cfg: &KdaConfig, dt: &Dtypes, known: &Strides) -> Params {
        use Provenance::{Produced, Ready};
        let h = cfg.heads as u64;
        let dim = h * 128;
        let rows = b.sym("R");
        let requests = b.sym("B");
        let cache = b.sym("S");
        let c = Dim::Const;
        let s = Dim::Sym;
        // Strides are bound at launch, except where the spec requires a
        // contiguous last dimension (vector access) or, for early >= 2, the
        // state's value stride of 128 (one bulk copy per CTA).
        let strided = |b: &mut Builder,
                       name: &str,
                       dtype: Scalar,
                       shape: &[Dim],
                       contiguous: bool,
                       prov: Provenance,
                       access: Access| {
            let n = shape.len();
            let strides: Vec<Dim> = match known.get(name) {
                Some(s) if s.len() == n => s.iter().map(|&x| Dim::Const(x)).collect(),
                _ => (0..n)
                    .map(|i| {
                        if contiguous && i == n - 1 {
                            Dim::Const(1)
                        } else {
                            Dim::Sym(b.sym(format!("{name}.stride{i}")))
                        }
                    })
                    .collect(),
            };
            b.tensor(name, dtype, shape, &strides, prov, access)
        };
        let x = strided(
            b,
            "x",
            Scalar::BF16,
            &[s(rows), c(3 * dim)],
            false,
            Produced,
            Access::Read,
        );
        let weights = strided(
            b,
            "weights",
            dt.weights,
            &[c(3), c(4), c(dim)],
            false,
            Ready,
            Access::Read,
        );
        let bias = strided(
            b,
            "bias",
            dt.bias,
            &[c(3 * dim)],
            false,
            Ready,
            Access::Read,
        );
        let conv_width = s(b.sym("conv_state.width"));
        let conv_state = strided(
            b,
            "conv_state",
            Scalar::BF16,
            &[s(cache), c(3 * dim), conv_width],
            false,
            Ready,
            Access::ReadWrite,
        );
        let raw_gate = strided(
            b,
            "raw_gate",
            Scalar::BF16,
            &[s(rows), c(128)],
            true,
            Produced,
            Access::Read,
        );
        b.set_align(raw_gate, 16);
        let beta = strided(
            b,
            "beta",
            dt.beta,
            &[s(rows), c(h)],
            false,
            Produced,
            Access::Read,
        );
        let a_log = strided(b, "a_log", Scalar::F32, &[c(h)], false, Ready, Access::Read);
        let dt_bias = strided(
            b,
            "dt_bias",
            Scalar::F32,
            &[c(dim)],
            false,
            Ready,
            Access::Read,
        );
        let slots = if cfg.tokens == 1 {
            strided(
                b,
                "slots",
                Scalar::I32,
                &[s(requests)],
                false,
                Ready,
                Access::Read,
            )
        } else {
            let width = s(b.sym("slots.width"));
            strided(
                b,
                "slots",
                Scalar::I32,
                &[s(requests), width],
                false,
                Ready,
                Access::Read,
            )
        };
        let state = if cfg.staged() && known.get("state").is_none() {
            let page = b.sym("state.stride0");
            let head = b.sym("state.stride1");
            b.tensor(
                "state",
                Scalar::F32,
                &[s(cache), c(h), c(128), c(128)],
                &[s(page), s(head), c(128), c(1)],
                Ready,
                Access::ReadWrite,
            )
        } else {
            strided(
                b,
                "state",
                Scalar::F32,
                &[s(cache), c(h), c(128), c(128)],
                true,
                Ready,
                Access::ReadWrite,
            )
        };
        b.set_align(state, 16);
        let output = strided(
            b,
            "output",
            Scalar::BF16,
            &[s(rows), c(dim)],
            false,
            Ready,
            Access::Write,
        );
        let gate = strided(
            b,
            "gate",
            dt.gate,
            &[s(rows), c(dim)],
            false,
            Produced,
            Access::Read,
        );
        let norm_weight = strided(
            b,
            "norm_weight",
            dt.norm_weight,
            &[c(128)],
            false,
            Ready,
            Access::Read,
        );
        let lower_bound = b.scalar("lower_bound", Scalar::F32);
        let scale = b.scalar("scale", Scalar::F32);
        let eps = b.scalar("eps", Scalar::F32);
        let f_b_weight = strided(
            b,
            "f_b_weight",
            Scalar::BF16,
            &[c(dim), c(128)],
            true,
            Ready,
            Access::Read,
        );
        b.set_align(f_b_weight, 16);
        let accepted = (cfg.tokens > 1).then(|| {
            strided(
                b,
                "accepted",
                Scalar::I32,
                &[s(requests)],
                false,
                Ready,
                Access::Read,
            )
        });
        let state_role = b.role("state", 0, STATE_THREADS);
        let gate_role = b.role("gate", STATE_THREADS, BLOCK - STATE_THREADS);
        Params {
            x,
            weights,
            bias,
            conv_state,
            raw_gate,
            beta,
            a_log,
            dt_bias,
            slots,
            state,
            output,
            gate,
            norm_weight,
            f_b_weight,
            accepted,
            lower_bound,
            scale,
            eps,
            state_role,
            gate_role,
        }
    }
}

/// Shared buffers and mbarriers of an active request.
pub struct Barriers {
    /// `out_full[k]` completes when token `p + k·C`'s 128 outputs (512 bytes)
    /// arrived at CTA `p`, which normalises that token.
    pub out_full: Vec<Barrier>,
    /// Completes when every CTA's decays for all T tokens arrived (512·T bytes).
    pub decay_full: Barrier,
    /// Early >= 2: completes when the CTA's state rows are bulk-copied in.
    pub state_full: Option<Barrier>,
    pub q: Buffer,
    pub k: Buffer,
    pub decay: Buffer,
    pub v: Buffer,
    /// `out[k]`: token `p + k·C`'s outputs, in `output_position` order.
    pub out: Vec<Buffer>,
    /// Per-warp partial sums of q² and k² (8 per token).
    pub reductions: Buffer,
    /// Early >= 2: the CTA's state rows, `[rows, 128]`.
    pub staged: Option<Buffer>,
    /// Early 3: the gate warp's F_B operands, `[copy, lane, 4]` words.
    pub gate_rows: Option<Buffer>,
}

impl Barriers {
    pub fn declare(b: &mut Builder, cfg: &KdaConfig, p: &Params) -> Barriers {
        let t = cfg.tokens;
        let (st, gt) = (p.state_role, p.gate_role);
        let owned = t.div_ceil(cfg.cluster());
        let out_full: Vec<Barrier> = (0..owned)
            .map(|k| b.mbarrier(format!("out_full{k}"), 1, 512, &[st]))
            .collect();
        let decay_full = b.mbarrier("decay_full", 1, 512 * t, &[st, gt]);
        let state_full = cfg
            .staged()
            .then(|| b.mbarrier("state_full", 1, cfg.rows() * 512, &[st]));
        let f32 = Scalar::F32;
        let q = b.shared("q", f32, 128 * t, 16, &[st], None);
        let k = b.shared("k", f32, 128 * t, 16, &[st], None);
        let decay = b.shared("decay", f32, 128 * t, 16, &[st, gt], Some(decay_full));
        let v = b.shared("v", f32, cfg.rows() * t, 16, &[st], None);
        let out = out_full
            .iter()
            .enumerate()
            .map(|(k, &bar)| b.shared(format!("out{k}"), f32, 128, 16, &[st], Some(bar)))
            .collect();
        let reductions = b.shared("reductions", f32, 8 * t, 16, &[st], None);
        let staged =
            state_full.map(|bar| b.shared("staged", f32, cfg.rows() * 128, 128, &[st], Some(bar)));
        let gate_rows = cfg.gate_staged().then(|| {
            b.shared(
                "gate_rows",
                Scalar::U32,
                cfg.rows() / 2 * 32 * 4,
                128,
                &[gt],
                None,
            )
        });
        Barriers {
            out_full,
            decay_full,
            state_full,
            q,
            k,
            decay,
            v,
            out,
            reductions,
            staged,
            gate_rows,
        }
    }

    /// Thread 0 arms the output barriers of the tokens this CTA owns and the
    /// decay barrier, then fences the inits for the cluster. Runs in the
    /// state role before its cluster arrive.
    pub fn setup(&self, b: &mut Builder, cfg: &KdaConfig, partition: Value, tid: Value) {
        let z = b.u32(0);
        let first = b.cmp(CmpOp::Eq, tid, z);
        let out_full = self.out_full.clone();
        let decay_full = self.decay_full;
        b.if_(first, |b| {
            for (k, &bar) in out_full.iter().enumerate() {
                // CTA p owns tokens p, p + C, ...: barrier k is live if p + k·C < T.
                let token = if k == 0 {
                    partition
                } else {
                    let off = b.u32(k as u32 * cfg.cluster());
                    b.add(partition, off)
                };
                let t = b.u32(cfg.tokens);
                let live = b.cmp(CmpOp::Lt, token, t);
                b.if_(live, |b| {
                    b.mbarrier_init(bar);
                    b.mbarrier_arrive_expect_tx(bar, 512);
                });
            }
            b.mbarrier_init(decay_full);
            b.mbarrier_arrive_expect_tx(decay_full, 512 * cfg.tokens);
        });
        b.fence_mbarrier_init();
    }
}

/// `((row & 7) << 4) | ((row >> 5) << 2) | ((row & 31) >> 3)`: where value
/// row `row`'s output lands in `out`, so that the RMSNorm's float4 reads see
/// each row exactly once (a bijection of 0..128).
pub fn output_position(b: &mut Builder, row: Value) -> Value {
    let c = |b: &mut Builder, v| b.u32(v);
    let (m7, s4, s5, s2, m31, s3) = (c(b, 7), c(b, 4), c(b, 5), c(b, 2), c(b, 31), c(b, 3));
    let lo = b.bin(BinOp::And, row, m7);
    let lo = b.bin(BinOp::Shl, lo, s4);
    let mid = b.bin(BinOp::Shr, row, s5);
    let mid = b.bin(BinOp::Shl, mid, s2);
    let hi = b.bin(BinOp::And, row, m31);
    let hi = b.bin(BinOp::Shr, hi, s3);
    let x = b.bin(BinOp::Or, lo, mid);
    b.bin(BinOp::Or, x, hi)
}
