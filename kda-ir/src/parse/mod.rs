//! The text form parser: reads what [`crate::write`] prints, so that
//! `write_kernel(&parse_kernel(text)?) == text` for every printed kernel.
//!
//! Beyond the printer's output it accepts what a person writes by hand in a
//! filetest: any comment line (`; ...`, including the verifier's `;! error:`
//! lines), any spacing within a line, instructions without a `; @file:line:col`
//! location (they get [`Loc::synthetic`]), and gaps in value numbering.
//! Statements are line-based: an instruction's operands are on its line, and a
//! region's `{` opens on it. An empty `yield` at the end of a region is implied,
//! as in the printer; it takes the location of the region's instruction.
//! Names are Rust string literals (the printer writes them with `{:?}`).
//!
//! `lexer` splits lines into tokens; the parser here walks them (token
//! helpers, the kernel header, the statement loop), `decls` reads declarations
//! and `insts` instructions.

mod decls;
mod insts;
mod lexer;
#[cfg(test)]
mod tests;

use std::fmt;

use cranelift_entity::{EntityRef, SecondaryMap};

use lexer::{Pos, T, Tok, err, lex};

use crate::entities::{Barrier, Buffer, Region, Role, ScalarParam, Sym, Tensor, Value};
use crate::kernel::{ClusterPolicy, Kernel, LaunchDecl, ValueData, ValueDef};
use crate::loc::Loc;
use crate::types::{Scalar, Type};

/// A syntax error, at a 1-based line and column of the input.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ParseError {
    /// 1-based line of the offending token (the last line at an unexpected end).
    pub line: u32,
    /// 1-based column in characters (one past the last character at an unexpected end).
    pub col: u32,
    /// What is wrong or was expected, without the position.
    pub msg: String,
}

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}: {}", self.line, self.col, self.msg)
    }
}

impl std::error::Error for ParseError {}

/// Parse one kernel in the text form.
///
/// ```
/// use kda_ir::parse::parse_kernel;
/// use kda_ir::write::write_kernel;
///
/// let text = r#"kernel square block=64 cluster=1 {
///   tensor t0 "x": f32[64] strides[1] ready read align 4  ; @square.rs:3:13
///   tensor t1 "y": f32[64] strides[1] ready write align 4  ; @square.rs:4:13
///   v0:u32 = special tid  ; @square.rs:5:13
///   v1:f32 = ld.global t0[v0]  ; @square.rs:6:13
///   v2:f32 = mul v1, v1  ; @square.rs:7:14
///   st.global t1[v0], v2  ; @square.rs:8:5
/// }
/// "#;
/// let k = parse_kernel(text)?;
/// assert_eq!((k.tensors.len(), k.insts.len()), (2, 4));
/// assert_eq!(write_kernel(&k), text);
/// # Ok::<(), kda_ir::parse::ParseError>(())
/// ```
pub fn parse_kernel(text: &str) -> Result<Kernel, ParseError> {
    let toks = lex(text)?;
    let end = Pos {
        line: text.lines().count().max(1) as u32,
        col: text.lines().last().map_or(0, |l| l.chars().count()) as u32 + 1,
    };
    let mut p = Parser {
        toks,
        at: 0,
        end,
        k: Kernel::new(
            "",
            LaunchDecl {
                block: 0,
                cluster: 1,
                min_blocks_per_sm: None,
                cluster_policy: Default::default(),
            },
        ),
        defined: SecondaryMap::new(),
        uses: Vec::new(),
        refs: Vec::new(),
        depth: 0,
    };
    p.kernel()?;
    p.finish()
}

#[derive(Copy, Clone, Debug)]
enum Ref {
    Tensor,
    Scalar,
    Sym,
    Role,
    Buffer,
    Barrier,
}

struct Parser {
    toks: Vec<Tok>,
    at: usize,
    end: Pos,
    k: Kernel,
    defined: SecondaryMap<Value, bool>,
    /// Every value use, checked against the definitions at the end.
    uses: Vec<(Value, Pos)>,
    /// Every declaration reference, checked at the end (a buffer's guard
    /// names a barrier declared after it).
    refs: Vec<(Ref, usize, Pos)>,
    /// Regions open around the current statement.
    depth: usize,
}

/// Deepest nesting of regions (`if`, `for`, `while`, roles) the parser
/// accepts: it recurses once per level (256 overflowed a 2 MiB test thread in
/// debug builds), and no kernel comes near it.
pub const MAX_NESTING: usize = 64;

/// Extra room for entity numbers beyond the text's token count: a number
/// can exceed the count only through gaps nothing refers to, and the
/// parser allocates one slot per number up to the largest.
const NUMBERING_SLACK: usize = 4096;

type R<X> = Result<X, ParseError>;

impl Parser {
    // -- token helpers

    fn peek(&self) -> Option<&T> {
        self.toks.get(self.at).map(|t| &t.t)
    }

    fn peek_at(&self, n: usize) -> Option<&T> {
        self.toks.get(self.at + n).map(|t| &t.t)
    }

    fn pos(&self) -> Pos {
        self.toks.get(self.at).map_or(self.end, |t| t.pos)
    }

    /// The line of the last consumed token.
    fn line(&self) -> u32 {
        self.at.checked_sub(1).map_or(0, |n| self.toks[n].pos.line)
    }

    /// Whether the next token is on the line of the last consumed one.
    fn same_line(&self) -> bool {
        self.toks
            .get(self.at)
            .is_some_and(|t| t.pos.line == self.line())
    }

    fn next(&mut self) -> R<Tok> {
        match self.toks.get(self.at) {
            Some(t) => {
                self.at += 1;
                Ok(t.clone())
            }
            None => err(self.end, "unexpected end of input"),
        }
    }

    fn describe(t: Option<&T>) -> String {
        match t {
            None => "end of input".into(),
            Some(T::Ident(s)) => format!("`{s}`"),
            Some(T::Num(s)) => format!("`{s}`"),
            Some(T::Str(s)) => format!("{s:?}"),
            Some(T::Punct(c)) => format!("`{c}`"),
            Some(T::DotDot) => "`..`".into(),
            Some(T::Loc(l)) => format!("`; @{l}`"),
        }
    }

    fn unexpected<X>(&self, wanted: &str) -> R<X> {
        err(
            self.pos(),
            format!("expected {wanted}, found {}", Self::describe(self.peek())),
        )
    }

    fn eat(&mut self, c: char) -> bool {
        if self.peek() == Some(&T::Punct(c)) {
            self.at += 1;
            true
        } else {
            false
        }
    }

    fn expect(&mut self, c: char) -> R<()> {
        if self.eat(c) {
            Ok(())
        } else {
            self.unexpected(&format!("`{c}`"))
        }
    }

    fn is_ident(&self, s: &str) -> bool {
        matches!(self.peek(), Some(T::Ident(x)) if x == s)
    }

    fn eat_ident(&mut self, s: &str) -> bool {
        if self.is_ident(s) {
            self.at += 1;
            true
        } else {
            false
        }
    }

    fn keyword(&mut self, s: &str) -> R<()> {
        if self.eat_ident(s) {
            Ok(())
        } else {
            self.unexpected(&format!("`{s}`"))
        }
    }

    fn ident(&mut self, wanted: &str) -> R<(String, Pos)> {
        match self.peek() {
            Some(T::Ident(s)) => {
                let s = s.clone();
                let pos = self.pos();
                self.at += 1;
                Ok((s, pos))
            }
            _ => self.unexpected(wanted),
        }
    }

    fn string(&mut self) -> R<String> {
        match self.peek() {
            Some(T::Str(s)) => {
                let s = s.clone();
                self.at += 1;
                Ok(s)
            }
            _ => self.unexpected("a quoted name"),
        }
    }

    fn number<N: std::str::FromStr>(&mut self, wanted: &str) -> R<N> {
        let pos = self.pos();
        match self.peek() {
            Some(T::Num(s)) => match s.parse::<N>() {
                Ok(n) => {
                    self.at += 1;
                    Ok(n)
                }
                Err(_) => err(pos, format!("`{s}` is not {wanted}")),
            },
            _ => self.unexpected(wanted),
        }
    }

    fn u32(&mut self) -> R<u32> {
        self.number("an unsigned 32-bit number")
    }

    fn fnum(&mut self) -> R<f64> {
        let neg = self.eat('-');
        let pos = self.pos();
        let v = match self.peek() {
            Some(T::Num(s)) => s.parse::<f64>().map_err(|_| ParseError {
                line: pos.line,
                col: pos.col,
                msg: format!("`{s}` is not a number"),
            })?,
            Some(T::Ident(s)) if s == "inf" => f64::INFINITY,
            Some(T::Ident(s)) if s == "NaN" => f64::NAN,
            _ => return self.unexpected("a floating-point number"),
        };
        self.at += 1;
        Ok(if neg { -v } else { v })
    }

    /// An entity written `prefix<n>`.
    fn entity(&mut self, prefix: &str, wanted: &str) -> R<(usize, Pos)> {
        let pos = self.pos();
        if let Some(T::Ident(s)) = self.peek()
            && let Some(digits) = s.strip_prefix(prefix)
            && digits.chars().all(|c| c.is_ascii_digit())
            && let Ok(n) = digits.parse::<usize>()
        {
            // Every entity is defined by at least one token, so a number
            // far past the token count is a gap nobody needs, and honouring
            // it would allocate a slot per number (`v100000000`: gigabytes).
            let limit = self.toks.len().saturating_add(NUMBERING_SLACK);
            if n > limit {
                return err(
                    pos,
                    format!(
                        "`{prefix}{n}` is numbered beyond what this text can define (at most {limit} here); number entities densely, as the printer does"
                    ),
                );
            }
            self.at += 1;
            return Ok((n, pos));
        }
        self.unexpected(wanted)
    }

    fn reference(&mut self, kind: Ref) -> R<usize> {
        let (prefix, wanted) = match kind {
            Ref::Tensor => ("t", "a tensor (`t0`)"),
            Ref::Scalar => ("s", "a scalar parameter (`s0`)"),
            Ref::Sym => ("sym", "a symbol (`sym0`)"),
            Ref::Role => ("role", "a role (`role0`)"),
            Ref::Buffer => ("buf", "a shared buffer (`buf0`)"),
            Ref::Barrier => ("bar", "an mbarrier (`bar0`)"),
        };
        let (n, pos) = self.entity(prefix, wanted)?;
        self.refs.push((kind, n, pos));
        Ok(n)
    }

    fn tensor(&mut self) -> R<Tensor> {
        self.reference(Ref::Tensor).map(Tensor::new)
    }
    fn buffer(&mut self) -> R<Buffer> {
        self.reference(Ref::Buffer).map(Buffer::new)
    }
    fn barrier(&mut self) -> R<Barrier> {
        self.reference(Ref::Barrier).map(Barrier::new)
    }
    /// A barrier operand: `bar3`, or an element of a ring, `bar3[%v of n]`:
    /// the barrier, the ring length (0: none) and the index operand.
    fn bar_ref(&mut self) -> R<(Barrier, u32, Vec<Value>)> {
        let b = self.barrier()?;
        if !self.eat('[') {
            return Ok((b, 0, vec![]));
        }
        let v = self.value()?;
        self.keyword("of")?;
        let n = self.u32()?;
        self.expect(']')?;
        Ok((b, n, vec![v]))
    }

    fn role_ref(&mut self) -> R<Role> {
        self.reference(Ref::Role).map(Role::new)
    }

    fn is_value(&self) -> bool {
        matches!(self.peek(), Some(T::Ident(s)) if s.strip_prefix('v').is_some_and(|d| !d.is_empty() && d.chars().all(|c| c.is_ascii_digit())))
    }

    /// A value use.
    fn value(&mut self) -> R<Value> {
        let (n, pos) = self.entity("v", "a value (`v0`)")?;
        let v = Value::new(n);
        self.uses.push((v, pos));
        Ok(v)
    }

    /// Comma-separated value uses on the current line (possibly none).
    fn values_on_line(&mut self) -> R<Vec<Value>> {
        let mut vs = Vec::new();
        if self.same_line() && self.is_value() {
            vs.push(self.value()?);
            while self.same_line() && self.eat(',') {
                vs.push(self.value()?);
            }
        }
        Ok(vs)
    }

    /// `v, v, ...` up to a closing delimiter (not consumed).
    fn values_until(&mut self, close: char) -> R<Vec<Value>> {
        let mut vs = Vec::new();
        if self.peek() != Some(&T::Punct(close)) {
            vs.push(self.value()?);
            while self.eat(',') {
                vs.push(self.value()?);
            }
        }
        Ok(vs)
    }

    /// `[v, v]`.
    fn index(&mut self) -> R<Vec<Value>> {
        self.expect('[')?;
        let vs = self.values_until(']')?;
        self.expect(']')?;
        Ok(vs)
    }

    /// `v7:f32` (a definition site).
    fn typed(&mut self) -> R<(Value, Type, Pos)> {
        let (n, pos) = self.entity("v", "a value (`v0`)")?;
        self.expect(':')?;
        let ty = self.ty()?;
        Ok((Value::new(n), ty, pos))
    }

    fn ty(&mut self) -> R<Type> {
        let (s, pos) = self.ident("a type")?;
        s.parse::<Type>().or_else(|e| err(pos, e))
    }

    fn scalar(&mut self) -> R<Scalar> {
        let pos = self.pos();
        let t = self.ty()?;
        if t.is_scalar() {
            Ok(t.elem)
        } else {
            err(pos, format!("expected a scalar type, found {t}"))
        }
    }

    /// The location at the end of the current line, if any.
    fn loc(&mut self) -> Loc {
        match self.toks.get(self.at) {
            Some(Tok { t: T::Loc(l), pos }) if pos.line == self.line() => {
                let l = l.clone();
                self.at += 1;
                l
            }
            _ => Loc::synthetic(),
        }
    }

    fn define(&mut self, v: Value, ty: Type, def: ValueDef, pos: Pos) -> R<()> {
        while self.k.values.len() <= v.index() {
            // A gap in the numbering: a value nothing refers to.
            self.k.values.push(ValueData {
                ty: Type::I32,
                def: ValueDef::Param(self.k.body, u32::MAX),
            });
        }
        if self.defined[v] {
            return err(pos, format!("{v} is defined twice"));
        }
        self.defined[v] = true;
        self.k.values[v] = ValueData { ty, def };
        Ok(())
    }

    // -- kernel

    fn kernel(&mut self) -> R<()> {
        self.keyword("kernel")?;
        self.k.name = match self.next()? {
            Tok {
                t: T::Ident(s) | T::Str(s),
                ..
            } => s,
            t => {
                return err(
                    t.pos,
                    format!(
                        "expected the kernel's name, found {}",
                        Self::describe(Some(&t.t))
                    ),
                );
            }
        };
        self.keyword("block")?;
        self.expect('=')?;
        self.k.launch.block = self.u32()?;
        self.keyword("cluster")?;
        self.expect('=')?;
        self.k.launch.cluster = self.u32()?;
        if self.eat_ident("min_blocks") {
            self.expect('=')?;
            self.k.launch.min_blocks_per_sm = Some(self.u32()?);
        }
        if self.eat_ident("maxnreg") {
            self.expect('=')?;
            self.k.max_regs = Some(self.u32()?);
        }
        if self.eat_ident("cluster_policy") {
            self.expect('=')?;
            let named = match self.peek() {
                Some(T::Ident(s)) => ClusterPolicy::from_name(s),
                _ => None,
            };
            match named {
                Some(p) => {
                    self.next()?;
                    self.k.launch.cluster_policy = p;
                }
                None => {
                    return self.unexpected("a cluster policy (`default`, `spread` or `balance`)");
                }
            }
        }
        self.k.schedule.early = self.eat_ident("early");
        self.k.schedule.trigger_at_entry = self.eat_ident("trigger_at_entry");
        self.k.schedule.late_release = self.eat_ident("late_release");
        self.k.schedule.evict_first = self.tensor_hint("evict_first")?;
        self.k.schedule.stage_through_shared = self.tensor_hint("stage_through_shared")?;
        self.k.schedule.store_through_shared = self.tensor_hint("store_through_shared")?;
        if self.eat_ident("wave") {
            self.expect('=')?;
            let pos = self.pos();
            let n = self.u32()?;
            if n == 0 {
                return err(pos, "wave=0: a wave issues at least one row chain");
            }
            self.k.schedule.wave = Some(n);
        }
        self.expect('{')?;
        let body = self.k.body;
        self.statements(body, true)?;
        self.expect('}')?;
        if self.peek().is_some() {
            return self.unexpected("end of input after the kernel");
        }
        Ok(())
    }

    /// `name=t0,t3,..` in the kernel header (nothing when absent): declared
    /// tensors in declaration order, each once.
    fn tensor_hint(&mut self, name: &str) -> R<Vec<Tensor>> {
        let mut hinted: Vec<Tensor> = Vec::new();
        if !self.eat_ident(name) {
            return Ok(hinted);
        }
        self.expect('=')?;
        loop {
            let pos = self.pos();
            let t = self.tensor()?;
            if hinted.last().is_some_and(|&last| last >= t) {
                return err(
                    pos,
                    format!(
                        "{name} lists {t} out of order or twice; name each tensor once, in declaration order"
                    ),
                );
            }
            hinted.push(t);
            if !self.eat(',') {
                return Ok(hinted);
            }
        }
    }

    fn finish(self) -> R<Kernel> {
        let k = self.k;
        for &(v, pos) in &self.uses {
            if !self.defined[v] {
                return err(pos, format!("{v} is used but never defined"));
            }
        }
        for &(kind, n, pos) in &self.refs {
            let (len, name) = match kind {
                Ref::Tensor => (k.tensors.len(), Tensor::new(n).to_string()),
                Ref::Scalar => (k.scalars.len(), ScalarParam::new(n).to_string()),
                Ref::Sym => (k.syms.len(), Sym::new(n).to_string()),
                Ref::Role => (k.roles.len(), Role::new(n).to_string()),
                Ref::Buffer => (k.buffers.len(), Buffer::new(n).to_string()),
                Ref::Barrier => (k.barriers.len(), Barrier::new(n).to_string()),
            };
            if n >= len {
                return err(pos, format!("{name} is not declared"));
            }
        }
        Ok(k)
    }

    /// Declarations (top level only) and instructions up to a `}`.
    fn statements(&mut self, r: Region, top: bool) -> R<()> {
        loop {
            match self.peek() {
                None | Some(T::Punct('}')) => return Ok(()),
                Some(T::Loc(_)) => {
                    // A location on a line of its own belongs to nothing.
                    self.at += 1;
                }
                Some(T::Ident(s)) if top && self.is_declaration(s) => self.declaration()?,
                _ => self.inst(r)?,
            }
        }
    }
}
