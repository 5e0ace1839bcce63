//! A kernel's parameter list as its signature states it: the descriptor
//! `#[cluster_kernel]` emits (`<kernel>::PARAMS`, and `<kernel>::params(..)`
//! for one configuration's list, `#[when]` conditions evaluated), so host
//! code, validators and bindings read the parameters from the one place they
//! are written.
//!
//! The traced [`Kernel`](crate::Kernel) carries the same declarations with
//! every comptime extent resolved (tensors first, then scalars); this
//! descriptor keeps the *signature order*, which positional calls follow,
//! and is available without tracing.

use crate::types::Scalar;

/// One parameter of a kernel's signature.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct ParamDesc {
    /// The parameter's name (the typed launch's field, the PTX parameter's suffix).
    pub name: &'static str,
    /// Tensor or scalar, and its declaration.
    pub kind: ParamKind,
    /// Declared under a `#[when(..)]` condition: absent from configurations
    /// where it does not hold.
    pub conditional: bool,
}

/// What a parameter is.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum ParamKind {
    /// A global tensor.
    Tensor(TensorDesc),
    /// A scalar passed by value.
    Scalar(ElemDesc),
}

/// A tensor parameter's declaration, as written.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct TensorDesc {
    /// Element type.
    pub elem: ElemDesc,
    /// Extents as written, outermost first: a number, a symbol's name
    /// (bound at launch), or a comptime expression's text (`{cfg.k}`).
    pub dims: &'static [&'static str],
    /// Strides as written (`_`: bound at launch); `None`: contiguous.
    pub strides: Option<&'static [&'static str]>,
    /// `#[produced]`: written by the preceding launch (read after the PDL wait).
    pub produced: bool,
    /// `#[align(..)]` as written, if any.
    pub align: Option<&'static str>,
}

impl TensorDesc {
    /// Number of dimensions.
    pub fn rank(&self) -> usize {
        self.dims.len()
    }
}

/// An element or scalar type: concrete, or a type parameter of the kernel
/// (chosen per build, e.g. bf16 or f32 weights).
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum ElemDesc {
    /// A concrete type.
    Fixed(Scalar),
    /// A type parameter of the kernel, by name.
    Generic(&'static str),
}

impl ParamDesc {
    /// Whether it is a scalar.
    pub fn is_scalar(&self) -> bool {
        matches!(self.kind, ParamKind::Scalar(_))
    }

    /// The tensor declaration, for a tensor parameter.
    pub fn tensor(&self) -> Option<&TensorDesc> {
        match &self.kind {
            ParamKind::Tensor(t) => Some(t),
            ParamKind::Scalar(_) => None,
        }
    }
}

/// The concrete [`Scalar`] a type name denotes (`f32`, `bf16`, ..), if any:
/// what the macro records for a parameter's element type.
pub fn scalar_named(name: &str) -> Option<Scalar> {
    Some(match name {
        "f32" => Scalar::F32,
        "bf16" => Scalar::BF16,
        "i32" => Scalar::I32,
        "u32" => Scalar::U32,
        "i64" => Scalar::I64,
        "u64" => Scalar::U64,
        _ => return None,
    })
}
