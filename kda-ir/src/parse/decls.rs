//! Declarations: `sym`, `tensor`, `scalar`, `role`, `shared` and `mbarrier`
//! lines at the top of a kernel, each kind numbered in order from 0.

use cranelift_entity::EntityRef;

use super::lexer::{T, err};
use super::{Parser, R, Ref};
use crate::entities::{Role, Sym};
use crate::kernel::{
    Access, BarrierDecl, BufferDecl, Dim, Provenance, RoleDecl, ScalarDecl, SymDecl, TensorDecl,
};

impl Parser {
    pub(super) fn is_declaration(&self, s: &str) -> bool {
        match s {
            "sym" | "tensor" | "scalar" | "shared" | "mbarrier" => true,
            "role" => matches!(self.peek_at(2), Some(T::Str(_))),
            _ => false,
        }
    }

    /// The next entity of a kind is numbered in order.
    fn numbered(&mut self, prefix: &str, wanted: &str, next: usize) -> R<()> {
        let (n, pos) = self.entity(prefix, wanted)?;
        if n != next {
            return err(
                pos,
                format!(
                    "expected {prefix}{next}: declarations of a kind are numbered in order from 0"
                ),
            );
        }
        Ok(())
    }

    fn dims(&mut self) -> R<Vec<Dim>> {
        self.expect('[')?;
        let mut ds = Vec::new();
        if !self.eat(']') {
            loop {
                if matches!(self.peek(), Some(T::Num(_))) {
                    ds.push(Dim::Const(self.number("a dimension")?));
                } else {
                    ds.push(Dim::Sym(Sym::new(self.reference(Ref::Sym)?)));
                }
                if self.eat(']') {
                    break;
                }
                self.expect(',')?;
            }
        }
        Ok(ds)
    }

    /// `roles(role0, role1)` if present.
    fn roles(&mut self) -> R<Vec<Role>> {
        let mut rs = Vec::new();
        if self.same_line() && self.eat_ident("roles") {
            self.expect('(')?;
            loop {
                rs.push(self.role_ref()?);
                if self.eat(')') {
                    break;
                }
                self.expect(',')?;
            }
        }
        Ok(rs)
    }

    pub(super) fn declaration(&mut self) -> R<()> {
        let (kw, _) = self.ident("a declaration")?;
        match kw.as_str() {
            "sym" => {
                self.numbered("sym", "a symbol (`sym0`)", self.k.syms.len())?;
                let name = self.string()?;
                self.k.syms.push(SymDecl { name });
            }
            "tensor" => {
                self.numbered("t", "a tensor (`t0`)", self.k.tensors.len())?;
                let name = self.string()?;
                self.expect(':')?;
                let dtype = self.scalar()?;
                let shape = self.dims()?;
                self.keyword("strides")?;
                let strides = self.dims()?;
                let provenance = match self.ident("`ready` or `produced`")?.0.as_str() {
                    "ready" => Provenance::Ready,
                    "produced" => Provenance::Produced,
                    _ => {
                        self.at -= 1;
                        return self.unexpected("`ready` or `produced`");
                    }
                };
                let access = match self.ident("`read`, `write` or `readwrite`")?.0.as_str() {
                    "read" => Access::Read,
                    "write" => Access::Write,
                    "readwrite" => Access::ReadWrite,
                    _ => {
                        self.at -= 1;
                        return self.unexpected("`read`, `write` or `readwrite`");
                    }
                };
                self.keyword("align")?;
                let align = self.u32()?;
                let loc = self.loc();
                self.k.tensors.push(TensorDecl {
                    name,
                    dtype,
                    shape,
                    strides,
                    provenance,
                    access,
                    align,
                    loc,
                });
            }
            "scalar" => {
                self.numbered("s", "a scalar parameter (`s0`)", self.k.scalars.len())?;
                let name = self.string()?;
                self.expect(':')?;
                let ty = self.scalar()?;
                let loc = self.loc();
                self.k.scalars.push(ScalarDecl { name, ty, loc });
            }
            "role" => {
                self.numbered("role", "a role (`role0`)", self.k.roles.len())?;
                let name = self.string()?;
                let first = self.u32()?;
                if !matches!(self.next()?.t, T::DotDot) {
                    self.at -= 1;
                    return self.unexpected("`..`");
                }
                let pos = self.pos();
                let end = self.u32()?;
                if end < first {
                    return err(
                        pos,
                        format!("role ends at {end}, before its first thread {first}"),
                    );
                }
                let regs = if self.same_line() && self.eat_ident("regs") {
                    Some(self.u32()?)
                } else {
                    None
                };
                let loc = self.loc();
                self.k.roles.push(RoleDecl {
                    name,
                    first,
                    threads: end - first,
                    regs,
                    loc,
                });
            }
            "shared" => {
                self.numbered("buf", "a shared buffer (`buf0`)", self.k.buffers.len())?;
                let name = self.string()?;
                self.expect(':')?;
                let elem = self.scalar()?;
                self.expect('[')?;
                let len = self.u32()?;
                self.expect(']')?;
                self.keyword("align")?;
                let align = self.u32()?;
                let roles = self.roles()?;
                let mut guard = None;
                if self.same_line() && self.eat_ident("guard") {
                    self.expect('(')?;
                    guard = Some(self.barrier()?);
                    self.expect(')')?;
                }
                let mut tile = None;
                if self.same_line() && self.eat_ident("tile") {
                    self.expect('(')?;
                    let rows = self.u32()?;
                    self.expect(',')?;
                    let cols = self.u32()?;
                    self.expect(',')?;
                    let (name, pos) = self.ident("a swizzle (`none`, `sw32`, `sw64`, `sw128`)")?;
                    let Some(swizzle) = crate::wgmma::Swizzle::from_name(&name) else {
                        return super::lexer::err(
                            pos,
                            format!("unknown swizzle `{name}`; allowed: none, sw32, sw64, sw128"),
                        );
                    };
                    self.expect(')')?;
                    tile = Some(crate::wgmma::MmaTile {
                        rows,
                        cols,
                        swizzle,
                    });
                }
                let loc = self.loc();
                self.k.buffers.push(BufferDecl {
                    name,
                    elem,
                    len,
                    align,
                    roles,
                    guard,
                    tile,
                    loc,
                });
            }
            "mbarrier" => {
                self.numbered("bar", "an mbarrier (`bar0`)", self.k.barriers.len())?;
                let name = self.string()?;
                self.expect(':')?;
                self.keyword("arrivals")?;
                let arrivals = self.u32()?;
                self.keyword("tx")?;
                let tx_bytes = self.u32()?;
                let roles = self.roles()?;
                let loc = self.loc();
                self.k.barriers.push(BarrierDecl {
                    name,
                    arrivals,
                    tx_bytes,
                    roles,
                    loc,
                });
            }
            _ => unreachable!("is_declaration"),
        }
        Ok(())
    }
}
