//! The text parser's limits and malformed operands: entity numbers it would have to allocate for
//! and region nesting it would have to recurse through are refused with a
//! located error instead of taking gigabytes or overflowing the stack.

use kda_ir::parse::{MAX_NESTING, parse_kernel};

/// A kernel whose body is `depth` nested `if`s on one condition.
fn nested_ifs(depth: usize) -> String {
    let mut s = String::from(
        "kernel t block=32 cluster=1 {\n  v0:u32 = iconst 1\n  v1:bool = cmp.eq v0, v0\n",
    );
    for _ in 0..depth {
        s.push_str("  if v1 {\n");
    }
    for _ in 0..depth {
        s.push_str("  } else {\n  }\n");
    }
    s.push_str("}\n");
    s
}

#[test]
fn a_value_numbered_far_past_the_text_is_refused_without_allocating() {
    // Before the limit, this took about 5 GB (one slot per number).
    let text = "kernel t block=32 cluster=1 {\n  v100000000:u32 = iconst 1\n}\n";
    let err = parse_kernel(text).unwrap_err();
    assert_eq!(err.line, 2, "{err}");
    assert!(
        err.to_string()
            .contains("`v100000000` is numbered beyond what this text can define"),
        "{err}"
    );
    // Small gaps stay legal (hand-written filetests use them).
    let gap = "kernel t block=32 cluster=1 {\n  v7:u32 = iconst 1\n}\n";
    parse_kernel(gap).unwrap();
}

#[test]
fn nesting_beyond_the_limit_is_an_error_not_a_stack_overflow() {
    // 10,000 levels overflowed the stack before the limit.
    let err = parse_kernel(&nested_ifs(10_000)).unwrap_err();
    assert!(
        err.to_string()
            .contains(&format!("regions nest deeper than {MAX_NESTING} levels")),
        "{err}"
    );
    // Deep but legal nesting still parses.
    parse_kernel(&nested_ifs(MAX_NESTING - 1)).unwrap();
}

#[test]
fn a_shared_access_without_its_index_is_a_parse_error() {
    // Found by the IR fuzz test: `ld.shared buf0[]` parsed, printed as
    // `<missing>` and did not parse back.
    let text = "kernel t block=32 cluster=1 {\n  shared buf0 \"data\": f32[32] align 16\n  v0:f32 = ld.shared buf0[ ]\n}\n";
    let err = parse_kernel(text).unwrap_err();
    assert_eq!(err.line, 3, "{err}");
    assert!(
        err.to_string()
            .contains("a shared buffer takes one element index"),
        "{err}"
    );
}
