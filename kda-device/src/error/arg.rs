//! Errors of a typed launch ([`crate::typed::bind`]): an argument that does
//! not fit the kernel's declaration, with the parameter and dimension named.
//! A leaf: it depends on nothing else in the crate.

use std::fmt;

use kda_ir::Scalar;
use thiserror::Error;

/// Why an argument does not fit the kernel.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ArgIssue {
    /// This configuration of the kernel declares the parameter; no value given.
    Missing,
    /// A value given for a parameter this configuration does not declare
    /// (a `#[when]` tensor whose condition is false).
    NotDeclared,
    /// Element type (tensors) or value type (scalars).
    Dtype {
        /// The declared type.
        want: Scalar,
        /// The argument's.
        got: Scalar,
    },
    /// The number of dimensions.
    Rank {
        /// Dimensions declared.
        want: usize,
        /// Dimensions given.
        got: usize,
    },
    /// An extent or stride the kernel was built for.
    Fixed {
        /// Extent or stride.
        what: Part,
        /// The dimension.
        dim: usize,
        /// The value the kernel was built for.
        want: u64,
        /// The argument's.
        got: usize,
    },
    /// A symbol already bound to another value by an earlier parameter.
    Symbol {
        /// Extent or stride.
        what: Part,
        /// The dimension.
        dim: usize,
        /// The argument's value.
        got: usize,
        /// The symbol's name.
        sym: String,
        /// Its value from the earlier parameter.
        bound: i64,
        /// That parameter.
        by: String,
    },
    /// A stride whose rows break the declared `#[align]`.
    Unaligned {
        /// The dimension whose stride is off.
        dim: usize,
        /// Its stride in bytes.
        stride_bytes: usize,
        /// The declared alignment.
        align: u32,
    },
    /// A value past what the kernel's 64-bit symbols hold.
    TooLarge {
        /// Extent or stride.
        what: Part,
        /// The dimension.
        dim: usize,
        /// The argument's value.
        got: usize,
    },
}

/// An extent or a stride.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Part {
    /// An extent (a dimension's length).
    Extent,
    /// A stride in elements.
    Stride,
}

impl fmt::Display for Part {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Part::Extent => "extent",
            Part::Stride => "stride",
        })
    }
}

impl fmt::Display for ArgIssue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ArgIssue::Missing => f.write_str("not given, but this configuration declares it"),
            ArgIssue::NotDeclared => {
                f.write_str("given, but this configuration does not declare it")
            }
            ArgIssue::Dtype { want, got } => write!(f, "is {got}, the kernel declares {want}"),
            ArgIssue::Rank { want, got } => write!(f, "has rank {got}, the kernel declares {want}"),
            ArgIssue::Fixed {
                what,
                dim,
                want,
                got,
            } => write!(f, "{what} {dim} is {got}, the kernel was built for {want}"),
            ArgIssue::Symbol {
                what,
                dim,
                got,
                sym,
                bound,
                by,
            } => write!(
                f,
                "{what} {dim} is {got}, but symbol `{sym}` is {bound} (from `{by}`)"
            ),
            ArgIssue::Unaligned {
                dim,
                stride_bytes,
                align,
            } => write!(
                f,
                "stride {dim} is {stride_bytes} bytes, not a multiple of the declared alignment {align}"
            ),
            ArgIssue::TooLarge { what, dim, got } => {
                write!(f, "{what} {dim} is {got}, past the kernel's 64-bit range")
            }
        }
    }
}

/// A launch argument that does not fit the kernel's declaration.
#[derive(Clone, Debug, Error, PartialEq, Eq)]
#[error("launch of `{kernel}`: argument `{param}` {issue}")]
pub struct ArgError {
    /// The kernel's name.
    pub kernel: String,
    /// The parameter's name.
    pub param: String,
    /// What is wrong with it.
    pub issue: ArgIssue,
}
