//! Structure: every reference resolves, the regions form a tree, yields
//! terminate nested regions, every value has exactly one definition. The
//! other checks walk the [`Layout`] built here.

use cranelift_entity::SecondaryMap;

use super::Ctx;
use crate::entities::{Inst, Region, Role, Value};
use crate::kernel::{Dim, Kernel, ValueDef};
use crate::op::Op;

/// The region tree, indexed: pre-order position and parent of every
/// instruction, owner of every region.
pub(crate) struct Layout {
    /// Instructions in pre-order: an instruction before those of its regions.
    pub order: Vec<Inst>,
    pos: SecondaryMap<Inst, Option<usize>>,
    /// The instruction whose region holds an instruction (`None`: top level).
    pub parent: SecondaryMap<Inst, Option<Inst>>,
    /// The instruction that owns a region (`None`: the top-level region).
    pub owner: SecondaryMap<Region, Option<Inst>>,
    /// The region that holds an instruction.
    pub region: SecondaryMap<Inst, Option<Region>>,
}

impl Layout {
    /// Position in pre-order, if the instruction is in the layout.
    pub fn pos(&self, i: Inst) -> Option<usize> {
        self.pos[i]
    }

    /// The enclosing region ops of `i`, innermost first.
    pub fn ancestors(&self, i: Inst) -> impl Iterator<Item = Inst> + '_ {
        std::iter::successors(self.parent[i], move |&p| self.parent[p])
    }

    /// Whether `r` is the region of `i` or of one of its ancestors: the values
    /// defined in `r` before that point are visible to `i`.
    pub fn encloses(&self, r: Region, i: Inst) -> bool {
        std::iter::once(i)
            .chain(self.ancestors(i))
            .any(|a| self.region[a] == Some(r))
    }

    /// The role whose region (innermost) holds `i`.
    pub fn role_of(&self, k: &Kernel, i: Inst) -> Option<Role> {
        self.ancestors(i).find_map(|a| match k.insts[a].op {
            Op::InRole { role, .. } => Some(role),
            _ => None,
        })
    }

    /// The innermost `for`/`while` holding `i`.
    pub fn innermost_loop(&self, k: &Kernel, i: Inst) -> Option<Inst> {
        self.ancestors(i)
            .find(|&a| matches!(k.insts[a].op, Op::For { .. } | Op::While { .. }))
    }
}

/// Returns the layout when the later checks can run, and whether the kernel
/// can be printed.
pub(super) fn check(cx: &mut Ctx) -> (Option<Layout>, bool) {
    let k = cx.k;
    let mut w = Walk {
        layout: Layout {
            order: Vec::new(),
            pos: SecondaryMap::new(),
            parent: SecondaryMap::new(),
            owner: SecondaryMap::new(),
            region: SecondaryMap::new(),
        },
        seen_region: SecondaryMap::new(),
        seen_inst: SecondaryMap::new(),
        regions: Vec::new(),
        fatal: false,
        printable: true,
    };
    declarations(cx, &mut w);
    if !k.regions.is_valid(k.body) {
        cx.decl_error(
            &crate::loc::Loc::synthetic(),
            format!("the top-level region {} does not exist", k.body),
        );
        return (None, false);
    }
    if !k.regions[k.body].params.is_empty() {
        cx.decl_error(
            &crate::loc::Loc::synthetic(),
            "the top-level region has parameters; it takes none",
        );
    }
    w.region(cx, k.body, None);
    if !w.fatal {
        definitions(cx, &w);
    }
    let layout = if w.fatal { None } else { Some(w.layout) };
    (layout, w.printable)
}

struct Walk {
    layout: Layout,
    seen_region: SecondaryMap<Region, bool>,
    seen_inst: SecondaryMap<Inst, bool>,
    /// Regions in the order they were reached.
    regions: Vec<Region>,
    /// Later checks cannot run.
    fatal: bool,
    /// The printer can run (no dangling value or region, no region twice).
    printable: bool,
}

fn declarations(cx: &mut Ctx, w: &mut Walk) {
    let k = cx.k;
    for (t, d) in k.tensors.iter() {
        for dim in d.shape.iter().chain(&d.strides) {
            if let Dim::Sym(s) = *dim
                && !k.syms.is_valid(s)
            {
                cx.decl_error(
                    &d.loc,
                    format!("tensor {t} {:?} uses {s}, which is not declared", d.name),
                );
                w.fatal = true;
            }
        }
    }
    for (b, d) in k.buffers.iter() {
        for &r in &d.roles {
            if !k.roles.is_valid(r) {
                cx.decl_error(
                    &d.loc,
                    format!(
                        "shared buffer {b} {:?} names {r}, which is not declared",
                        d.name
                    ),
                );
                w.fatal = true;
            }
        }
        if let Some(g) = d.guard
            && !k.barriers.is_valid(g)
        {
            cx.decl_error(
                &d.loc,
                format!(
                    "shared buffer {b} {:?} is guarded by {g}, which is not declared",
                    d.name
                ),
            );
            w.fatal = true;
        }
    }
    for (b, d) in k.barriers.iter() {
        for &r in &d.roles {
            if !k.roles.is_valid(r) {
                cx.decl_error(
                    &d.loc,
                    format!("mbarrier {b} {:?} names {r}, which is not declared", d.name),
                );
                w.fatal = true;
            }
        }
    }
}

impl Walk {
    fn region(&mut self, cx: &mut Ctx, r: Region, owner: Option<Inst>) {
        let k = cx.k;
        if self.seen_region[r] {
            let msg = format!(
                "{r} is also the region of another instruction; a region belongs to exactly one"
            );
            match owner {
                Some(o) => cx.error(o, msg),
                None => cx.decl_error(&crate::loc::Loc::synthetic(), msg),
            }
            self.fatal = true;
            self.printable = false;
            return;
        }
        self.seen_region[r] = true;
        self.regions.push(r);
        self.layout.owner[r] = owner;
        let nested = owner.is_some();
        for &p in &k.regions[r].params {
            if !k.values.is_valid(p) {
                let msg = format!("region {r} has parameter {p}, which does not exist");
                match owner {
                    Some(o) => cx.error(o, msg),
                    None => cx.decl_error(&crate::loc::Loc::synthetic(), msg),
                }
                self.fatal = true;
                self.printable = false;
            }
        }
        let insts = &k.regions[r].insts;
        for (n, &i) in insts.iter().enumerate() {
            if !k.insts.is_valid(i) {
                let msg = format!("region {r} lists {i}, which does not exist");
                match owner {
                    Some(o) => cx.error(o, msg),
                    None => cx.decl_error(&crate::loc::Loc::synthetic(), msg),
                }
                self.fatal = true;
                self.printable = false;
                continue;
            }
            if self.seen_inst[i] {
                cx.error(i, "this instruction appears twice in the layout; it belongs to exactly one region");
                self.fatal = true;
                self.printable = false;
                continue;
            }
            self.seen_inst[i] = true;
            self.layout.pos[i] = Some(self.layout.order.len());
            self.layout.order.push(i);
            self.layout.parent[i] = owner;
            self.layout.region[i] = Some(r);
            self.references(cx, i);
            if k.insts[i].op == Op::Yield {
                if !nested {
                    cx.error(
                        i,
                        "`yield` in the top-level region; only nested regions end with a yield",
                    );
                } else if n + 1 != insts.len() {
                    cx.error(i, "`yield` before the end of its region; it must be the region's last instruction");
                }
            }
            for sub in k.insts[i].op.regions() {
                if k.regions.is_valid(sub) {
                    self.region(cx, sub, Some(i));
                } else {
                    cx.error(i, format!("this instruction's region {sub} does not exist"));
                    self.fatal = true;
                    self.printable = false;
                }
            }
        }
        if let Some(o) = owner {
            let ends = insts
                .last()
                .is_some_and(|&i| k.insts.get(i).is_some_and(|d| d.op == Op::Yield));
            if !ends {
                cx.error(
                    o,
                    format!(
                        "region {r} of this `{}` does not end with a yield",
                        cx.mnemonic(o)
                    ),
                );
            }
        }
    }

    /// Entities and values named by one instruction exist.
    fn references(&mut self, cx: &mut Ctx, i: Inst) {
        let k = cx.k;
        let d = &k.insts[i];
        // In the order the text form names them: buffer, tensor, barrier.
        let op = &d.op;
        let mut missing = Vec::new();
        if let Op::Param(s) = *op
            && !k.scalars.is_valid(s)
        {
            missing.push(s.to_string());
        }
        for b in op.buffers() {
            if !k.buffers.is_valid(b) {
                missing.push(b.to_string());
            }
        }
        if let Some(t) = op.tensor()
            && !k.tensors.is_valid(t)
        {
            missing.push(t.to_string());
        }
        if let Some((b, _)) = op.barrier()
            && !k.barriers.is_valid(b)
        {
            missing.push(b.to_string());
        }
        if let Op::InRole { role, .. } = *op
            && !k.roles.is_valid(role)
        {
            missing.push(role.to_string());
        }
        for m in missing {
            cx.error(
                i,
                format!("{} names {m}, which is not declared", cx.mnemonic(i)),
            );
            self.fatal = true;
        }
        for &v in d.args.iter().chain(&d.results) {
            if !k.values.is_valid(v) {
                cx.error(
                    i,
                    format!("{} names {v}, which does not exist", cx.mnemonic(i)),
                );
                self.fatal = true;
                self.printable = false;
            }
        }
    }
}

/// Every value in the layout is defined once, and `ValueDef` agrees.
fn definitions(cx: &mut Ctx, w: &Walk) {
    let k = cx.k;
    let mut defined: SecondaryMap<Value, bool> = SecondaryMap::new();
    let describe = |def: &ValueDef| match *def {
        ValueDef::Result(i, n) => format!("result {n} of {i}"),
        ValueDef::Param(r, n) => format!("parameter {n} of {r}"),
    };
    for &r in &w.regions {
        let owner = w.layout.owner[r];
        for (n, &p) in k.regions[r].params.iter().enumerate() {
            let mut msgs = Vec::new();
            if std::mem::replace(&mut defined[p], true) {
                msgs.push(format!(
                    "{p} is defined more than once; a value has exactly one definition"
                ));
            }
            let def = &k.values[p].def;
            if !matches!(*def, ValueDef::Param(dr, dn) if dr == r && dn as usize == n) {
                msgs.push(format!(
                    "{p} is parameter {n} of {r} but records its definition as {}",
                    describe(def)
                ));
            }
            for m in msgs {
                match owner {
                    Some(o) => cx.error(o, m),
                    None => cx.decl_error(&crate::loc::Loc::synthetic(), m),
                }
            }
        }
    }
    for &i in &w.layout.order {
        for (n, &v) in k.insts[i].results.iter().enumerate() {
            if std::mem::replace(&mut defined[v], true) {
                cx.error(
                    i,
                    format!("{v} is defined more than once; a value has exactly one definition"),
                );
            }
            let def = &k.values[v].def;
            if !matches!(*def, ValueDef::Result(di, dn) if di == i && dn as usize == n) {
                cx.error(
                    i,
                    format!(
                        "{v} is result {n} of this instruction but records its definition as {}",
                        describe(def)
                    ),
                );
            }
        }
    }
}
