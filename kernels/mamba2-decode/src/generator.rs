//! Seeded generator of realistic Mamba-2 decode launches.
//!
//! Magnitudes follow the Mamba-2 layer the kernel serves: unit-scale
//! activations, depthwise conv weights and bias at their kaiming bound
//! (fan-in 4: ±0.5), `A = -U[1, 16]` (Mamba-2's `A_init_range`), `D` around
//! 1, state ~ N(0, 0.1). Everything stored as bf16 is drawn and then rounded
//! (RNE), so the stored values are what the reference reads. Slots come from
//! KdaSplit's [`kda_host::slot_table`] with one token per request.

use kda_host::{ConvLayout, Draw, HostTensor, SlotOptions, sentinel_output, slot_table, to_f32};

use crate::args::Mamba2Args;
use crate::config::Mamba2Config;

/// How `dt_bias` is drawn (`dA = exp(softplus(dt + dt_bias) · A)` with
/// `dt ~ N(0, 1)`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum DtBias {
    /// N(-3, 1): `dA` spread over (0, 1], median ≈ 0.83, about 20 % below
    /// 0.5, so a wrong decay is visible in every test.
    #[default]
    Spread,
    /// Mamba-2's init, the inverse softplus of `dt` log-uniform in
    /// [1e-3, 1e-1]: realistic, `dA` mostly near 1 (median ≈ 0.96).
    Init,
}

/// What to generate besides the config's shapes. Build with
/// [`GenOptions::new`] and the setters.
#[derive(Clone, Debug, PartialEq)]
pub struct GenOptions {
    /// Requests B.
    pub requests: usize,
    pub seed: u64,
    /// Cache slots S of `state` and `conv_state`; at least `1 + B` (slot 0 is
    /// the null block). Default `B + 3`, leaving slots nobody references.
    pub num_slots: Option<usize>,
    pub dt_bias: DtBias,
    /// Probability that a request is padding (slot 0 or -1).
    pub padding: f64,
    /// Store `conv_weight` and `conv_bias` as F32 (values stay bf16-exact).
    pub weights_f32: bool,
    pub conv_layout: ConvLayout,
    /// Conv columns beyond the three the launch uses (never touched).
    pub conv_extra: usize,
}

impl GenOptions {
    pub fn new(requests: usize) -> Self {
        Self {
            requests,
            seed: 0,
            num_slots: None,
            dt_bias: DtBias::Spread,
            padding: 0.25,
            weights_f32: false,
            conv_layout: ConvLayout::Ds,
            conv_extra: 0,
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

    /// The slot count the generator uses.
    pub fn resolved_num_slots(&self) -> usize {
        self.num_slots.unwrap_or(self.requests + 3)
    }
}

/// Generates one valid launch for `config`. Panics if `num_slots < 1 + B` or
/// `padding` is outside [0, 1].
pub fn generate(config: &Mamba2Config, options: &GenOptions) -> Mamba2Args {
    let o = options;
    let (h, b, slots) = (config.h(), o.requests, o.resolved_num_slots());
    let (conv_dim, d_inner) = (config.conv_dim(), config.d_inner());
    let mut g = Draw::new(o.seed);
    let weight = |t: HostTensor| if o.weights_f32 { to_f32(&t) } else { t };

    let xbc = g.bf16(vec![b, conv_dim], |g| g.normal(0.0, 1.0));
    let conv_weight = weight(g.bf16(vec![conv_dim, 4], |g| g.uniform(-0.5, 0.5)));
    let conv_bias = config
        .has_conv_bias
        .then(|| weight(g.bf16(vec![conv_dim], |g| g.uniform(-0.5, 0.5))));
    let conv_state = g.conv_state(slots, conv_dim, 3 + o.conv_extra, o.conv_layout);
    let dt = g.bf16(vec![b, h], |g| g.normal(0.0, 1.0));
    let dt_bias = g.f32(vec![h], |g| draw_dt_bias(g, o.dt_bias));
    let a = g.f32(vec![h], |g| -g.uniform(1.0, 16.0));
    let d = config
        .has_d
        .then(|| g.f32(vec![h], |g| g.uniform(0.5, 1.5)));
    let z = config
        .has_z
        .then(|| g.bf16(vec![b, d_inner], |g| g.normal(0.0, 1.0)));
    let (slots_tensor, _) = slot_table(
        &mut g.0,
        &SlotOptions {
            requests: b,
            tokens: 1,
            num_slots: slots,
            padding: o.padding,
            holes: 0.0,
            slot_extra: 0,
        },
    );
    let state = g.f32(vec![slots, h, config.p(), config.n()], |g| {
        g.normal(0.0, 0.1)
    });
    let output = sentinel_output(b, d_inner);

    Mamba2Args {
        xbc,
        conv_weight,
        conv_bias,
        conv_state,
        dt,
        dt_bias,
        a,
        d,
        z,
        slots: slots_tensor,
        state,
        output,
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
    use kda_host::OUTPUT_SENTINEL;

    #[test]
    fn same_seed_same_launch_and_every_variant_validates() {
        for (has_z, has_d, has_conv_bias) in [(true, true, true), (false, false, false)] {
            for layout in [ConvLayout::Ds, ConvLayout::Sd] {
                let c = Mamba2Config {
                    heads: 2,
                    n_groups: 2,
                    has_z,
                    has_d,
                    has_conv_bias,
                    ..Mamba2Config::default()
                }
                .validated()
                .unwrap();
                let o = GenOptions::new(3)
                    .seed(11)
                    .conv_layout(layout)
                    .conv_extra(1)
                    .weights_f32(true)
                    .dt_bias(DtBias::Init);
                let a = generate(&c, &o);
                assert_eq!(a, generate(&c, &o));
                assert_eq!(validate(&c, &a), vec![]);
                assert_eq!((a.z.is_some(), a.d.is_some()), (has_z, has_d));
            }
        }
        let c = Mamba2Config::new(1, 1).unwrap();
        assert_ne!(
            generate(&c, &GenOptions::new(2)),
            generate(&c, &GenOptions::new(2).seed(1))
        );
    }

    #[test]
    fn padding_is_drawn_and_output_prefilled() {
        let c = Mamba2Config::new(1, 1).unwrap();
        let a = generate(&c, &GenOptions::new(64).padding(0.3).seed(3));
        let padding = (0..64).filter(|&b| resolve(&a, b).is_none()).count();
        assert!((5..40).contains(&padding), "{padding}");
        assert!(
            a.output
                .values()
                .iter()
                .all(|&v| v == f64::from(OUTPUT_SENTINEL))
        );
    }

    /// Decays as `generate` draws them: `A = -U[1, 16]`, `dt ~ N(0, 1)`,
    /// `dt_bias` per [`DtBias`].
    fn decay_quantiles(kind: DtBias) -> impl Fn(f64) -> f64 {
        let mut g = Draw::new(7);
        let mut decays: Vec<f64> = (0..4096)
            .map(|_| {
                let a = -g.uniform(1.0, 16.0);
                let dt = g.normal(0.0, 1.0);
                let dt_bias = draw_dt_bias(&mut g, kind);
                (softplus(dt + dt_bias) * a).exp()
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
        let c = Mamba2Config::new(1, 1).unwrap();
        let spread = generate(&c, &GenOptions::new(1).seed(2)).dt_bias.get(&[0]);
        let init = generate(&c, &GenOptions::new(1).seed(2).dt_bias(DtBias::Init));
        assert!((-6.95..-2.25).contains(&init.dt_bias.get(&[0])));
        assert_ne!(spread, init.dt_bias.get(&[0]));
    }
}
