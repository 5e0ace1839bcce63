//! Roles: warp-aligned, disjoint, within the block; not nested in other
//! roles; the only users of the buffers and barriers declared for them.

mod verifier_support;

use kda_ir::Type;
use verifier_support::*;

#[test]
fn roles_are_warp_aligned_and_in_the_block() {
    assert_err(
        &kernel(128, |b| {
            b.role("half", 16, 32);
        }),
        "role role0 \"half\" covers threads 16..48, which is not warp-aligned; its first thread and thread count must be multiples of 32",
    );
    assert_err(
        &kernel(128, |b| {
            b.role("odd", 0, 48);
        }),
        "role role0 \"odd\" covers threads 0..48, which is not warp-aligned",
    );
    assert_err(
        &kernel(128, |b| {
            b.role("none", 32, 0);
        }),
        "role role0 \"none\" has no threads; allowed: a positive multiple of 32",
    );
    assert_err(
        &kernel(128, |b| {
            b.role("big", 64, 96);
        }),
        "role role0 \"big\" covers threads 64..160, beyond the block of 128 threads",
    );
    assert_ok(&kernel(128, |b| {
        b.role("state", 0, 96);
        b.role("gate", 96, 32);
    }));
}

#[test]
fn roles_do_not_overlap() {
    assert_err(
        &kernel(128, |b| {
            b.role("state", 0, 96);
            b.role("gate", 64, 32);
        }),
        "role role1 \"gate\" (threads 64..96) overlaps role role0 \"state\" (threads 0..96); roles are disjoint thread ranges",
    );
}

#[test]
fn role_regions_nest_only_in_their_own_role() {
    assert_err(
        &kernel(64, |b| {
            let (a, c) = (b.role("a", 0, 32), b.role("c", 32, 32));
            b.in_role(a, |b| b.in_role(c, |b| b.pdl_wait()));
        }),
        "the region of role role1 \"c\" is nested in the region of role role0 \"a\"; roles are disjoint, so it would never run",
    );
    assert_ok(&kernel(64, |b| {
        let a = b.role("a", 0, 32);
        b.in_role(a, |b| b.in_role(a, |b| b.pdl_wait()));
    }));
}

#[test]
fn buffers_are_touched_only_by_their_roles() {
    let build = |inside: Option<usize>| {
        kernel(64, |b| {
            let roles = [b.role("a", 0, 32), b.role("c", 32, 32)];
            let s = b.shared("s", kda_ir::Scalar::F32, 32, 16, &roles[..1], None);
            let body = |b: &mut kda_ir::Builder| {
                let i = b.u32(0);
                b.ld_shared(s, i, Type::F32);
            };
            match inside {
                None => body(b),
                Some(r) => b.in_role(roles[r], body),
            }
        })
    };
    assert_err(
        &build(None),
        "`ld.shared` touches shared buffer buf0 \"s\", which is declared for roles (role0 \"a\"); this runs outside any role: move it into a region of one of those roles",
    );
    assert_err(
        &build(Some(1)),
        "which is declared for roles (role0 \"a\"); this runs in role role1 \"c\"",
    );
    assert_ok(&build(Some(0)));
}

#[test]
fn barriers_are_touched_only_by_their_roles() {
    let build = |in_role: bool| {
        kernel(64, |b| {
            let a = b.role("a", 0, 32);
            let bar = b.mbarrier("full", 1, 0, &[a]);
            if in_role {
                b.in_role(a, |b| b.mbarrier_init(bar));
            } else {
                b.mbarrier_init(bar);
            }
        })
    };
    assert_err(
        &build(false),
        "`mbarrier.init` touches mbarrier bar0 \"full\", which is declared for roles (role0 \"a\")",
    );
    assert_ok(&build(true));
}
