//! Branches and loops. A condition (or a range loop's bounds) that is not
//! comptime marks its `if` / `for` / `while` for dispatch. Conditions are
//! pushed as frames while their bodies are walked: events under one are not
//! exact, and a lane-varying one makes the collectives under it divergent
//! (a comptime `for` pushes none: its body runs once per iteration). Each
//! branch is walked from the same scopes and the results merged, a local
//! assigned in a runtime branch taking the condition's level. A loop body is
//! walked twice, the first time without recording events, so that what the
//! body assigns late reaches its uses early in the next iteration.

use std::collections::HashMap;

use syn::{Expr, ExprForLoop, ExprIf, ExprMatch, ExprWhile};

use super::syntax::{literal_trip, strip, text};
use super::{Frame, Level, Walker, is_range_iter, mark};

impl Walker<'_> {
    pub(super) fn merge(
        &mut self,
        before: &[HashMap<String, Level>],
        branches: Vec<Vec<HashMap<String, Level>>>,
        cond: Level,
    ) {
        for (d, scope) in before.iter().enumerate() {
            for (name, &old) in scope {
                let mut lv = old;
                let mut changed = false;
                for b in &branches {
                    if let Some(&x) = b.get(d).and_then(|s| s.get(name)) {
                        changed |= x != old;
                        lv = lv.join(x);
                    }
                }
                if changed && !cond.comptime() {
                    lv = lv.join(cond);
                }
                self.scopes[d].insert(name.clone(), lv);
            }
        }
    }

    pub(super) fn if_(&mut self, i: &mut ExprIf) -> Level {
        self.push_scope();
        let is_let = matches!(strip(&mut i.cond), Expr::Let(_));
        let cond_text = text(strip(&mut i.cond));
        let c = self.expr(&mut i.cond);
        let runtime = !is_let && !c.comptime();
        if runtime {
            mark(&mut i.attrs);
        }
        let before = self.scopes.clone();
        self.conds.push(Frame {
            runtime,
            varying: runtime && c.varying(),
            text: cond_text,
            depth: self.inlining.len(),
        });
        let t = self.block(&mut i.then_branch);
        let after_then = std::mem::replace(&mut self.scopes, before.clone());
        let el = match &mut i.else_branch {
            Some((_, e)) => self.expr(e),
            None => Level::Comptime,
        };
        self.conds.pop();
        let after_else = std::mem::replace(&mut self.scopes, before.clone());
        let cond = if runtime { c } else { Level::Comptime };
        self.merge(&before, vec![after_then, after_else], cond);
        self.pop_scope();
        let lv = t.join(el);
        if runtime { lv.join(c) } else { lv }
    }

    pub(super) fn for_(&mut self, f: &mut ExprForLoop) -> Level {
        let iter_text = text(strip(&mut f.expr));
        let it = self.expr(&mut f.expr);
        let runtime = is_range_iter(&f.expr) && !it.comptime();
        if runtime {
            mark(&mut f.attrs);
        }
        let trip = if runtime { None } else { literal_trip(&f.expr) };
        if runtime {
            self.runtime_loops.insert(self.next_loop, f.for_token.span);
        }
        self.loops.push((self.next_loop, trip));
        self.next_loop += 1;
        // A comptime loop's body runs unconditionally (once per iteration).
        if runtime {
            self.conds.push(Frame {
                runtime,
                varying: it.varying(),
                text: iter_text,
                depth: self.inlining.len(),
            });
        }
        let before = self.scopes.clone();
        for pass in [false, true] {
            let rec = self.record;
            self.record = rec && pass;
            self.push_scope();
            self.bind_pat(&f.pat, it);
            self.alias(&f.pat, &f.expr);
            self.block(&mut f.body);
            self.pop_scope();
            self.record = rec;
        }
        if runtime {
            self.conds.pop();
        }
        let after = std::mem::replace(&mut self.scopes, before.clone());
        self.merge(
            &before,
            vec![after],
            if runtime { it } else { Level::Comptime },
        );
        self.loops.pop();
        Level::Comptime
    }

    pub(super) fn while_(&mut self, w: &mut ExprWhile) -> Level {
        let is_let = matches!(strip(&mut w.cond), Expr::Let(_));
        let cond_text = text(strip(&mut w.cond));
        self.push_scope();
        let c = self.expr(&mut w.cond);
        self.pop_scope();
        let runtime = !is_let && !c.comptime();
        if runtime {
            mark(&mut w.attrs);
            self.runtime_loops
                .insert(self.next_loop, w.while_token.span);
        }
        self.loops.push((self.next_loop, None));
        self.next_loop += 1;
        self.conds.push(Frame {
            runtime,
            varying: runtime && c.varying(),
            text: cond_text,
            depth: self.inlining.len(),
        });
        let before = self.scopes.clone();
        for pass in [false, true] {
            let rec = self.record;
            self.record = rec && pass;
            self.push_scope();
            self.expr(&mut w.cond);
            self.block(&mut w.body);
            self.pop_scope();
            self.record = rec;
        }
        self.conds.pop();
        let after = std::mem::replace(&mut self.scopes, before.clone());
        self.merge(
            &before,
            vec![after],
            if runtime { c } else { Level::Comptime },
        );
        self.loops.pop();
        Level::Comptime
    }

    pub(super) fn match_(&mut self, m: &mut ExprMatch) -> Level {
        let s = self.expr(&mut m.expr);
        let before = self.scopes.clone();
        let mut branches = Vec::new();
        let mut lv = Level::Comptime;
        self.conds.push(Frame {
            runtime: false,
            varying: false,
            text: String::new(),
            depth: self.inlining.len(),
        });
        for arm in &mut m.arms {
            self.push_scope();
            self.bind_pat(&arm.pat, s);
            if let Some((_, g)) = &mut arm.guard {
                self.expr(g);
            }
            lv = lv.join(self.expr(&mut arm.body));
            self.pop_scope();
            branches.push(std::mem::replace(&mut self.scopes, before.clone()));
        }
        self.conds.pop();
        self.merge(&before, branches, Level::Comptime);
        lv
    }
}
