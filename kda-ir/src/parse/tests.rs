use cranelift_entity::EntityRef;

use super::parse_kernel;
use crate::builder::Builder;
use crate::entities::Barrier;
use crate::kernel::{Access, Dim, LaunchDecl, Provenance};
use crate::op::{BinOp, CachePolicy, CmpOp, Op, ShflMode, Special, UnOp};
use crate::types::{Scalar, Type};
use crate::write::write_kernel;

/// The demo kernel as `cargo run -p dsmem-exchange --example dump` prints it.
const DEMO: &str = include_str!("../../filetests/verifier/dsmem-exchange-ok.kir");

/// Drop the leading comment lines a filetest starts with.
fn body(text: &str) -> String {
    text.lines()
        .skip_while(|l| l.starts_with(';'))
        .map(|l| format!("{l}\n"))
        .collect()
}

#[test]
fn demo_round_trips() {
    let text = body(DEMO);
    let k = parse_kernel(&text).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(write_kernel(&k), text);
    assert_eq!(k.name, "dsmem_exchange");
    assert_eq!(k.launch.cluster, 2);
    assert_eq!(k.roles.len(), 2);
    assert_eq!(k.barriers[Barrier::new(0)].tx_bytes, 128);
}

#[test]
fn every_op_round_trips() {
    let mut b = Builder::new(
        "all_ops",
        LaunchDecl {
            block: 128,
            cluster: 2,
            min_blocks_per_sm: Some(2),
            cluster_policy: crate::ClusterPolicy::LoadBalancing,
        },
    );
    let n = b.sym("n");
    let t = b.tensor(
        "x \"quoted\"\n",
        Scalar::F32,
        &[Dim::Sym(n), Dim::Const(64)],
        &[Dim::Const(64), Dim::Const(1)],
        Provenance::Produced,
        Access::ReadWrite,
    );
    b.set_align(t, 16);
    let s = b.scalar("eps", Scalar::F32);
    let w = b.role("w", 0, 128);
    let bar = b.mbarrier("full", 1, 256, &[w]);
    let buf = b.shared("buf", Scalar::F32, 64, 128, &[w], Some(bar));
    let eps = b.param(s);
    let tid = b.thread_idx();
    let lane = b.special(Special::LaneId);
    let _ = b.special(Special::GridDim(2));
    let neg = b.i32(-7);
    let big = b.iconst(Type::U64, u64::MAX as i64);
    let _ = b.bin(BinOp::Shl, big, big);
    let x = b.ld_global(
        t,
        &[tid, lane],
        Type::vec(Scalar::F32, 4),
        CachePolicy::EvictFirst,
    );
    let x0 = b.extract(x, 3);
    let tiny = b.push(Op::FConst(1e-30), &[], &[Type::F32])[0];
    let inf = b.push(Op::FConst(f64::NEG_INFINITY), &[], &[Type::F32])[0];
    let y = b.fma(x0, tiny, inf, true);
    let _ = b.un(UnOp::Exp2 { fast: true }, y);
    let _ = b.un(UnOp::Sqrt, y);
    let _ = b.un(UnOp::Log2Approx, y);
    let c = b.cmp(CmpOp::Le, y, eps);
    let z = b.select(c, y, eps);
    let p = b.pack(&[z, z]);
    let _ = b.bitcast(p, Type::U64);
    let h = b.cvt(neg, Type::BF16);
    let _ = b.shfl(ShflMode::Bfly, z, lane);
    let e = b.elect();
    b.warp_sync();
    let au = b.iconst(Type::vec(Scalar::U32, 4), 0);
    let bu = b.iconst(Type::vec(Scalar::U32, 2), 0);
    let cf = b.ld_global(
        t,
        &[tid, lane],
        Type::vec(Scalar::F32, 4),
        CachePolicy::Normal,
    );
    let _ = b.mma(au, bu, cf);
    b.st_global(t, &[tid, lane], z, Some(e), CachePolicy::EvictFirst);
    b.in_role(w, |b| {
        b.mbarrier_init(bar);
        b.mbarrier_arrive(bar);
        b.mbarrier_arrive_expect_tx(bar, 256);
        b.fence_mbarrier_init();
        b.fence_proxy_async();
        b.cluster_arrive(false);
        b.cluster_wait();
        b.bar_sync(1, 128);
        b.st_async(buf, lane, z, lane, bar);
        b.cp_async(buf, lane, t, &[tid, lane]);
        b.cp_async_commit();
        b.cp_async_wait(0);
        b.bulk_copy(
            buf,
            lane,
            t,
            &[tid, lane],
            256,
            bar,
            CachePolicy::EvictFirst,
        );
        b.wait(bar);
        let v = b.ld_shared(buf, lane, Type::F32);
        b.st_shared(buf, lane, v);
    });
    b.pdl_wait();
    b.pdl_launch_dependents();
    let r = b.if_else(c, |b| vec![b.f32(1.0)], |_| vec![h]);
    let zero = b.i32(0);
    let ten = b.i32(10);
    let one = b.i32(1);
    let sum = b.for_(zero, ten, one, &[r[0], z], |b, iv, carried| {
        let f = b.cvt(iv, Type::F32);
        let s = b.add(carried[1], f);
        vec![carried[0], s]
    });
    let _ = b.while_(
        &[sum[1]],
        |b, c| b.cmp(CmpOp::Gt, c[0], eps),
        |b, c| vec![b.mul(c[0], c[0])],
    );
    b.for_(zero, ten, one, &[], |_, _, _| vec![]);
    b.set_early(true);
    let k = b.finish();
    let text = write_kernel(&k);
    assert!(
        text.starts_with(
            "kernel all_ops block=128 cluster=2 min_blocks=2 cluster_policy=balance early {"
        ),
        "{text}"
    );
    let back = parse_kernel(&text).unwrap_or_else(|e| panic!("{e}\n{text}"));
    assert_eq!(write_kernel(&back), text);
    assert_eq!(back.schedule, k.schedule);
    assert_eq!(back.launch.cluster_policy, k.launch.cluster_policy);
    assert_eq!(back.tensors[t].name, "x \"quoted\"\n");
}

#[test]
fn hand_written_text_is_accepted() {
    let text = "\
; a comment line
kernel k block=32 cluster=1 {
  v0:u32 = special tid
  v5:bool = cmp.eq v0, v0   ; a trailing comment
  if v5 {
  } else {
  }
}
";
    let k = parse_kernel(text).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(k.values.len(), 6, "gaps in the numbering are kept");
    let printed = write_kernel(&k);
    assert!(
        printed.contains("v5:bool = cmp.eq v0, v0  ; @<kda>:0:0"),
        "{printed}"
    );
    // Implied yields take the location of their region's instruction.
    let again = parse_kernel(&printed).unwrap();
    assert_eq!(write_kernel(&again), printed);
}

#[test]
fn the_early_flag_follows_the_launch() {
    for (header, early, min_blocks) in [
        ("kernel k block=32 cluster=1 {", false, None),
        ("kernel k block=32 cluster=1 early {", true, None),
        (
            "kernel k block=32 cluster=2 min_blocks=3 early {",
            true,
            Some(3),
        ),
        (
            "kernel k block=32 cluster=2 early trigger_at_entry {",
            true,
            None,
        ),
        (
            "kernel k block=32 cluster=2 trigger_at_entry {",
            false,
            None,
        ),
        (
            "kernel k block=32 cluster=2 early trigger_at_entry late_release {",
            true,
            None,
        ),
        ("kernel k block=32 cluster=2 late_release {", false, None),
    ] {
        let text = format!("{header}\n}}\n");
        let k = parse_kernel(&text).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(k.schedule.early, early, "{header}");
        assert_eq!(
            k.schedule.trigger_at_entry,
            header.contains("trigger_at_entry"),
            "{header}"
        );
        assert_eq!(
            k.schedule.late_release,
            header.contains("late_release"),
            "{header}"
        );
        assert_eq!(k.launch.min_blocks_per_sm, min_blocks, "{header}");
        assert_eq!(write_kernel(&k), text);
    }
    // The flags come after `min_blocks`, in header order, each once.
    for text in [
        "kernel k block=32 cluster=1 early min_blocks=2 {\n}\n",
        "kernel k block=32 cluster=1 early early {\n}\n",
        "kernel k block=32 cluster=1 trigger_at_entry early {\n}\n",
        "kernel k block=32 cluster=1 late_release trigger_at_entry {\n}\n",
        "kernel k block=32 cluster=1 late_release late_release {\n}\n",
    ] {
        parse_kernel(text).expect_err(text);
    }
}

#[test]
fn the_cluster_policy_is_named_after_maxnreg() {
    for (header, policy) in [
        (
            "kernel k block=32 cluster=2 maxnreg=64 cluster_policy=spread early {",
            crate::ClusterPolicy::Spread,
        ),
        (
            "kernel k block=32 cluster=2 cluster_policy=balance {",
            crate::ClusterPolicy::LoadBalancing,
        ),
    ] {
        let text = format!("{header}\n}}\n");
        let k = parse_kernel(&text).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(k.launch.cluster_policy, policy, "{header}");
        assert_eq!(write_kernel(&k), text);
    }
    // `default` parses (and is not written back); other names do not.
    let k = parse_kernel("kernel k block=32 cluster=2 cluster_policy=default {\n}\n")
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(k.launch.cluster_policy, crate::ClusterPolicy::Default);
    for text in [
        "kernel k block=32 cluster=2 cluster_policy=fast {\n}\n",
        "kernel k block=32 cluster=2 cluster_policy=2 {\n}\n",
        "kernel k block=32 cluster=2 early cluster_policy=balance {\n}\n",
    ] {
        let e = parse_kernel(text).expect_err(text);
        assert!(!e.to_string().is_empty());
    }
    let e = parse_kernel("kernel k block=32 cluster=2 cluster_policy=fast {\n}\n")
        .expect_err("an unknown policy");
    assert!(
        e.to_string()
            .contains("a cluster policy (`default`, `spread` or `balance`)"),
        "{e}"
    );
}

#[test]
fn the_tensor_hints_name_declared_tensors_in_order() {
    let decls = "  tensor t0 \"x\": f32[32] strides[1] ready read align 4  ; @<kda>:0:0\n  tensor t1 \"y\": f32[32] strides[1] ready write align 4  ; @<kda>:0:0\n";
    let hinted = |k: &crate::Kernel, name: &str| {
        k.schedule
            .tensor_hints()
            .into_iter()
            .find(|(n, _)| *n == name)
            .map(|(_, ts)| ts.len())
    };
    for name in [
        "evict_first",
        "stage_through_shared",
        "store_through_shared",
    ] {
        for (hint, named) in [
            (String::new(), 0),
            (format!(" {name}=t1"), 1),
            (format!(" {name}=t0,t1"), 2),
        ] {
            let text = format!("kernel k block=32 cluster=1 early{hint} {{\n{decls}}}\n");
            let k = parse_kernel(&text).unwrap_or_else(|e| panic!("{e}"));
            assert_eq!(hinted(&k, name), Some(named), "{hint}");
            assert!(k.schedule.early);
            assert_eq!(write_kernel(&k), text);
        }
        for (hint, msg) in [
            (format!(" {name}=t2"), "t2 is not declared".to_string()),
            (
                format!(" {name}=t1,t0"),
                format!("{name} lists t0 out of order or twice"),
            ),
            (
                format!(" {name}=t1,t1"),
                format!("{name} lists t1 out of order or twice"),
            ),
            (format!(" {name}=s0"), "expected a tensor (`t0`)".into()),
            (format!(" {name}=sym0"), "expected a tensor (`t0`)".into()),
            (format!(" {name} early"), "expected `=`".into()),
            (format!(" {name}=t0 early"), "expected `{`".into()),
        ] {
            let text = format!("kernel k block=32 cluster=1{hint} {{\n{decls}}}\n");
            let e = parse_kernel(&text).expect_err(&text).to_string();
            assert!(e.contains(&msg), "{hint}: {e}");
        }
    }
    // The hints, each with its own list, in header order.
    let text = format!(
        "kernel k block=32 cluster=1 evict_first=t1 stage_through_shared=t0 store_through_shared=t1 {{\n{decls}}}\n"
    );
    let k = parse_kernel(&text).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        (
            hinted(&k, "evict_first"),
            hinted(&k, "stage_through_shared"),
            hinted(&k, "store_through_shared")
        ),
        (Some(1), Some(1), Some(1))
    );
    assert_eq!(write_kernel(&k), text);
    let swapped = format!(
        "kernel k block=32 cluster=1 stage_through_shared=t0 evict_first=t1 {{\n{decls}}}\n"
    );
    let e = parse_kernel(&swapped).expect_err(&swapped).to_string();
    assert!(e.contains("expected `{`"), "{e}");
}

#[test]
fn the_wave_hint_comes_last_and_is_positive() {
    let decls = "  tensor t0 \"x\": f32[32] strides[1] ready read align 4  ; @<kda>:0:0\n";
    for (hint, wave) in [
        ("", None),
        (" wave=1", Some(1)),
        (" early wave=4", Some(4)),
        (" evict_first=t0 wave=2", Some(2)),
    ] {
        let text = format!("kernel k block=32 cluster=1{hint} {{\n{decls}}}\n");
        let k = parse_kernel(&text).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(k.schedule.wave, wave, "{hint}");
        assert_eq!(write_kernel(&k), text);
    }
    for (hint, msg) in [
        (" wave=0", "wave=0: a wave issues at least one row chain"),
        (" wave", "expected `=`"),
        (" wave=2 early", "expected `{`"),
        (" wave=2 evict_first=t0", "expected `{`"),
    ] {
        let text = format!("kernel k block=32 cluster=1{hint} {{\n{decls}}}\n");
        let e = parse_kernel(&text).expect_err(&text).to_string();
        assert!(e.contains(msg), "{hint}: {e}");
    }
}

#[test]
fn errors_point_at_the_token() {
    let cases = [
        (
            "kernel k block=32 cluster=1 {\n  v0:u32 = add v1, v1\n}\n",
            2,
            16,
            "v1 is used but never defined",
        ),
        (
            "kernel k block=32 cluster=1 {\n  v0:u32 = special tid\n  v0:u32 = special tid\n}\n",
            3,
            3,
            "v0 is defined twice",
        ),
        (
            "kernel k block=32 cluster=1 {\n  v0:f32 = frob v1\n}\n",
            2,
            12,
            "unknown instruction `frob`",
        ),
        (
            "kernel k block=32 cluster=1 {\n  mbarrier.init bar0\n}\n",
            2,
            17,
            "bar0 is not declared",
        ),
        (
            "kernel k block=32 cluster=1 {\n  tensor t1 \"x\": f32[4] strides[1] ready read align 4\n}\n",
            2,
            10,
            "expected t0",
        ),
        (
            "kernel k block=32 cluster=1 {\n  v0:f33 = fconst 1.0\n}\n",
            2,
            6,
            "unknown type `f33`",
        ),
        (
            "kernel k block=32 cluster=1 {\n  pdl.wait  ; @nowhere\n}\n",
            2,
            13,
            "bad location",
        ),
        ("kernel k block=32 cluster=1 {\n", 1, 30, "expected `}`"),
    ];
    for (text, line, col, msg) in cases {
        let e = parse_kernel(text).expect_err(text);
        assert!(e.msg.contains(msg), "{e} (wanted {msg:?})");
        assert_eq!((e.line, e.col), (line, col), "{e}");
    }
}
