//! Seeded generator of realistic GDN decode launches.
//!
//! Magnitudes follow the Qwen3-Next / fla layers the kernel serves:
//! unit-scale activations, depthwise conv weights at their kaiming bound
//! (fan-in 4: ±0.5), `A = exp(a_log) ∈ [1, 16]`, state ~ N(0, 0.1), norm
//! weights around 1. Everything stored as bf16 is drawn and then rounded
//! (RNE), so the stored values are what the reference reads. The slot table
//! (padding requests, write holes, `accepted`) is drawn by KdaSplit's own
//! [`kda_host::slot_table`].

use kda_host::{ConvLayout, Draw, HostTensor, SlotOptions, sentinel_output, slot_table, to_f32};

use crate::args::GdnArgs;
use crate::config::GdnConfig;

/// How `dt_bias` is drawn (the decay is `exp(-exp(a_log) · softplus(a + dt_bias))`
/// with `a ~ N(0, 1)`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum DtBias {
    /// N(-3, 1): decays spread over (0, 1], median ≈ 0.83, about 20 % below
    /// 0.5, about 1 % below e^-6, so a wrong decay is visible in every test.
    #[default]
    Spread,
    /// The inverse-softplus init of fla / Mamba (`dt` log-uniform in
    /// [1e-3, 1e-1]): realistic, decays mostly near 1 (median ≈ 0.96).
    Init,
}

/// What to generate besides the config's shapes. Build with
/// [`GenOptions::new`] and the setters.
#[derive(Clone, Debug, PartialEq)]
pub struct GenOptions {
    /// Requests B.
    pub requests: usize,
    pub seed: u64,
    /// Cache slots S of `state` and `conv_state`; at least `1 + B*T` (slot 0
    /// is the null block). Default `B*T + 3`, leaving slots nobody references.
    pub num_slots: Option<usize>,
    pub dt_bias: DtBias,
    /// Probability that a request is padding (read slot 0 or -1).
    pub padding: f64,
    /// Probability that an eligible write slot of an active T > 1 request is
    /// a hole (0 or -1): neither the conv column 0 nor the read column.
    pub holes: f64,
    /// Store `conv_weight`, `conv_bias` and `norm_weight` as F32 (values stay
    /// bf16-exact).
    pub weights_f32: bool,
    pub conv_layout: ConvLayout,
    /// Conv columns beyond the ones the launch uses (never touched).
    pub conv_extra: usize,
    /// `slots` columns beyond T for T > 1 (never read; filled with -1).
    pub slot_extra: usize,
    /// RMSNorm epsilon (Qwen3-Next: 1e-6).
    pub eps: f32,
}

impl GenOptions {
    pub fn new(requests: usize) -> Self {
        Self {
            requests,
            seed: 0,
            num_slots: None,
            dt_bias: DtBias::Spread,
            padding: 0.25,
            holes: 0.25,
            weights_f32: false,
            conv_layout: ConvLayout::Ds,
            conv_extra: 0,
            slot_extra: 0,
            eps: 1e-6,
        }
    }

    pub fn seed(mut self, seed: u64) -> Self {
        self.seed = seed;
        self
    }

    pub fn num_slots(mut self, num_slots: usize) -> Self {
        self.num_slots = Some(num_slots);
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

    pub fn eps(mut self, eps: f32) -> Self {
        self.eps = eps;
        self
    }

    /// The slot count the generator uses for `tokens` tokens per request.
    pub fn resolved_num_slots(&self, tokens: u32) -> usize {
        self.num_slots
            .unwrap_or(self.requests * tokens as usize + 3)
    }
}

/// Generates one valid launch for `config`. Panics if `num_slots < 1 + B*T`
/// or a probability is outside [0, 1].
pub fn generate(config: &GdnConfig, options: &GenOptions) -> GdnArgs {
    let o = options;
    let (hv, dv, t) = (config.hv(), config.dv(), config.tokens as usize);
    let (b, conv_dim, value_dim) = (o.requests, config.conv_dim(), config.value_dim());
    let (rows, slots) = (b * t, o.resolved_num_slots(config.tokens));
    let mut g = Draw::new(o.seed);
    let weight = |t: HostTensor| if o.weights_f32 { to_f32(&t) } else { t };

    let x = g.bf16(vec![rows, conv_dim], |g| g.normal(0.0, 1.0));
    let conv_weight = weight(g.bf16(vec![conv_dim, 4], |g| g.uniform(-0.5, 0.5)));
    let conv_bias = config
        .has_bias
        .then(|| weight(g.bf16(vec![conv_dim], |g| g.uniform(-0.5, 0.5))));
    let conv_state = g.conv_state(
        slots,
        conv_dim,
        config.conv_width() + o.conv_extra,
        o.conv_layout,
    );
    let a = g.bf16(vec![rows, hv], |g| g.normal(0.0, 1.0));
    let beta = g.bf16(vec![rows, hv], |g| g.normal(0.0, 1.0));
    let a_log = g.f32(vec![hv], |g| g.uniform(1.0, 16.0).ln());
    let dt_bias = g.f32(vec![hv], |g| draw_dt_bias(g, o.dt_bias));
    let (slots_tensor, accepted) = slot_table(
        &mut g.0,
        &SlotOptions {
            requests: b,
            tokens: config.tokens,
            num_slots: slots,
            padding: o.padding,
            holes: o.holes,
            slot_extra: o.slot_extra,
        },
    );
    let state = g.f32(vec![slots, hv, dv, config.dk()], |g| g.normal(0.0, 0.1));
    let output = sentinel_output(rows, value_dim);
    let z = g.bf16(vec![rows, value_dim], |g| g.normal(0.0, 1.0));
    let norm_weight = weight(g.bf16(vec![dv], |g| g.uniform(0.5, 1.5)));

    GdnArgs {
        x,
        conv_weight,
        conv_bias,
        conv_state,
        a,
        beta,
        a_log,
        dt_bias,
        slots: slots_tensor,
        state,
        output,
        z,
        norm_weight,
        scale: (config.dk() as f32).powf(-0.5),
        eps: o.eps,
        accepted,
    }
}

/// One `dt_bias` value drawn per `kind`.
fn draw_dt_bias(g: &mut Draw, kind: DtBias) -> f64 {
    match kind {
        DtBias::Spread => g.normal(-3.0, 1.0),
        DtBias::Init => g.dt_bias_init(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::reference::{resolve, softplus};
    use crate::validate::validate;
    use kda_host::{OUTPUT_SENTINEL, Request};

    #[test]
    fn same_seed_same_launch_and_every_variant_validates() {
        for tokens in [1, 2, 4] {
            for layout in [ConvLayout::Ds, ConvLayout::Sd] {
                let c = GdnConfig::new(1, 2, tokens, tokens != 2).unwrap();
                let o = GenOptions::new(3)
                    .seed(11)
                    .conv_layout(layout)
                    .conv_extra(1)
                    .slot_extra(2)
                    .weights_f32(true)
                    .dt_bias(DtBias::Init);
                let a = generate(&c, &o);
                assert_eq!(a, generate(&c, &o));
                assert_eq!(validate(&c, &a), vec![]);
                assert_eq!(a.conv_weight.dtype(), kda_host::DType::F32);
            }
        }
        let c = GdnConfig::new(1, 1, 1, false).unwrap();
        assert_ne!(
            generate(&c, &GenOptions::new(2)),
            generate(&c, &GenOptions::new(2).seed(1))
        );
    }

    #[test]
    fn padding_holes_and_accepted_are_drawn() {
        let c = GdnConfig::new(1, 1, 4, false).unwrap();
        let a = generate(&c, &GenOptions::new(32).padding(0.3).holes(0.5).seed(3));
        let plans: Vec<Request> = (0..32).map(|b| resolve(&c, &a, b)).collect();
        let padding = plans.iter().filter(|p| **p == Request::Padding).count();
        assert!((3..20).contains(&padding), "{padding}");
        let holes: usize = plans
            .iter()
            .map(|p| match p {
                Request::Active { writes, .. } => writes.iter().filter(|w| w.is_none()).count(),
                Request::Padding => 0,
            })
            .sum();
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

    /// Decays as `generate` draws them: `A = exp(a_log) ∈ [1, 16]`,
    /// `a ~ N(0, 1)`, `dt_bias` per [`DtBias`].
    fn decay_quantiles(kind: DtBias) -> impl Fn(f64) -> f64 {
        let mut g = Draw::new(7);
        let mut decays: Vec<f64> = (0..4096)
            .map(|_| {
                let a_log = g.uniform(1.0, 16.0).ln();
                let a = g.normal(0.0, 1.0);
                let dt_bias = draw_dt_bias(&mut g, kind);
                (-f64::exp(a_log) * softplus(a + dt_bias)).exp()
            })
            .collect();
        decays.sort_by(f64::total_cmp);
        move |p: f64| decays[((p * decays.len() as f64) as usize).min(decays.len() - 1)]
    }

    #[test]
    fn default_decays_spread_over_the_unit_interval() {
        let q = decay_quantiles(DtBias::Spread);
        assert!(q(0.05) < 0.2 && q(0.2) < 0.6, "{} {}", q(0.05), q(0.2));
        assert!((0.7..0.95).contains(&q(0.5)), "{}", q(0.5));
        assert!(q(1.0) < 1.0);
        let q = decay_quantiles(DtBias::Init);
        assert!(q(0.5) > 0.93, "{}", q(0.5));
        // And `generate` uses the option.
        let c = GdnConfig::new(1, 1, 1, false).unwrap();
        let spread = generate(&c, &GenOptions::new(1).seed(2)).dt_bias.get(&[0]);
        let init = generate(&c, &GenOptions::new(1).seed(2).dt_bias(DtBias::Init));
        assert!((-6.95..-2.25).contains(&init.dt_bias.get(&[0])));
        assert_ne!(spread, init.dt_bias.get(&[0]));
    }
}
