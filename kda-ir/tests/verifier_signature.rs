//! Operand and result counts and types of every op (the signatures in the
//! op table, `op/table.rs`). Each test builds the illegal form, asserts the message, and
//! builds the legal twin, which verifies clean.

mod verifier_support;

use cranelift_entity::EntityRef;
use kda_ir::op::{BinOp, CmpOp, Op, ShflMode, Special, UnOp};
use kda_ir::{Access, Builder, CachePolicy, Dim, Provenance, Scalar, Tensor, Type, Value};
use verifier_support::*;

/// Build a 128-thread kernel with `f`; it must fail with `msg`.
#[track_caller]
fn bad(msg: &str, f: impl FnOnce(&mut Builder)) {
    assert_err(&kernel(128, f), msg);
}

/// Build a 128-thread kernel with `f`; it must verify.
#[track_caller]
fn good(f: impl FnOnce(&mut Builder)) {
    assert_ok(&kernel(128, f));
}

const F32X4: Type = Type::vec(Scalar::F32, 4);

fn tensor(b: &mut Builder, dtype: Scalar, access: Access, align: u32) -> Tensor {
    let t = b.tensor(
        "x",
        dtype,
        &[Dim::Const(8), Dim::Const(64)],
        &[Dim::Const(64), Dim::Const(1)],
        Provenance::Ready,
        access,
    );
    b.set_align(t, align);
    t
}

fn f32(b: &mut Builder) -> Value {
    b.f32(1.0)
}

#[test]
fn value_types_are_scalars_or_vectors_of_2_4_8() {
    bad(
        "v0 has type f32x3; allowed: a scalar or a vector of 2, 4 or 8 lanes",
        |b| {
            b.push(Op::FConst(1.0), &[], &[Type::vec(Scalar::F32, 3)]);
        },
    );
    bad("v0 has type boolx2; bool values are scalars", |b| {
        b.push(Op::ElectSync, &[], &[Type::vec(Scalar::Bool, 2)]);
    });
    good(|b| {
        let x = f32(b);
        b.pack(&[x, x, x, x]);
    });
}

#[test]
fn operand_and_result_counts() {
    bad("`add` takes 2 operands, found 3", |b| {
        let x = b.u32(1);
        b.push(Op::Bin(BinOp::Add), &[x, x, x], &[Type::U32]);
    });
    bad("`add` has 1 result, found 0", |b| {
        let x = b.u32(1);
        b.push(Op::Bin(BinOp::Add), &[x, x], &[]);
    });
    bad("`pdl.wait` takes 0 operands, found 1", |b| {
        let x = b.u32(1);
        b.push(Op::GridDepWait, &[x], &[]);
    });
    good(|b| {
        let x = b.u32(1);
        b.add(x, x);
        b.pdl_wait();
    });
}

#[test]
fn constants_and_indices() {
    bad(
        "`iconst 4294967296` does not fit u32 (allowed: 0..=4294967295)",
        |b| {
            b.iconst(Type::U32, 1 << 32);
        },
    );
    bad("`iconst 2` does not fit bool (allowed: 0..=1)", |b| {
        b.iconst(Type::BOOL, 2);
    });
    bad(
        "`iconst` produces an integer or bool scalar, found f32",
        |b| {
            b.iconst(Type::F32, 1);
        },
    );
    bad("`fconst` produces f32 or bf16, found i32", |b| {
        b.push(Op::FConst(1.0), &[], &[Type::I32]);
    });
    bad("`special` produces u32, found v0:i32", |b| {
        b.push(Op::Special(Special::ThreadIdx), &[], &[Type::I32]);
    });
    bad(
        "`special` dimension 3 does not exist; allowed: 0 (x), 1 (y), 2 (z)",
        |b| {
            b.special(Special::BlockIdx(3));
        },
    );
    bad("`param` produces f32, found v0:i32", |b| {
        let s = b.scalar("eps", Scalar::F32);
        b.push(Op::Param(s), &[], &[Type::I32]);
    });
    good(|b| {
        b.iconst(Type::U32, u32::MAX as i64);
        b.iconst(Type::I64, i64::MIN);
        b.bool(true);
        b.push(Op::FConst(1.0), &[], &[Type::BF16]);
        b.special(Special::GridDim(2));
        let s = b.scalar("eps", Scalar::F32);
        b.param(s);
    });
}

#[test]
fn binary_arithmetic() {
    bad(
        "`add` operands and result must have one type, found v0:u32, v1:i32 -> v2:u32",
        |b| {
            let (x, y) = (b.u32(1), b.i32(1));
            b.add(x, y);
        },
    );
    bad("`rem` takes integers, found v0:f32", |b| {
        let x = f32(b);
        b.bin(BinOp::Rem, x, x);
    });
    bad("`and` takes integers or bool, found v0:f32", |b| {
        let x = f32(b);
        b.bin(BinOp::And, x, x);
    });
    bad("`add` takes integers or floats, found v0:bool", |b| {
        let x = b.bool(true);
        b.add(x, x);
    });
    good(|b| {
        let (x, f, p) = (b.u32(1), f32(b), b.bool(true));
        b.bin(BinOp::Rem, x, x);
        b.bin(BinOp::Shr, x, x);
        b.bin(BinOp::Max, f, f);
        b.bin(BinOp::Xor, p, p);
    });
}

#[test]
fn fma_is_f32() {
    bad("`fma` operand b must be an f32, found v1:bf16", |b| {
        let x = f32(b);
        let h = b.cvt(x, Type::BF16);
        b.push(Op::Fma { ftz: false }, &[x, h, x], &[Type::F32]);
    });
    good(|b| {
        let x = f32(b);
        b.fma(x, x, x, true);
    });
}

#[test]
fn unary_arithmetic() {
    bad("`neg` takes signed integers or floats, found v0:u32", |b| {
        let x = b.u32(1);
        b.un(UnOp::Neg, x);
    });
    bad("`exp.fast` takes f32, found v1:bf16", |b| {
        let x = f32(b);
        let h = b.cvt(x, Type::BF16);
        b.un(UnOp::Exp { fast: true }, h);
    });
    bad("`not` takes integers or bool, found v0:f32", |b| {
        let x = f32(b);
        b.un(UnOp::Not, x);
    });
    bad(
        "`sqrt` produces its operand's type, found v0:f32 -> v1:bf16",
        |b| {
            let x = f32(b);
            b.push(Op::Un(UnOp::Sqrt), &[x], &[Type::BF16]);
        },
    );
    good(|b| {
        let (x, i, p) = (f32(b), b.i32(-1), b.bool(false));
        b.un(UnOp::Neg, i);
        b.un(UnOp::Abs, x);
        b.un(UnOp::Not, p);
        b.un(UnOp::Sigmoid { fast: false }, x);
        b.un(UnOp::Rsqrt { fast: true }, x);
    });
}

#[test]
fn compare_and_select() {
    bad(
        "`cmp.lt` compares two values of one type, found v0:f32 and v1:i32",
        |b| {
            let (x, y) = (f32(b), b.i32(1));
            b.cmp(CmpOp::Lt, x, y);
        },
    );
    bad(
        "`cmp.lt` cannot order bool values; bool allows only `cmp.eq` and `cmp.ne`",
        |b| {
            let p = b.bool(true);
            b.cmp(CmpOp::Lt, p, p);
        },
    );
    bad("`cmp.eq` compares scalars, found v1:f32x2", |b| {
        let x = f32(b);
        let v = b.pack(&[x, x]);
        b.cmp(CmpOp::Eq, v, v);
    });
    bad("`cmp.eq` produces bool, found v1:u32", |b| {
        let x = f32(b);
        b.push(Op::Cmp(CmpOp::Eq), &[x, x], &[Type::U32]);
    });
    bad("`select` condition must be bool, found v0:u32", |b| {
        let c = b.u32(1);
        b.select(c, c, c);
    });
    bad(
        "`select` operands and result must have one type, found v1:f32, v2:i32 -> v3:f32",
        |b| {
            let (c, x, y) = (b.bool(true), f32(b), b.i32(0));
            b.select(c, x, y);
        },
    );
    good(|b| {
        let (p, x) = (b.bool(true), f32(b));
        b.cmp(CmpOp::Ne, p, p);
        let c = b.cmp(CmpOp::Ge, x, x);
        b.select(c, x, x);
    });
}

#[test]
fn conversions() {
    bad(
        "`cvt` converts between numeric types, found v0:bool -> u32; use `select`",
        |b| {
            let p = b.bool(true);
            b.cvt(p, Type::U32);
        },
    );
    bad(
        "`cvt` keeps the lane count, found v1:f32x2 -> bf16x4",
        |b| {
            let x = f32(b);
            let v = b.pack(&[x, x]);
            b.cvt(v, Type::vec(Scalar::BF16, 4));
        },
    );
    bad(
        "`bitcast` keeps the size, found v0:f32 (4 bytes) -> u64 (8 bytes)",
        |b| {
            let x = f32(b);
            b.bitcast(x, Type::U64);
        },
    );
    bad("`bitcast` cannot reinterpret bool", |b| {
        let p = b.bool(true);
        b.bitcast(p, Type::BOOL);
    });
    good(|b| {
        let x = f32(b);
        let v = b.pack(&[x, x]);
        b.cvt(v, Type::vec(Scalar::BF16, 2));
        b.bitcast(v, Type::U64);
        b.cvt(x, Type::I32);
    });
}

#[test]
fn pack_and_extract() {
    bad("`pack` takes 2, 4 or 8 scalars, found 3", |b| {
        let x = f32(b);
        b.pack(&[x, x, x]);
    });
    bad(
        "`pack` takes scalars of one type, found v0:f32 and v1:i32",
        |b| {
            let (x, i) = (f32(b), b.i32(1));
            b.push(Op::Pack, &[x, i], &[Type::vec(Scalar::F32, 2)]);
        },
    );
    bad("`pack` takes non-bool scalars, found v0:bool", |b| {
        let p = b.bool(true);
        b.push(Op::Pack, &[p, p], &[Type::vec(Scalar::U32, 2)]);
    });
    bad("`pack` produces f32x2, found v1:f32x4", |b| {
        let x = f32(b);
        b.push(Op::Pack, &[x, x], &[F32X4]);
    });
    bad(
        "`extract.4` reads lane 4 of v1:f32x4, which has lanes 0..4",
        |b| {
            let x = f32(b);
            let v = b.pack(&[x, x, x, x]);
            b.extract(v, 4);
        },
    );
    bad("`extract.0` takes a vector, found v0:f32", |b| {
        let x = f32(b);
        b.extract(x, 0);
    });
    good(|b| {
        let x = b.u32(1);
        let v = b.pack(&[x, x, x, x, x, x, x, x]);
        b.extract(v, 7);
    });
}

#[test]
fn global_loads() {
    bad(
        "`ld.global` of t0 \"x\" takes one index per dimension (2), found 1",
        |b| {
            let t = tensor(b, Scalar::F32, Access::Read, 16);
            let i = b.u32(0);
            b.ld_global(t, &[i], Type::F32, CachePolicy::Normal);
        },
    );
    bad(
        "`ld.global` index must be an integer scalar, found v0:f32",
        |b| {
            let t = tensor(b, Scalar::F32, Access::Read, 16);
            let x = f32(b);
            b.ld_global(t, &[x, x], Type::F32, CachePolicy::Normal);
        },
    );
    bad(
        "`ld.global` of t0 \"x\" accesses bf16x2; its elements must be the tensor's dtype f32",
        |b| {
            let t = tensor(b, Scalar::F32, Access::Read, 16);
            let i = b.u32(0);
            b.ld_global(t, &[i, i], Type::vec(Scalar::BF16, 2), CachePolicy::Normal);
        },
    );
    bad(
        "`ld.global` accesses f32x8 (32 bytes); allowed: a scalar or a vector of 4, 8 or 16 bytes",
        |b| {
            let t = tensor(b, Scalar::F32, Access::Read, 16);
            let i = b.u32(0);
            b.ld_global(t, &[i, i], Type::vec(Scalar::F32, 8), CachePolicy::Normal);
        },
    );
    bad(
        "`ld.global` of f32x4 needs t0 \"x\" aligned to 16 bytes; it declares align 4",
        |b| {
            let t = tensor(b, Scalar::F32, Access::Read, 4);
            let i = b.u32(0);
            b.ld_global(t, &[i, i], F32X4, CachePolicy::Normal);
        },
    );
    bad(
        "`ld.global` of f32x4 needs a unit innermost stride; t0 \"x\" does not declare one",
        |b| {
            let t = b.tensor(
                "x",
                Scalar::F32,
                &[Dim::Const(64)],
                &[Dim::Const(2)],
                Provenance::Ready,
                Access::Read,
            );
            b.set_align(t, 16);
            let i = b.u32(0);
            b.ld_global(t, &[i], F32X4, CachePolicy::Normal);
        },
    );
    bad(
        "t0 \"x\" is write-only; `ld.global` needs read or readwrite access",
        |b| {
            let t = tensor(b, Scalar::F32, Access::Write, 16);
            let i = b.u32(0);
            b.ld_global(t, &[i, i], Type::F32, CachePolicy::Normal);
        },
    );
    good(|b| {
        let t = tensor(b, Scalar::F32, Access::ReadWrite, 16);
        let (i, j) = (b.u32(0), b.iconst(Type::I64, 0));
        b.ld_global(t, &[i, j], F32X4, CachePolicy::EvictFirst);
        b.ld_global(t, &[i, j], Type::F32, CachePolicy::Normal);
        let h = tensor(b, Scalar::BF16, Access::Read, 4);
        b.ld_global(h, &[i, i], Type::vec(Scalar::BF16, 2), CachePolicy::Normal);
    });
}

#[test]
fn global_stores() {
    bad(
        "t0 \"x\" is read-only; `st.global` needs write or readwrite access",
        |b| {
            let t = tensor(b, Scalar::F32, Access::Read, 16);
            let (i, x) = (b.u32(0), f32(b));
            b.st_global(t, &[i, i], x, None, CachePolicy::Normal);
        },
    );
    bad("`st.global` predicate must be bool, found v0:u32", |b| {
        let t = tensor(b, Scalar::F32, Access::Write, 16);
        let (i, x) = (b.u32(0), f32(b));
        b.st_global(t, &[i, i], x, Some(i), CachePolicy::Normal);
    });
    bad(
        "`st.global` of t0 \"x\" takes one index per dimension (2), the value and the predicate: 4 operands, found 3",
        |b| {
            let t = tensor(b, Scalar::F32, Access::Write, 16);
            let (i, x) = (b.u32(0), f32(b));
            b.push(
                Op::StGlobal {
                    tensor: t,
                    policy: CachePolicy::Normal,
                    predicated: true,
                },
                &[i, i, x],
                &[],
            );
        },
    );
    good(|b| {
        let t = tensor(b, Scalar::F32, Access::Write, 16);
        let (i, x, p) = (b.u32(0), f32(b), b.bool(true));
        b.st_global(t, &[i, i], x, Some(p), CachePolicy::Normal);
    });
}

#[test]
fn shared_accesses() {
    bad(
        "`ld.shared` of buf0 \"s\" accesses u32; its elements must be the buffer's f32",
        |b| {
            let s = b.shared("s", Scalar::F32, 64, 16, &[], None);
            let i = b.u32(0);
            b.ld_shared(s, i, Type::U32);
        },
    );
    bad(
        "`st.shared` of f32x4 needs buf0 \"s\" aligned to 16 bytes; it declares align 4",
        |b| {
            let s = b.shared("s", Scalar::F32, 64, 4, &[], None);
            let (i, x) = (b.u32(0), f32(b));
            let v = b.pack(&[x, x, x, x]);
            b.st_shared(s, i, v);
        },
    );
    bad(
        "`ld.shared` index must be an integer scalar, found v0:f32",
        |b| {
            let s = b.shared("s", Scalar::F32, 64, 16, &[], None);
            let x = f32(b);
            b.ld_shared(s, x, Type::F32);
        },
    );
    good(|b| {
        let s = b.shared("s", Scalar::F32, 64, 16, &[], None);
        let (i, x) = (b.u32(0), f32(b));
        let v = b.pack(&[x, x, x, x]);
        b.st_shared(s, i, v);
        b.ld_shared(s, i, F32X4);
    });
}

#[test]
fn warp_collectives() {
    bad(
        "`shfl.bfly` moves 32-bit values (f32, i32, u32, bf16x2), found v1:u64",
        |b| {
            let (l, x) = (b.u32(1), b.iconst(Type::U64, 0));
            b.shfl(ShflMode::Bfly, x, l);
        },
    );
    bad(
        "`shfl.idx` lane or mask must be an integer scalar, found v0:f32",
        |b| {
            let x = f32(b);
            b.shfl(ShflMode::Idx, x, x);
        },
    );
    bad("`elect` produces bool, found v0:u32", |b| {
        b.push(Op::ElectSync, &[], &[Type::U32]);
    });
    bad(
        "`mma.m16n8k16` operand b must be u32x2, found v1:u32x4",
        |b| {
            let u = b.u32(0);
            let a = b.pack(&[u, u, u, u]);
            let x = f32(b);
            let c = b.pack(&[x, x, x, x]);
            b.mma(a, a, c);
        },
    );
    good(|b| {
        let (l, x) = (b.u32(1), f32(b));
        b.shfl(ShflMode::Bfly, x, l);
        let x2 = b.pack(&[x, x]);
        let h = b.cvt(x2, Type::vec(Scalar::BF16, 2));
        b.shfl(ShflMode::Idx, h, l);
        b.elect();
        let u = b.u32(0);
        let a = b.pack(&[u, u, u, u]);
        let bb = b.pack(&[u, u]);
        let c = b.pack(&[x, x, x, x]);
        b.mma(a, bb, c);
    });
}

/// A one-warp role owning a barrier and a buffer, for the async ops.
fn with_async(
    b: &mut Builder,
    align: u32,
    f: impl FnOnce(&mut Builder, kda_ir::Buffer, kda_ir::Barrier, Tensor),
) {
    let t = tensor(b, Scalar::F32, Access::Read, 16);
    let bar = b.mbarrier("full", 1, 0, &[]);
    let s = b.shared("s", Scalar::F32, 64, align, &[], None);
    b.mbarrier_init(bar);
    f(b, s, bar, t);
}

#[test]
fn async_copies_and_sends() {
    bad(
        "`st.async` stores 4, 8 or 16 bytes, found v2:bf16 (2 bytes)",
        |b| {
            with_async(b, 16, |b, s, bar, _| {
                let (i, x) = (b.u32(0), f32(b));
                let h = b.cvt(x, Type::BF16);
                b.st_async(s, i, h, i, bar);
            })
        },
    );
    bad(
        "`st.async` destination cta must be an integer scalar, found v1:f32",
        |b| {
            with_async(b, 16, |b, s, bar, _| {
                let (i, x) = (b.u32(0), f32(b));
                b.st_async(s, i, x, x, bar);
            })
        },
    );
    bad(
        "`cp.async` needs buf0 \"s\" aligned to 16 bytes; it declares align 4",
        |b| {
            with_async(b, 4, |b, s, _, t| {
                let i = b.u32(0);
                b.cp_async(s, i, t, &[i, i]);
            })
        },
    );
    bad(
        "`cp.async.bulk` copies a positive multiple of 16 bytes, found 20",
        |b| {
            with_async(b, 16, |b, s, bar, t| {
                let i = b.u32(0);
                b.bulk_copy(s, i, t, &[i, i], 20, bar, CachePolicy::Normal);
            })
        },
    );
    bad(
        "`cp.async.bulk` copies 512 bytes from t0 \"x\" into buf0 \"s\", which holds 256",
        |b| {
            with_async(b, 16, |b, s, bar, t| {
                let i = b.u32(0);
                b.bulk_copy(s, i, t, &[i, i], 512, bar, CachePolicy::Normal);
            })
        },
    );
    bad(
        "`mbarrier.arrive.expect_tx` expects 0 bytes; allowed: 1..=1048575",
        |b| with_async(b, 16, |b, _, bar, _| b.mbarrier_arrive_expect_tx(bar, 0)),
    );
    bad(
        "`bar.sync` id 16 does not exist; named barriers are 0..16",
        |b| b.bar_sync(16, 128),
    );
    bad(
        "`bar.sync` counts 48 threads; allowed: a positive multiple of 32 up to the block (128)",
        |b| b.bar_sync(1, 48),
    );
    good(|b| {
        with_async(b, 16, |b, s, _, t| {
            let i = b.u32(0);
            b.cp_async(s, i, t, &[i, i]);
            b.cp_async_commit();
            b.cp_async_wait(0);
        });
        b.bar_sync(15, 128);
    });
}

#[test]
fn if_regions_yield_its_results() {
    bad("`if` condition must be bool, found v0:u32", |b| {
        let c = b.u32(1);
        b.if_(c, |_| {});
    });
    bad(
        "the else-region of this `if` yields (i32) but must yield (f32) (the `if` results)",
        |b| {
            let c = b.bool(true);
            b.if_else(c, |b| vec![b.f32(1.0)], |b| vec![b.i32(1)]);
        },
    );
    good(|b| {
        let c = b.bool(true);
        b.if_else(c, |b| vec![b.f32(1.0)], |b| vec![b.f32(2.0)]);
    });
}

#[test]
fn for_loops() {
    bad(
        "`for` bounds must have one integer scalar type, found lo v0:i32, hi v1:u32, step v2:i32",
        |b| {
            let (lo, hi, st) = (b.i32(0), b.u32(4), b.i32(1));
            b.for_(lo, hi, st, &[], |_, _, _| vec![]);
        },
    );
    bad(
        "the body of this `for` yields (i32) but must yield (f32)",
        |b| {
            let (lo, hi, st, x) = (b.i32(0), b.i32(4), b.i32(1), f32(b));
            b.for_(lo, hi, st, &[x], |_, iv, _| vec![iv]);
        },
    );
    let mut k = kernel(128, |b| {
        let (lo, hi, st, x) = (b.i32(0), b.i32(4), b.i32(1), f32(b));
        b.for_(lo, hi, st, &[x], |_, _, c| vec![c[0]]);
    });
    let f = find(&k, "for");
    k.insts[f].results.clear();
    assert_err(&k, "this `for` carries (f32) but has results ()");
    good(|b| {
        let (lo, hi, st, x) = (
            b.iconst(Type::I64, 0),
            b.iconst(Type::I64, 4),
            b.iconst(Type::I64, 1),
            f32(b),
        );
        b.for_(lo, hi, st, &[x], |b, iv, c| {
            let f = b.cvt(iv, Type::F32);
            vec![b.add(c[0], f)]
        });
    });
}

#[test]
fn while_loops() {
    bad(
        "the condition of this `while` yields (u32, f32) but must yield (bool, f32) (the condition, then the carried values)",
        |b| {
            let x = f32(b);
            b.while_(&[x], |b, _| b.u32(1), |_, c| vec![c[0]]);
        },
    );
    good(|b| {
        let x = f32(b);
        b.while_(
            &[x],
            |b, c| {
                let one = b.f32(1.0);
                b.cmp(CmpOp::Lt, c[0], one)
            },
            |b, c| vec![b.add(c[0], c[0])],
        );
    });
}

#[test]
fn role_bodies_yield_nothing() {
    let mut k = kernel(128, |b| {
        let r = b.role("all", 0, 128);
        b.in_role(r, |b| {
            b.u32(1);
        });
    });
    let y = find(&k, "yield");
    let v = kda_ir::Value::new(0);
    k.insts[y].args.push(v);
    assert_err(&k, "the body of this `role` yields (u32) but must yield ()");
    assert_ok(&kernel(128, |b| {
        let r = b.role("all", 0, 128);
        b.in_role(r, |b| {
            b.u32(1);
        });
    }));
}

/// Each kind of rule a row of the op table states (`op/table.rs`), on an op
/// whose row uses it: the table-driven check rejects the wrong type with the
/// operand's name and the rule, and accepts the legal twin.
#[test]
fn table_rules_of_each_kind() {
    // A named operand of one fixed type.
    bad(
        "`mbarrier.wait.parity` parity must be a u32, found v0:f32",
        |b| {
            with_async(b, 16, |b, _, bar, _| {
                let x = f32(b);
                let op = Op::MbarWaitParity {
                    barrier: bar,
                    ring: 0,
                };
                b.push(op, &[x], &[]);
            })
        },
    );
    // The ring index, present when the barrier is a ring.
    let ring = |b: &mut Builder, at: Value| {
        let first = b.mbarrier("full0", 1, 0, &[]);
        b.mbarrier("full1", 1, 0, &[]);
        b.mbarrier_arrive_at(first, 2, at);
    };
    bad(
        "`mbarrier.arrive` ring index must be a u32, found v0:i32",
        |b| {
            let at = b.i32(0);
            ring(b, at);
        },
    );
    // An integer scalar.
    bad(
        "`st.shared` index must be an integer scalar, found v0:bool",
        |b| {
            let s = b.shared("s", Scalar::F32, 64, 16, &[], None);
            let (p, x) = (b.bool(true), f32(b));
            b.st_shared(s, p, x);
        },
    );
    // The type variable: one type for the operand and result...
    bad(
        "`shfl.idx` produces its value's type, found v0:f32 -> v2:u32",
        |b| {
            let (x, l) = (f32(b), b.u32(0));
            b.push(Op::Shfl(ShflMode::Idx), &[x, l], &[Type::U32]);
        },
    );
    // ... which the row's class admits.
    bad("`sqrt` takes f32, found v0:i32", |b| {
        let i = b.i32(4);
        b.un(UnOp::Sqrt, i);
    });
    // Tensor indices among other operands: the count names every slot.
    bad(
        "`cp.async` of t0 \"x\" takes the shared index and one index per dimension (2): 3 operands, found 2",
        |b| {
            with_async(b, 16, |b, s, _, t| {
                let i = b.u32(0);
                b.cp_async(s, i, t, &[i]);
            })
        },
    );
    // The access the row's effects need from the tensor.
    bad(
        "t0 \"x\" is write-only; `cp.async` needs read or readwrite access",
        |b| {
            let t = tensor(b, Scalar::F32, Access::Write, 16);
            let s = b.shared("s", Scalar::F32, 64, 16, &[], None);
            let i = b.u32(0);
            b.cp_async(s, i, t, &[i, i]);
        },
    );
    good(|b| {
        let at = b.u32(1);
        ring(b, at);
        let (x, l) = (f32(b), b.u32(0));
        b.shfl(ShflMode::Idx, x, l);
        b.un(UnOp::Sqrt, x);
        let t = tensor(b, Scalar::F32, Access::ReadWrite, 16);
        let s = b.shared("s", Scalar::F32, 64, 16, &[], None);
        b.st_shared(s, l, x);
        b.cp_async(s, l, t, &[l, l]);
    });
}
