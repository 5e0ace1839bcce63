//! Numerics of the simulator.
//!
//! * f32 arithmetic is Rust's IEEE f32 (round to nearest even); `fma` is
//!   `f32::mul_add` (one rounding); `ftz` flushes subnormal inputs and
//!   results to a zero of the same sign, as `.ftz` does on the GPU.
//! * bf16 values are converted with round-to-nearest-even (`half`); bf16
//!   arithmetic computes in f32 and rounds once to bf16 (exact for add, sub,
//!   mul, div and sqrt because f32 has more than 2·8+2 significand bits).
//! * Fast-math ops (`ex2.approx.ftz`, `rsqrt.approx`, `rcp.approx.ftz`, fast
//!   sigmoid) return the *precise* f32 result of their input with subnormal
//!   inputs and results flushed to zero: `exp` is `f32::exp`, `rsqrt` is
//!   `1 / sqrt(x)`, sigmoid is `1 / (1 + exp(-x))`. The GPU's approximations
//!   differ by a few ulp; comparisons against hardware use tolerances.
//! * Float compares are ordered except `ne`, which holds when either side is
//!   NaN (as in Rust).
//! * Float-to-int conversion truncates and saturates (`cvt.rzi`), NaN gives 0;
//!   int-to-float rounds to nearest even (`cvt.rn`).
//! * Integer division by zero gives all ones and remainder by zero the
//!   dividend (PTX leaves both unspecified); shifts by 32 or more give 0 (or
//!   the sign for an arithmetic right shift), as PTX clamps them.
//! * `mma.sync.m16n8k16` bf16: the products are exact in f32; the 16 products
//!   and the accumulator are summed in f64 and rounded once to f32 (a model of
//!   the tensor core's wide internal accumulation).

use half::bf16;
use kda_ir::Scalar;

#[inline]
pub(crate) fn ftz(x: f32) -> f32 {
    if x.is_subnormal() {
        f32::copysign(0.0, x)
    } else {
        x
    }
}

#[inline]
pub(crate) fn bf16_to_f32(bits: u32) -> f32 {
    f32::from_bits((bits & 0xffff) << 16)
}

#[inline]
pub(crate) fn f32_to_bf16(x: f32) -> u32 {
    bf16::from_f32(x).to_bits() as u32
}

/// Words a value of `lanes` elements of `elem` occupies in a register.
/// Elements are packed as in memory (bf16 two to a word, 64-bit values in
/// two words, low first); a bool takes a word per element.
pub(crate) fn words(elem: Scalar, lanes: u8) -> u32 {
    match elem {
        Scalar::Bool => lanes as u32,
        Scalar::BF16 => (lanes as u32).div_ceil(2),
        _ => elem.bytes() * lanes as u32 / 4,
    }
}

/// Read element `e` (its bits, zero-extended) of a value stored at `slot`.
#[inline]
pub(crate) fn get_elem(regs: &[u32], slot: u32, elem: Scalar, e: u32, lane: usize) -> u64 {
    let at = |w: u32| regs[(slot + w) as usize * 32 + lane];
    match elem {
        Scalar::BF16 => {
            let w = at(e / 2);
            (if e.is_multiple_of(2) {
                w & 0xffff
            } else {
                w >> 16
            }) as u64
        }
        Scalar::I64 | Scalar::U64 => at(2 * e) as u64 | (at(2 * e + 1) as u64) << 32,
        _ => at(e) as u64,
    }
}

/// Write element `e` of a value stored at `slot`.
#[inline]
pub(crate) fn set_elem(regs: &mut [u32], slot: u32, elem: Scalar, e: u32, lane: usize, bits: u64) {
    let ix = |w: u32| (slot + w) as usize * 32 + lane;
    match elem {
        Scalar::BF16 => {
            let i = ix(e / 2);
            let b = bits as u32 & 0xffff;
            regs[i] = if e.is_multiple_of(2) {
                (regs[i] & 0xffff_0000) | b
            } else {
                (regs[i] & 0xffff) | b << 16
            };
        }
        Scalar::I64 | Scalar::U64 => {
            regs[ix(2 * e)] = bits as u32;
            regs[ix(2 * e + 1)] = (bits >> 32) as u32;
        }
        _ => regs[ix(e)] = bits as u32,
    }
}

/// The bits of an element of type `ty` holding the integer `v` (or, for floats, its value).
pub(crate) fn const_int(ty: Scalar, v: i64) -> u64 {
    match ty {
        Scalar::Bool => (v != 0) as u64,
        Scalar::I32 | Scalar::U32 => v as u32 as u64,
        Scalar::I64 | Scalar::U64 => v as u64,
        Scalar::F32 => (v as f32).to_bits() as u64,
        Scalar::BF16 => bf16::from_f64(v as f64).to_bits() as u64,
    }
}

/// The bits of an element of type `ty` holding the float `v`.
pub(crate) fn const_float(ty: Scalar, v: f64) -> u64 {
    match ty {
        Scalar::F32 => (v as f32).to_bits() as u64,
        Scalar::BF16 => bf16::from_f64(v).to_bits() as u64,
        _ => const_int(ty, v as i64),
    }
}

/// A scalar as a number, for conversions.
enum Num {
    I(i64),
    U(u64),
    F(f64),
}

fn decode(ty: Scalar, bits: u64) -> Num {
    match ty {
        Scalar::Bool => Num::U(bits & 1),
        Scalar::I32 => Num::I(bits as u32 as i32 as i64),
        Scalar::U32 => Num::U(bits as u32 as u64),
        Scalar::I64 => Num::I(bits as i64),
        Scalar::U64 => Num::U(bits),
        Scalar::F32 => Num::F(f32::from_bits(bits as u32) as f64),
        Scalar::BF16 => Num::F(bf16_to_f32(bits as u32) as f64),
    }
}

/// `cvt` from `from` to `to` of one element's bits.
pub(crate) fn convert(from: Scalar, to: Scalar, bits: u64) -> u64 {
    if from == to {
        return bits;
    }
    // Direct f32 <-> bf16 paths (the common ones) avoid f64 double rounding.
    match (from, to) {
        (Scalar::F32, Scalar::BF16) => return f32_to_bf16(f32::from_bits(bits as u32)) as u64,
        (Scalar::BF16, Scalar::F32) => return bf16_to_f32(bits as u32).to_bits() as u64,
        _ => {}
    }
    let n = decode(from, bits);
    match to {
        Scalar::Bool => match n {
            Num::I(v) => (v != 0) as u64,
            Num::U(v) => (v != 0) as u64,
            Num::F(v) => (v != 0.0) as u64,
        },
        Scalar::I32 => match n {
            Num::I(v) => v as i32 as u32 as u64,
            Num::U(v) => v as u32 as u64,
            Num::F(v) => v as i32 as u32 as u64,
        },
        Scalar::U32 => match n {
            Num::I(v) => v as u32 as u64,
            Num::U(v) => v as u32 as u64,
            Num::F(v) => v as u32 as u64,
        },
        Scalar::I64 => match n {
            Num::I(v) => v as u64,
            Num::U(v) => v,
            Num::F(v) => v as i64 as u64,
        },
        Scalar::U64 => match n {
            Num::I(v) => v as u64,
            Num::U(v) => v,
            Num::F(v) => v as u64,
        },
        Scalar::F32 => match n {
            Num::I(v) => (v as f32).to_bits() as u64,
            Num::U(v) => (v as f32).to_bits() as u64,
            Num::F(v) => (v as f32).to_bits() as u64,
        },
        Scalar::BF16 => match n {
            Num::I(v) => bf16::from_f32(v as f32).to_bits() as u64,
            Num::U(v) => bf16::from_f32(v as f32).to_bits() as u64,
            Num::F(v) => bf16::from_f64(v).to_bits() as u64,
        },
    }
}

/// `mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32` over a whole warp.
///
/// Fragment layout (PTX ISA, "Matrix Fragments for mma.m16n8k16" with
/// `.bf16`), with `g = lane >> 2` (groupID) and `t = lane & 3`
/// (threadID_in_group); each `.b32` register holds two bf16, the lower
/// column / row in the low half:
///
/// * A (16×16, row major), 4 registers: `a0 = A[g][2t..2t+2]`,
///   `a1 = A[g+8][2t..2t+2]`, `a2 = A[g][2t+8..2t+10]`, `a3 = A[g+8][2t+8..2t+10]`;
/// * B (16×8, K×N), 2 registers: `b0 = B[2t..2t+2][g]`, `b1 = B[2t+8..2t+10][g]`;
/// * C, D (16×8 f32), 4 registers: `c0, c1 = C[g][2t], C[g][2t+1]`,
///   `c2, c3 = C[g+8][2t], C[g+8][2t+1]`.
///
/// `a`, `b`, `c` give each lane's registers; the result is each lane's D.
pub(crate) fn mma_m16n8k16(
    a: &[[u32; 4]; 32],
    b: &[[u32; 2]; 32],
    c: &[[f32; 4]; 32],
) -> [[f32; 4]; 32] {
    let mut am = [[0f32; 16]; 16];
    let mut bm = [[0f32; 8]; 16];
    let mut cm = [[0f32; 8]; 16];
    for lane in 0..32 {
        let (g, t) = (lane >> 2, lane & 3);
        for r in 0..4 {
            let row = g + 8 * (r & 1);
            let col = 2 * t + 8 * (r >> 1);
            am[row][col] = bf16_to_f32(a[lane][r]);
            am[row][col + 1] = bf16_to_f32(a[lane][r] >> 16);
        }
        for r in 0..2 {
            let k = 2 * t + 8 * r;
            bm[k][g] = bf16_to_f32(b[lane][r]);
            bm[k + 1][g] = bf16_to_f32(b[lane][r] >> 16);
        }
        for i in 0..4 {
            cm[g + 8 * (i >> 1)][2 * t + (i & 1)] = c[lane][i];
        }
    }
    let mut d = [[0f32; 4]; 32];
    for lane in 0..32 {
        let (g, t) = (lane >> 2, lane & 3);
        for i in 0..4 {
            let (row, col) = (g + 8 * (i >> 1), 2 * t + (i & 1));
            let mut acc = cm[row][col] as f64;
            for k in 0..16 {
                acc += am[row][k] as f64 * bm[k][col] as f64;
            }
            d[lane][i] = acc as f32;
        }
    }
    d
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bf16_round_trip_and_rne() {
        assert_eq!(bf16_to_f32(f32_to_bf16(1.0)), 1.0);
        // 1 + 2^-8 is a tie between 1 and 1 + 2^-7: even is 1.
        assert_eq!(bf16_to_f32(f32_to_bf16(1.0 + 1.0 / 256.0)), 1.0);
        // 1 + 3·2^-8 ties to 1 + 2^-6 (even).
        assert_eq!(
            bf16_to_f32(f32_to_bf16(1.0 + 3.0 / 256.0)),
            1.0 + 1.0 / 64.0
        );
    }

    #[test]
    fn conversions() {
        assert_eq!(
            convert(Scalar::F32, Scalar::I32, (-2.7f32).to_bits() as u64) as u32 as i32,
            -2
        );
        assert_eq!(
            convert(Scalar::F32, Scalar::I32, f32::NAN.to_bits() as u64),
            0
        );
        assert_eq!(
            convert(Scalar::I32, Scalar::I64, (-5i32) as u32 as u64) as i64,
            -5
        );
        assert_eq!(convert(Scalar::U32, Scalar::I64, 0xffff_ffff), 0xffff_ffff);
        assert_eq!(
            f32::from_bits(convert(Scalar::U32, Scalar::F32, 3) as u32),
            3.0
        );
        assert_eq!(ftz(f32::from_bits(1)), 0.0);
        assert!(ftz(-f32::from_bits(1)).is_sign_negative());
    }
}
