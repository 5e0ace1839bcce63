//! Small numeric building blocks shared by the roles.

use kda_ir::{BinOp, Builder, ShflMode, Type, UnOp, Value};

/// Widen any float to f32 (no-op for f32).
pub fn f32(b: &mut Builder, v: Value) -> Value {
    if b.ty(v) == Type::F32 {
        v
    } else {
        b.cvt(v, Type::F32)
    }
}

pub fn sigmoid(b: &mut Builder, v: Value, fast: bool) -> Value {
    b.un(UnOp::Sigmoid { fast }, v)
}

/// `z · σ(z)`.
pub fn silu(b: &mut Builder, z: Value, fast: bool) -> Value {
    let s = sigmoid(b, z, fast);
    b.mul(z, s)
}

/// Butterfly sum over aligned groups of `width` lanes (a power of two <= 32):
/// every lane ends with its group's sum.
pub fn group_sum(b: &mut Builder, mut v: Value, width: u32) -> Value {
    let mut shift = width / 2;
    while shift > 0 {
        let m = b.u32(shift);
        let o = b.shfl(ShflMode::Bfly, v, m);
        v = b.add(v, o);
        shift /= 2;
    }
    v
}

/// `Σ_e row[e]·x[e]` over one float4 chunk: a product then three FMAs.
pub fn dot4(b: &mut Builder, row: &[Value; 4], x: &[Value; 4], ftz: bool) -> Value {
    let mut acc = b.mul(row[0], x[0]);
    for e in 1..4 {
        acc = b.fma(row[e], x[e], acc, ftz);
    }
    acc
}

/// Pairwise tree sum (`s[j] += s[j + half]`, halving), the order the seed uses
/// for in-thread partials.
pub fn tree_sum(b: &mut Builder, mut s: Vec<Value>) -> Value {
    while s.len() > 1 {
        let half = s.len() / 2;
        for j in 0..half {
            s[j] = b.add(s[j], s[j + half]);
        }
        s.truncate(half);
    }
    s[0]
}

/// The four lanes of a float4 (or any 4-vector).
pub fn lanes4(b: &mut Builder, v: Value) -> [Value; 4] {
    [0, 1, 2, 3].map(|e| b.extract(v, e))
}

pub fn and(b: &mut Builder, x: Value, m: u32) -> Value {
    let m = b.u32(m);
    b.bin(BinOp::And, x, m)
}

pub fn shr(b: &mut Builder, x: Value, s: u32) -> Value {
    let s = b.u32(s);
    b.bin(BinOp::Shr, x, s)
}

pub fn addc(b: &mut Builder, x: Value, c: u32) -> Value {
    if c == 0 {
        return x;
    }
    let c = b.u32(c);
    b.add(x, c)
}

pub fn mulc(b: &mut Builder, x: Value, c: u32) -> Value {
    let c = b.u32(c);
    b.mul(x, c)
}
