//! SSA scoping in structured regions, each failing case with a legal twin.

mod verifier_support;

use kda_ir::{CmpOp, Op, Type};
use verifier_support::*;

#[test]
fn a_value_is_used_after_its_definition() {
    let mut k = kernel(32, |b| {
        let x = b.u32(1);
        b.add(x, x);
    });
    // Swap the two instructions: the add now comes first.
    let body = k.body;
    k.regions[body].insts.swap(0, 1);
    assert_err(&k, "v0 is used before its definition at");
    assert_ok(&kernel(32, |b| {
        let x = b.u32(1);
        b.add(x, x);
    }));
}

#[test]
fn an_instruction_does_not_use_its_own_result() {
    let mut k = kernel(32, |b| {
        let x = b.u32(1);
        b.add(x, x);
    });
    let add = find(&k, "add");
    let r = k.insts[add].results[0];
    k.insts[add].args[1] = r;
    assert_err(&k, "v1 is used by the instruction that defines it");
}

#[test]
fn values_of_a_region_stay_inside_it() {
    let mut inner = None;
    let mut k = kernel(32, |b| {
        let t = b.bool(true);
        b.if_(t, |b| {
            inner = Some(b.u32(7));
        });
        let one = b.u32(1);
        b.add(one, one);
    });
    let add = find(&k, "add");
    k.insts[add].args[0] = inner.unwrap();
    assert_err(
        &k,
        "v1 is defined inside a region that does not enclose this use (the `if` at",
    );
    // The legal form passes the value out with a yield.
    assert_ok(&kernel(32, |b| {
        let t = b.bool(true);
        let r = b.if_else(t, |b| vec![b.u32(7)], |b| vec![b.u32(8)]);
        b.add(r[0], r[0]);
    }));
}

#[test]
fn region_parameters_stay_inside_their_region() {
    let mut iv = None;
    let mut k = kernel(32, |b| {
        let (lo, hi, one) = (b.i32(0), b.i32(4), b.i32(1));
        b.for_(lo, hi, one, &[], |_, i, _| {
            iv = Some(i);
            vec![]
        });
        b.cvt(lo, Type::F32);
    });
    let cvt = find(&k, "cvt");
    k.insts[cvt].args[0] = iv.unwrap();
    assert_err(&k, "v3 is a parameter of a region of the `for` at");
    // Inside the body, the induction variable and outer values are visible.
    assert_ok(&kernel(32, |b| {
        let (lo, hi, one) = (b.i32(0), b.i32(4), b.i32(1));
        b.for_(lo, hi, one, &[], |b, i, _| {
            let c = b.cmp(CmpOp::Lt, i, hi);
            b.select(c, i, lo);
            vec![]
        });
    }));
}

#[test]
fn results_of_a_region_op_are_not_visible_inside_it() {
    let mut k = kernel(32, |b| {
        let t = b.bool(true);
        b.if_else(t, |b| vec![b.u32(1)], |b| vec![b.u32(2)]);
    });
    let i = find(&k, "if");
    let r = k.insts[i].results[0];
    let Op::If { then, .. } = k.insts[i].op else {
        unreachable!()
    };
    let y = *k.regions[then].insts.last().unwrap();
    k.insts[y].args[0] = r;
    assert_err(&k, "v3 is a result of the `if` at");
    assert_err(&k, "and is not visible inside its regions");
}
