//! Seeded generator of realistic KdaSplit launches (spec §8.10, §8.12, §8.13).
//!
//! Magnitudes follow the fla/vLLM layers the kernel serves: unit-scale
//! activations, depthwise conv weights at their kaiming bound (fan-in 4),
//! F_B at `128^-0.5`, `A = exp(a_log) ∈ [1, 16]`, state ~ N(0, 0.1). Everything
//! stored as bf16 is drawn and then rounded, so the stored values are what the
//! reference reads. The draws, slot tables and conv layouts are the shared
//! ones of [`kda_host::generator`] (re-exported here).

pub use kda_host::generator::{
    CaseLimit, ConvLayout, Draw, LimitError, OUTPUT_SENTINEL, PAD_SLOT, SlotOptions, case_limit,
    sentinel_output, slot_table, to_f32,
};

use kda_host::generator::TensorBytes;
use thiserror::Error;

use crate::args::KdaArgs;
use crate::config::HEAD_DIM;

const D: usize = HEAD_DIM;

/// How the raw gate's operands `f_a` (`raw_gate`) and `f_b_weight` are drawn.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum GateInputs {
    /// `f_a = m·2^-6`, `f_b = n·2^-9`, `|m|, |n| <= 127` (Gaussian, snapped and
    /// clamped): every partial sum is exact in f32, so the bf16 raw gate is the
    /// same for every gate mode and MMA order.
    #[default]
    Grid,
    /// Plain bf16-rounded Gaussians: about 4 raw gates in 65 536 land on the
    /// other side of a bf16 midpoint in f32 (spec §5).
    Gaussian,
}

/// How `dt_bias` is drawn.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum DtBias {
    /// N(-1, 1): decays spread over `[e^lower_bound, 1]` (spec §8.13).
    #[default]
    Spread,
    /// fla's inverse-softplus init of dt ∈ [1e-3, 1e-1]: realistic, but σ
    /// saturates and almost every decay is exactly 1.
    Fla,
}

/// What to generate. Build with [`GenOptions::new`] and the setters.
#[derive(Clone, Debug, PartialEq)]
pub struct GenOptions {
    pub heads: u32,
    /// Requests B.
    pub requests: usize,
    pub tokens: u32,
    pub seed: u64,
    pub has_bias: bool,
    /// Cache slots S of `state` and `conv_state`; at least `1 + B*T` (slot 0 is
    /// the null block). Default `B*T + 3`, leaving two slots nobody references.
    pub num_slots: Option<usize>,
    pub gate_inputs: GateInputs,
    pub dt_bias: DtBias,
    /// Probability that a request is padding (read slot 0 or -1).
    pub padding: f64,
    /// Probability that an eligible write slot of an active T > 1 request is a
    /// hole (0 or -1). Eligible: neither the conv column 0 nor the read column.
    pub holes: f64,
    /// Store `weights` as F32 (vLLM keeps conv weights in f32); values stay
    /// bf16-exact.
    pub weights_f32: bool,
    pub conv_layout: ConvLayout,
    /// Conv columns beyond the ones the launch uses (never touched).
    pub conv_extra: usize,
    /// `slots` columns beyond T for T > 1 (never read; filled with -1).
    pub slot_extra: usize,
    pub lower_bound: f32,
    pub eps: f32,
}

impl GenOptions {
    pub fn new(heads: u32, requests: usize, tokens: u32) -> Self {
        Self {
            heads,
            requests,
            tokens,
            seed: 0,
            has_bias: true,
            num_slots: None,
            gate_inputs: GateInputs::Grid,
            dt_bias: DtBias::Spread,
            padding: 0.25,
            holes: 0.25,
            weights_f32: false,
            conv_layout: ConvLayout::Ds,
            conv_extra: 0,
            slot_extra: 0,
            lower_bound: -5.0,
            eps: 1e-5,
        }
    }

    pub fn seed(mut self, seed: u64) -> Self {
        self.seed = seed;
        self
    }

    pub fn has_bias(mut self, has_bias: bool) -> Self {
        self.has_bias = has_bias;
        self
    }

    pub fn num_slots(mut self, num_slots: usize) -> Self {
        self.num_slots = Some(num_slots);
        self
    }

    pub fn gate_inputs(mut self, gate_inputs: GateInputs) -> Self {
        self.gate_inputs = gate_inputs;
        self
    }

    pub fn dt_bias(mut self, dt_bias: DtBias) -> Self {
        self.dt_bias = dt_bias;
        self
    }

    pub fn padding(mut self, padding: f64) -> Self {
        self.padding = padding;
        self
    }

    pub fn holes(mut self, holes: f64) -> Self {
        self.holes = holes;
        self
    }

    pub fn weights_f32(mut self, weights_f32: bool) -> Self {
        self.weights_f32 = weights_f32;
        self
    }

    pub fn conv_layout(mut self, conv_layout: ConvLayout) -> Self {
        self.conv_layout = conv_layout;
        self
    }

    pub fn conv_extra(mut self, conv_extra: usize) -> Self {
        self.conv_extra = conv_extra;
        self
    }

    pub fn slot_extra(mut self, slot_extra: usize) -> Self {
        self.slot_extra = slot_extra;
        self
    }

    pub fn lower_bound(mut self, lower_bound: f32) -> Self {
        self.lower_bound = lower_bound;
        self
    }

    pub fn eps(mut self, eps: f32) -> Self {
        self.eps = eps;
        self
    }

    /// The slot count the generator uses (saturating: [`GenOptions::check`]
    /// refuses counts that overflow).
    pub fn resolved_num_slots(&self) -> usize {
        self.num_slots.unwrap_or_else(|| {
            self.requests
                .saturating_mul(self.tokens as usize)
                .saturating_add(3)
        })
    }

    /// Checks what [`generate`] would otherwise panic or abort on, before
    /// anything is allocated: enough slots for every request's T distinct
    /// slots plus the null slot, slot ids that fit I32, probabilities in
    /// [0, 1], and the case's bytes (its tensors as in the file, with the
    /// four `expected.*` when `with_expected`) under `limit`, every size
    /// computed with checked arithmetic. Returns those bytes.
    pub fn check(&self, limit: &CaseLimit, with_expected: bool) -> Result<u64, GenError> {
        for (name, p) in [("padding", self.padding), ("holes", self.holes)] {
            if !(0.0..=1.0).contains(&p) {
                return Err(GenError::Probability { name, p });
            }
        }
        let overflow = |what: &str| LimitError::Overflow { what: what.into() };
        let (h, b, t) = (self.heads as usize, self.requests, self.tokens as usize);
        let dim = h.checked_mul(D).ok_or_else(|| overflow("heads x 128"))?;
        let rows = b
            .checked_mul(t)
            .ok_or_else(|| overflow("requests x tokens"))?;
        let slots = match self.num_slots {
            Some(slots) => slots,
            None => rows.checked_add(3).ok_or_else(|| overflow("num_slots"))?,
        };
        if slots <= rows {
            return Err(GenError::TooFewSlots {
                slots,
                requests: b,
                tokens: self.tokens,
            });
        }
        let width = if t == 1 { 3 } else { t + 2 }
            .checked_add(self.conv_extra)
            .ok_or_else(|| overflow("conv_state width"))?;
        let columns = if t == 1 {
            1
        } else {
            t.checked_add(self.slot_extra)
                .ok_or_else(|| overflow("slots columns"))?
        };
        let weight_bytes = if self.weights_f32 { 4 } else { 2 };
        let mut bytes = TensorBytes::default();
        let three_dim = dim.checked_mul(3).ok_or_else(|| overflow("3 x dim"))?;
        for (what, shape, size) in [
            ("x", vec![rows, three_dim], 2),
            ("weights", vec![12, dim], weight_bytes),
            ("bias", vec![three_dim], 2),
            ("conv_state", vec![slots, three_dim, width], 2),
            ("raw_gate", vec![rows, D], 2),
            ("beta", vec![rows, h], 2),
            ("a_log", vec![h], 4),
            ("dt_bias", vec![dim], 4),
            ("slots", vec![b, columns], 4),
            // The shuffled pool of fresh slot ids the slot table draws from.
            ("the slot pool", vec![slots], 4),
            ("accepted", vec![b], 4),
            ("state", vec![slots, h, D, D], 4),
            ("output", vec![rows, dim], 2),
            ("gate", vec![rows, dim], 2),
            ("norm_weight", vec![D], 2),
            ("f_b_weight", vec![dim, D], 2),
            ("the scalars", vec![3], 4),
        ] {
            bytes.add(what, &shape, size)?;
        }
        if with_expected {
            for (what, shape, size) in [
                ("expected.output", vec![rows, dim], 2),
                ("expected.output_f32", vec![rows, dim], 4),
                ("expected.state", vec![slots, h, D, D], 4),
                ("expected.conv_state", vec![slots, three_dim, width], 2),
            ] {
                bytes.add(what, &shape, size)?;
            }
        }
        limit.check("the case", bytes.bytes())?;
        if i32::try_from(slots - 1).is_err() {
            return Err(GenError::SlotIds { slots });
        }
        Ok(bytes.bytes())
    }
}

/// Why [`GenOptions::check`] refuses to generate.
#[derive(Clone, Debug, Error, PartialEq)]
pub enum GenError {
    /// Too large for this machine, or sizes that overflow.
    #[error(transparent)]
    Limit(#[from] LimitError),
    #[error(
        "num_slots = {slots} is too small: each of the {requests} requests draws {tokens} \
         distinct slots and slot 0 is the null block"
    )]
    TooFewSlots {
        slots: usize,
        requests: usize,
        tokens: u32,
    },
    #[error("num_slots = {slots}: slot ids are I32, so at most 2^31 slots")]
    SlotIds { slots: usize },
    #[error("{name} is a probability in [0, 1]; got {p}")]
    Probability { name: &'static str, p: f64 },
}

/// Generates one valid launch. Panics if `num_slots < 1 + B*T` (each request
/// draws T distinct slots) or the probabilities are outside [0, 1]; callers
/// with untrusted options run [`GenOptions::check`] first, which also bounds
/// the memory.
pub fn generate(options: &GenOptions) -> KdaArgs {
    let o = options;
    let (h, b, t) = (o.heads as usize, o.requests, o.tokens as usize);
    let (dim, rows, slots) = (h * D, b * t, o.resolved_num_slots());
    assert!(
        slots > b * t,
        "num_slots = {slots} leaves no room for {b} requests of {t} distinct slots plus the null slot"
    );
    let mut g = Draw::new(o.seed);

    let x = g.bf16(vec![rows, 3 * dim], |g| g.normal(0.0, 1.0));
    let weights = g.bf16(vec![3, 4, dim], |g| g.uniform(-0.5, 0.5));
    let weights = if o.weights_f32 {
        to_f32(&weights)
    } else {
        weights
    };
    let bias = g.bf16(vec![3 * dim], |g| g.uniform(-0.5, 0.5));
    let width = if t == 1 { 3 } else { t + 2 } + o.conv_extra;
    let conv_state = g.conv_state(slots, 3 * dim, width, o.conv_layout);

    let f_b_std = (D as f64).powf(-0.5);
    let raw_gate = g.bf16(vec![rows, D], |g| gate_operand(g, o.gate_inputs, 1.0, 6));
    let beta = g.bf16(vec![rows, h], |g| g.normal(0.0, 1.0));
    let a_log = g.f32(vec![h], |g| g.uniform(1.0, 16.0).ln());
    let dt_bias = g.f32(vec![dim], |g| match o.dt_bias {
        DtBias::Spread => g.normal(-1.0, 1.0),
        DtBias::Fla => g.dt_bias_init(),
    });

    let (slots_tensor, accepted) = slot_table(
        &mut g.0,
        &SlotOptions {
            requests: b,
            tokens: o.tokens,
            num_slots: slots,
            padding: o.padding,
            holes: o.holes,
            slot_extra: o.slot_extra,
        },
    );

    let state = g.f32(vec![slots, h, D, D], |g| g.normal(0.0, 0.1));
    let output = sentinel_output(rows, dim);
    let gate = g.bf16(vec![rows, dim], |g| g.normal(0.0, 1.0));
    let norm_weight = g.bf16(vec![D], |g| g.uniform(0.5, 1.5));
    let f_b_weight = g.bf16(vec![dim, D], |g| gate_operand(g, o.gate_inputs, f_b_std, 9));

    KdaArgs {
        x,
        weights,
        bias,
        conv_state,
        raw_gate,
        beta,
        a_log,
        dt_bias,
        slots: slots_tensor,
        state,
        output,
        gate,
        norm_weight,
        lower_bound: o.lower_bound,
        scale: (D as f32).powf(-0.5),
        eps: o.eps,
        f_b_weight,
        accepted,
    }
}

/// N(0, std), optionally snapped to the grid `m·2^-bits`, |m| <= 127.
fn gate_operand(g: &mut Draw, inputs: GateInputs, std: f64, bits: i32) -> f64 {
    let value = g.normal(0.0, std);
    match inputs {
        GateInputs::Gaussian => value,
        GateInputs::Grid => {
            let unit = 2f64.powi(-bits);
            (value / unit).round().clamp(-127.0, 127.0) * unit
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::KdaConfig;
    use crate::reference::{Request, resolve};
    use crate::validate::validate;

    fn config(o: &GenOptions) -> KdaConfig {
        KdaConfig::new(
            o.heads,
            o.requests as u32,
            0,
            o.has_bias,
            &[0, 0, 0],
            o.tokens,
        )
        .unwrap()
    }

    #[test]
    fn same_seed_same_case_and_all_variants_validate() {
        for tokens in [1, 3, 8] {
            for layout in [ConvLayout::Ds, ConvLayout::Sd] {
                let o = GenOptions::new(2, 5, tokens)
                    .seed(11)
                    .conv_layout(layout)
                    .conv_extra(1)
                    .slot_extra(2)
                    .weights_f32(true)
                    .gate_inputs(GateInputs::Gaussian)
                    .dt_bias(DtBias::Fla);
                let a = generate(&o);
                assert_eq!(a, generate(&o));
                assert_eq!(validate(&config(&o), &a), vec![]);
            }
        }
        assert_ne!(
            generate(&GenOptions::new(1, 2, 1)),
            generate(&GenOptions::new(1, 2, 1).seed(1))
        );
    }

    #[test]
    fn grid_operands_sit_on_their_grids() {
        let a = generate(&GenOptions::new(1, 2, 1));
        for (t, bits) in [(&a.raw_gate, 6), (&a.f_b_weight, 9)] {
            for v in t.values() {
                let m = v * 2f64.powi(bits);
                assert!(m == m.round() && m.abs() <= 127.0, "{v}");
            }
        }
    }

    #[test]
    fn padding_holes_and_accepted_are_drawn() {
        let o = GenOptions::new(1, 64, 4).padding(0.3).holes(0.5).seed(3);
        let a = generate(&o);
        let plans: Vec<Request> = (0..o.requests).map(|b| resolve(4, &a, b)).collect();
        let padding = plans.iter().filter(|p| **p == Request::Padding).count();
        assert!((5..40).contains(&padding), "{padding}");
        let holes = plans
            .iter()
            .filter_map(|p| match p {
                Request::Active { writes, .. } => {
                    Some(writes.iter().filter(|w| w.is_none()).count())
                }
                Request::Padding => None,
            })
            .sum::<usize>();
        assert!(holes > 0);
        let accepted = a.accepted.as_ref().unwrap().values();
        for count in 1..=4 {
            assert!(accepted.contains(&f64::from(count)));
        }
        assert!(
            a.output
                .values()
                .iter()
                .all(|&v| v == f64::from(OUTPUT_SENTINEL))
        );
    }

    #[test]
    fn impossible_options_are_refused_before_allocating() {
        let limit = CaseLimit {
            bytes: 1 << 30,
            basis: "a test".into(),
        };
        let ok = GenOptions::new(2, 4, 1);
        let bytes = ok.check(&limit, true).unwrap();
        // The footprint is the file's tensor bytes (the header aside).
        let case = crate::Case::generate(&ok, crate::RawGateOrder::Exact).unwrap();
        let file = case.to_bytes().unwrap().len() as u64;
        assert!(bytes <= file && file < bytes + 4096, "{bytes} vs {file}");
        let refused = |o: GenOptions| o.check(&limit, true).unwrap_err();
        for o in [
            GenOptions::new(2, 4, 1).num_slots(usize::MAX),
            GenOptions::new(2, 4, 1).num_slots(1_000_000_000_000),
            GenOptions::new(2, 4, 1).conv_extra(usize::MAX),
            GenOptions::new(2, 4, 1).conv_extra(1_000_000_000_000),
            GenOptions::new(2, 4, 2).slot_extra(usize::MAX),
            GenOptions::new(2, 4_294_967_295, 1),
            GenOptions::new(100_000, 4, 1),
            GenOptions::new(u32::MAX, usize::MAX, 8),
        ] {
            assert!(matches!(refused(o), GenError::Limit(_)));
        }
        assert!(matches!(
            refused(GenOptions::new(1, 4, 2).num_slots(8)),
            GenError::TooFewSlots { .. }
        ));
        assert!(matches!(
            refused(GenOptions::new(1, 4, 2).padding(1.5)),
            GenError::Probability { .. }
        ));
        let huge = CaseLimit {
            bytes: u64::MAX,
            basis: "a test".into(),
        };
        assert!(matches!(
            GenOptions::new(1, 1, 1)
                .num_slots(1 << 32)
                .check(&huge, true),
            Err(GenError::SlotIds { .. })
        ));
    }
}
