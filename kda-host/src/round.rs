//! Correctly rounded narrowing to bf16.
//!
//! `half::bf16::from_f64` drops the low 32 bits of the f64 mantissa before
//! rounding, so a value just above a bf16 midpoint (sticky bits only in the
//! dropped part) rounds the wrong way, and going through f32 first rounds twice.
//! The reference needs the exact RNE of its f64 results (spec §5), so it rounds
//! here instead.

use half::bf16;

/// Round-to-nearest-even of `x` to bfloat16 (subnormals and overflow included).
///
/// ```
/// use kda_host::bf16_rne;
///
/// // 1 + 2^-8 ties between 1 and 1 + 2^-7 (to even: 1); a sticky bit far
/// // below f32 precision breaks the tie upwards.
/// let tie = 1.0 + 2f64.powi(-8);
/// assert_eq!(bf16_rne(tie).to_f64(), 1.0);
/// assert_eq!(bf16_rne(tie + 2f64.powi(-40)).to_f64(), 1.0 + 2f64.powi(-7));
/// ```
pub fn bf16_rne(x: f64) -> bf16 {
    if !x.is_finite() || x == 0.0 {
        return bf16::from_f64(x);
    }
    // bf16 keeps 8 significant bits and f32's exponent range: the quantum at
    // binade e is 2^(e-7), and bf16 subnormals share the quantum of the lowest
    // binade, 2^-133. Scaling by powers of two is exact, so one f64 rounding to
    // an integer is the whole RNE.
    let exponent = ((x.to_bits() >> 52) & 0x7ff) as i32 - 1023;
    let quantum = 2f64.powi(exponent.max(-126) - 7);
    let rounded = (x / quantum).round_ties_even() * quantum;
    // `rounded` is a bf16 value (or 2^128, which converts to infinity), so this
    // conversion is exact.
    bf16::from_f64(rounded)
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{Rng, SeedableRng};
    use rand_chacha::ChaCha8Rng;

    #[test]
    fn matches_half_on_f32_inputs() {
        // half's f32 -> bf16 conversion sees every bit, so it is a correct RNE.
        let mut rng = ChaCha8Rng::seed_from_u64(1);
        for _ in 0..100_000 {
            let bits: u32 = rng.random();
            let x = f32::from_bits(bits);
            if x.is_nan() {
                continue;
            }
            assert_eq!(
                bf16_rne(f64::from(x)).to_bits(),
                bf16::from_f32(x).to_bits(),
                "{x:e}"
            );
        }
    }

    #[test]
    fn sticky_bits_below_f32_precision_count() {
        // 1 + 2^-8 is a tie between 1 and 1 + 2^-7; even -> 1. Adding 2^-40
        // (invisible to half's truncated path) breaks the tie upwards.
        let tie = 1.0 + 2f64.powi(-8);
        assert_eq!(bf16_rne(tie), bf16::from_f64(1.0));
        assert_eq!(bf16_rne(tie + 2f64.powi(-40)).to_f64(), 1.0 + 2f64.powi(-7));
        assert_eq!(
            bf16_rne(-(tie + 2f64.powi(-40))).to_f64(),
            -(1.0 + 2f64.powi(-7))
        );
    }

    #[test]
    fn edges() {
        assert_eq!(bf16_rne(1e300), bf16::INFINITY);
        assert_eq!(bf16_rne(-768.0).to_f64(), -768.0);
        // Smallest bf16 subnormal is 2^-133; half of it ties to zero.
        assert_eq!(bf16_rne(2f64.powi(-133)).to_f64(), 2f64.powi(-133));
        assert_eq!(bf16_rne(2f64.powi(-134)).to_f64(), 0.0);
        assert_eq!(bf16_rne(1.5 * 2f64.powi(-134)).to_f64(), 2f64.powi(-133));
    }
}
