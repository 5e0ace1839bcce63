//! Source locations. Every instruction carries the DSL line it came from; the
//! builder records its caller's location (`#[track_caller]`), so code the macro
//! emits with the user's spans reports the user's file and line.

use std::fmt;
use std::sync::Arc;

/// A source position: file, line and column as [`std::panic::Location`] gives
/// them (1-based), written `file:line:col` (the IR text's `@` suffix).
#[derive(Clone, PartialEq, Eq, Hash, Debug)]
pub struct Loc {
    /// The file, as rustc names it (shared, so cloning a `Loc` per instruction is cheap).
    pub file: Arc<str>,
    /// 1-based line; 0 for [`Loc::synthetic`].
    pub line: u32,
    /// 1-based column; 0 for [`Loc::synthetic`].
    pub col: u32,
}

impl Loc {
    /// A location from its parts.
    pub fn new(file: &str, line: u32, col: u32) -> Loc {
        Loc {
            file: file.into(),
            line,
            col,
        }
    }

    /// The location of the caller of the current `#[track_caller]` function.
    #[track_caller]
    pub fn caller() -> Loc {
        let l = std::panic::Location::caller();
        Loc::new(l.file(), l.line(), l.column())
    }

    /// A placeholder for instructions synthesised by a pass with no user origin.
    pub fn synthetic() -> Loc {
        Loc::new("<kda>", 0, 0)
    }
}

impl fmt::Display for Loc {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}:{}", self.file, self.line, self.col)
    }
}
