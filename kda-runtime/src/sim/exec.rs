//! The interpreter: runs one warp of a decoded [`Program`] until it blocks,
//! finishes or uses up its instruction budget.
//!
//! SIMT execution: a warp has one pc and an active mask; arithmetic runs over
//! all 32 lanes (results of inactive lanes are never read: every value's slot
//! belongs to it alone while it lives), side effects and yields only in the
//! active lanes. Warp collectives (shuffle, mma) read every lane, as the
//! hardware's full-warp forms do. A blocking op (mbarrier wait, cluster wait,
//! `bar.sync`) that cannot pass leaves the pc on itself and returns
//! [`Stop::Blocked`]; running the warp again retries it.

use kda_ir::{BinOp, CmpOp, Scalar, ShflMode, Special, UnOp};

use super::decode::{Copies, Idx, Ins, Num, Program, ShBuf};
use super::mbarrier::{ClusterBar, Mbar, MbarFault, Named};
use super::memory::{TensorView, read_words, write_words};
use super::numeric::{bf16_to_f32, convert, f32_to_bf16, ftz, get_elem, mma_m16n8k16, set_elem};
use super::report::{BarrierMisuse, Misaligned, OutOfBounds, SimError, Site, Space, TxOverflow};

/// A mask-stack entry: the mask to restore and, for an `if`, the else lanes.
#[derive(Copy, Clone, Debug)]
pub(crate) struct Frame {
    pub saved: u32,
    pub other: u32,
}

/// One warp's state.
pub(crate) struct Warp {
    /// Rank of its CTA in the cluster.
    pub rank: u32,
    /// Warp index in the CTA.
    pub warp: u32,
    pub pc: u32,
    pub active: u32,
    /// Lanes that exist (the last warp of an odd-sized block is partial).
    pub lanes: u32,
    pub stack: Vec<Frame>,
    /// `regs[word * 32 + lane]`.
    pub regs: Vec<u32>,
    pub scratch: Vec<u32>,
    pub done: bool,
    /// A `bar.sync` this warp arrived at: (id, generation).
    pub bar_wait: Option<(u8, u32)>,
    /// Lanes arrived at the cluster barrier and the phase they arrived in.
    pub cl_mask: u32,
    pub cl_phase: u32,
    /// Whether the warp has passed `griddepcontrol.wait`.
    pub pdl_waited: bool,
}

impl Warp {
    pub fn new(prog: &Program, rank: u32, warp: u32) -> Warp {
        let lanes = prog.lanes[warp as usize];
        Warp {
            rank,
            warp,
            pc: 0,
            active: lanes,
            lanes,
            stack: Vec::with_capacity(16),
            regs: vec![0; prog.reg_words as usize * 32],
            scratch: vec![0; prog.scratch_words as usize * 32],
            done: false,
            bar_wait: None,
            cl_mask: 0,
            cl_phase: 0,
            pdl_waited: false,
        }
    }

    /// Back to the start, registers zeroed (runs are deterministic whatever
    /// the registers last held).
    pub fn reset(&mut self, rank: u32) {
        self.rank = rank;
        self.pc = 0;
        self.active = self.lanes;
        self.stack.clear();
        self.regs.fill(0);
        self.done = false;
        self.bar_wait = None;
        self.cl_mask = 0;
        self.cl_phase = 0;
        self.pdl_waited = false;
    }
}

/// One CTA's shared state.
pub(crate) struct Cta {
    pub smem: Vec<u32>,
    pub mbar: Vec<Mbar>,
    pub named: [Named; 16],
    pub block: [u32; 3],
    /// Threads that have not exited.
    pub live: u32,
}

/// Everything the warps of one cluster share.
pub(crate) struct Cluster<'a> {
    pub ctas: Vec<Cta>,
    pub cbar: ClusterBar,
    pub tensors: &'a [TensorView<'a>],
    pub params: &'a [[u32; 2]],
    pub grid: [u32; 3],
    pub index: u32,
    /// Report reads of produced tensors before the PDL wait.
    pub check_pdl: bool,
}

/// Why [`run`] returned.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub(crate) enum Stop {
    Budget,
    Blocked,
    Done,
}

#[inline(always)]
fn lanes(regs: &[u32], slot: u32) -> [u32; 32] {
    let b = slot as usize * 32;
    regs[b..b + 32].try_into().expect("32 lanes")
}

#[inline(always)]
fn out(regs: &mut [u32], slot: u32) -> &mut [u32; 32] {
    let b = slot as usize * 32;
    (&mut regs[b..b + 32]).try_into().expect("32 lanes")
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

#[inline(always)]
fn rd_idx(regs: &[u32], i: Idx, l: usize) -> i64 {
    let w = regs[i.slot as usize * 32 + l];
    match i.kind {
        Scalar::I32 => w as i32 as i64,
        Scalar::I64 | Scalar::U64 => {
            (w as u64 | (regs[(i.slot as usize + 1) * 32 + l] as u64) << 32) as i64
        }
        _ => w as i64,
    }
}

#[inline(always)]
fn f(x: u32) -> f32 {
    f32::from_bits(x)
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

/// Masked register moves.
fn do_copies(regs: &mut [u32], scratch: &mut [u32], c: &Copies, mask: u32) {
    let copy = |regs: &mut [u32], dst: usize, src: usize| {
        if mask == u32::MAX {
            let x: [u32; 32] = regs[src..src + 32].try_into().expect("32 lanes");
            regs[dst..dst + 32].copy_from_slice(&x);
        } else {
            let mut m = mask;
            while m != 0 {
                let l = m.trailing_zeros() as usize;
                m &= m - 1;
                regs[dst + l] = regs[src + l];
            }
        }
    };
    if c.parallel {
        let mut at = 0;
        for &(_, s, w) in c.moves.iter() {
            let n = w as usize * 32;
            scratch[at..at + n].copy_from_slice(&regs[s as usize * 32..s as usize * 32 + n]);
            at += n;
        }
        let mut at = 0;
        for &(d, _, w) in c.moves.iter() {
            for i in 0..w as usize {
                let dst = (d as usize + i) * 32;
                let mut m = mask;
                while m != 0 {
                    let l = m.trailing_zeros() as usize;
                    m &= m - 1;
                    regs[dst + l] = scratch[at + i * 32 + l];
                }
            }
            at += w as usize * 32;
        }
    } else {
        for &(d, s, w) in c.moves.iter() {
            for i in 0..w as usize {
                copy(regs, (d as usize + i) * 32, (s as usize + i) * 32);
            }
        }
    }
}

fn lane_mask(regs: &[u32], slot: u32) -> u32 {
    let x = lanes(regs, slot);
    (0..32).fold(0u32, |m, l| m | ((x[l] != 0) as u32) << l)
}

/// Lanes where an index-typed iv is below `hi`.
fn below(regs: &[u32], ty: Num, iv: u32, hi: u32) -> u32 {
    let mut m = 0u32;
    for l in 0..32 {
        let lt = match ty {
            Num::I32 => (regs[iv as usize * 32 + l] as i32) < (regs[hi as usize * 32 + l] as i32),
            Num::U32 => regs[iv as usize * 32 + l] < regs[hi as usize * 32 + l],
            Num::I64 => {
                (get_elem(regs, iv, Scalar::I64, 0, l) as i64)
                    < (get_elem(regs, hi, Scalar::I64, 0, l) as i64)
            }
            _ => get_elem(regs, iv, Scalar::U64, 0, l) < get_elem(regs, hi, Scalar::U64, 0, l),
        };
        m |= (lt as u32) << l;
    }
    m
}

fn iv_step(regs: &mut [u32], ty: Num, iv: u32, step: u32, mask: u32) {
    let mut m = mask;
    while m != 0 {
        let l = m.trailing_zeros() as usize;
        m &= m - 1;
        match ty {
            Num::I32 | Num::U32 => {
                let s = regs[step as usize * 32 + l];
                let i = &mut regs[iv as usize * 32 + l];
                *i = i.wrapping_add(s);
            }
            _ => {
                let x = get_elem(regs, iv, Scalar::U64, 0, l).wrapping_add(get_elem(
                    regs,
                    step,
                    Scalar::U64,
                    0,
                    l,
                ));
                set_elem(regs, iv, Scalar::U64, 0, l, x);
            }
        }
    }
}

/// Shared memory words of a CTA: read / write `bytes` at an aligned byte offset.
#[inline]
fn smem_read(smem: &[u32], byte: usize, bytes: u32, o: &mut [u32]) {
    if bytes == 2 {
        let w = smem[byte / 4];
        o[0] = if byte & 2 == 0 { w & 0xffff } else { w >> 16 };
    } else {
        let n = bytes as usize / 4;
        o[..n].copy_from_slice(&smem[byte / 4..byte / 4 + n]);
    }
}

#[inline]
fn smem_write(smem: &mut [u32], byte: usize, bytes: u32, v: &[u32]) {
    if bytes == 2 {
        let w = &mut smem[byte / 4];
        *w = if byte & 2 == 0 {
            (*w & 0xffff_0000) | (v[0] & 0xffff)
        } else {
            (*w & 0xffff) | (v[0] << 16)
        };
    } else {
        let n = bytes as usize / 4;
        smem[byte / 4..byte / 4 + n].copy_from_slice(&v[..n]);
    }
}

/// Run `w` for at most `budget` instructions. Returns the number executed
/// (a blocked wait does not count) and why it stopped.
pub(crate) fn run(
    prog: &Program,
    w: &mut Warp,
    cx: &mut Cluster<'_>,
    budget: u64,
) -> Result<(u64, Stop), SimError> {
    let mut executed = 0u64;
    let k = &prog.kernel;
    let site = |w: &Warp, cx: &Cluster<'_>, lane: Option<u32>| -> Site {
        let pc = w.pc as usize;
        Site {
            loc: prog.loc_of(pc).clone(),
            op: prog.op_name(pc),
            cluster: cx.index,
            block: cx.ctas[w.rank as usize].block,
            rank: w.rank,
            warp: w.warp,
            lane,
        }
    };
    let misuse = |w: &Warp, cx: &Cluster<'_>, lane: Option<u32>, msg: String| -> SimError {
        SimError::Barrier(Box::new(BarrierMisuse {
            msg,
            site: site(w, cx, lane),
        }))
    };
    let nctas = cx.ctas.len() as u32;
    let mut idx = [0i64; 8];
    let mut tmp = [0u32; 4];
    loop {
        if executed >= budget {
            return Ok((executed, Stop::Budget));
        }
        let pc = w.pc as usize;
        let active = w.active;
        let regs = &mut w.regs;
        match &prog.code[pc] {
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
                        let (x, y, z) =
                            (lanes(regs, a + e), lanes(regs, b + e), lanes(regs, c + e));
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
            Ins::LdGlobal {
                t,
                d,
                idx: ix,
                bytes,
            } => {
                let tv = &cx.tensors[*t as usize];
                if cx.check_pdl && prog.produced[*t as usize] && !w.pdl_waited {
                    return Err(produced_early(k, *t, site(w, cx, None)));
                }
                let elems = (*bytes / tv.dtype_bytes).max(1) as u64;
                let nw = (*bytes as usize).div_ceil(4);
                let mut m = active;
                while m != 0 {
                    let l = m.trailing_zeros() as usize;
                    m &= m - 1;
                    let byte =
                        global_byte(k, *t, tv, &w.regs, ix, &mut idx, l, elems, *bytes, || {
                            site(w, cx, Some(l as u32))
                        })?;
                    read_words(tv.mem, byte as usize, *bytes, &mut tmp[..nw]);
                    for (i, &v) in tmp[..nw].iter().enumerate() {
                        w.regs[(*d as usize + i) * 32 + l] = v;
                    }
                }
            }
            Ins::StGlobal {
                t,
                v,
                idx: ix,
                bytes,
                pred,
            } => {
                let tv = &cx.tensors[*t as usize];
                let elems = (*bytes / tv.dtype_bytes).max(1) as u64;
                let nw = (*bytes as usize).div_ceil(4);
                let mut m = active;
                if let Some(p) = pred {
                    m &= lane_mask(regs, *p);
                }
                while m != 0 {
                    let l = m.trailing_zeros() as usize;
                    m &= m - 1;
                    let byte =
                        global_byte(k, *t, tv, &w.regs, ix, &mut idx, l, elems, *bytes, || {
                            site(w, cx, Some(l as u32))
                        })?;
                    for (i, x) in tmp[..nw].iter_mut().enumerate() {
                        *x = w.regs[(*v as usize + i) * 32 + l];
                    }
                    write_words(tv.mem, byte as usize, *bytes, &tmp[..nw]);
                }
            }
            &Ins::LdShared {
                sb,
                d,
                idx: ix,
                bytes,
            } => {
                let nw = (bytes as usize).div_ceil(4);
                let cta = &cx.ctas[w.rank as usize];
                let mut m = active;
                while m != 0 {
                    let l = m.trailing_zeros() as usize;
                    m &= m - 1;
                    let i = rd_idx(&w.regs, ix, l);
                    let byte = match shared_byte(sb, i, bytes) {
                        Ok(b) => b,
                        Err(e) => {
                            return Err(shared_fault(
                                k,
                                sb,
                                w.rank,
                                i,
                                bytes,
                                e,
                                site(w, cx, Some(l as u32)),
                            ));
                        }
                    };
                    smem_read(&cta.smem, byte, bytes, &mut tmp);
                    for (j, &v) in tmp[..nw].iter().enumerate() {
                        w.regs[(d as usize + j) * 32 + l] = v;
                    }
                }
            }
            &Ins::StShared {
                sb,
                v,
                idx: ix,
                bytes,
            } => {
                let nw = (bytes as usize).div_ceil(4);
                let mut m = active;
                while m != 0 {
                    let l = m.trailing_zeros() as usize;
                    m &= m - 1;
                    let i = rd_idx(&w.regs, ix, l);
                    let byte = match shared_byte(sb, i, bytes) {
                        Ok(b) => b,
                        Err(e) => {
                            return Err(shared_fault(
                                k,
                                sb,
                                w.rank,
                                i,
                                bytes,
                                e,
                                site(w, cx, Some(l as u32)),
                            ));
                        }
                    };
                    for (j, x) in tmp[..nw].iter_mut().enumerate() {
                        *x = w.regs[(v as usize + j) * 32 + l];
                    }
                    smem_write(&mut cx.ctas[w.rank as usize].smem, byte, bytes, &tmp);
                }
            }
            &Ins::Shfl {
                mode,
                d,
                v,
                l: src,
                words,
            } => {
                let sv = lanes(regs, src);
                let from: [usize; 32] = std::array::from_fn(|l| match mode {
                    ShflMode::Bfly => (l as u32 ^ (sv[l] & 31)) as usize,
                    ShflMode::Idx => (sv[l] & 31) as usize,
                });
                for i in 0..words {
                    let x = lanes(regs, v + i);
                    let o = out(regs, d + i);
                    (0..32).for_each(|l| o[l] = x[from[l]]);
                }
            }
            &Ins::Elect { d } => {
                let o = out(regs, d);
                let first = active.trailing_zeros() as usize;
                (0..32).for_each(|l| o[l] = (l == first) as u32);
            }
            &Ins::Mma { d, a, b, c } => {
                let am: [[u32; 4]; 32] = std::array::from_fn(|l| {
                    std::array::from_fn(|i| regs[(a as usize + i) * 32 + l])
                });
                let bm: [[u32; 2]; 32] = std::array::from_fn(|l| {
                    std::array::from_fn(|i| regs[(b as usize + i) * 32 + l])
                });
                let cm: [[f32; 4]; 32] = std::array::from_fn(|l| {
                    std::array::from_fn(|i| f(regs[(c as usize + i) * 32 + l]))
                });
                let dm = mma_m16n8k16(&am, &bm, &cm);
                for (l, r) in dm.iter().enumerate() {
                    for (i, x) in r.iter().enumerate() {
                        regs[(d as usize + i) * 32 + l] = x.to_bits();
                    }
                }
            }
            &Ins::MbarInit { bar } => {
                let count = k.barriers[kda_ir::Barrier::from_u32(bar)].arrivals;
                let mb = &mut cx.ctas[w.rank as usize].mbar[bar as usize];
                if mb.init && (mb.phase > 0 || mb.pending != mb.count || mb.tx != 0) {
                    let msg = format!(
                        "mbarrier.init on mbarrier `{}` of CTA rank {} while it is in use (phase {}, {} of {} arrivals, \
                         {} tx bytes pending)",
                        bar_name(k, bar),
                        w.rank,
                        mb.phase,
                        mb.count - mb.pending,
                        mb.count,
                        mb.tx
                    );
                    return Err(misuse(w, cx, None, msg));
                }
                mb.init(count);
            }
            &Ins::MbarArrive { bar, tx } => {
                let mut m = active;
                while m != 0 {
                    let l = m.trailing_zeros();
                    m &= m - 1;
                    let mb = &mut cx.ctas[w.rank as usize].mbar[bar as usize];
                    let (ph, count) = (mb.phase, mb.count);
                    match mb.arrive(tx) {
                        Ok(true) if m != 0 => {
                            let msg = format!(
                                "{} lanes arrive at once on mbarrier `{}` of CTA rank {} whose count is {count}: \
                                 phase {ph} completes and the other lanes arrive on phase {}",
                                active.count_ones(),
                                bar_name(k, bar),
                                w.rank,
                                ph + 1
                            );
                            return Err(misuse(w, cx, Some(l), msg));
                        }
                        Ok(_) => {}
                        Err(MbarFault::Uninit) => {
                            let msg = format!(
                                "arrive on mbarrier `{}` of CTA rank {} before it is initialised",
                                bar_name(k, bar),
                                w.rank
                            );
                            return Err(misuse(w, cx, Some(l), msg));
                        }
                        Err(_) => {
                            let msg = format!(
                                "more arrivals than the count {count} in phase {ph} of mbarrier `{}` of CTA rank {}",
                                bar_name(k, bar),
                                w.rank
                            );
                            return Err(misuse(w, cx, Some(l), msg));
                        }
                    }
                }
            }
            &Ins::MbarWait { bar, phase } => {
                let mb = &cx.ctas[w.rank as usize].mbar[bar as usize];
                if mb.init && mb.phase > phase + 1 {
                    let msg = format!(
                        "wait on phase {phase} of mbarrier `{}` of CTA rank {}, which has already completed phase {}: \
                         a parity wait would wait for phase {} instead",
                        bar_name(k, bar),
                        w.rank,
                        mb.phase - 1,
                        phase + 2
                    );
                    return Err(misuse(w, cx, None, msg));
                }
                if !mb.passed(phase) {
                    return Ok((executed, Stop::Blocked));
                }
            }
            Ins::Nop => {}
            Ins::PdlWait => w.pdl_waited = true,
            Ins::ClusterArrive => {
                if w.cl_mask & active != 0 {
                    let msg =
                        "barrier.cluster.arrive again before barrier.cluster.wait".to_string();
                    return Err(misuse(w, cx, None, msg));
                }
                w.cl_mask |= active;
                w.cl_phase = cx.cbar.phase;
                cx.cbar.arrived += active.count_ones();
                cx.cbar.try_complete();
            }
            Ins::ClusterWait => {
                if active & !w.cl_mask != 0 {
                    let msg = "barrier.cluster.wait without a preceding barrier.cluster.arrive"
                        .to_string();
                    return Err(misuse(w, cx, None, msg));
                }
                if cx.cbar.phase <= w.cl_phase {
                    return Ok((executed, Stop::Blocked));
                }
                w.cl_mask &= !active;
            }
            &Ins::BarSync { id, threads } => {
                let cta = &mut cx.ctas[w.rank as usize];
                let live = cta.live;
                let nb = &mut cta.named[id as usize];
                match w.bar_wait {
                    Some((i, g)) if i == id => {
                        if nb.generation == g {
                            return Ok((executed, Stop::Blocked));
                        }
                        w.bar_wait = None;
                    }
                    _ => {
                        if nb.arrived == 0 {
                            nb.expected = threads;
                        }
                        nb.arrived += w.lanes.count_ones();
                        let need = if nb.expected == 0 { live } else { nb.expected };
                        if nb.arrived >= need {
                            nb.arrived = 0;
                            nb.generation += 1;
                        } else {
                            w.bar_wait = Some((id, nb.generation));
                            return Ok((executed, Stop::Blocked));
                        }
                    }
                }
            }
            &Ins::StAsync {
                sb,
                bar,
                idx: ix,
                v,
                cta: peer,
                bytes,
            } => {
                let nw = (bytes as usize).div_ceil(4);
                let declared = k.barriers[kda_ir::Barrier::from_u32(bar)].tx_bytes;
                // Barriers this instruction completed a phase of: (rank, phase bytes).
                let mut completed: [(u32, u64); 4] = [(u32::MAX, 0); 4];
                let mut ncompleted = 0;
                let mut m = active;
                while m != 0 {
                    let l = m.trailing_zeros() as usize;
                    m &= m - 1;
                    let r = rd_idx(&w.regs, peer, l);
                    if r < 0 || r >= nctas as i64 {
                        return Err(SimError::BadPeer {
                            rank: r,
                            cluster: nctas,
                            site: Box::new(site(w, cx, Some(l as u32))),
                        });
                    }
                    let r = r as u32;
                    let i = rd_idx(&w.regs, ix, l);
                    let byte = match shared_byte(sb, i, bytes) {
                        Ok(b) => b,
                        Err(e) => {
                            return Err(shared_fault(
                                k,
                                sb,
                                r,
                                i,
                                bytes,
                                e,
                                site(w, cx, Some(l as u32)),
                            ));
                        }
                    };
                    for (j, x) in tmp[..nw].iter_mut().enumerate() {
                        *x = w.regs[(v as usize + j) * 32 + l];
                    }
                    smem_write(&mut cx.ctas[r as usize].smem, byte, bytes, &tmp);
                    if let Some(&(_, done)) = completed[..ncompleted].iter().find(|c| c.0 == r) {
                        let rest = peers_to(&w.regs, peer, m | 1 << l, r) as u64 * bytes as u64;
                        let phase = cx.ctas[r as usize].mbar[bar as usize].phase - 1;
                        return Err(tx_overflow(
                            k,
                            bar,
                            r,
                            phase,
                            done,
                            done + rest,
                            site(w, cx, Some(l as u32)),
                        ));
                    }
                    let mb = &mut cx.ctas[r as usize].mbar[bar as usize];
                    mb.last_sender = Some((w.pc, w.rank, w.warp, l as u32));
                    let before = mb.delivered + bytes as u64;
                    match mb.complete_tx(bytes, declared) {
                        Ok(true) => {
                            if ncompleted < completed.len() {
                                completed[ncompleted] = (r, before);
                                ncompleted += 1;
                            }
                        }
                        Ok(false) => {}
                        Err(MbarFault::Tx {
                            phase,
                            expected,
                            arrived,
                        }) => {
                            let rest = peers_to(&w.regs, peer, m, r) as u64 * bytes as u64;
                            return Err(tx_overflow(
                                k,
                                bar,
                                r,
                                phase,
                                expected,
                                arrived + rest,
                                site(w, cx, Some(l as u32)),
                            ));
                        }
                        Err(_) => {
                            let msg = format!(
                                "st.async completes {bytes} bytes on mbarrier `{}` of CTA rank {r} before that barrier \
                                 is initialised (send only after the cluster barrier that follows mbarrier.init)",
                                bar_name(k, bar)
                            );
                            return Err(misuse(w, cx, Some(l as u32), msg));
                        }
                    }
                }
            }
            Ins::CpAsync { sb, t, sidx, gidx } => {
                if cx.check_pdl && prog.produced[*t as usize] && !w.pdl_waited {
                    return Err(produced_early(k, *t, site(w, cx, None)));
                }
                let tv = &cx.tensors[*t as usize];
                let elems = (16 / tv.dtype_bytes).max(1) as u64;
                let mut m = active;
                while m != 0 {
                    let l = m.trailing_zeros() as usize;
                    m &= m - 1;
                    let gbyte =
                        global_byte(k, *t, tv, &w.regs, gidx, &mut idx, l, elems, 16, || {
                            site(w, cx, Some(l as u32))
                        })?;
                    let i = rd_idx(&w.regs, *sidx, l);
                    let byte = match shared_byte(*sb, i, 16) {
                        Ok(b) => b,
                        Err(e) => {
                            return Err(shared_fault(
                                k,
                                *sb,
                                w.rank,
                                i,
                                16,
                                e,
                                site(w, cx, Some(l as u32)),
                            ));
                        }
                    };
                    read_words(tv.mem, gbyte as usize, 16, &mut tmp);
                    smem_write(&mut cx.ctas[w.rank as usize].smem, byte, 16, &tmp);
                }
            }
            Ins::Bulk {
                sb,
                t,
                bar,
                bytes,
                sidx,
                gidx,
            } => {
                if cx.check_pdl && prog.produced[*t as usize] && !w.pdl_waited {
                    return Err(produced_early(k, *t, site(w, cx, None)));
                }
                let tv = &cx.tensors[*t as usize];
                let declared = k.barriers[kda_ir::Barrier::from_u32(*bar)].tx_bytes;
                let mut m = active;
                while m != 0 {
                    let l = m.trailing_zeros() as usize;
                    m &= m - 1;
                    for (i, &x) in gidx.iter().enumerate() {
                        idx[i] = rd_idx(&w.regs, x, l);
                    }
                    let r = gidx.len();
                    let elems = (*bytes / tv.dtype_bytes) as u64;
                    let Some(off) = tv.bulk_offset(&idx[..r], *bytes as u64) else {
                        return Err(global_oob(
                            k,
                            *t,
                            &idx[..r],
                            tv,
                            elems,
                            site(w, cx, Some(l as u32)),
                        ));
                    };
                    let gbyte = off * tv.dtype_bytes as u64;
                    if !gbyte.is_multiple_of(16) {
                        return Err(misaligned_global(
                            k,
                            *t,
                            gbyte,
                            16,
                            site(w, cx, Some(l as u32)),
                        ));
                    }
                    let i = rd_idx(&w.regs, *sidx, l);
                    let byte = match shared_byte(*sb, i, *bytes) {
                        Ok(b) => b,
                        Err(e) => {
                            return Err(shared_fault(
                                k,
                                *sb,
                                w.rank,
                                i,
                                *bytes,
                                e,
                                site(w, cx, Some(l as u32)),
                            ));
                        }
                    };
                    let smem = &mut cx.ctas[w.rank as usize].smem;
                    for j in 0..*bytes as usize / 4 {
                        read_words(tv.mem, gbyte as usize + 4 * j, 4, &mut tmp[..1]);
                        smem[byte / 4 + j] = tmp[0];
                    }
                    let mb = &mut cx.ctas[w.rank as usize].mbar[*bar as usize];
                    mb.last_sender = Some((w.pc, w.rank, w.warp, l as u32));
                    match mb.complete_tx(*bytes, declared) {
                        Ok(_) => {}
                        Err(MbarFault::Tx {
                            phase,
                            expected,
                            arrived,
                        }) => {
                            return Err(tx_overflow(
                                k,
                                *bar,
                                w.rank,
                                phase,
                                expected,
                                arrived,
                                site(w, cx, Some(l as u32)),
                            ));
                        }
                        Err(_) => {
                            let msg = format!(
                                "cp.async.bulk completes bytes on mbarrier `{}` of CTA rank {} before it is initialised",
                                bar_name(k, *bar),
                                w.rank
                            );
                            return Err(misuse(w, cx, Some(l as u32), msg));
                        }
                    }
                }
            }
            &Ins::IfBegin { c, else_pc } => {
                let cm = lane_mask(regs, c);
                let (t, e) = (active & cm, active & !cm);
                w.stack.push(Frame {
                    saved: active,
                    other: e,
                });
                if t != 0 {
                    w.active = t;
                } else {
                    w.pc = else_pc;
                    executed += 1;
                    continue;
                }
            }
            &Ins::Else { end_pc } => {
                let e = w.stack.last().expect("if frame").other;
                w.active = e;
                if e == 0 {
                    w.pc = end_pc;
                    executed += 1;
                    continue;
                }
            }
            Ins::Move { copies } => do_copies(regs, &mut w.scratch, copies, active),
            Ins::PopMask => w.active = w.stack.pop().expect("mask frame").saved,
            &Ins::ForInit {
                ty,
                iv,
                lo,
                ref copies,
            } => {
                w.stack.push(Frame {
                    saved: active,
                    other: 0,
                });
                let words = if matches!(ty, Num::I32 | Num::U32) {
                    1
                } else {
                    2
                };
                let c = Copies {
                    moves: Box::new([(iv, lo, words)]),
                    parallel: false,
                };
                do_copies(regs, &mut w.scratch, &c, active);
                do_copies(regs, &mut w.scratch, copies, active);
            }
            &Ins::ForHead {
                ty,
                iv,
                hi,
                exit_pc,
            } => {
                let m = active & below(regs, ty, iv, hi);
                w.active = m;
                if m == 0 {
                    w.pc = exit_pc;
                    executed += 1;
                    continue;
                }
            }
            &Ins::ForNext {
                ty,
                iv,
                step,
                ref copies,
                head_pc,
            } => {
                do_copies(regs, &mut w.scratch, copies, active);
                iv_step(regs, ty, iv, step, active);
                w.pc = head_pc;
                executed += 1;
                continue;
            }
            Ins::ForExit { copies } => {
                let saved = w.stack.pop().expect("loop frame").saved;
                w.active = saved;
                do_copies(&mut w.regs, &mut w.scratch, copies, saved);
            }
            Ins::WhileInit { copies } => {
                w.stack.push(Frame {
                    saved: active,
                    other: 0,
                });
                do_copies(regs, &mut w.scratch, copies, active);
            }
            &Ins::WhileCond {
                c,
                ref to_body,
                ref to_res,
                exit_pc,
            } => {
                let cm = lane_mask(regs, c);
                let (stay, leave) = (active & cm, active & !cm);
                if leave != 0 {
                    do_copies(regs, &mut w.scratch, to_res, leave);
                }
                w.active = stay;
                if stay == 0 {
                    w.pc = exit_pc;
                    executed += 1;
                    continue;
                }
                do_copies(&mut w.regs, &mut w.scratch, to_body, stay);
            }
            &Ins::WhileNext {
                ref copies,
                head_pc,
            } => {
                do_copies(regs, &mut w.scratch, copies, active);
                w.pc = head_pc;
                executed += 1;
                continue;
            }
            &Ins::RoleBegin { ref masks, end_pc } => {
                w.stack.push(Frame {
                    saved: active,
                    other: 0,
                });
                let m = active & masks[w.warp as usize];
                w.active = m;
                if m == 0 {
                    w.pc = end_pc;
                    executed += 1;
                    continue;
                }
            }
            Ins::Exit => {
                exit_warp(w, cx);
                return Ok((executed + 1, Stop::Done));
            }
        }
        w.pc += 1;
        executed += 1;
    }
}

/// Account for a warp's exit: its threads count as arrived at the cluster
/// barrier and leave `bar.sync` barriers that wait for every live thread.
fn exit_warp(w: &mut Warp, cx: &mut Cluster<'_>) {
    w.done = true;
    let n = w.lanes.count_ones();
    let cb = &mut cx.cbar;
    cb.exited += n;
    if w.cl_mask != 0 && w.cl_phase == cb.phase {
        cb.arrived -= w.cl_mask.count_ones();
    }
    cb.try_complete();
    let cta = &mut cx.ctas[w.rank as usize];
    cta.live -= n;
    let live = cta.live;
    for nb in cta.named.iter_mut() {
        if nb.arrived > 0 && nb.expected == 0 && nb.arrived >= live {
            nb.arrived = 0;
            nb.generation += 1;
        }
    }
}

/// Lanes of `mask` whose peer index is `rank`.
fn peers_to(regs: &[u32], peer: Idx, mask: u32, rank: u32) -> u32 {
    let mut n = 0;
    let mut m = mask;
    while m != 0 {
        let l = m.trailing_zeros() as usize;
        m &= m - 1;
        n += (rd_idx(regs, peer, l) == rank as i64) as u32;
    }
    n
}

fn bar_name(k: &kda_ir::Kernel, bar: u32) -> &str {
    &k.barriers[kda_ir::Barrier::from_u32(bar)].name
}

enum SharedFault {
    Bounds,
    Align,
}

/// Byte offset in the CTA's shared memory of element `i` of a buffer.
#[inline(always)]
fn shared_byte(sb: ShBuf, i: i64, bytes: u32) -> Result<usize, SharedFault> {
    let off = i.wrapping_mul(sb.eb as i64);
    if i < 0 || off + bytes as i64 > sb.size as i64 {
        return Err(SharedFault::Bounds);
    }
    let byte = sb.base as usize + off as usize;
    if !byte.is_multiple_of(bytes.min(16) as usize) {
        return Err(SharedFault::Align);
    }
    Ok(byte)
}

#[cold]
fn shared_fault(
    k: &kda_ir::Kernel,
    sb: ShBuf,
    rank: u32,
    i: i64,
    bytes: u32,
    e: SharedFault,
    site: Site,
) -> SimError {
    let decl = &k.buffers[kda_ir::Buffer::from_u32(sb.buf)];
    match e {
        SharedFault::Bounds => SimError::OutOfBounds(Box::new(OutOfBounds {
            space: Space::Shared { rank },
            name: decl.name.clone(),
            index: vec![i],
            extent: vec![decl.len as i64],
            elems: (bytes / decl.elem.bytes()).max(1) as u64,
            site,
        })),
        SharedFault::Align => SimError::Misaligned(Box::new(Misaligned {
            space: Space::Shared { rank },
            name: decl.name.clone(),
            byte_offset: sb.base as u64 + (i * sb.eb as i64) as u64,
            align: bytes.min(16),
            site,
        })),
    }
}

/// Lane `l`'s byte offset into tensor `t` for an access of `align` bytes
/// (`elems` elements) at the indices in `ix`, bounds- and alignment-checked.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
fn global_byte(
    k: &kda_ir::Kernel,
    t: u32,
    tv: &TensorView<'_>,
    regs: &[u32],
    ix: &[Idx],
    idx: &mut [i64; 8],
    l: usize,
    elems: u64,
    align: u32,
    site: impl Fn() -> Site,
) -> Result<u64, SimError> {
    for (i, &x) in ix.iter().enumerate() {
        idx[i] = rd_idx(regs, x, l);
    }
    let r = ix.len();
    let Some(off) = tv.offset(&idx[..r], elems) else {
        return Err(global_oob(k, t, &idx[..r], tv, elems, site()));
    };
    let byte = off * tv.dtype_bytes as u64;
    if !byte.is_multiple_of(align as u64) {
        return Err(misaligned_global(k, t, byte, align, site()));
    }
    Ok(byte)
}

#[cold]
fn global_oob(
    k: &kda_ir::Kernel,
    t: u32,
    idx: &[i64],
    tv: &TensorView<'_>,
    elems: u64,
    site: Site,
) -> SimError {
    SimError::OutOfBounds(Box::new(OutOfBounds {
        space: Space::Global,
        name: k.tensors[kda_ir::Tensor::from_u32(t)].name.clone(),
        index: idx.to_vec(),
        extent: tv.shape.clone(),
        elems,
        site,
    }))
}

#[cold]
fn misaligned_global(k: &kda_ir::Kernel, t: u32, byte: u64, align: u32, site: Site) -> SimError {
    SimError::Misaligned(Box::new(Misaligned {
        space: Space::Global,
        name: k.tensors[kda_ir::Tensor::from_u32(t)].name.clone(),
        byte_offset: byte,
        align,
        site,
    }))
}

#[cold]
fn produced_early(k: &kda_ir::Kernel, t: u32, site: Site) -> SimError {
    SimError::ProducedBeforeWait {
        tensor: k.tensors[kda_ir::Tensor::from_u32(t)].name.clone(),
        site: Box::new(site),
    }
}

#[cold]
fn tx_overflow(
    k: &kda_ir::Kernel,
    bar: u32,
    rank: u32,
    phase: u32,
    expected: u64,
    arrived: u64,
    site: Site,
) -> SimError {
    SimError::TxOverflow(Box::new(TxOverflow {
        barrier: bar_name(k, bar).to_string(),
        rank,
        phase,
        expected,
        arrived,
        site,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sim::numeric::words;

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
