//! Events: what the static checks read (barrier operations, cluster
//! barriers, the PDL wait, DSMEM sends, bulk copies, reads of tensors and
//! shared buffers, warp collectives, barriers escaping into calls), each
//! with the context the walk is in when it meets it: the role, the
//! enclosing loops and their literal trip counts, whether a condition or a
//! comptime condition the macro cannot evaluate is around it, whether it is
//! in a definition rather than where it runs, and, for a collective, the
//! lane-varying condition that makes it divergent and where to report it.

use std::collections::HashSet;

use proc_macro2::Span;
use syn::Expr;
use syn::spanned::Spanned;

use super::Walker;
use super::syntax::const_eval;
use crate::ast::Decl;

/// The threads an event runs on.
#[derive(Clone, PartialEq, Eq, Debug)]
pub enum RoleCtx {
    /// Outside any `in_role!`: every thread of the block.
    All,
    Named(String),
    /// Inside a closure or function definition, or a role the macro cannot name.
    Unknown,
}

#[derive(Clone, Debug)]
pub enum Kind {
    Init(String),
    Arrive(String),
    /// `bar.arrive_on(rank)`: an arrival on the barrier of a cluster peer.
    ArriveOn(String),
    /// `x.arrive_on(..)` on a declared name that is not an mbarrier
    /// (`what`: "shared buffer", "tensor"...).
    ArriveOnNonBarrier {
        name: String,
        what: &'static str,
    },
    Arm(String),
    ArriveTx {
        bar: String,
        bytes: Option<u64>,
        arg: Span,
    },
    Wait(String),
    ClusterArrive,
    ClusterWait,
    PdlWait,
    /// A DSMEM send; `bytes`: per sending thread and destination.
    Send {
        bar: Option<String>,
        bytes: Option<u64>,
        all: bool,
    },
    BulkCopy {
        bar: Option<String>,
        bytes: Option<u64>,
    },
    ReadTensor(String),
    ReadShared(String),
    /// A write into a shared buffer: a store, a send, a copy into it.
    WriteShared(String),
    /// `bulk_store!` from a shared buffer.
    BulkStore(String),
    /// `bulk_wait(n)` or `bulk_wait_read(n)`.
    BulkWait,
    UseBarrier(String),
    UseBuffer(String),
    /// An element access of a shared buffer (`buf[i]`, `buf[[r, c]] = v`,
    /// `send!(buf[i] = ..)`) with at least one index the macro evaluates;
    /// `index`: one entry per written index (flat when there is one),
    /// `lanes`: consecutive elements written from there.
    SharedAccess {
        buf: String,
        index: Vec<Option<u64>>,
        lanes: u64,
        access: Access,
        /// The index as written, to underline all of it.
        tokens: proc_macro2::TokenStream,
    },
    Collective(String),
    /// A barrier passed to code the macro cannot see (a function call).
    Escape(String),
}

#[derive(Clone, Copy, Debug)]
pub enum Access {
    Load,
    Store,
    Send,
}

/// A collective under a lane-varying condition.
#[derive(Clone, Debug)]
pub struct Divergence {
    /// Where to report: the collective, or the call of the closure holding it.
    pub at: Span,
    /// The condition, as written.
    pub cond: String,
    /// The closure called at `at`, when the collective is inside it.
    pub via: Option<String>,
}

#[derive(Clone, Debug)]
pub struct Event {
    pub kind: Kind,
    pub span: Span,
    pub role: RoleCtx,
    /// Position in program order.
    pub seq: usize,
    /// Enclosing loops (ids).
    pub loops: Vec<usize>,
    /// Not under any condition: runs once per iteration of its loops.
    pub exact: bool,
    /// Under a condition on a comptime value the macro cannot evaluate.
    pub comptime_cond: bool,
    /// Iterations of the enclosing loops when all are literal ranges.
    pub mult: Option<u64>,
    /// Recorded in a closure or function definition (not where it runs).
    pub def: bool,
    /// For `def` events: the `let`-bound closure (None: a nested `fn`).
    pub owner: Option<String>,
    /// For a collective: the lane-varying condition it is under, if any.
    pub divergent: Option<Divergence>,
    /// The stage expression as written: the ring element of a barrier
    /// operation (`full[s].wait()`: `s`), the first index of a shared read
    /// at `[[stage, ..]]` (`ring[[s, j]]`: `s`).
    pub stage: Option<Expr>,
}

pub struct Flow {
    pub events: Vec<Event>,
    /// `let`-bound closures that are never called by name.
    pub uncalled: HashSet<String>,
    /// Runtime loops (IR `for`/`while`, a runtime trip count) by id, with
    /// the span of their keyword.
    pub runtime_loops: std::collections::HashMap<usize, Span>,
}

impl Walker<'_> {
    pub(super) fn event(&mut self, kind: Kind, span: Span) {
        if !self.record {
            return;
        }
        let mult = self
            .loops
            .iter()
            .try_fold(1u64, |a, (_, n)| n.map(|n| a.saturating_mul(n)));
        let divergent = if let Kind::Collective(_) = &kind {
            self.divergence(span)
        } else {
            None
        };
        self.events.push(Event {
            kind,
            span,
            role: self.role.clone(),
            seq: self.events.len(),
            loops: self.loops.iter().map(|(id, _)| *id).collect(),
            exact: self.conds.is_empty(),
            comptime_cond: self.conds.iter().any(|f| !f.runtime),
            mult,
            def: self.def,
            owner: self.owner.clone(),
            divergent,
            stage: None,
        });
    }

    /// An event with its stage expression (see [`Event::stage`]).
    pub(super) fn staged(&mut self, kind: Kind, span: Span, stage: Option<&Expr>) {
        let n = self.events.len();
        self.event(kind, span);
        if self.events.len() > n
            && let Some(e) = self.events.last_mut()
        {
            e.stage = stage.cloned();
        }
    }

    /// Where a collective at `span` under a lane-varying condition is
    /// reported: at itself when the condition is in the same closure, at the
    /// call of the inlined closure otherwise.
    pub(super) fn divergence(&self, span: Span) -> Option<Divergence> {
        let f = self.conds.iter().rev().find(|f| f.runtime && f.varying)?;
        let depth = self.inlining.len();
        if f.depth == depth {
            // Inside the closure being inlined: its definition reported it.
            (depth == 0).then(|| Divergence {
                at: span,
                cond: f.text.clone(),
                via: None,
            })
        } else {
            let (name, call) = &self.inlining[f.depth];
            Some(Divergence {
                at: *call,
                cond: f.text.clone(),
                via: Some(name.clone()),
            })
        }
    }

    /// An element access of shared buffer `buf` at `index`, recorded when
    /// some index is a constant the macro evaluates (the bounds check).
    pub(super) fn shared_access(&mut self, buf: &str, index: &Expr, lanes: u64, access: Access) {
        let parts: Vec<Option<u64>> = match index {
            Expr::Array(a) => a.elems.iter().map(const_eval).collect(),
            Expr::Range(_) => return,
            e => vec![const_eval(e)],
        };
        if parts.iter().all(Option::is_none) {
            return;
        }
        self.event(
            Kind::SharedAccess {
                buf: buf.to_string(),
                index: parts,
                lanes,
                access,
                tokens: quote::ToTokens::to_token_stream(index),
            },
            index.span(),
        );
    }

    /// Barriers handed to code the macro does not see.
    pub(super) fn escapes<'a>(&mut self, args: impl IntoIterator<Item = &'a Expr>) {
        let names: Vec<(String, Span)> = args
            .into_iter()
            .filter_map(|a| match self.decl(a) {
                Some((n, Decl::Barrier(_))) => Some((n, a.span())),
                _ => None,
            })
            .collect();
        for (n, s) in names {
            self.event(Kind::Escape(n), s);
        }
    }
}
