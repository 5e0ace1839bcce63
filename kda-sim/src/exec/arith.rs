//! Register computations: constants, specials, kernel parameters,
//! arithmetic (`f32` / `bf16` / integer, `fma`), comparisons, selects,
//! conversions, packing and extraction. They run over all 32 lanes (an
//! inactive lane's result is never read) and cannot fail.

use kda_ir::{BinOp, CmpOp, Scalar, Special, UnOp};

use super::{Cluster, Warp, f, lanes, out};
use crate::decode::{Ins, Num};
use crate::numeric::{bf16_to_f32, convert, f32_to_bf16, ftz, get_elem, set_elem};

/// Run one op of the family.
#[inline(always)]
pub(super) fn exec(ins: &Ins, w: &mut Warp, cx: &Cluster<'_>) {
    let regs = &mut w.regs;
    match ins {
        Ins::Const { d, words } => {
            for (i, &v) in words.iter().enumerate() {
                out(regs, d + i as u32).fill(v);
            }
        }
        &Ins::Special { d, s } => {
            let o = out(regs, d);
            let block = cx.ctas[w.rank as usize].block;
            for (l, x) in o.iter_mut().enumerate() {
                *x = match s {
                    Special::ThreadIdx => w.warp * 32 + l as u32,
                    Special::LaneId => l as u32,
                    Special::BlockIdx(i) => block[i.min(2) as usize],
                    Special::GridDim(i) => cx.grid[i.min(2) as usize],
                    Special::ClusterRank => w.rank,
                };
            }
        }
        &Ins::Param { d, p, words } => {
            for i in 0..words {
                out(regs, d + i).fill(cx.params[p as usize][i as usize]);
            }
        }
        &Ins::Bin { op, ty, n, d, a, b } => exec_bin(regs, op, ty, n, d, a, b),
        &Ins::Fma {
            ty,
            ftz: flush,
            n,
            d,
            a,
            b,
            c,
        } => {
            if ty == Num::F32 {
                for e in 0..n {
                    let (x, y, z) = (lanes(regs, a + e), lanes(regs, b + e), lanes(regs, c + e));
                    fma_dispatch(out(regs, d + e), &x, &y, &z, flush);
                }
            } else {
                clear(regs, d, n.div_ceil(2));
                for e in 0..n {
                    for l in 0..32 {
                        let g = |s: u32| {
                            bf16_to_f32(get_elem(regs, s, Scalar::BF16, e, l) as u32) as f64
                        };
                        let mut r = (g(a).mul_add(g(b), g(c))) as f32;
                        if flush {
                            r = ftz(r);
                        }
                        set_elem(regs, d, Scalar::BF16, e, l, f32_to_bf16(r) as u64);
                    }
                }
            }
        }
        &Ins::Un { op, ty, n, d, a } => exec_un(regs, op, ty, n, d, a),
        &Ins::Cmp { op, ty, d, a, b } => exec_cmp(regs, op, ty, d, a, b),
        &Ins::Select { d, c, a, b, words } => {
            let cv = lanes(regs, c);
            for i in 0..words {
                let (x, y) = (lanes(regs, a + i), lanes(regs, b + i));
                let o = out(regs, d + i);
                (0..32).for_each(|l| o[l] = if cv[l] != 0 { x[l] } else { y[l] });
            }
        }
        &Ins::Cvt { from, to, n, d, a } => {
            if n != 1 || cvt_fast(regs, from, to, d, a).is_none() {
                if to == Scalar::BF16 {
                    clear(regs, d, n.div_ceil(2));
                }
                for e in 0..n {
                    for l in 0..32 {
                        let x = get_elem(regs, a, from, e, l);
                        set_elem(regs, d, to, e, l, convert(from, to, x));
                    }
                }
            }
        }
        &Ins::Copy { d, a, words } => copy_slot(regs, d, a, words),
        Ins::Pack { elem, d, srcs } => {
            if *elem == Scalar::BF16 {
                clear(regs, *d, (srcs.len() as u32).div_ceil(2));
            }
            for (e, &s) in srcs.iter().enumerate() {
                for l in 0..32 {
                    let x = get_elem(regs, s, *elem, 0, l);
                    set_elem(regs, *d, *elem, e as u32, l, x);
                }
            }
        }
        Ins::PackWords { d, srcs, w } => {
            for (i, &s) in srcs.iter().enumerate() {
                copy_slot(regs, *d + i as u32 * *w, s, *w);
            }
        }
        &Ins::Extract { elem, e, d, a } => {
            if elem == Scalar::BF16 {
                clear(regs, d, 1);
            }
            for l in 0..32 {
                let x = get_elem(regs, a, elem, e, l);
                set_elem(regs, d, elem, 0, l, x);
            }
        }
        _ => unreachable!("not an arithmetic op"),
    }
}

/// Copy `words` words of every lane from slot `src` to slot `dst` (distinct slots).
#[inline(always)]
fn copy_slot(regs: &mut [u32], dst: u32, src: u32, words: u32) {
    for i in 0..words {
        let x = lanes(regs, src + i);
        *out(regs, dst + i) = x;
    }
}

/// `o = x·y + z` per lane, one rounding, optionally flushing subnormals.
#[inline(always)]
fn fma_lanes(o: &mut [u32; 32], x: &[u32; 32], y: &[u32; 32], z: &[u32; 32], flush: bool) {
    if flush {
        (0..32)
            .for_each(|l| o[l] = ftz(ftz(f(x[l])).mul_add(ftz(f(y[l])), ftz(f(z[l])))).to_bits());
    } else {
        (0..32).for_each(|l| o[l] = f(x[l]).mul_add(f(y[l]), f(z[l])).to_bits());
    }
}

/// [`fma_lanes`] compiled for the FMA instruction set.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "fma")]
fn fma_lanes_hw(o: &mut [u32; 32], x: &[u32; 32], y: &[u32; 32], z: &[u32; 32], flush: bool) {
    fma_lanes(o, x, y, z, flush)
}

/// `f32::mul_add` is a libm call unless the build targets FMA; use the
/// instruction when the CPU has it (same results: both round once).
#[inline]
fn fma_dispatch(o: &mut [u32; 32], x: &[u32; 32], y: &[u32; 32], z: &[u32; 32], flush: bool) {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("fma") {
        // SAFETY: the CPU supports FMA, the only requirement of `fma_lanes_hw`.
        unsafe { fma_lanes_hw(o, x, y, z, flush) };
        return;
    }
    fma_lanes(o, x, y, z, flush)
}

macro_rules! int_bin {
    ($name:ident, $t:ty, $ut:ty, $bits:expr) => {
        #[inline(always)]
        fn $name(op: BinOp, x: $t, y: $t) -> $t {
            match op {
                BinOp::Add => x.wrapping_add(y),
                BinOp::Sub => x.wrapping_sub(y),
                BinOp::Mul => x.wrapping_mul(y),
                BinOp::Div => {
                    if y == 0 {
                        !0
                    } else {
                        x.wrapping_div(y)
                    }
                }
                BinOp::Rem => {
                    if y == 0 {
                        x
                    } else {
                        x.wrapping_rem(y)
                    }
                }
                BinOp::Min => x.min(y),
                BinOp::Max => x.max(y),
                BinOp::And => x & y,
                BinOp::Or => x | y,
                BinOp::Xor => x ^ y,
                BinOp::Shl => {
                    let s = y as $ut;
                    if s >= $bits { 0 } else { x << s }
                }
                BinOp::Shr => {
                    let s = y as $ut;
                    if s >= $bits {
                        x >> ($bits - 1) >> 1
                    } else {
                        x >> s
                    }
                }
            }
        }
    };
}

int_bin!(bin_i32, i32, u32, 32);
int_bin!(bin_u32, u32, u32, 32);
int_bin!(bin_i64, i64, u64, 64);
int_bin!(bin_u64, u64, u64, 64);

#[inline(always)]
fn bin_f32(op: BinOp, x: f32, y: f32) -> f32 {
    match op {
        BinOp::Add => x + y,
        BinOp::Sub => x - y,
        BinOp::Mul => x * y,
        BinOp::Div => x / y,
        BinOp::Min => x.min(y),
        BinOp::Max => x.max(y),
        _ => unreachable!("rejected by the decoder"),
    }
}

fn un_f32(op: UnOp, x: f32) -> f32 {
    let fast = matches!(
        op,
        UnOp::Exp { fast: true }
            | UnOp::Exp2 { fast: true }
            | UnOp::Rsqrt { fast: true }
            | UnOp::Sigmoid { fast: true }
            | UnOp::Rcp { fast: true }
            | UnOp::Log2Approx
    );
    if fast {
        // The approximate instructions flush subnormal inputs and results.
        return ftz(un_precise(op, ftz(x)));
    }
    un_precise(op, x)
}

fn un_precise(op: UnOp, x: f32) -> f32 {
    match op {
        UnOp::Neg => -x,
        UnOp::Abs => x.abs(),
        UnOp::Exp { .. } => x.exp(),
        UnOp::Exp2 { .. } => x.exp2(),
        UnOp::Rsqrt { .. } => 1.0 / x.sqrt(),
        UnOp::Sqrt => x.sqrt(),
        UnOp::Sigmoid { .. } => 1.0 / (1.0 + (-x).exp()),
        UnOp::Rcp { .. } => 1.0 / x,
        UnOp::Log2Approx => x.log2(),
        UnOp::Not => unreachable!("rejected by the decoder"),
    }
}

fn cmp<T: PartialOrd>(op: CmpOp, x: T, y: T) -> bool {
    match op {
        CmpOp::Eq => x == y,
        // Unordered, as in Rust: true when either side is NaN.
        CmpOp::Ne => x != y,
        CmpOp::Lt => x < y,
        CmpOp::Le => x <= y,
        CmpOp::Gt => x > y,
        CmpOp::Ge => x >= y,
    }
}

fn elem_of(ty: Num) -> Scalar {
    match ty {
        Num::Bool => Scalar::Bool,
        Num::I32 => Scalar::I32,
        Num::U32 => Scalar::U32,
        Num::I64 => Scalar::I64,
        Num::U64 => Scalar::U64,
        Num::F32 => Scalar::F32,
        Num::BF16 => Scalar::BF16,
    }
}

fn exec_bin(regs: &mut [u32], op: BinOp, ty: Num, n: u32, d: u32, a: u32, b: u32) {
    match ty {
        Num::F32 => {
            for e in 0..n {
                let (x, y) = (lanes(regs, a + e), lanes(regs, b + e));
                let o = out(regs, d + e);
                match op {
                    BinOp::Add => (0..32).for_each(|l| o[l] = (f(x[l]) + f(y[l])).to_bits()),
                    BinOp::Sub => (0..32).for_each(|l| o[l] = (f(x[l]) - f(y[l])).to_bits()),
                    BinOp::Mul => (0..32).for_each(|l| o[l] = (f(x[l]) * f(y[l])).to_bits()),
                    _ => (0..32).for_each(|l| o[l] = bin_f32(op, f(x[l]), f(y[l])).to_bits()),
                }
            }
        }
        Num::I32 | Num::U32 | Num::Bool => {
            let signed = ty == Num::I32;
            for e in 0..n {
                let (x, y) = (lanes(regs, a + e), lanes(regs, b + e));
                let o = out(regs, d + e);
                macro_rules! each {
                    ($f:expr) => {
                        (0..32).for_each(|l| o[l] = $f(x[l], y[l]))
                    };
                }
                match (op, signed) {
                    (BinOp::Add, _) => each!(|a: u32, b| a.wrapping_add(b)),
                    (BinOp::Sub, _) => each!(|a: u32, b| a.wrapping_sub(b)),
                    (BinOp::Mul, _) => each!(|a: u32, b| a.wrapping_mul(b)),
                    (BinOp::And, _) => each!(|a, b| a & b),
                    (BinOp::Or, _) => each!(|a, b| a | b),
                    (BinOp::Xor, _) => each!(|a, b| a ^ b),
                    (_, true) => each!(|a, b| bin_i32(op, a as i32, b as i32) as u32),
                    (_, false) => each!(|a, b| bin_u32(op, a, b)),
                }
            }
        }
        Num::I64 | Num::U64 => {
            let s = elem_of(ty);
            for e in 0..n {
                for l in 0..32 {
                    let (x, y) = (get_elem(regs, a, s, e, l), get_elem(regs, b, s, e, l));
                    let r = if ty == Num::I64 {
                        bin_i64(op, x as i64, y as i64) as u64
                    } else {
                        bin_u64(op, x, y)
                    };
                    set_elem(regs, d, s, e, l, r);
                }
            }
        }
        Num::BF16 => {
            clear(regs, d, n.div_ceil(2));
            for e in 0..n {
                for l in 0..32 {
                    let x = bf16_to_f32(get_elem(regs, a, Scalar::BF16, e, l) as u32);
                    let y = bf16_to_f32(get_elem(regs, b, Scalar::BF16, e, l) as u32);
                    set_elem(
                        regs,
                        d,
                        Scalar::BF16,
                        e,
                        l,
                        f32_to_bf16(bin_f32(op, x, y)) as u64,
                    );
                }
            }
        }
    }
}

fn clear(regs: &mut [u32], d: u32, words: u32) {
    let b = d as usize * 32;
    regs[b..b + words as usize * 32].fill(0);
}

fn exec_un(regs: &mut [u32], op: UnOp, ty: Num, n: u32, d: u32, a: u32) {
    match ty {
        Num::F32 => {
            for e in 0..n {
                let x = lanes(regs, a + e);
                let o = out(regs, d + e);
                (0..32).for_each(|l| o[l] = un_f32(op, f(x[l])).to_bits());
            }
        }
        Num::BF16 => {
            clear(regs, d, n.div_ceil(2));
            for e in 0..n {
                for l in 0..32 {
                    let x = bf16_to_f32(get_elem(regs, a, Scalar::BF16, e, l) as u32);
                    set_elem(
                        regs,
                        d,
                        Scalar::BF16,
                        e,
                        l,
                        f32_to_bf16(un_f32(op, x)) as u64,
                    );
                }
            }
        }
        Num::Bool => {
            for e in 0..n {
                let x = lanes(regs, a + e);
                let o = out(regs, d + e);
                (0..32).for_each(|l| o[l] = x[l] ^ 1);
            }
        }
        _ => {
            let s = elem_of(ty);
            for e in 0..n {
                for l in 0..32 {
                    let x = get_elem(regs, a, s, e, l);
                    let r = match (op, ty) {
                        (UnOp::Not, _) => !x,
                        (UnOp::Neg, _) => x.wrapping_neg(),
                        (UnOp::Abs, Num::I32) => (x as u32 as i32).wrapping_abs() as u32 as u64,
                        (UnOp::Abs, Num::I64) => (x as i64).wrapping_abs() as u64,
                        _ => x,
                    };
                    set_elem(regs, d, s, e, l, r);
                }
            }
        }
    }
}

fn exec_cmp(regs: &mut [u32], op: CmpOp, ty: Num, d: u32, a: u32, b: u32) {
    macro_rules! each {
        ($conv:expr) => {{
            let (x, y) = (lanes(regs, a), lanes(regs, b));
            let o = out(regs, d);
            match op {
                CmpOp::Eq => (0..32).for_each(|l| o[l] = ($conv(x[l]) == $conv(y[l])) as u32),
                CmpOp::Ne => (0..32).for_each(|l| o[l] = ($conv(x[l]) != $conv(y[l])) as u32),
                CmpOp::Lt => (0..32).for_each(|l| o[l] = ($conv(x[l]) < $conv(y[l])) as u32),
                CmpOp::Le => (0..32).for_each(|l| o[l] = ($conv(x[l]) <= $conv(y[l])) as u32),
                CmpOp::Gt => (0..32).for_each(|l| o[l] = ($conv(x[l]) > $conv(y[l])) as u32),
                CmpOp::Ge => (0..32).for_each(|l| o[l] = ($conv(x[l]) >= $conv(y[l])) as u32),
            }
        }};
    }
    match ty {
        Num::U32 | Num::Bool => each!(|v: u32| v),
        Num::I32 => each!(|v: u32| v as i32),
        Num::F32 => each!(f),
        _ => {
            let s = elem_of(ty);
            for l in 0..32 {
                let (x, y) = (get_elem(regs, a, s, 0, l), get_elem(regs, b, s, 0, l));
                let r = match ty {
                    Num::I64 => cmp(op, x as i64, y as i64),
                    Num::BF16 => cmp(op, bf16_to_f32(x as u32), bf16_to_f32(y as u32)),
                    _ => cmp(op, x, y),
                };
                regs[d as usize * 32 + l] = r as u32;
            }
        }
    }
}

/// Scalar conversions between 32-bit types and widening to 64 bits, one
/// loop per kind; `None` when the generic path is needed.
fn cvt_fast(regs: &mut [u32], from: Scalar, to: Scalar, d: u32, a: u32) -> Option<()> {
    use Scalar::*;
    let x = lanes(regs, a);
    let one = |regs: &mut [u32], g: &dyn Fn(u32) -> u32| {
        let o = out(regs, d);
        (0..32).for_each(|l| o[l] = g(x[l]));
    };
    match (from, to) {
        (F32, BF16) => one(regs, &|v| f32_to_bf16(f(v))),
        (BF16, F32) => one(regs, &|v| bf16_to_f32(v).to_bits()),
        (U32, F32) => one(regs, &|v| (v as f32).to_bits()),
        (I32, F32) => one(regs, &|v| (v as i32 as f32).to_bits()),
        (F32, I32) => one(regs, &|v| f(v) as i32 as u32),
        (F32, U32) => one(regs, &|v| f(v) as u32),
        (I32 | U32 | Bool, I32 | U32) => one(regs, &|v| v),
        (I32 | U32, Bool) => one(regs, &|v| (v != 0) as u32),
        (U32 | Bool, I64 | U64) => {
            one(regs, &|v| v);
            out(regs, d + 1).fill(0);
        }
        (I32, I64 | U64) => {
            one(regs, &|v| v);
            let o = out(regs, d + 1);
            (0..32).for_each(|l| o[l] = ((x[l] as i32) >> 31) as u32);
        }
        (I64 | U64, I32 | U32) => one(regs, &|v| v),
        _ => return None,
    }
    Some(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::numeric::words;

    /// The scalar fast paths agree with the generic converter.
    #[test]
    fn cvt_fast_paths_match_convert() {
        use Scalar::*;
        let samples: [u64; 12] = [
            0,
            1,
            0x7fff_ffff,
            0x8000_0000,
            0xffff_ffff,
            0xdead_beef,
            (-2.75f32).to_bits() as u64,
            f32::NAN.to_bits() as u64,
            3.0e9f32.to_bits() as u64,
            (-3.0e9f32).to_bits() as u64,
            0x1_2345_6789,
            0xffff_ffff_8000_0000,
        ];
        let all = [Bool, I32, U32, I64, U64, F32, BF16];
        for from in all {
            for to in all {
                let mut regs = vec![0u32; 8 * 32];
                for (l, &v) in samples.iter().enumerate() {
                    let v = match from {
                        Bool => v & 1,
                        BF16 => v & 0xffff,
                        I64 | U64 => v,
                        _ => v & 0xffff_ffff,
                    };
                    set_elem(&mut regs, 0, from, 0, l, v);
                }
                if cvt_fast(&mut regs, from, to, 4, 0).is_none() {
                    continue;
                }
                for (l, _) in samples.iter().enumerate() {
                    let x = get_elem(&regs, 0, from, 0, l);
                    let want = convert(from, to, x);
                    let mut got = get_elem(&regs, 4, to, 0, l);
                    if words(to, 1) == 1 && to != BF16 {
                        got &= 0xffff_ffff;
                    }
                    assert_eq!(got, want, "{from} -> {to} of {x:#x}");
                }
            }
        }
    }
}
