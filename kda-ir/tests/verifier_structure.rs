//! Structure: references resolve, the regions form a tree, yields end nested
//! regions, every value has one definition. Each failing case has a legal twin.

mod verifier_support;

use cranelift_entity::EntityRef;
use kda_ir::kernel::ValueDef;
use kda_ir::op::InstData;
use kda_ir::verifier::verify;
use kda_ir::{Barrier, Loc, Op, Region, Tensor, Type, Value};
use verifier_support::*;

#[test]
fn declarations_name_declared_entities() {
    let mut k = demo(2);
    k.buffers[kda_ir::Buffer::new(0)].guard = Some(Barrier::new(5));
    assert_err(
        &k,
        "shared buffer buf0 \"inbox\" is guarded by bar5, which is not declared",
    );
    assert_ok(&demo(2));
}

#[test]
fn instructions_name_declared_entities() {
    let mut k = demo(2);
    let ld = find(&k, "ld.global");
    k.insts[ld].op = Op::LdGlobal {
        tensor: Tensor::new(9),
        policy: Default::default(),
    };
    assert_err(&k, "ld.global names t9, which is not declared");
}

#[test]
fn instructions_name_existing_values() {
    let mut k = demo(2);
    let fma = find(&k, "fma");
    k.insts[fma].args[2] = Value::new(999);
    let e = verify(&k).unwrap_err();
    assert!(
        e.errors
            .iter()
            .any(|e| e.msg == "fma names v999, which does not exist"),
        "{e}"
    );
    // A dangling value cannot be printed: the listing is the errors alone.
    assert!(
        e.listing.starts_with(";! the kernel cannot be printed"),
        "{}",
        e.listing
    );
}

#[test]
fn a_region_belongs_to_one_instruction() {
    let mut k = kernel(32, |b| {
        let t = b.bool(true);
        b.if_(t, |_| {});
    });
    let i = find(&k, "if");
    let Op::If { then, .. } = k.insts[i].op else {
        unreachable!()
    };
    k.insts[i].op = Op::If { then, els: then };
    assert_err(
        &k,
        "is also the region of another instruction; a region belongs to exactly one",
    );
}

#[test]
fn an_instruction_appears_once() {
    let mut k = kernel(32, |b| b.pdl_wait());
    let w = find(&k, "pdl.wait");
    let body = k.body;
    k.regions[body].insts.push(w);
    assert_err(&k, "this instruction appears twice in the layout");
    assert_ok(&kernel(32, |b| b.pdl_wait()));
}

#[test]
fn nested_regions_end_with_a_yield() {
    let mut k = kernel(32, |b| {
        let t = b.bool(true);
        b.if_(t, |b| b.pdl_wait());
    });
    let i = find(&k, "if");
    let Op::If { then, .. } = k.insts[i].op else {
        unreachable!()
    };
    k.regions[then].insts.pop();
    assert_err(&k, "of this `if` does not end with a yield");
}

#[test]
fn yield_only_ends_nested_regions() {
    let mut k = kernel(32, |b| b.pdl_wait());
    let y = k.insts.push(InstData {
        op: Op::Yield,
        args: vec![],
        results: vec![],
        loc: Loc::synthetic(),
    });
    let body = k.body;
    k.regions[body].insts.push(y);
    assert_err(
        &k,
        "`yield` in the top-level region; only nested regions end with a yield",
    );

    let mut k = kernel(32, |b| {
        let t = b.bool(true);
        b.if_(t, |b| b.pdl_wait());
    });
    let i = find(&k, "if");
    let Op::If { then, .. } = k.insts[i].op else {
        unreachable!()
    };
    k.regions[then].insts.swap(0, 1);
    assert_err(
        &k,
        "`yield` before the end of its region; it must be the region's last instruction",
    );
}

#[test]
fn a_value_is_defined_once() {
    let mut k = kernel(32, |b| {
        b.u32(1);
        b.u32(2);
    });
    let consts: Vec<_> = k.insts.keys().collect();
    let v = k.insts[consts[0]].results[0];
    k.insts[consts[1]].results[0] = v;
    assert_err(
        &k,
        "v0 is defined more than once; a value has exactly one definition",
    );
}

#[test]
fn a_value_records_its_definition() {
    let mut k = kernel(32, |b| {
        b.u32(1);
    });
    let v = Value::new(0);
    k.values[v].def = ValueDef::Param(Region::new(0), 0);
    assert_err(
        &k,
        "v0 is result 0 of this instruction but records its definition as parameter 0 of r0",
    );
    let ok = kernel(32, |b| {
        let v = b.u32(1);
        assert_eq!(b.ty(v), Type::U32);
    });
    assert_ok(&ok);
}

#[test]
fn tensor_shapes_name_declared_syms() {
    let mut k = demo(2);
    k.tensors[Tensor::new(0)].shape[0] = kda_ir::Dim::Sym(kda_ir::Sym::new(4));
    assert_err(&k, "tensor t0 \"input\" uses sym4, which is not declared");
}

#[test]
fn the_top_level_region_takes_no_parameters() {
    let mut k = kernel(32, |b| b.pdl_wait());
    let body = k.body;
    let v = k.values.push(kda_ir::kernel::ValueData {
        ty: Type::U32,
        def: ValueDef::Param(body, 0),
    });
    k.regions[body].params.push(v);
    assert_err(&k, "the top-level region has parameters; it takes none");
}

#[test]
fn yield_has_no_results() {
    let mut k = kernel(32, |b| {
        let t = b.bool(true);
        b.if_(t, |_| {});
    });
    let y = k
        .insts
        .keys()
        .find(|&i| k.insts[i].op == Op::Yield)
        .unwrap();
    let v = k.values.push(kda_ir::kernel::ValueData {
        ty: Type::U32,
        def: ValueDef::Result(y, 0),
    });
    k.insts[y].results.push(v);
    assert_err(&k, "`yield` has 0 results, found 1");
}
