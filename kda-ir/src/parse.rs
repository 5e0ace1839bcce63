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

use std::fmt;

use cranelift_entity::{EntityRef, SecondaryMap};

use crate::entities::{Barrier, Buffer, Inst, Region, Role, ScalarParam, Sym, Tensor, Value};
use crate::kernel::{
    Access, BarrierDecl, BufferDecl, Dim, Kernel, LaunchDecl, Provenance, RegionData, RoleDecl,
    ScalarDecl, SymDecl, TensorDecl, ValueData, ValueDef,
};
use crate::loc::Loc;
use crate::op::{BinOp, CachePolicy, CmpOp, InstData, Op, ShflMode, Special, UnOp};
use crate::types::{Scalar, Type};

/// A syntax error, at a 1-based line and column of the input.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ParseError {
    pub line: u32,
    pub col: u32,
    pub msg: String,
}

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}: {}", self.line, self.col, self.msg)
    }
}

impl std::error::Error for ParseError {}

/// Parse one kernel in the text form.
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
            },
        ),
        defined: SecondaryMap::new(),
        uses: Vec::new(),
        refs: Vec::new(),
    };
    p.kernel()?;
    p.finish()
}

// ---- lexer

#[derive(Copy, Clone, Debug, PartialEq, Eq)]
struct Pos {
    line: u32,
    col: u32,
}

#[derive(Clone, Debug, PartialEq)]
enum T {
    /// Names, keywords, mnemonics, entities: `[A-Za-z_][A-Za-z0-9_]*`, with
    /// `.` joining parts (`mbarrier.arrive.expect_tx`, `extract.2`) but not `..`.
    Ident(String),
    /// A number as written (`-3`, `2.0`, `1e-7`).
    Num(String),
    Str(String),
    /// `{ } [ ] ( ) , : = | -`
    Punct(char),
    DotDot,
    /// `; @file:line:col`
    Loc(Loc),
}

#[derive(Clone, Debug)]
struct Tok {
    t: T,
    pos: Pos,
}

fn err<X>(pos: Pos, msg: impl Into<String>) -> Result<X, ParseError> {
    Err(ParseError {
        line: pos.line,
        col: pos.col,
        msg: msg.into(),
    })
}

fn lex(text: &str) -> Result<Vec<Tok>, ParseError> {
    let mut toks = Vec::new();
    for (ln, line) in text.lines().enumerate() {
        let chars: Vec<char> = line.chars().collect();
        let mut i = 0;
        while i < chars.len() {
            let c = chars[i];
            let pos = Pos {
                line: ln as u32 + 1,
                col: i as u32 + 1,
            };
            let ident_char = |c: char| c.is_ascii_alphanumeric() || c == '_';
            if c.is_whitespace() {
                i += 1;
            } else if c == ';' {
                let rest: String = chars[i + 1..].iter().collect();
                if let Some(l) = rest.trim_start().strip_prefix('@') {
                    toks.push(Tok {
                        t: T::Loc(parse_loc(l.trim_end(), pos)?),
                        pos,
                    });
                }
                break;
            } else if c.is_ascii_alphabetic() || c == '_' {
                let start = i;
                while i < chars.len()
                    && (ident_char(chars[i])
                        || (chars[i] == '.' && chars.get(i + 1).is_some_and(|&n| ident_char(n))))
                {
                    i += 1;
                }
                toks.push(Tok {
                    t: T::Ident(chars[start..i].iter().collect()),
                    pos,
                });
            } else if c.is_ascii_digit()
                || (c == '-' && chars.get(i + 1).is_some_and(|n| n.is_ascii_digit()))
            {
                let start = i;
                i += 1;
                let digits = |i: &mut usize| {
                    while *i < chars.len() && chars[*i].is_ascii_digit() {
                        *i += 1;
                    }
                };
                digits(&mut i);
                if chars.get(i) == Some(&'.')
                    && chars.get(i + 1).is_some_and(|n| n.is_ascii_digit())
                {
                    i += 1;
                    digits(&mut i);
                }
                if matches!(chars.get(i), Some('e' | 'E')) {
                    let mut j = i + 1;
                    if matches!(chars.get(j), Some('+' | '-')) {
                        j += 1;
                    }
                    if chars.get(j).is_some_and(|n| n.is_ascii_digit()) {
                        i = j;
                        digits(&mut i);
                    }
                }
                toks.push(Tok {
                    t: T::Num(chars[start..i].iter().collect()),
                    pos,
                });
            } else if c == '"' {
                let (s, next) = lex_string(&chars, i, pos)?;
                toks.push(Tok { t: T::Str(s), pos });
                i = next;
            } else if c == '.' && chars.get(i + 1) == Some(&'.') {
                toks.push(Tok { t: T::DotDot, pos });
                i += 2;
            } else if "{}[](),:=|-".contains(c) {
                toks.push(Tok {
                    t: T::Punct(c),
                    pos,
                });
                i += 1;
            } else {
                return err(pos, format!("unexpected character `{c}`"));
            }
        }
    }
    Ok(toks)
}

/// `file:line:col`; the file may itself contain `:`.
fn parse_loc(s: &str, pos: Pos) -> Result<Loc, ParseError> {
    let mut parts = s.rsplitn(3, ':');
    let (col, line, file) = (parts.next(), parts.next(), parts.next());
    match (
        file,
        line.and_then(|l| l.parse().ok()),
        col.and_then(|c| c.parse().ok()),
    ) {
        (Some(f), Some(l), Some(c)) => Ok(Loc::new(f, l, c)),
        _ => err(
            pos,
            format!("bad location `@{s}`; expected `@file:line:col`"),
        ),
    }
}

/// A Rust string literal as `{:?}` writes it; returns the string and the
/// index after the closing quote.
fn lex_string(chars: &[char], start: usize, pos: Pos) -> Result<(String, usize), ParseError> {
    let mut s = String::new();
    let mut i = start + 1;
    loop {
        let here = Pos {
            line: pos.line,
            col: i as u32 + 1,
        };
        match chars.get(i) {
            None => return err(pos, "unterminated string"),
            Some('"') => return Ok((s, i + 1)),
            Some('\\') => {
                let e = chars.get(i + 1).copied();
                i += 2;
                s.push(match e {
                    Some('n') => '\n',
                    Some('r') => '\r',
                    Some('t') => '\t',
                    Some('0') => '\0',
                    Some(c @ ('\\' | '"' | '\'')) => c,
                    Some('u') if chars.get(i) == Some(&'{') => {
                        let close = chars[i..].iter().position(|&c| c == '}').map(|n| i + n);
                        let Some(close) = close else {
                            return err(here, "unterminated `\\u{...}` escape");
                        };
                        let hex: String = chars[i + 1..close].iter().collect();
                        i = close + 1;
                        match u32::from_str_radix(&hex, 16).ok().and_then(char::from_u32) {
                            Some(c) => c,
                            None => return err(here, format!("bad escape `\\u{{{hex}}}`")),
                        }
                    }
                    _ => return err(here, "unknown escape in string"),
                });
            }
            Some(&c) => {
                s.push(c);
                i += 1;
            }
        }
    }
}

// ---- parser

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
}

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
        self.k.schedule.early = self.eat_ident("early");
        self.expect('{')?;
        let body = self.k.body;
        self.statements(body, true)?;
        self.expect('}')?;
        if self.peek().is_some() {
            return self.unexpected("end of input after the kernel");
        }
        Ok(())
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

    fn is_declaration(&self, s: &str) -> bool {
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

    fn declaration(&mut self) -> R<()> {
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
                let loc = self.loc();
                self.k.roles.push(RoleDecl {
                    name,
                    first,
                    threads: end - first,
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
                let loc = self.loc();
                self.k.buffers.push(BufferDecl {
                    name,
                    elem,
                    len,
                    align,
                    roles,
                    guard,
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

    // -- instructions

    fn inst(&mut self, r: Region) -> R<()> {
        let mut results = Vec::new();
        if self.is_value() && self.peek_at(1) == Some(&T::Punct(':')) {
            results.push(self.typed()?);
            while self.eat(',') {
                results.push(self.typed()?);
            }
            self.expect('=')?;
        }
        let (m, mpos) = self.ident("an instruction")?;
        let (op, args, implied) = self.op(&m, mpos)?;
        let loc = self.loc();
        for y in implied {
            self.k.insts[y].loc = loc.clone();
        }
        let inst = self.k.insts.push(InstData {
            op,
            args,
            results: Vec::new(),
            loc,
        });
        for (n, &(v, ty, pos)) in results.iter().enumerate() {
            self.define(v, ty, ValueDef::Result(inst, n as u32), pos)?;
        }
        self.k.insts[inst].results = results.iter().map(|r| r.0).collect();
        self.k.regions[r].insts.push(inst);
        Ok(())
    }

    /// A nested region: `|v1:i32, v2:f32| { ... }` (parameters optional).
    /// Returns it and the implied empty `yield` added at its end, if any.
    fn region(&mut self) -> R<(Region, Option<Inst>)> {
        let r = self.k.regions.push(RegionData::default());
        if self.eat('|') {
            let mut n = 0;
            if !self.eat('|') {
                loop {
                    let (v, ty, pos) = self.typed()?;
                    self.define(v, ty, ValueDef::Param(r, n), pos)?;
                    self.k.regions[r].params.push(v);
                    n += 1;
                    if self.eat('|') {
                        break;
                    }
                    self.expect(',')?;
                }
            }
        }
        self.expect('{')?;
        self.statements(r, false)?;
        self.expect('}')?;
        let ends = self.k.regions[r]
            .insts
            .last()
            .is_some_and(|&i| self.k.insts[i].op == Op::Yield);
        let implied = if ends {
            None
        } else {
            let y = self.k.insts.push(InstData {
                op: Op::Yield,
                args: Vec::new(),
                results: Vec::new(),
                loc: Loc::synthetic(),
            });
            self.k.regions[r].insts.push(y);
            Some(y)
        };
        Ok((r, implied))
    }

    /// The op named `m` and its operands; region ops also return the implied
    /// yields whose location is the op's.
    fn op(&mut self, m: &str, mpos: Pos) -> R<(Op, Vec<Value>, Vec<Inst>)> {
        let (base, policy) = match m.strip_suffix(".evict_first") {
            Some(b) => (b, CachePolicy::EvictFirst),
            None => (m, CachePolicy::Normal),
        };
        let (unary, fast) = match m.strip_suffix(".fast") {
            Some(b) => (b, true),
            None => (m, false),
        };
        let bin = |b| Some(Op::Bin(b));
        let simple = match m {
            "add" => bin(BinOp::Add),
            "sub" => bin(BinOp::Sub),
            "mul" => bin(BinOp::Mul),
            "div" => bin(BinOp::Div),
            "rem" => bin(BinOp::Rem),
            "min" => bin(BinOp::Min),
            "max" => bin(BinOp::Max),
            "and" => bin(BinOp::And),
            "or" => bin(BinOp::Or),
            "xor" => bin(BinOp::Xor),
            "shl" => bin(BinOp::Shl),
            "shr" => bin(BinOp::Shr),
            "fma" => Some(Op::Fma { ftz: false }),
            "fma.ftz" => Some(Op::Fma { ftz: true }),
            "neg" => Some(Op::Un(UnOp::Neg)),
            "not" => Some(Op::Un(UnOp::Not)),
            "abs" => Some(Op::Un(UnOp::Abs)),
            "sqrt" => Some(Op::Un(UnOp::Sqrt)),
            "lg2.approx" => Some(Op::Un(UnOp::Log2Approx)),
            "cmp.eq" => Some(Op::Cmp(CmpOp::Eq)),
            "cmp.ne" => Some(Op::Cmp(CmpOp::Ne)),
            "cmp.lt" => Some(Op::Cmp(CmpOp::Lt)),
            "cmp.le" => Some(Op::Cmp(CmpOp::Le)),
            "cmp.gt" => Some(Op::Cmp(CmpOp::Gt)),
            "cmp.ge" => Some(Op::Cmp(CmpOp::Ge)),
            "select" => Some(Op::Select),
            "cvt" => Some(Op::Cvt),
            "bitcast" => Some(Op::Bitcast),
            "pack" => Some(Op::Pack),
            "shfl.bfly" => Some(Op::Shfl(ShflMode::Bfly)),
            "shfl.idx" => Some(Op::Shfl(ShflMode::Idx)),
            "elect" => Some(Op::ElectSync),
            "mma.m16n8k16" => Some(Op::Mma16816),
            "fence.mbarrier_init" => Some(Op::FenceMbarInit),
            "warp.sync" => Some(Op::WarpSync),
            "fence.proxy.async" => Some(Op::FenceProxyAsync),
            "cluster.arrive" => Some(Op::ClusterArrive { relaxed: false }),
            "cluster.arrive.relaxed" => Some(Op::ClusterArrive { relaxed: true }),
            "cluster.wait" => Some(Op::ClusterWait),
            "cp.async.commit" => Some(Op::CpAsyncCommit),
            "pdl.wait" => Some(Op::GridDepWait),
            "pdl.launch_dependents" => Some(Op::GridDepLaunch),
            "yield" => Some(Op::Yield),
            _ => match unary {
                "exp" => Some(Op::Un(UnOp::Exp { fast })),
                "exp2" => Some(Op::Un(UnOp::Exp2 { fast })),
                "rsqrt" => Some(Op::Un(UnOp::Rsqrt { fast })),
                "sigmoid" => Some(Op::Un(UnOp::Sigmoid { fast })),
                "rcp" => Some(Op::Un(UnOp::Rcp { fast })),
                _ => None,
            },
        };
        if let Some(op) = simple {
            let args = self.values_on_line()?;
            return Ok((op, args, Vec::new()));
        }
        if let Some(n) = m.strip_prefix("extract.") {
            let Ok(lane) = n.parse::<u8>() else {
                return err(mpos, format!("bad lane in `{m}`"));
            };
            let args = self.values_on_line()?;
            return Ok((Op::Extract(lane), args, Vec::new()));
        }
        Ok(match base {
            "iconst" => {
                let c = self.number::<i64>("an integer")?;
                (Op::IConst(c), vec![], vec![])
            }
            "fconst" => (Op::FConst(self.fnum()?), vec![], vec![]),
            "special" => {
                let (s, pos) = self.ident("a special register")?;
                let sp = match s.as_str() {
                    "tid" => Special::ThreadIdx,
                    "laneid" => Special::LaneId,
                    "cluster_rank" => Special::ClusterRank,
                    "ctaid.x" => Special::BlockIdx(0),
                    "ctaid.y" => Special::BlockIdx(1),
                    "ctaid.z" => Special::BlockIdx(2),
                    "nctaid.x" => Special::GridDim(0),
                    "nctaid.y" => Special::GridDim(1),
                    "nctaid.z" => Special::GridDim(2),
                    _ => return err(pos, format!("unknown special register `{s}`")),
                };
                (Op::Special(sp), vec![], vec![])
            }
            "param" => (
                Op::Param(ScalarParam::new(self.reference(Ref::Scalar)?)),
                vec![],
                vec![],
            ),
            "ld.global" => {
                let tensor = self.tensor()?;
                (Op::LdGlobal { tensor, policy }, self.index()?, vec![])
            }
            "st.global" => {
                let tensor = self.tensor()?;
                let mut args = self.index()?;
                self.expect(',')?;
                args.push(self.value()?);
                let predicated = self.same_line() && self.eat_ident("if");
                if predicated {
                    args.push(self.value()?);
                }
                (
                    Op::StGlobal {
                        tensor,
                        policy,
                        predicated,
                    },
                    args,
                    vec![],
                )
            }
            "ld.shared" => {
                let buffer = self.buffer()?;
                (Op::LdShared { buffer }, self.index()?, vec![])
            }
            "st.shared" => {
                let buffer = self.buffer()?;
                let mut args = self.index()?;
                self.expect(',')?;
                args.push(self.value()?);
                (Op::StShared { buffer }, args, vec![])
            }
            "mbarrier.init" => (
                Op::MbarInit {
                    barrier: self.barrier()?,
                },
                vec![],
                vec![],
            ),
            "mbarrier.arrive" => (
                Op::MbarArrive {
                    barrier: self.barrier()?,
                },
                vec![],
                vec![],
            ),
            "mbarrier.arrive.expect_tx" => {
                let barrier = self.barrier()?;
                self.expect(',')?;
                (
                    Op::MbarArriveExpectTx {
                        barrier,
                        bytes: self.u32()?,
                    },
                    vec![],
                    vec![],
                )
            }
            "mbarrier.wait" => {
                let barrier = self.barrier()?;
                self.expect(',')?;
                self.keyword("phase")?;
                (
                    Op::MbarWait {
                        barrier,
                        phase: self.u32()?,
                    },
                    vec![],
                    vec![],
                )
            }
            "bar.sync" => {
                let id = self.number::<u8>("a barrier id (0..=255)")?;
                self.expect(',')?;
                (
                    Op::BarSync {
                        id,
                        threads: self.u32()?,
                    },
                    vec![],
                    vec![],
                )
            }
            "st.async" => {
                let buffer = self.buffer()?;
                let mut args = self.index()?;
                self.expect(',')?;
                args.push(self.value()?);
                self.expect(',')?;
                self.keyword("cta")?;
                args.push(self.value()?);
                self.expect(',')?;
                (
                    Op::StAsync {
                        buffer,
                        barrier: self.barrier()?,
                    },
                    args,
                    vec![],
                )
            }
            "cp.async" => {
                let buffer = self.buffer()?;
                let mut args = self.index()?;
                self.expect(',')?;
                let tensor = self.tensor()?;
                args.extend(self.index()?);
                (Op::CpAsync { buffer, tensor }, args, vec![])
            }
            "cp.async.wait" => (Op::CpAsyncWait(self.u32()?), vec![], vec![]),
            "cp.async.bulk" => {
                let buffer = self.buffer()?;
                let mut args = self.index()?;
                self.expect(',')?;
                let tensor = self.tensor()?;
                args.extend(self.index()?);
                self.expect(',')?;
                let bytes = self.u32()?;
                self.expect(',')?;
                let barrier = self.barrier()?;
                (
                    Op::BulkCopy {
                        buffer,
                        tensor,
                        barrier,
                        bytes,
                        policy,
                    },
                    args,
                    vec![],
                )
            }
            "if" => {
                let cond = self.value()?;
                let (then, y1) = self.region()?;
                self.keyword("else")?;
                let (els, y2) = self.region()?;
                (
                    Op::If { then, els },
                    vec![cond],
                    y1.into_iter().chain(y2).collect(),
                )
            }
            "for" => {
                let lo = self.value()?;
                if !matches!(self.next()?.t, T::DotDot) {
                    self.at -= 1;
                    return self.unexpected("`..`");
                }
                let hi = self.value()?;
                self.keyword("step")?;
                let step = self.value()?;
                let mut args = vec![lo, hi, step];
                if self.eat_ident("iter") {
                    self.expect('(')?;
                    args.extend(self.values_until(')')?);
                    self.expect(')')?;
                }
                let (body, y) = self.region()?;
                (Op::For { body }, args, y.into_iter().collect())
            }
            "while" => {
                self.expect('(')?;
                let args = self.values_until(')')?;
                self.expect(')')?;
                let (cond, y1) = self.region()?;
                self.keyword("do")?;
                let (body, y2) = self.region()?;
                (
                    Op::While { cond, body },
                    args,
                    y1.into_iter().chain(y2).collect(),
                )
            }
            "role" => {
                let role = self.role_ref()?;
                let (body, y) = self.region()?;
                (Op::InRole { role, body }, vec![], y.into_iter().collect())
            }
            _ => return err(mpos, format!("unknown instruction `{m}`")),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::builder::Builder;
    use crate::write::write_kernel;

    /// The demo kernel as `cargo run -p dsmem-exchange --example dump` prints it.
    const DEMO: &str = include_str!("../filetests/verifier/dsmem-exchange-ok.kir");

    /// Drop the leading comment lines a filetest starts with.
    fn body(text: &str) -> String {
        text.lines()
            .skip_while(|l| l.starts_with(';'))
            .map(|l| format!("{l}\n"))
            .collect()
    }

    #[test]
    fn demo_round_trips() {
        let text = body(DEMO);
        let k = parse_kernel(&text).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(write_kernel(&k), text);
        assert_eq!(k.name, "dsmem_exchange");
        assert_eq!(k.launch.cluster, 2);
        assert_eq!(k.roles.len(), 2);
        assert_eq!(k.barriers[Barrier::new(0)].tx_bytes, 128);
    }

    #[test]
    fn every_op_round_trips() {
        let mut b = Builder::new(
            "all_ops",
            LaunchDecl {
                block: 128,
                cluster: 2,
                min_blocks_per_sm: Some(2),
            },
        );
        let n = b.sym("n");
        let t = b.tensor(
            "x \"quoted\"\n",
            Scalar::F32,
            &[Dim::Sym(n), Dim::Const(64)],
            &[Dim::Const(64), Dim::Const(1)],
            Provenance::Produced,
            Access::ReadWrite,
        );
        b.set_align(t, 16);
        let s = b.scalar("eps", Scalar::F32);
        let w = b.role("w", 0, 128);
        let bar = b.mbarrier("full", 1, 256, &[w]);
        let buf = b.shared("buf", Scalar::F32, 64, 128, &[w], Some(bar));
        let eps = b.param(s);
        let tid = b.thread_idx();
        let lane = b.special(Special::LaneId);
        let _ = b.special(Special::GridDim(2));
        let neg = b.i32(-7);
        let big = b.iconst(Type::U64, u64::MAX as i64);
        let _ = b.bin(BinOp::Shl, big, big);
        let x = b.ld_global(
            t,
            &[tid, lane],
            Type::vec(Scalar::F32, 4),
            CachePolicy::EvictFirst,
        );
        let x0 = b.extract(x, 3);
        let tiny = b.push(Op::FConst(1e-30), &[], &[Type::F32])[0];
        let inf = b.push(Op::FConst(f64::NEG_INFINITY), &[], &[Type::F32])[0];
        let y = b.fma(x0, tiny, inf, true);
        let _ = b.un(UnOp::Exp2 { fast: true }, y);
        let _ = b.un(UnOp::Sqrt, y);
        let _ = b.un(UnOp::Log2Approx, y);
        let c = b.cmp(CmpOp::Le, y, eps);
        let z = b.select(c, y, eps);
        let p = b.pack(&[z, z]);
        let _ = b.bitcast(p, Type::U64);
        let h = b.cvt(neg, Type::BF16);
        let _ = b.shfl(ShflMode::Bfly, z, lane);
        let e = b.elect();
        b.warp_sync();
        let au = b.iconst(Type::vec(Scalar::U32, 4), 0);
        let bu = b.iconst(Type::vec(Scalar::U32, 2), 0);
        let cf = b.ld_global(
            t,
            &[tid, lane],
            Type::vec(Scalar::F32, 4),
            CachePolicy::Normal,
        );
        let _ = b.mma(au, bu, cf);
        b.st_global(t, &[tid, lane], z, Some(e), CachePolicy::EvictFirst);
        b.in_role(w, |b| {
            b.mbarrier_init(bar);
            b.mbarrier_arrive(bar);
            b.mbarrier_arrive_expect_tx(bar, 256);
            b.fence_mbarrier_init();
            b.fence_proxy_async();
            b.cluster_arrive(false);
            b.cluster_wait();
            b.bar_sync(1, 128);
            b.st_async(buf, lane, z, lane, bar);
            b.cp_async(buf, lane, t, &[tid, lane]);
            b.cp_async_commit();
            b.cp_async_wait(0);
            b.bulk_copy(
                buf,
                lane,
                t,
                &[tid, lane],
                256,
                bar,
                CachePolicy::EvictFirst,
            );
            b.wait(bar);
            let v = b.ld_shared(buf, lane, Type::F32);
            b.st_shared(buf, lane, v);
        });
        b.pdl_wait();
        b.pdl_launch_dependents();
        let r = b.if_else(c, |b| vec![b.f32(1.0)], |_| vec![h]);
        let zero = b.i32(0);
        let ten = b.i32(10);
        let one = b.i32(1);
        let sum = b.for_(zero, ten, one, &[r[0], z], |b, iv, carried| {
            let f = b.cvt(iv, Type::F32);
            let s = b.add(carried[1], f);
            vec![carried[0], s]
        });
        let _ = b.while_(
            &[sum[1]],
            |b, c| b.cmp(CmpOp::Gt, c[0], eps),
            |b, c| vec![b.mul(c[0], c[0])],
        );
        b.for_(zero, ten, one, &[], |_, _, _| vec![]);
        b.set_early(true);
        let k = b.finish();
        let text = write_kernel(&k);
        assert!(
            text.starts_with("kernel all_ops block=128 cluster=2 min_blocks=2 early {"),
            "{text}"
        );
        let back = parse_kernel(&text).unwrap_or_else(|e| panic!("{e}\n{text}"));
        assert_eq!(write_kernel(&back), text);
        assert_eq!(back.schedule, k.schedule);
        assert_eq!(back.tensors[t].name, "x \"quoted\"\n");
    }

    #[test]
    fn hand_written_text_is_accepted() {
        let text = "\
; a comment line
kernel k block=32 cluster=1 {
  v0:u32 = special tid
  v5:bool = cmp.eq v0, v0   ; a trailing comment
  if v5 {
  } else {
  }
}
";
        let k = parse_kernel(text).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(k.values.len(), 6, "gaps in the numbering are kept");
        let printed = write_kernel(&k);
        assert!(
            printed.contains("v5:bool = cmp.eq v0, v0  ; @<kda>:0:0"),
            "{printed}"
        );
        // Implied yields take the location of their region's instruction.
        let again = parse_kernel(&printed).unwrap();
        assert_eq!(write_kernel(&again), printed);
    }

    #[test]
    fn the_early_flag_follows_the_launch() {
        for (header, early, min_blocks) in [
            ("kernel k block=32 cluster=1 {", false, None),
            ("kernel k block=32 cluster=1 early {", true, None),
            (
                "kernel k block=32 cluster=2 min_blocks=3 early {",
                true,
                Some(3),
            ),
        ] {
            let text = format!("{header}\n}}\n");
            let k = parse_kernel(&text).unwrap_or_else(|e| panic!("{e}"));
            assert_eq!(k.schedule.early, early, "{header}");
            assert_eq!(k.launch.min_blocks_per_sm, min_blocks, "{header}");
            assert_eq!(write_kernel(&k), text);
        }
        // `early` comes after `min_blocks`, once.
        for text in [
            "kernel k block=32 cluster=1 early min_blocks=2 {\n}\n",
            "kernel k block=32 cluster=1 early early {\n}\n",
        ] {
            parse_kernel(text).expect_err(text);
        }
    }

    #[test]
    fn errors_point_at_the_token() {
        let cases = [
            (
                "kernel k block=32 cluster=1 {\n  v0:u32 = add v1, v1\n}\n",
                2,
                16,
                "v1 is used but never defined",
            ),
            (
                "kernel k block=32 cluster=1 {\n  v0:u32 = special tid\n  v0:u32 = special tid\n}\n",
                3,
                3,
                "v0 is defined twice",
            ),
            (
                "kernel k block=32 cluster=1 {\n  v0:f32 = frob v1\n}\n",
                2,
                12,
                "unknown instruction `frob`",
            ),
            (
                "kernel k block=32 cluster=1 {\n  mbarrier.init bar0\n}\n",
                2,
                17,
                "bar0 is not declared",
            ),
            (
                "kernel k block=32 cluster=1 {\n  tensor t1 \"x\": f32[4] strides[1] ready read align 4\n}\n",
                2,
                10,
                "expected t0",
            ),
            (
                "kernel k block=32 cluster=1 {\n  v0:f33 = fconst 1.0\n}\n",
                2,
                6,
                "unknown type `f33`",
            ),
            (
                "kernel k block=32 cluster=1 {\n  pdl.wait  ; @nowhere\n}\n",
                2,
                13,
                "bad location",
            ),
            ("kernel k block=32 cluster=1 {\n", 1, 30, "expected `}`"),
        ];
        for (text, line, col, msg) in cases {
            let e = parse_kernel(text).expect_err(text);
            assert!(e.msg.contains(msg), "{e} (wanted {msg:?})");
            assert_eq!((e.line, e.col), (line, col), "{e}");
        }
    }
}
