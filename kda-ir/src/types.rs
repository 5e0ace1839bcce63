//! Value types: scalars and short vectors of them.

use std::fmt;

/// A scalar element type.
#[derive(Copy, Clone, PartialEq, Eq, Hash, Debug)]
pub enum Scalar {
    /// A predicate (`.pred` in PTX).
    Bool,
    I32,
    U32,
    I64,
    U64,
    F32,
    BF16,
}

impl Scalar {
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

    pub fn is_float(self) -> bool {
        matches!(self, Scalar::F32 | Scalar::BF16)
    }

    pub fn is_int(self) -> bool {
        matches!(self, Scalar::I32 | Scalar::U32 | Scalar::I64 | Scalar::U64)
    }

    pub fn is_signed(self) -> bool {
        matches!(self, Scalar::I32 | Scalar::I64)
    }

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

    pub fn from_name(s: &str) -> Option<Scalar> {
        Scalar::ALL.into_iter().find(|t| t.name() == s)
    }
}

/// A value type: a scalar (`lanes == 1`) or a vector of 2, 4 or 8 scalars.
#[derive(Copy, Clone, PartialEq, Eq, Hash, Debug)]
pub struct Type {
    pub elem: Scalar,
    pub lanes: u8,
}

impl Type {
    pub const BOOL: Type = Type::scalar(Scalar::Bool);
    pub const I32: Type = Type::scalar(Scalar::I32);
    pub const U32: Type = Type::scalar(Scalar::U32);
    pub const I64: Type = Type::scalar(Scalar::I64);
    pub const U64: Type = Type::scalar(Scalar::U64);
    pub const F32: Type = Type::scalar(Scalar::F32);
    pub const BF16: Type = Type::scalar(Scalar::BF16);

    pub const fn scalar(elem: Scalar) -> Type {
        Type { elem, lanes: 1 }
    }

    pub const fn vec(elem: Scalar, lanes: u8) -> Type {
        Type { elem, lanes }
    }

    pub fn is_scalar(self) -> bool {
        self.lanes == 1
    }

    /// Size in bytes of the value in memory.
    pub fn bytes(self) -> u32 {
        self.elem.bytes() * self.lanes as u32
    }

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
