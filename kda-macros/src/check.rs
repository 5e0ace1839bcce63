//! The static checks: the misuse classes a kernel's text shows, each a named
//! `check_*` function stating its rule. They read the declarations of the
//! [`Kernel`] and the events of the [`Flow`] analysis, and report every
//! violation (at the offending token) into the [`Ctxt`].
//!
//! Order is "may happen before" on the threads of the role: an earlier event
//! in program order, or one in a loop enclosing both, on the same role's
//! threads (code outside `in_role!` runs on every thread). Events under
//! comptime conditions the macro cannot evaluate count as happening, so a
//! check fires only when no path of the traced kernel could be correct; what
//! depends on comptime values is rechecked on the traced kernel by the IR
//! verifier (`kda::ir::verifier`), with the figures and the source line.

use std::collections::HashSet;

use proc_macro2::Span;

use crate::ast::{Decl, Kernel, Node, ParamKind};
use crate::ctxt::Ctxt;
use crate::flow::{Access, Event, Flow, Kind, RoleCtx, const_eval};

pub fn check(cx: &Ctxt, k: &Kernel, flow: &Flow) {
    let mut seen = Seen::default();
    check_wait_is_armed(cx, flow, &mut seen);
    check_completed_barrier_is_armed(cx, flow, &mut seen);
    check_wait_completes_per_iteration(cx, flow, &mut seen);
    check_refill_waits_for_release(cx, k, flow, &mut seen);
    check_send_after_cluster_barrier(cx, flow, &mut seen);
    check_remote_arrival_has_a_peer(cx, k, flow, &mut seen);
    check_produced_read_after_pdl_wait(cx, k, flow, &mut seen);
    check_guarded_read_after_wait(cx, k, flow, &mut seen);
    check_tx_bytes(cx, k, flow, &mut seen);
    check_collectives_converged(cx, flow, &mut seen);
    check_roles(cx, k);
    check_role_access(cx, k, flow, &mut seen);
    check_shared_bounds(cx, k, flow, &mut seen);
    check_bulk_source_rewrite(cx, flow, &mut seen);
}

/// (1b) A wait inside a runtime loop waits for a new phase every iteration,
/// so something must complete a phase every iteration: an arrival, an arm,
/// a send or a bulk copy of the same barrier inside a runtime loop (any
/// role's). A barrier armed and filled only outside runtime loops (once, or
/// a comptime number of times) completes a fixed number of phases while the
/// loop waits a runtime number of times: from some iteration on the wait
/// has no phase to complete and hangs (or, on a stale parity, passes early
/// and reads data that never arrived). Barriers handed to code the macro
/// cannot see are left to the verifier and the simulator.
fn check_wait_completes_per_iteration(cx: &Ctxt, flow: &Flow, seen: &mut Seen) {
    let in_runtime_loop = |e: &Event| {
        e.loops
            .iter()
            .find(|l| flow.runtime_loops.contains_key(l))
            .copied()
    };
    for w in flow.events.iter().filter(|e| !e.def) {
        let Kind::Wait(bar) = &w.kind else { continue };
        let Some(l) = in_runtime_loop(w) else {
            continue;
        };
        let escapes = flow
            .events
            .iter()
            .any(|e| matches!(&e.kind, Kind::Escape(b) if b == bar));
        let completions: Vec<&Event> = flow
            .events
            .iter()
            .filter(|e| !e.def && (arms(e, bar) || completes(e, bar)))
            .collect();
        if escapes
            || completions.is_empty()
            || completions.iter().any(|c| in_runtime_loop(c).is_some())
        {
            continue;
        }
        if !seen.first(w.span, "wait-per-iteration") {
            continue;
        }
        let lines: Vec<String> = completions
            .iter()
            .map(|c| line(c.span).to_string())
            .collect();
        let loop_line = line(flow.runtime_loops[&l]);
        cx.error_at(
            w.span,
            format!(
                "a wait on `{bar}` runs in every iteration of the runtime loop at line {loop_line}, but `{bar}` \
                 is completed only outside runtime loops (line{} {}): it completes a fixed number of phases \
                 while the loop waits a runtime number of times, so a later iteration waits for a phase that \
                 never completes; arm and fill (or arrive on) `{bar}` inside a runtime loop with the same trip \
                 count",
                if lines.len() == 1 { "" } else { "s" },
                lines.join(", ")
            ),
        );
    }
}

/// (1c) A buffer refilled through its guard in every iteration of a runtime
/// loop (a ring: `bulk_copy!` or `send!` completing the guard) is
/// overwritten while its readers may still be reading the previous fill,
/// unless the writing role waits in that loop for them to release it (the
/// ring's "empty" barrier, any barrier other than the guard), or passes a
/// cluster barrier in it (`cluster_wait()`: every thread of the cluster
/// arrives once per iteration, so past the wait each reader has finished
/// the previous iteration's reads). The stage indices are not compared: a
/// wait on another barrier in the loop counts.
fn check_refill_waits_for_release(cx: &Ctxt, k: &Kernel, flow: &Flow, seen: &mut Seen) {
    let guards: Vec<(String, String)> = k
        .decls
        .keys()
        .filter_map(|b| buffer_guard(k, b).map(|g| (b.clone(), g)))
        .collect();
    for e in flow
        .events
        .iter()
        .filter(|e| !e.def && e.role != RoleCtx::Unknown)
    {
        let (Kind::BulkCopy { bar: Some(bar), .. } | Kind::Send { bar: Some(bar), .. }) = &e.kind
        else {
            continue;
        };
        let Some((buf, _)) = guards.iter().find(|(_, g)| g == bar) else {
            continue;
        };
        let Some(&l) = e
            .loops
            .iter()
            .rev()
            .find(|l| flow.runtime_loops.contains_key(l))
        else {
            continue;
        };
        let released = on_threads(flow, &e.role).any(|w| {
            matches!(&w.kind, Kind::Wait(b) if b != bar) && w.loops.contains(&l)
                || matches!(w.kind, Kind::ClusterWait) && w.loops.contains(&l)
        });
        if released || !seen.first(e.span, "refill") {
            continue;
        }
        cx.error_at(
            e.span,
            format!(
                "`{buf}` (filled through `{bar}`) is refilled in every iteration of the runtime loop at line {}, \
                 but {} does not wait in that loop for its readers to release it, so a refill can overwrite \
                 a stage they are still reading: wait on the ring's empty barrier (`empty[s].wait()`, declared \
                 `released` so the first lap passes) before the copy",
                line(flow.runtime_loops[&l]),
                role_name(&e.role)
            ),
        );
    }
}

/// Report each offending token once (a closure's body is analysed at each call).
#[derive(Default)]
struct Seen(HashSet<(usize, usize, &'static str)>);

impl Seen {
    fn first(&mut self, span: Span, class: &'static str) -> bool {
        let lc = span.start();
        self.0.insert((lc.line, lc.column, class))
    }
}

fn line(span: Span) -> usize {
    span.start().line
}

/// `a` may happen before `b`: earlier, or in a loop around both.
fn may_precede(a: &Event, b: &Event) -> bool {
    a.seq < b.seq || a.loops.iter().any(|l| b.loops.contains(l))
}

/// The events that run on the threads of `role` (not in definitions).
fn on_threads<'a>(flow: &'a Flow, role: &'a RoleCtx) -> impl Iterator<Item = &'a Event> + 'a {
    flow.events
        .iter()
        .filter(move |e| !e.def && (e.role == RoleCtx::All || e.role == *role))
}

fn role_name(role: &RoleCtx) -> String {
    match role {
        RoleCtx::Named(r) => format!("role `{r}`"),
        _ => "the block's threads".to_string(),
    }
}

fn completes(e: &Event, bar: &str) -> bool {
    match &e.kind {
        Kind::Send { bar: Some(b), .. } | Kind::BulkCopy { bar: Some(b), .. } => b == bar,
        _ => false,
    }
}

fn arms(e: &Event, bar: &str) -> bool {
    match &e.kind {
        Kind::Arrive(b) | Kind::ArriveOn(b) | Kind::Arm(b) => b == bar,
        Kind::ArriveTx { bar: b, .. } => b == bar,
        _ => false,
    }
}

fn escapes(flow: &Flow, bar: &str) -> bool {
    flow.events
        .iter()
        .any(|e| matches!(&e.kind, Kind::Escape(b) if b == bar))
}

/// (1) A wait returns when a phase completes: something must arrive on the
/// barrier (`arrive`, `arm`, `arrive_expect_tx`) or complete transactions on
/// it (`send!`/`bulk_copy!` with `completes = bar`), somewhere in the kernel.
fn check_wait_is_armed(cx: &Ctxt, flow: &Flow, seen: &mut Seen) {
    for w in &flow.events {
        let Kind::Wait(bar) = &w.kind else { continue };
        let fed = flow
            .events
            .iter()
            .any(|e| arms(e, bar) || completes(e, bar))
            || escapes(flow, bar);
        if !fed && seen.first(w.span, "wait") {
            cx.error_at(
                w.span,
                format!(
                    "`{bar}.wait()` waits on an mbarrier that nothing arms or completes, so it never returns: \
                     arrive on it (`{bar}.arrive()`, `{bar}.arm()`, `{bar}.arrive_expect_tx(..)`) or complete it \
                     (`send!(.., completes = {bar})`, `bulk_copy!(.., completes = {bar})`)"
                ),
            );
        }
    }
}

/// (1a) Sends and bulk copies complete transaction bytes, not arrivals: a
/// phase completes only after its arrivals, so a barrier that `send!`s or
/// `bulk_copy!`s complete (`completes = bar`) must also be arrived on
/// somewhere (`bar.arm()`, `bar.arrive_expect_tx(..)`, `bar.arrive()`),
/// usually by the receiving CTA, which arms it with the bytes it expects.
/// Checked, like the verifier, on barriers that are waited on, and reported
/// at the first wait (which never returns). Barriers handed to code the
/// macro cannot see are left to the verifier.
fn check_completed_barrier_is_armed(cx: &Ctxt, flow: &Flow, seen: &mut Seen) {
    let mut barriers: Vec<&str> = Vec::new();
    for e in &flow.events {
        if let Kind::Send { bar: Some(b), .. } | Kind::BulkCopy { bar: Some(b), .. } = &e.kind
            && !barriers.contains(&b.as_str())
        {
            barriers.push(b);
        }
    }
    for bar in barriers {
        if escapes(flow, bar) || flow.events.iter().any(|e| arms(e, bar)) {
            continue;
        }
        let Some(wait) = flow
            .events
            .iter()
            .find(|e| matches!(&e.kind, Kind::Wait(b) if b == bar))
        else {
            continue;
        };
        let at = wait.span;
        let lines: Vec<String> = flow
            .events
            .iter()
            .filter(|e| completes(e, bar))
            .map(|c| {
                let what = match c.kind {
                    Kind::Send { .. } => "send!",
                    _ => "bulk_copy!",
                };
                format!("`{what}` at line {}", line(c.span))
            })
            .collect();
        if !seen.first(at, "unarmed-completion") {
            continue;
        }
        cx.error_at(
            at,
            format!(
                "`{bar}` is completed only by transaction bytes ({}) and nothing arrives on it, so its phase \
                 never completes and `{bar}.wait()` never returns: sends and bulk copies complete bytes, not \
                 arrivals; arm it where it is waited on (`{bar}.arm()` or `{bar}.arrive_expect_tx(..)` on the \
                 receiving CTA) or arrive on it (`{bar}.arrive()`)",
                lines.join(", ")
            ),
        );
    }
}

/// (2) A DSMEM send completes the *peer's* mbarrier, and a remote arrival
/// (`bar.arrive_on(rank)`) arrives on it, which exists only once the peer
/// initialised it: the sending threads must pass a cluster barrier
/// (`cluster_wait()`) whose phase the initialising threads arrived on after
/// `bar.init()`.
fn check_send_after_cluster_barrier(cx: &Ctxt, flow: &Flow, seen: &mut Seen) {
    for s in flow
        .events
        .iter()
        .filter(|e| !e.def && e.role != RoleCtx::Unknown)
    {
        let (bar, what, reaches) = match &s.kind {
            Kind::Send { bar: Some(bar), .. } => (bar, "DSMEM send", "completes"),
            Kind::ArriveOn(bar) => (bar, "remote arrival", "arrives on"),
            _ => continue,
        };
        let mine: Vec<&Event> = on_threads(flow, &s.role).collect();
        let waits: Vec<&Event> = mine
            .iter()
            .copied()
            .filter(|w| matches!(w.kind, Kind::ClusterWait) && may_precede(w, s))
            .collect();
        if waits.is_empty() {
            if seen.first(s.span, "send") {
                cx.error_at(
                    s.span,
                    format!(
                        "{what} before {} has passed a cluster barrier: the destination CTA's mbarrier \
                         `{bar}` may not be initialised yet; every CTA initialises `{bar}` and arrives on the \
                         cluster barrier (`cluster_arrive()`), and senders call `cluster_wait()` before their \
                         first send",
                        role_name(&s.role)
                    ),
                );
            }
            continue;
        }
        let inits: Vec<&Event> = flow
            .events
            .iter()
            .filter(|e| !e.def && matches!(&e.kind, Kind::Init(b) if b == bar))
            .collect();
        if inits.is_empty() {
            let elsewhere = flow
                .events
                .iter()
                .any(|e| matches!(&e.kind, Kind::Init(b) if b == bar));
            if !elsewhere && !escapes(flow, bar) && seen.first(s.span, "send") {
                cx.error_at(
                    s.span,
                    format!(
                        "{what} {reaches} `{bar}`, which is never initialised: one thread of each CTA calls \
                         `{bar}.init()`, then `fence_mbarrier_init()` and `cluster_arrive()`, before peers send"
                    ),
                );
            }
            continue;
        }
        // The latest cluster phase the sender has waited for (0-based).
        let waited = waits
            .iter()
            .map(|w| {
                mine.iter()
                    .filter(|x| matches!(x.kind, Kind::ClusterWait) && x.seq < w.seq)
                    .count()
            })
            .max()
            .unwrap_or(0);
        let covered = inits.iter().any(|i| {
            let theirs: Vec<&Event> = on_threads(flow, &i.role).collect();
            theirs.iter().any(|a| {
                matches!(a.kind, Kind::ClusterArrive)
                    && may_precede(i, a)
                    && theirs
                        .iter()
                        .filter(|x| matches!(x.kind, Kind::ClusterArrive) && x.seq < a.seq)
                        .count()
                        <= waited
            })
        });
        if !covered && seen.first(s.span, "send") {
            cx.error_at(
                s.span,
                format!(
                    "{what} before {} has passed a cluster barrier that follows `{bar}.init()`: the threads \
                     that initialise `{bar}` (line {}) do not arrive on the cluster barrier after it, so the peer's \
                     mbarrier may not exist yet; `{bar}.init()`, `fence_mbarrier_init()`, then `cluster_arrive()` \
                     there, and `cluster_wait()` here before sending",
                    role_name(&s.role),
                    line(inits[0].span)
                ),
            );
        }
    }
}

/// (2a) `bar.arrive_on(rank)` arrives on the mbarrier `bar` of the cluster's
/// CTA `rank`: it needs an mbarrier (the name declared with `mbarrier!`)
/// and a kernel with a cluster of more than one CTA (`cluster = ..` in
/// `#[cluster_kernel]`; without it the only CTA is this one, and a local
/// `bar.arrive()` says so).
fn check_remote_arrival_has_a_peer(cx: &Ctxt, k: &Kernel, flow: &Flow, seen: &mut Seen) {
    let single = k.launch.cluster.as_ref().map_or(Some(1), const_eval) == Some(1);
    for e in &flow.events {
        match &e.kind {
            Kind::ArriveOnNonBarrier { name, what } if seen.first(e.span, "arrive-on") => {
                cx.error_at(
                    e.span,
                    format!(
                        "`{name}.arrive_on(..)` arrives on an mbarrier of a cluster peer, but `{name}` is {what}, \
                         not an mbarrier: declare one with `let {name} = mbarrier!(arrivals = n);` (or name the \
                         ring's empty barrier, `empty[s].arrive_on(rank)`)"
                    ),
                );
            }
            Kind::ArriveOn(bar) if single && seen.first(e.span, "arrive-on") => {
                cx.error_at(
                    e.span,
                    format!(
                        "`{bar}.arrive_on(..)` arrives on the mbarrier of another CTA of the cluster, but this \
                         kernel runs one CTA per cluster: declare the cluster (`#[cluster_kernel(.., cluster = n)]`) \
                         or arrive locally with `{bar}.arrive()`"
                    ),
                );
            }
            _ => {}
        }
    }
}

/// (3) A `#[produced]` tensor is written by the preceding launch; its data is
/// visible only after `pdl_wait()` on the reading threads.
fn check_produced_read_after_pdl_wait(cx: &Ctxt, k: &Kernel, flow: &Flow, seen: &mut Seen) {
    for r in flow
        .events
        .iter()
        .filter(|e| !e.def && e.role != RoleCtx::Unknown)
    {
        let Kind::ReadTensor(t) = &r.kind else {
            continue;
        };
        let produced = matches!(k.decls.get(t), Some(Decl::Tensor(i))
            if matches!(&k.params[*i].kind, ParamKind::Tensor(tp) if tp.produced));
        if !produced {
            continue;
        }
        let waited =
            on_threads(flow, &r.role).any(|w| matches!(w.kind, Kind::PdlWait) && may_precede(w, r));
        if !waited && seen.first(r.span, "pdl") {
            cx.error_at(
                r.span,
                format!(
                    "`{t}` is read before `pdl_wait()`: it is `#[produced]` by the preceding launch, whose \
                     writes are visible only after the PDL wait; read it after `pdl_wait()` on these threads, \
                     or mark it `#[ready]` if no launch in the PDL chain writes it"
                ),
            );
        }
    }
}

fn buffer_guard(k: &Kernel, buf: &str) -> Option<String> {
    match k.decls.get(buf) {
        Some(Decl::Buffer(i)) => match &k.nodes[*i] {
            Node::Shared(s) => s.guard.as_ref().map(|g| g.to_string()),
            _ => None,
        },
        _ => None,
    }
}

/// Whether `buf` is guarded by a whole ring (`guard = bars`, `bars` declared
/// with `count`): stage `s` of it (its first dimension) is filled through
/// `bars[s]`.
fn ring_guarded(k: &Kernel, buf: &str, guard: &str) -> bool {
    let whole = match k.decls.get(buf) {
        Some(Decl::Buffer(i)) => matches!(&k.nodes[*i], Node::Shared(s) if s.guard_index.is_none()),
        _ => false,
    };
    whole
        && match k.decls.get(guard) {
            Some(Decl::Barrier(i)) => {
                matches!(&k.nodes[*i], Node::Mbarrier(m) if m.count.is_some())
            }
            _ => false,
        }
}

/// A stage expression in the form `(v + c) % m`: the variable (empty for a
/// constant), the offset and the modulus as written (`None`: no `%`).
#[derive(PartialEq, Debug)]
struct StageForm {
    var: String,
    offset: i128,
    modulus: Option<String>,
}

fn stage_form(e: &syn::Expr) -> Option<StageForm> {
    use syn::{BinOp, Expr};
    let tokens = |e: &Expr| quote::ToTokens::to_token_stream(e).to_string();
    match e {
        Expr::Paren(p) => stage_form(&p.expr),
        Expr::Group(g) => stage_form(&g.expr),
        Expr::Path(p) => Some(StageForm {
            var: p.path.get_ident()?.to_string(),
            offset: 0,
            modulus: None,
        }),
        Expr::Lit(_) => Some(StageForm {
            var: String::new(),
            offset: i128::from(const_eval(e)?),
            modulus: None,
        }),
        Expr::Binary(b) if matches!(b.op, BinOp::Add(_) | BinOp::Sub(_)) => {
            let sign = if matches!(b.op, BinOp::Sub(_)) { -1 } else { 1 };
            if let Some(c) = const_eval(&b.right) {
                let f = stage_form(&b.left)?;
                (f.modulus.is_none()).then_some(StageForm {
                    offset: f.offset + sign * i128::from(c),
                    ..f
                })
            } else if let (Some(c), 1) = (const_eval(&b.left), sign) {
                let f = stage_form(&b.right)?;
                (f.modulus.is_none()).then_some(StageForm {
                    offset: f.offset + i128::from(c),
                    ..f
                })
            } else {
                None
            }
        }
        Expr::Binary(b) if matches!(b.op, BinOp::Rem(_)) => {
            let f = stage_form(&b.left)?;
            f.modulus.is_none().then(|| StageForm {
                modulus: Some(tokens(&b.right)),
                ..f
            })
        }
        Expr::MethodCall(m) if m.method == "add_mod" && m.args.len() == 2 => {
            let f = stage_form(&m.receiver)?;
            let c = const_eval(&m.args[0])?;
            f.modulus.is_none().then(|| StageForm {
                offset: f.offset + i128::from(c),
                modulus: Some(tokens(&m.args[1])),
                ..f
            })
        }
        _ => None,
    }
}

/// Two stage expressions certainly name different stages: the same
/// variable (or both constants) at different offsets, under the same
/// modulus or where one of them has none (a stage index already lies in
/// `0..stages`, so `s` and `(s + 1) % stages` differ); a literal modulus
/// compares the offsets modulo it. Anything else may be equal.
fn stages_differ(a: &syn::Expr, b: &syn::Expr) -> bool {
    let (Some(x), Some(y)) = (stage_form(a), stage_form(b)) else {
        return false;
    };
    if x.var != y.var {
        return false;
    }
    let m = match (&x.modulus, &y.modulus) {
        (Some(p), Some(q)) if p != q => return false,
        (Some(p), _) | (_, Some(p)) => p.parse::<i128>().ok(),
        (None, None) => None,
    };
    match m {
        Some(m) if m > 0 => (x.offset - y.offset).rem_euclid(m) != 0,
        _ => x.offset != y.offset,
    }
}

fn text(e: &syn::Expr) -> String {
    quote::ToTokens::to_token_stream(e).to_string()
}

/// (4) A buffer declared `guard = bar` is filled through `bar`: its contents
/// are defined for a thread only after that thread waited on `bar`. Per
/// stage for a buffer guarded by a whole ring (`guard = full`, stage `s`
/// filled through `full[s]`): a read of `ring[[t, ..]]` needs a wait on an
/// element whose stage expression may equal `t`; one on `full[s]` only,
/// where `s` and `t` visibly differ (`s` and `(s + 1) % stages`), leaves
/// stage `t` unguarded. Stage expressions the macro cannot compare (other
/// variables, flat indices) are accepted.
fn check_guarded_read_after_wait(cx: &Ctxt, k: &Kernel, flow: &Flow, seen: &mut Seen) {
    for r in flow
        .events
        .iter()
        .filter(|e| !e.def && e.role != RoleCtx::Unknown)
    {
        let Kind::ReadShared(buf) = &r.kind else {
            continue;
        };
        let Some(guard) = buffer_guard(k, buf) else {
            continue;
        };
        let waits: Vec<&Event> = on_threads(flow, &r.role)
            .filter(|w| matches!(&w.kind, Kind::Wait(b) if *b == guard) && may_precede(w, r))
            .collect();
        let waited = !waits.is_empty();
        if waited
            && let Some(t) = &r.stage
            && ring_guarded(k, buf, &guard)
            && waits
                .iter()
                .all(|w| w.stage.as_ref().is_some_and(|s| stages_differ(s, t)))
            && seen.first(r.span, "guard")
        {
            let t = text(t);
            let mut others: Vec<String> = waits
                .iter()
                .map(|w| {
                    format!(
                        "`{guard}[{}]` at line {}",
                        w.stage.as_ref().map_or_else(String::new, text),
                        line(w.span)
                    )
                })
                .collect();
            others.dedup();
            cx.error_at(
                r.span,
                format!(
                    "stage `{t}` of `{buf}` is read before waiting on `{guard}[{t}]`: `{buf}` is guarded per \
                     stage by the ring `{guard}` (stage `s` is filled through `{guard}[s]`), but these threads \
                     waited only on {}, another stage; wait on `{guard}[{t}]` before reading \
                     `{buf}[[{t}, ..]]`, or read the stage that was waited for",
                    others.join(", ")
                ),
            );
            continue;
        }
        if !waited && seen.first(r.span, "guard") {
            cx.error_at(
                r.span,
                format!(
                    "`{buf}` is read before waiting on its guard `{guard}`: the buffer is filled through \
                     `{guard}` (`guard = {guard}`), so its contents are defined only after `{guard}.wait()` on \
                     these threads"
                ),
            );
        }
    }
}

struct BarrierFigures {
    arrivals: Option<u64>,
    tx: Option<u64>,
    tx_span: Span,
    tx_written: bool,
}

fn barrier_figures(k: &Kernel, name: &str) -> Option<BarrierFigures> {
    let Some(Decl::Barrier(i)) = k.decls.get(name) else {
        return None;
    };
    let Node::Mbarrier(b) = &k.nodes[*i] else {
        return None;
    };
    Some(BarrierFigures {
        arrivals: const_eval(&b.arrivals),
        tx: b.tx.as_ref().map_or(Some(0), const_eval),
        tx_span: b.tx.as_ref().map_or(b.span, syn::spanned::Spanned::span),
        tx_written: b.tx.is_some(),
    })
}

/// Threads of a role (or of the block), when the macro can compute them.
fn threads(k: &Kernel, role: &RoleCtx) -> Option<u64> {
    match role {
        RoleCtx::All => k.launch.block.as_ref().and_then(const_eval),
        RoleCtx::Named(r) => match k.decls.get(r) {
            Some(Decl::Role(i)) => match &k.nodes[*i] {
                Node::Role(rn) => const_eval(&rn.hi)?.checked_sub(const_eval(&rn.lo)?),
                _ => None,
            },
            _ => None,
        },
        RoleCtx::Unknown => None,
    }
}

/// (5) Per phase, the transaction bytes that reach an mbarrier must equal
/// what it expects (`tx`), else the phase never completes or completes early.
/// A `send!` delivers its bytes × the threads that run it (× the cluster for
/// `to = all`), a `bulk_copy!` its bytes once; with one arrival per phase,
/// `arrive_expect_tx(n)` must expect exactly `tx`. Checked when every figure
/// is a constant the macro sees, the sends run unconditionally in literal
/// loops, and the barrier is waited once per role (one phase).
fn check_tx_bytes(cx: &Ctxt, k: &Kernel, flow: &Flow, seen: &mut Seen) {
    let cluster = k.launch.cluster.as_ref().map_or(Some(1), const_eval);
    for (name, decl) in &k.decls {
        let Decl::Barrier(_) = decl else { continue };
        let Some(fig) = barrier_figures(k, name) else {
            continue;
        };
        let Some(tx) = fig.tx else { continue };
        for e in &flow.events {
            if let Kind::ArriveTx {
                bar,
                bytes: Some(b),
                arg,
            } = &e.kind
                && bar == name
                && fig.arrivals == Some(1)
                && *b != tx
                && seen.first(*arg, "tx")
            {
                cx.error_at(
                        *arg,
                        format!(
                            "this arrival expects {b} transaction bytes but `{name}` expects {tx} per phase \
                             (`tx = {tx}`): with one arrival per phase it must expect exactly `tx` \
                             (`{name}.arm()` does)"
                        ),
                    );
            }
        }
        if escapes(flow, name) {
            continue;
        }
        let feeding: Vec<&Event> = flow.events.iter().filter(|e| completes(e, name)).collect();
        let waited = flow
            .events
            .iter()
            .any(|e| matches!(&e.kind, Kind::Wait(b) if b == name));
        let armed = flow
            .events
            .iter()
            .any(|e| matches!(&e.kind, Kind::Arm(b) | Kind::ArriveTx { bar: b, .. } if b == name));
        if feeding.is_empty() {
            if tx > 0 && waited && armed && fig.tx_written && seen.first(fig.tx_span, "tx") {
                cx.error_at(
                    fig.tx_span,
                    format!(
                        "`{name}` expects {tx} transaction bytes per phase but nothing sends into it: no \
                         `send!`/`bulk_copy!` has `completes = {name}`, so a wait never returns"
                    ),
                );
            }
            continue;
        }
        // A closure's sends count where it is called; one never called by
        // name (or a nested `fn`) sends an unknown amount.
        if feeding
            .iter()
            .any(|e| e.def && e.owner.as_ref().is_none_or(|o| flow.uncalled.contains(o)))
        {
            continue;
        }
        let feeding: Vec<&Event> = feeding.into_iter().filter(|e| !e.def).collect();
        // One phase: each role waits at most once, outside loops.
        let mut roles_waiting = Vec::new();
        let mut one_phase = true;
        for w in flow
            .events
            .iter()
            .filter(|e| matches!(&e.kind, Kind::Wait(b) if b == name))
        {
            if w.def || !w.loops.is_empty() || roles_waiting.contains(&&w.role) {
                one_phase = false;
            }
            roles_waiting.push(&w.role);
        }
        if !one_phase {
            continue;
        }
        let mut total = 0u64;
        let mut parts = Vec::new();
        let mut over: Option<Span> = None;
        let mut known = true;
        for e in &feeding {
            let amount = match &e.kind {
                Kind::Send {
                    bytes: Some(b),
                    all,
                    ..
                } if e.exact => {
                    let dests = if *all { cluster } else { Some(1) };
                    match (threads(k, &e.role), e.mult, dests) {
                        (Some(t), Some(m), Some(d)) => {
                            parts.push(format!(
                                "{t} threads × {b} bytes{}{} at line {}",
                                if m > 1 {
                                    format!(" × {m} iterations")
                                } else {
                                    String::new()
                                },
                                if *all {
                                    format!(" × {} CTAs", d)
                                } else {
                                    String::new()
                                },
                                line(e.span)
                            ));
                            Some(t * b * m * d)
                        }
                        _ => None,
                    }
                }
                Kind::BulkCopy { bytes: Some(b), .. } if !e.comptime_cond => e.mult.map(|m| {
                    parts.push(format!("a {b}-byte bulk copy at line {}", line(e.span)));
                    b * m
                }),
                _ => None,
            };
            match amount {
                Some(a) => {
                    total += a;
                    if total > tx && over.is_none() {
                        over = Some(e.span);
                    }
                }
                None => known = false,
            }
        }
        if !known || total == tx {
            continue;
        }
        let detail = parts.join(" + ");
        if let Some(at) = over {
            if seen.first(at, "tx") {
                cx.error_at(
                    at,
                    format!(
                        "transaction bytes cannot match: the sends that complete `{name}` add up to {total} bytes \
                         per phase ({detail}), more than the {tx} it expects (`tx = {tx}`); the extra bytes \
                         complete the phase early or overflow into the next one"
                    ),
                );
            }
        } else if seen.first(fig.tx_span, "tx") {
            cx.error_at(
                fig.tx_span,
                format!(
                    "transaction bytes cannot match: `{name}` expects {tx} bytes per phase but the sends that \
                     complete it add up to {total} ({detail}), so the phase never completes"
                ),
            );
        }
    }
}

/// (6) Shuffles, `elect`, `mma` and `warp_sum` need every lane of the warp:
/// not inside an `if`/`for`/`while` whose condition differs between lanes.
fn check_collectives_converged(cx: &Ctxt, flow: &Flow, seen: &mut Seen) {
    for e in &flow.events {
        let (Kind::Collective(op), Some(d)) = (&e.kind, &e.divergent) else {
            continue;
        };
        if !seen.first(d.at, "collective") {
            continue;
        }
        let what = match &d.via {
            None => format!("warp collective `{op}`"),
            Some(f) => format!("call of `{f}`, which performs the warp collective `{op}`,"),
        };
        cx.error_at(
            d.at,
            format!(
                "{what} inside thread-divergent control flow: `{}` differs between the lanes of a warp, so not \
                 every lane reaches it; move it out of the branch, or branch on a warp-uniform value (a comptime \
                 value, `block_idx`, `cluster_rank`, the warp index `thread_idx() / 32`, a broadcast \
                 `shfl_idx(v, 0)`) or a role",
                d.cond
            ),
        );
    }
}

/// (7) Roles are whole warps (first thread and end multiples of 32), not
/// empty, inside the block, and disjoint.
fn check_roles(cx: &Ctxt, k: &Kernel) {
    let block = k.launch.block.as_ref().and_then(const_eval);
    let mut placed: Vec<(String, u64, u64)> = Vec::new();
    for node in &k.nodes {
        let Node::Role(r) = node else { continue };
        let name = r
            .name
            .as_ref()
            .map_or_else(|| "_".to_string(), |n| n.to_string());
        let (Some(lo), Some(hi)) = (const_eval(&r.lo), const_eval(&r.hi)) else {
            continue;
        };
        if lo >= hi {
            cx.error_spanned_by(
                &r.range,
                format!("role `{name}` is empty ({lo}..{hi}): a role has at least one warp"),
            );
            continue;
        }
        if lo % 32 != 0 || hi % 32 != 0 {
            cx.error_spanned_by(
                &r.range,
                format!(
                    "role `{name}` spans threads {lo}..{hi}, which is not warp-aligned: a role starts and ends \
                     on a multiple of 32 threads (whole warps), e.g. {}..{}",
                    lo / 32 * 32,
                    hi.div_ceil(32) * 32
                ),
            );
        }
        if let Some(b) = block
            && hi > b
        {
            cx.error_spanned_by(
                    &r.range,
                    format!(
                        "role `{name}` spans threads {lo}..{hi} but the block has {b} threads (`block = {b}`): \
                         a role lies inside 0..{b}"
                    ),
                );
        }
        if let Some((other, olo, ohi)) = placed.iter().find(|(_, olo, ohi)| lo < *ohi && *olo < hi)
        {
            cx.error_spanned_by(
                &r.range,
                format!(
                    "role `{name}` ({lo}..{hi}) overlaps role `{other}` ({olo}..{ohi}) in threads {}..{}: \
                     a thread belongs to at most one role",
                    lo.max(*olo),
                    hi.min(*ohi)
                ),
            );
        }
        placed.push((name, lo, hi));
    }
    check_budgets(cx, k);
}

/// The register file of one CTA (and SM) on sm_90.
const REGISTER_FILE: u64 = 65536;

/// `kda::ir::kernel::default_max_regs`: the starting count a kernel with
/// budgets gets without `max_regs` (the largest multiple of 8 at which
/// `min_blocks` blocks fit the register file, 24..=248).
fn default_max_regs(block: u64, min_blocks: u64) -> u64 {
    ((REGISTER_FILE / (block.max(1) * min_blocks.max(1))) / 8 * 8).clamp(24, 248)
}

/// (7) Register budgets (`role!(.., regs = n)`): a budget is a multiple of 8
/// in 24..=256 on a role of whole warpgroups (`setmaxnreg` resizes four
/// warps at once), and the budgets, with the starting count for every other
/// thread, fit in what the block starts with (`block × max_regs`), else a
/// `setmaxnreg.inc` waits forever. Checked where every figure is a constant.
fn check_budgets(cx: &Ctxt, k: &Kernel) {
    let block = k.launch.block.as_ref().and_then(const_eval);
    let mut budgeted: Vec<(String, usize, u64, u64, &syn::Expr)> = Vec::new();
    // Misplaced budgets are their own error; the total would repeat them.
    let mut all_known = true;
    for node in &k.nodes {
        let Node::Role(r) = node else { continue };
        let Some(regs_expr) = &r.regs else { continue };
        let name = r
            .name
            .as_ref()
            .map_or_else(|| "_".to_string(), |n| n.to_string());
        let regs = const_eval(regs_expr);
        if let Some(n) = regs
            && (!(24..=256).contains(&n) || n % 8 != 0)
        {
            all_known = false;
            cx.error_spanned_by(
                regs_expr,
                format!(
                    "role `{name}` declares `regs = {n}`: a register budget is a multiple of 8 in 24..=256 (what `setmaxnreg` can set)"
                ),
            );
        }
        let (Some(lo), Some(hi)) = (const_eval(&r.lo), const_eval(&r.hi)) else {
            all_known = false;
            continue;
        };
        if lo < hi && (lo % 128 != 0 || hi % 128 != 0) {
            all_known = false;
            cx.error_spanned_by(
                &r.range,
                format!(
                    "role `{name}` spans threads {lo}..{hi} and declares a register budget, but `setmaxnreg` resizes \
                     whole warpgroups: a role with `regs` starts and ends on a multiple of 128 threads (four warps), \
                     e.g. {}..{}",
                    lo / 128 * 128,
                    hi.div_ceil(128) * 128
                ),
            );
        }
        match regs {
            Some(n) => budgeted.push((name, line(r.span), hi.saturating_sub(lo), n, regs_expr)),
            None => all_known = false,
        }
    }
    let Some(block) = block else { return };
    let min_blocks = match &k.launch.min_blocks {
        None => Some(1),
        Some(m) => const_eval(m),
    };
    let (start, how) = match &k.launch.max_regs {
        Some(m) => match const_eval(m) {
            Some(s) => {
                let ctas = min_blocks.unwrap_or(1).max(1);
                if block * s * ctas > REGISTER_FILE {
                    cx.error_spanned_by(
                        m,
                        format!(
                            "`max_regs = {s}` × {block} threads{} = {} registers, more than the register file's {REGISTER_FILE}: the launch would fail (at most {} per thread)",
                            if ctas > 1 { format!(" × min_blocks {ctas}") } else { String::new() },
                            block * s * ctas,
                            default_max_regs(block, ctas)
                        ),
                    );
                    return;
                }
                (s, "`max_regs`".to_string())
            }
            None => return,
        },
        None => match min_blocks {
            Some(n) => {
                let s = default_max_regs(block, n);
                (
                    s,
                    format!("the default start for {block} threads without `max_regs`"),
                )
            }
            None => return,
        },
    };
    if budgeted.is_empty() || !all_known {
        return;
    }
    let covered: u64 = budgeted.iter().map(|b| b.2).sum();
    let rest = block.saturating_sub(covered);
    let total: u64 = budgeted.iter().map(|b| b.2 * b.3).sum::<u64>() + rest * start;
    let have = block * start;
    if total <= have {
        return;
    }
    let mut parts: Vec<String> = budgeted
        .iter()
        .map(|(n, l, t, r, _)| format!("role `{n}` (line {l}) {t} × {r}"))
        .collect();
    if rest > 0 {
        parts.push(format!("{rest} other threads × {start}"));
    }
    let (name, _, _, _, at) = budgeted.last().expect("not empty");
    cx.error_spanned_by(
        *at,
        format!(
            "the register budgets add up to {total} registers ({}), more than the {have} the block starts with \
             ({block} threads × {start}, {how}): the `setmaxnreg.inc` of a role like `{name}` takes registers other \
             warpgroups released and would wait forever; lower a budget",
            parts.join(" + ")
        ),
    );
}

/// (10) A bulk store reads its shared source asynchronously, until a
/// `bulk_wait_read(n)` (or `bulk_wait(n)`) on the storing threads says it
/// has: a write into the source (a store, a copy into it) that may follow
/// the `bulk_store!` on the same threads with no such wait on the way
/// between them (in program order, or around a loop enclosing both) can
/// change the bytes being stored. The wait's count is not compared with
/// the groups in flight (as stage expressions are not compared for rings).
fn check_bulk_source_rewrite(cx: &Ctxt, flow: &Flow, seen: &mut Seen) {
    let same_threads = |a: &Event, b: &Event| {
        a.role != RoleCtx::Unknown
            && b.role != RoleCtx::Unknown
            && (a.role == b.role || a.role == RoleCtx::All || b.role == RoleCtx::All)
    };
    let live = || flow.events.iter().filter(|e| !e.def);
    for st in live() {
        let Kind::BulkStore(buf) = &st.kind else {
            continue;
        };
        for w in live() {
            if !matches!(&w.kind, Kind::WriteShared(b) if b == buf)
                || !same_threads(st, w)
                || !may_precede(st, w)
            {
                continue;
            }
            let waits = live().filter(|e| matches!(e.kind, Kind::BulkWait) && same_threads(st, e));
            let covered = if st.seq < w.seq {
                waits.into_iter().any(|e| st.seq < e.seq && e.seq < w.seq)
            } else {
                let shared: Vec<usize> = st
                    .loops
                    .iter()
                    .filter(|l| w.loops.contains(l))
                    .copied()
                    .collect();
                waits.into_iter().any(|e| {
                    e.loops.iter().any(|l| shared.contains(l)) && (e.seq > st.seq || e.seq < w.seq)
                })
            };
            if covered || !seen.first(w.span, "bulk-source") {
                continue;
            }
            cx.error_at(
                w.span,
                format!(
                    "`{buf}` is written while the `bulk_store!` from it at line {} may still be reading it: a bulk \
                     store reads its source asynchronously, so between the store and this write the storing \
                     threads commit it (`bulk_commit()`) and wait for the read (`bulk_wait_read(n)`, or \
                     `bulk_wait(n)`)",
                    line(st.span)
                ),
            );
        }
    }
}

/// (8) A barrier or buffer declared with `roles = [..]` is touched only by
/// code of those roles (inside their `in_role!` blocks).
fn check_role_access(cx: &Ctxt, k: &Kernel, flow: &Flow, seen: &mut Seen) {
    for e in flow.events.iter().filter(|e| !e.def) {
        let (name, what, roles) = match &e.kind {
            Kind::UseBarrier(b) => match k.decls.get(b) {
                Some(Decl::Barrier(i)) => match &k.nodes[*i] {
                    Node::Mbarrier(n) => (b, "mbarrier", &n.roles),
                    _ => continue,
                },
                _ => continue,
            },
            Kind::UseBuffer(b) => match k.decls.get(b) {
                Some(Decl::Buffer(i)) => match &k.nodes[*i] {
                    Node::Shared(n) => (b, "shared buffer", &n.roles),
                    _ => continue,
                },
                _ => continue,
            },
            _ => continue,
        };
        let Some(roles) = roles else { continue };
        let list = roles
            .iter()
            .map(|r| r.to_string())
            .collect::<Vec<_>>()
            .join(", ");
        match &e.role {
            RoleCtx::Named(r) if !roles.iter().any(|d| d == r) && seen.first(e.span, "access") => {
                cx.error_at(
                        e.span,
                        format!(
                            "{what} `{name}` is used in role `{r}`, which does not declare access to it: it is \
                             declared with `roles = [{list}]`; add `{r}` there or move this use into one of those \
                             roles"
                        ),
                    );
            }
            RoleCtx::All if seen.first(e.span, "access") => {
                cx.error_at(
                        e.span,
                        format!(
                            "{what} `{name}` is used outside any role (by every thread of the block), but it is \
                             declared with `roles = [{list}]`: move this use into `in_role!({}, ..)`",
                            roles[0]
                        ),
                    );
            }
            _ => {}
        }
    }
}

/// (9) A shared-buffer access at constant indices lies inside the declared
/// extent: one index is a flat element index (row-major over all
/// dimensions) and with the send's lanes covers `i..i + lanes` of the
/// product of the extents; `[[r, c]]` has one index per dimension, each
/// below its extent. Out of bounds the store or send lands on the next
/// buffer or an mbarrier behind it, which neither ptxas nor the hardware
/// reports. Indices the macro cannot evaluate, accesses under comptime
/// conditions it cannot decide, and extents that are not literals are left
/// to the verifier.
fn check_shared_bounds(cx: &Ctxt, k: &Kernel, flow: &Flow, seen: &mut Seen) {
    for e in flow.events.iter().filter(|e| !e.def && !e.comptime_cond) {
        let Kind::SharedAccess {
            buf,
            index,
            lanes,
            access,
            tokens,
        } = &e.kind
        else {
            continue;
        };
        let Some(Decl::Buffer(i)) = k.decls.get(buf) else {
            continue;
        };
        let Node::Shared(sh) = &k.nodes[*i] else {
            continue;
        };
        let dims: Vec<Option<u64>> = sh.dims.iter().map(const_eval).collect();
        let shape = format!(
            "`[{}; {}]`",
            sh.elem.name,
            sh.dims
                .iter()
                .map(|d| quote::ToTokens::to_token_stream(d).to_string())
                .collect::<Vec<_>>()
                .join(", ")
        );
        let what = match access {
            Access::Load => "load",
            Access::Store => "store",
            Access::Send => "DSMEM send",
        };
        let msg = if let [Some(at)] = index[..] {
            let Some(n) = dims.iter().try_fold(1u64, |a, d| a.checked_mul((*d)?)) else {
                continue;
            };
            let end = at.saturating_add(*lanes);
            if end <= n {
                continue;
            }
            let flat = if dims.len() > 1 {
                " (one index is flat over all dimensions)"
            } else {
                ""
            };
            if *lanes > 1 {
                format!(
                    "this {lanes}-lane {what} writes elements {at}..{end} of `{buf}`, which has {n} elements \
                     ({shape}){flat}: past its end it overwrites what lies behind the buffer; a {lanes}-lane \
                     {what} starts at an index in 0..={}",
                    n.saturating_sub(*lanes)
                )
            } else {
                format!(
                    "index {at} is out of bounds for `{buf}`, which has {n} elements ({shape}){flat}: the \
                     {what} would touch the memory behind the buffer; an index into it lies in 0..{n}"
                )
            }
        } else if index.len() == dims.len() {
            let Some((d, at, n)) =
                index
                    .iter()
                    .zip(&dims)
                    .enumerate()
                    .find_map(|(d, (i, n))| match (i, n) {
                        (Some(i), Some(n)) if i >= n => Some((d, *i, *n)),
                        _ => None,
                    })
            else {
                continue;
            };
            format!(
                "index {at} in dimension {d} of `{buf}` is out of bounds: that extent is {n} ({shape}), so the \
                 {what} would touch the wrong element or the memory behind the buffer; an index in dimension \
                 {d} lies in 0..{n}"
            )
        } else {
            continue;
        };
        if seen.first(e.span, "bounds") {
            cx.error_spanned_by(tokens, msg);
        }
    }
}
