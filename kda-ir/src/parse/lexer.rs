//! The lexer: one line at a time into identifiers (with `.`-joined parts),
//! numbers, string literals, punctuation, `..` and trailing `; @file:line:col`
//! locations; every other comment is dropped.

use super::ParseError;
use crate::loc::Loc;

#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub(super) struct Pos {
    pub(super) line: u32,
    pub(super) col: u32,
}

#[derive(Clone, Debug, PartialEq)]
pub(super) enum T {
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
pub(super) struct Tok {
    pub(super) t: T,
    pub(super) pos: Pos,
}

pub(super) fn err<X>(pos: Pos, msg: impl Into<String>) -> Result<X, ParseError> {
    Err(ParseError {
        line: pos.line,
        col: pos.col,
        msg: msg.into(),
    })
}

pub(super) fn lex(text: &str) -> Result<Vec<Tok>, ParseError> {
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
