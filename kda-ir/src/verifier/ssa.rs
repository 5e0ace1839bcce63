//! SSA scoping: a use sees the values defined earlier in its region and in the
//! enclosing regions, and the parameters of those regions; nothing else.

use cranelift_entity::SecondaryMap;

use super::{Ctx, Layout};
use crate::entities::{Inst, Region, Value};
use crate::kernel::ValueDef;

pub(super) fn check(cx: &mut Ctx, layout: &Layout) {
    let mut s = Scope {
        visible: SecondaryMap::new(),
        stack: Vec::new(),
    };
    region(cx, layout, cx.k.body, &mut s);
}

struct Scope {
    visible: SecondaryMap<Value, bool>,
    stack: Vec<Value>,
}

impl Scope {
    fn define(&mut self, v: Value) {
        self.visible[v] = true;
        self.stack.push(v);
    }
}

fn region(cx: &mut Ctx, layout: &Layout, r: Region, s: &mut Scope) {
    let k = cx.k;
    let mark = s.stack.len();
    for &p in &k.regions[r].params {
        s.define(p);
    }
    for &i in &k.regions[r].insts {
        for (n, &a) in k.insts[i].args.iter().enumerate() {
            // Report a value once per instruction.
            if !s.visible[a] && !k.insts[i].args[..n].contains(&a) {
                let msg = not_visible(cx, layout, i, a);
                cx.error(i, msg);
            }
        }
        for sub in k.insts[i].op.regions() {
            region(cx, layout, sub, s);
        }
        for &v in &k.insts[i].results {
            s.define(v);
        }
    }
    for v in s.stack.drain(mark..) {
        s.visible[v] = false;
    }
}

/// Why `v` cannot be used by `user`, and what is allowed.
fn not_visible(cx: &Ctx, layout: &Layout, user: Inst, v: Value) -> String {
    let k = cx.k;
    match k.values[v].def {
        ValueDef::Result(d, _) if d == user => {
            format!("{v} is used by the instruction that defines it")
        }
        ValueDef::Result(d, _) if layout.ancestors(user).any(|a| a == d) => {
            format!(
                "{v} is a result of {} and is not visible inside its regions",
                cx.at(d)
            )
        }
        ValueDef::Result(d, _) => match layout.region[d] {
            Some(rd) if layout.encloses(rd, user) => format!(
                "{v} is used before its definition at {}; a value is visible only after it is defined",
                k.insts[d].loc
            ),
            Some(_) => format!(
                "{v} is defined inside a region that does not enclose this use ({}); pass it out with `yield`",
                layout.parent[d].map_or_else(|| "the top level".into(), |p| cx.at(p))
            ),
            None => format!("{v} is not defined by any instruction of the kernel"),
        },
        ValueDef::Param(r, _) => match layout.owner[r] {
            Some(o) if layout.pos(o).is_some() => format!(
                "{v} is a parameter of a region of {} and is used outside that region",
                cx.at(o)
            ),
            _ => format!("{v} is a parameter of {r}, which is not in the kernel"),
        },
    }
}
