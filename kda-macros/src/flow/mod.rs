//! Flow analysis of the kernel body, on the syn AST. One walk in program
//! order computes:
//!
//! * the **level** of every expression: comptime (known when the kernel is
//!   traced: literals, `#[comptime]` parameters, constants), warp-uniform
//!   runtime (`block_idx`, `cluster_rank`, scalar parameters, loads at uniform
//!   indices, `tid / 32`), or lane-varying runtime (`thread_idx`, `lane_id`,
//!   shuffles, `elect`, and whatever is computed from them) — through `let`
//!   bindings and assignments, including assignments under runtime branches;
//! * the **annotations** the expansion needs: an `if`/`for`/`while` or a
//!   comparison that is not provably comptime gets the `#[__kda_runtime]`
//!   marker and is dispatched on its type at trace time;
//! * the **events** the static checks read ([`Event`]): barrier operations,
//!   cluster barriers, the PDL wait, DSMEM sends, bulk copies, reads of
//!   tensors and shared buffers, warp collectives — each with its span, the
//!   role it runs in, its enclosing loops and conditions.
//!
//! Closures bound with `let f = |..| ..` are analysed where they are called
//! (`f(..)`), in the caller's role and conditions; other closures (iterator
//! adapters) where they are written, as loops of unknown trip count.
//! Comptime conditions the macro cannot evaluate make the events under them
//! "maybe executed": the ordering checks then accept them (the IR verifier
//! rechecks the traced kernel), and byte totals under them are unknown.
//!
//! The walk is one [`Walker`]; its parts live in:
//!
//! * `level`: the three levels, and the scopes that carry them through
//!   `let` bindings and assignments;
//! * `decls`: which declaration a name stands for, through aliasing locals;
//! * `events`: the [`Event`]s, with the context the walk records them in;
//! * `walk`: statements and expressions, the DSL's calls and methods;
//! * `control`: branches and loops, their conditions and the merge of the
//!   levels assigned in them;
//! * `closures`: `let`-bound closures (inlined at their calls), nested
//!   functions and iterator-adapter closures;
//! * `nodes`: the DSL's macro nodes (`in_role!`, `send!`, copies, ...);
//! * `mark`: the `#[__kda_runtime]` marker the expansion reads;
//! * `syntax`: what the syntax alone says (constants, ranges, names).

mod closures;
mod control;
mod decls;
mod events;
mod level;
mod mark;
mod nodes;
mod syntax;
mod walk;

use std::collections::{HashMap, HashSet};

use proc_macro2::Span;

use crate::ast::{Decl, Kernel, Node};

pub use decls::root;
pub use events::{Access, Event, Flow, Kind, RoleCtx};
pub use level::Level;
pub use mark::{is_marked, mark, take_mark};
pub use syntax::{const_eval, is_range_iter};

use closures::ClosureDef;
use level::{UNKNOWN, bind_pat_into};

/// A condition the walk is under (an `if`, a runtime loop, a `match` arm).
#[derive(Clone)]
struct Frame {
    /// Not comptime: decided per warp (or lane) when the kernel runs.
    runtime: bool,
    /// May differ between the lanes of a warp.
    varying: bool,
    /// As written, for messages.
    text: String,
    /// How many inlined closure calls deep it was pushed.
    depth: usize,
}

/// The state of the walk, shared by its parts.
struct Walker<'k> {
    decls: &'k HashMap<String, Decl>,
    /// Locals that name a declaration (`for bar in &outs`, `let b = outs[k]`),
    /// scoped like `scopes`.
    aliases: Vec<HashMap<String, String>>,
    nodes: &'k mut Vec<Node>,
    events: Vec<Event>,
    /// The levels of the locals in scope, innermost last.
    scopes: Vec<HashMap<String, Level>>,
    role: RoleCtx,
    /// Enclosing loops: id and literal trip count.
    loops: Vec<(usize, Option<u64>)>,
    next_loop: usize,
    /// Runtime loops (IR `for`/`while`) by id: where they start.
    runtime_loops: HashMap<usize, Span>,
    /// Enclosing conditions, innermost last.
    conds: Vec<Frame>,
    /// Off on a loop body's first, level-only walk.
    record: bool,
    /// In a closure or function definition (not where it runs).
    def: bool,
    /// `let`-bound closures by name, inlined at their calls.
    closures: HashMap<String, ClosureDef>,
    called: HashSet<String>,
    /// The closures being inlined, outermost first, with their calls.
    inlining: Vec<(String, Span)>,
    /// The `let`-bound closure whose definition is being walked.
    owner: Option<String>,
}

/// Analyse `k`'s body, marking its runtime control flow and comparisons.
pub fn analyse(k: &mut Kernel) -> Flow {
    let mut top = HashMap::new();
    for pt in &k.comptime {
        bind_pat_into(&mut top, &pt.pat, Level::Comptime);
    }
    for p in &k.params {
        let lv = match p.kind {
            crate::ast::ParamKind::Tensor(_) => Level::Comptime,
            crate::ast::ParamKind::Scalar(..) => UNKNOWN,
        };
        top.insert(p.ident.to_string(), lv);
    }
    let mut w = Walker {
        decls: &k.decls,
        aliases: vec![HashMap::new()],
        nodes: &mut k.nodes,
        events: Vec::new(),
        scopes: vec![top],
        role: RoleCtx::All,
        loops: Vec::new(),
        next_loop: 0,
        runtime_loops: HashMap::new(),
        conds: Vec::new(),
        record: true,
        def: false,
        closures: HashMap::new(),
        called: HashSet::new(),
        inlining: Vec::new(),
        owner: None,
    };
    w.block(&mut k.body);
    let uncalled = w
        .closures
        .keys()
        .filter(|n| !w.called.contains(*n))
        .cloned()
        .collect();
    Flow {
        events: w.events,
        uncalled,
        runtime_loops: w.runtime_loops,
    }
}
