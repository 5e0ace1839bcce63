//! Value types: scalars and short vectors of them.

use std::fmt;

/// A scalar element type.
#[derive(Copy, Clone, PartialEq, Eq, Hash, Debug)]
pub enum Scalar {
    /// A predicate (`.pred` in PTX).
    Bool,
    /// Signed 32-bit integer (`.s32`).
    I32,
    /// Unsigned 32-bit integer (`.u32`): indices, ids, lane masks.
    U32,
    /// Signed 64-bit integer (`.s64`).
    I64,
    /// Unsigned 64-bit integer (`.u64`): byte addresses and offsets.
    U64,
    /// IEEE single (`.f32`).
    F32,
    /// bfloat16, held in `.b16` registers; arithmetic on it runs in `f32` and rounds
    /// back to nearest even.
    BF16,
}

impl Scalar {
    /// Every scalar, in declaration order.
    pub const ALL: [Scalar; 7] = [
        Scalar::Bool,
        Scalar::I32,
        Scalar::U32,
        Scalar::I64,
        Scalar::U64,
        Scalar::F32,
        Scalar::BF16,
    ];

    /// Size in bytes in memory (a predicate has no memory form; 1 is nominal).
    pub fn bytes(self) -> u32 {
        match self {
            Scalar::Bool => 1,
            Scalar::BF16 => 2,
            Scalar::I32 | Scalar::U32 | Scalar::F32 => 4,
            Scalar::I64 | Scalar::U64 => 8,
        }
    }

    /// `f32` or `bf16`.
    pub fn is_float(self) -> bool {
        matches!(self, Scalar::F32 | Scalar::BF16)
    }

    /// One of the four integer types (not `bool`).
    pub fn is_int(self) -> bool {
        matches!(self, Scalar::I32 | Scalar::U32 | Scalar::I64 | Scalar::U64)
    }

    /// `i32` or `i64`.
    pub fn is_signed(self) -> bool {
        matches!(self, Scalar::I32 | Scalar::I64)
    }

    /// The name in the IR text (`f32`, `u32`, ...), as [`Display`](fmt::Display) writes it.
    pub fn name(self) -> &'static str {
        match self {
            Scalar::Bool => "bool",
            Scalar::I32 => "i32",
            Scalar::U32 => "u32",
            Scalar::I64 => "i64",
            Scalar::U64 => "u64",
            Scalar::F32 => "f32",
            Scalar::BF16 => "bf16",
        }
    }

    /// The scalar [`Scalar::name`] calls `s`, if any.
    pub fn from_name(s: &str) -> Option<Scalar> {
        Scalar::ALL.into_iter().find(|t| t.name() == s)
    }
}

/// A value type: a scalar (`lanes == 1`) or a vector of 2, 4 or 8 scalars.
#[derive(Copy, Clone, PartialEq, Eq, Hash, Debug)]
pub struct Type {
    /// The element type of each lane.
    pub elem: Scalar,
    /// Number of lanes: 1 for a scalar; the verifier allows 2, 4 or 8 otherwise,
    /// and never a vector of `bool`.
    pub lanes: u8,
}

impl Type {
    /// A predicate.
    pub const BOOL: Type = Type::scalar(Scalar::Bool);
    /// A scalar `i32`.
    pub const I32: Type = Type::scalar(Scalar::I32);
    /// A scalar `u32`.
    pub const U32: Type = Type::scalar(Scalar::U32);
    /// A scalar `i64`.
    pub const I64: Type = Type::scalar(Scalar::I64);
    /// A scalar `u64`.
    pub const U64: Type = Type::scalar(Scalar::U64);
    /// A scalar `f32`.
    pub const F32: Type = Type::scalar(Scalar::F32);
    /// A scalar `bf16`.
    pub const BF16: Type = Type::scalar(Scalar::BF16);

    /// One lane of `elem`.
    pub const fn scalar(elem: Scalar) -> Type {
        Type { elem, lanes: 1 }
    }

    /// `lanes` lanes of `elem` (written `f32x4` in the IR text).
    pub const fn vec(elem: Scalar, lanes: u8) -> Type {
        Type { elem, lanes }
    }

    /// One lane.
    pub fn is_scalar(self) -> bool {
        self.lanes == 1
    }

    /// Size in bytes of the value in memory.
    pub fn bytes(self) -> u32 {
        self.elem.bytes() * self.lanes as u32
    }

    /// The same element type with `lanes` lanes.
    pub fn with_lanes(self, lanes: u8) -> Type {
        Type { lanes, ..self }
    }
}

impl From<Scalar> for Type {
    fn from(s: Scalar) -> Type {
        Type::scalar(s)
    }
}

impl fmt::Display for Scalar {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl fmt::Display for Type {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.lanes == 1 {
            write!(f, "{}", self.elem)
        } else {
            write!(f, "{}x{}", self.elem, self.lanes)
        }
    }
}

impl std::str::FromStr for Type {
    type Err = String;
    fn from_str(s: &str) -> Result<Type, String> {
        let (elem, lanes) = match s.split_once('x') {
            Some((e, n)) => (
                e,
                n.parse::<u8>()
                    .map_err(|_| format!("bad lane count in `{s}`"))?,
            ),
            None => (s, 1),
        };
        let elem = Scalar::from_name(elem).ok_or_else(|| format!("unknown type `{s}`"))?;
        Ok(Type { elem, lanes })
    }
}
