//! Seeded generators every kernel's case generator is built from: one
//! ChaCha8 stream of draws ([`Draw`]), bf16 values rounded as the kernels
//! store them, conv states in both vLLM layouts, sentinel-filled outputs and
//! slot tables with KdaSplit's cache semantics (spec §2).

use half::bf16;
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use rand_distr::{Distribution, Normal};

use crate::round::bf16_rne;
use crate::tensor::HostTensor;

/// Sentinel pre-filled into `output`: every element must be overwritten, and no
/// real output reaches it (|y| <= sqrt(128) · max |norm_weight| < 768).
pub const OUTPUT_SENTINEL: f32 = -768.0;

/// vLLM's padding slot id; slot 0 (the null block) is padding too.
pub const PAD_SLOT: i32 = -1;

/// Memory layout behind a `[slot, channels, width]` conv-state view.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ConvLayout {
    /// vLLM's DS `(blocks, dim, state_len)`: taps contiguous (the seed's layout).
    #[default]
    Ds,
    /// vLLM's SD `(blocks, state_len, dim)`: channels contiguous.
    Sd,
}

/// A bf16-exact tensor stored as F32 (for the "weights as f32" options).
pub fn to_f32(t: &HostTensor) -> HostTensor {
    let values = t.values().iter().map(|&v| v as f32).collect::<Vec<_>>();
    HostTensor::new(values, t.shape().to_vec()).expect("same shape")
}

/// A row-major bf16 `[rows, cols]` output pre-filled with [`OUTPUT_SENTINEL`].
pub fn sentinel_output(rows: usize, cols: usize) -> HostTensor {
    HostTensor::new(
        vec![bf16::from_f32(OUTPUT_SENTINEL); rows * cols],
        vec![rows, cols],
    )
    .expect("output length")
}

/// The seeded draws every kernel's generator is built from (KdaSplit, GDN,
/// Mamba-2): one ChaCha8 stream, consumed in call order.
pub struct Draw(
    /// The stream; shared with [`slot_table`].
    pub ChaCha8Rng,
);

impl Draw {
    /// The stream of `seed`.
    pub fn new(seed: u64) -> Self {
        Self(ChaCha8Rng::seed_from_u64(seed))
    }

    /// N(mean, std).
    pub fn normal(&mut self, mean: f64, std: f64) -> f64 {
        Normal::new(mean, std)
            .expect("finite std")
            .sample(&mut self.0)
    }

    /// U[low, high).
    pub fn uniform(&mut self, low: f64, high: f64) -> f64 {
        self.0.random_range(low..high)
    }

    /// A row-major bf16 tensor of `draw`s, each rounded to nearest even.
    pub fn bf16(
        &mut self,
        shape: Vec<usize>,
        mut draw: impl FnMut(&mut Self) -> f64,
    ) -> HostTensor {
        let n = shape.iter().product();
        let values: Vec<bf16> = (0..n).map(|_| bf16_rne(draw(self))).collect();
        HostTensor::new(values, shape).expect("generated length")
    }

    /// A row-major f32 tensor of `draw`s.
    pub fn f32(&mut self, shape: Vec<usize>, mut draw: impl FnMut(&mut Self) -> f64) -> HostTensor {
        let n = shape.iter().product();
        let values: Vec<f32> = (0..n).map(|_| draw(self) as f32).collect();
        HostTensor::new(values, shape).expect("generated length")
    }

    /// The inverse softplus of `dt` log-uniform in [1e-3, 1e-1] (fla's and
    /// Mamba's `dt_bias` init).
    pub fn dt_bias_init(&mut self) -> f64 {
        let dt = self.uniform(1e-3f64.ln(), 1e-1f64.ln()).exp().max(1e-4);
        dt + (-(-dt).exp_m1()).ln()
    }

    /// A `[slots, channels, width]` bf16 conv state ~ N(0, 1) in `layout`.
    pub fn conv_state(
        &mut self,
        slots: usize,
        channels: usize,
        width: usize,
        layout: ConvLayout,
    ) -> HostTensor {
        let values: Vec<bf16> = (0..slots * channels * width)
            .map(|_| bf16_rne(self.normal(0.0, 1.0)))
            .collect();
        let shape = vec![slots, channels, width];
        match layout {
            ConvLayout::Ds => HostTensor::new(values, shape),
            ConvLayout::Sd => {
                let strides = vec![width * channels, 1, channels];
                HostTensor::strided(values, shape, strides)
            }
        }
        .expect("conv storage matches its view")
    }
}

/// How [`slot_table`] draws a slot table.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SlotOptions {
    /// Requests B.
    pub requests: usize,
    /// Tokens per request T.
    pub tokens: u32,
    /// Slots S of the cache tensors; at least `1 + B*T`.
    pub num_slots: usize,
    /// Probability that a request is padding (read slot 0 or -1).
    pub padding: f64,
    /// Probability that an eligible write slot of an active T > 1 request is
    /// a hole (0 or -1). Eligible: neither the conv column 0 nor the read column.
    pub holes: f64,
    /// `slots` columns beyond T for T > 1 (never read; filled with -1).
    pub slot_extra: usize,
}

/// `slots` (I32 `[B]` for T = 1, `[B, T + slot_extra]` for T > 1) and
/// `accepted` (I32 `[B]`, T > 1 only) with the cache semantics of spec §2.
/// Every request draws T distinct fresh slots from `1..num_slots` (vLLM gives
/// each speculative token its own block); padding requests keep some of
/// theirs, so a wrongly taken padding branch writes a visible slot. Panics if
/// `num_slots <= B*T` or a probability is outside [0, 1].
pub fn slot_table(rng: &mut ChaCha8Rng, o: &SlotOptions) -> (HostTensor, Option<HostTensor>) {
    let (b, t) = (o.requests, o.tokens as usize);
    assert!(
        o.num_slots > b * t,
        "num_slots = {} leaves no room for {b} requests of {t} distinct slots plus the null slot",
        o.num_slots
    );
    let pad = |rng: &mut ChaCha8Rng| if rng.random_bool(0.5) { 0 } else { PAD_SLOT };
    let mut pool: Vec<i32> = (1..o.num_slots as i32).collect();
    pool.shuffle(rng);
    let mut fresh = pool.into_iter();
    let columns = if t == 1 { 1 } else { t + o.slot_extra };
    let mut table = vec![PAD_SLOT; b * columns];
    let mut accepted = Vec::with_capacity(b);
    for request in 0..b {
        let a = if t == 1 { 1 } else { rng.random_range(1..=t) };
        accepted.push(a as i32);
        let padding = rng.random_bool(o.padding);
        let row = &mut table[request * columns..];
        for (column, entry) in row[..t].iter_mut().enumerate() {
            let slot = fresh.next().expect("num_slots checked");
            let read = column == a - 1;
            let unused = if padding {
                read || rng.random_bool(0.5)
            } else {
                !read && column != 0 && rng.random_bool(o.holes)
            };
            *entry = if unused { pad(rng) } else { slot };
        }
    }
    let slots = if t == 1 {
        HostTensor::new(table, vec![b])
    } else {
        HostTensor::new(table, vec![b, columns])
    }
    .expect("slot table length");
    let accepted = (t > 1).then(|| HostTensor::new(accepted, vec![b]).expect("accepted length"));
    (slots, accepted)
}

/// Bytes one case may take (the sum of its tensors' bytes, as in its file)
/// where the physical memory cannot be read: the tools hold a case about
/// [`CASE_COPIES`] times over at their peak.
pub const FALLBACK_CASE_LIMIT: u64 = 2 << 30;

/// How many times over the tools hold a case at their peak: the arguments,
/// the expected results (a second state), the serialised bytes or the
/// device's copy, and the results read back.
pub const CASE_COPIES: u64 = 4;

/// The largest case (tensor bytes) a tool generates or reads here: half the
/// physical memory (`MemTotal` of `/proc/meminfo`) shared by the
/// [`CASE_COPIES`] copies, else [`FALLBACK_CASE_LIMIT`]. Checked before
/// anything is allocated, so an impossible request fails at once with a
/// message instead of aborting in the allocator or swapping for minutes.
pub fn case_limit() -> CaseLimit {
    let total = std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|text| mem_total(&text));
    match total {
        Some(bytes) => CaseLimit {
            bytes: bytes / 2 / CASE_COPIES,
            basis: format!(
                "1/{} of the {} of physical memory",
                2 * CASE_COPIES,
                human_bytes(bytes)
            ),
        },
        None => CaseLimit {
            bytes: FALLBACK_CASE_LIMIT,
            basis: "the fixed ceiling (physical memory unknown)".into(),
        },
    }
}

/// `MemTotal` of a `/proc/meminfo` text, in bytes.
fn mem_total(meminfo: &str) -> Option<u64> {
    let line = meminfo.lines().find(|l| l.starts_with("MemTotal:"))?;
    let mut words = line.split_whitespace().skip(1);
    let kib: u64 = words.next()?.parse().ok()?;
    match words.next() {
        Some("kB") | None => kib.checked_mul(1024),
        Some(_) => None,
    }
}

/// `1.5 GiB`, `12 KiB`, `7 B`.
pub fn human_bytes(bytes: u64) -> String {
    const UNITS: [&str; 6] = ["B", "KiB", "MiB", "GiB", "TiB", "PiB"];
    let mut value = bytes as f64;
    let mut unit = 0;
    while value >= 1024.0 && unit + 1 < UNITS.len() {
        value /= 1024.0;
        unit += 1;
    }
    if unit == 0 {
        format!("{bytes} B")
    } else {
        format!("{value:.1} {}", UNITS[unit])
    }
}

/// The most bytes of tensors one case may hold, and where that comes from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CaseLimit {
    /// The limit in bytes.
    pub bytes: u64,
    /// How it was derived, for messages.
    pub basis: String,
}

impl CaseLimit {
    /// `Ok` if `bytes` of `what` fit under the limit.
    pub fn check(&self, what: &str, bytes: u64) -> Result<(), LimitError> {
        if bytes <= self.bytes {
            return Ok(());
        }
        Err(LimitError::TooLarge {
            what: what.into(),
            bytes,
            limit: self.bytes,
            basis: self.basis.clone(),
        })
    }
}

/// Why a case is refused before anything is allocated.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum LimitError {
    /// A size does not even fit in 64 bits.
    #[error("{what}: the sizes overflow 64-bit arithmetic")]
    Overflow {
        /// The tensor or count that overflowed.
        what: String,
    },
    /// The case would hold more bytes than the limit.
    #[error(
        "{what} would take {} ({bytes} bytes); the limit is {} ({basis})",
        human_bytes(*bytes),
        human_bytes(*limit)
    )]
    TooLarge {
        /// What was measured (the case, the file).
        what: String,
        /// Its bytes.
        bytes: u64,
        /// The limit's bytes.
        limit: u64,
        /// How the limit was derived.
        basis: String,
    },
}

/// The bytes of a set of tensors, added up with checked arithmetic, so that
/// a generator can refuse a shape before allocating it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TensorBytes {
    bytes: u64,
}

impl TensorBytes {
    /// Adds a tensor of `shape` with `element_bytes` per element.
    pub fn add(
        &mut self,
        what: &str,
        shape: &[usize],
        element_bytes: usize,
    ) -> Result<(), LimitError> {
        let overflow = || LimitError::Overflow { what: what.into() };
        let bytes = shape
            .iter()
            .try_fold(element_bytes as u64, |n, &d| n.checked_mul(d as u64))
            .ok_or_else(overflow)?;
        self.bytes = self.bytes.checked_add(bytes).ok_or_else(overflow)?;
        Ok(())
    }

    /// The bytes so far.
    pub fn bytes(&self) -> u64 {
        self.bytes
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::reference::{Request, resolve_slots};
    use crate::validate::check_slot_table;

    #[test]
    fn slot_tables_are_seeded_and_valid() {
        for tokens in [1, 4] {
            let o = SlotOptions {
                requests: 16,
                tokens,
                num_slots: 16 * tokens as usize + 1,
                padding: 0.3,
                holes: 0.5,
                slot_extra: 1,
            };
            let draw = |seed| slot_table(&mut Draw::new(seed).0, &o);
            assert_eq!(draw(3), draw(3));
            assert_ne!(draw(3), draw(4));
            let (slots, accepted) = draw(3);
            assert_eq!(accepted.is_some(), tokens > 1);
            let errors =
                check_slot_table(tokens, &slots, accepted.as_ref(), o.num_slots, o.num_slots);
            assert_eq!(errors, vec![]);
            let padding = (0..o.requests)
                .filter(|&b| {
                    resolve_slots(tokens, &slots, accepted.as_ref(), b) == Request::Padding
                })
                .count();
            assert!((1..o.requests).contains(&padding), "{padding}");
        }
    }

    #[test]
    fn sd_conv_states_view_channels_contiguously() {
        let ds = Draw::new(1).conv_state(2, 5, 3, ConvLayout::Ds);
        let sd = Draw::new(1).conv_state(2, 5, 3, ConvLayout::Sd);
        assert_eq!(ds.strides(), [15, 3, 1]);
        assert_eq!(sd.strides(), [15, 1, 5]);
        assert!(sd.is_non_overlapping());
        assert_eq!(
            sentinel_output(2, 3).values(),
            vec![f64::from(OUTPUT_SENTINEL); 6]
        );
    }

    #[test]
    fn footprints_are_checked_and_limits_named() {
        let mut f = TensorBytes::default();
        f.add("x", &[2, 3], 4).unwrap();
        f.add("scalar", &[], 4).unwrap();
        assert_eq!(f.bytes(), 28);
        assert!(matches!(
            f.add("huge", &[usize::MAX, 2], 1),
            Err(LimitError::Overflow { .. })
        ));
        assert!(matches!(
            TensorBytes::default().add("huge", &[1 << 40, 1 << 30], 4),
            Err(LimitError::Overflow { .. })
        ));
        let limit = CaseLimit {
            bytes: 1 << 20,
            basis: "a test".into(),
        };
        assert_eq!(limit.check("the case", 1 << 20), Ok(()));
        let e = limit.check("the case", 3 << 29).unwrap_err();
        assert_eq!(
            e.to_string(),
            "the case would take 1.5 GiB (1610612736 bytes); the limit is 1.0 MiB (a test)"
        );
    }

    #[test]
    fn the_limit_comes_from_mem_total() {
        assert_eq!(
            mem_total("MemFree: 1 kB\nMemTotal:       16384 kB\n"),
            Some(16 << 20)
        );
        assert_eq!(mem_total("MemFree: 1 kB\n"), None);
        let limit = case_limit();
        assert!(limit.bytes > 0, "{limit:?}");
    }
}
