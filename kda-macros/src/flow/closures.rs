//! Closures and nested functions. A `let`-bound closure is walked where it
//! is defined, in an unknown role and outside the caller's conditions and
//! loops (its annotations, and its events as `def` facts: that it holds
//! barrier operations, its own divergence), and again at each call by
//! name, inlined with the arguments' levels in the caller's role, loops and
//! conditions, where its events count for ordering. A nested `fn` is walked
//! once, isolated from the enclosing scopes. Other closures (iterator
//! adapters) run where they are written, as a loop of unknown trip count.

use std::collections::HashMap;

use proc_macro2::Span;
use syn::{Expr, ExprClosure, Pat};

use super::{Level, RoleCtx, UNKNOWN, Walker};

pub(super) struct ClosureDef {
    pub(super) inputs: Vec<Pat>,
    pub(super) body: Expr,
}

impl Walker<'_> {
    /// Walk a closure or nested function where it is defined: annotations
    /// and facts local to it (its own divergence, existence of barrier
    /// operations); its role and order are those of its calls.
    pub(super) fn definition(
        &mut self,
        owner: Option<String>,
        inputs: &[Pat],
        body: &mut Expr,
        isolated: bool,
    ) {
        let saved_owner = std::mem::replace(&mut self.owner, owner);
        let saved_role = std::mem::replace(&mut self.role, RoleCtx::Unknown);
        let saved_conds = std::mem::take(&mut self.conds);
        let saved_loops = std::mem::take(&mut self.loops);
        let saved_inlining = std::mem::take(&mut self.inlining);
        let saved_def = std::mem::replace(&mut self.def, true);
        let saved_scopes = if isolated {
            Some(std::mem::replace(&mut self.scopes, vec![HashMap::new()]))
        } else {
            None
        };
        self.push_scope();
        for p in inputs {
            self.bind_pat(p, UNKNOWN);
        }
        self.expr(body);
        self.pop_scope();
        if let Some(s) = saved_scopes {
            self.scopes = s;
        }
        self.role = saved_role;
        self.conds = saved_conds;
        self.loops = saved_loops;
        self.inlining = saved_inlining;
        self.def = saved_def;
        self.owner = saved_owner;
    }

    /// Analyse a `let`-bound closure at its call, in the caller's context.
    pub(super) fn inline(&mut self, name: &str, args: &[Level], call: Span) -> Level {
        self.called.insert(name.to_string());
        let def = &self.closures[name];
        let (inputs, mut body) = (def.inputs.clone(), def.body.clone());
        self.push_scope();
        for (p, &lv) in inputs.iter().zip(args) {
            self.bind_pat(p, lv);
        }
        self.inlining.push((name.to_string(), call));
        let lv = self.expr(&mut body);
        self.inlining.pop();
        self.pop_scope();
        lv
    }

    /// A closure passed along (an iterator adapter): runs here, any number
    /// of times. Its level is that of what it computes.
    pub(super) fn anon_closure(&mut self, c: &mut ExprClosure) -> Level {
        self.loops.push((self.next_loop, None));
        self.next_loop += 1;
        let mut lv = Level::Comptime;
        for pass in [false, true] {
            let rec = self.record;
            self.record = rec && pass;
            self.push_scope();
            for p in &c.inputs {
                self.bind_pat(p, UNKNOWN);
            }
            lv = self.expr(&mut c.body);
            self.pop_scope();
            self.record = rec;
        }
        self.loops.pop();
        lv
    }
}
