//! Host-side kernel arguments: strided tensors and the 18 positional arguments of
//! spec §1.1.
//!
//! Strides are kept because the kernel accepts strided views for most arguments
//! (the conv state in particular may be vLLM's SD or DS layout); the reference
//! and the checks read through them, and case files store the logical
//! (row-major) contents.

use std::fmt;

use half::bf16;
use thiserror::Error;

/// Element types used by KdaSplit arguments.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum DType {
    Bf16,
    F32,
    I32,
}

impl DType {
    pub fn size(self) -> usize {
        match self {
            Self::Bf16 => 2,
            Self::F32 | Self::I32 => 4,
        }
    }

    /// Spelling used by safetensors headers.
    pub fn name(self) -> &'static str {
        match self {
            Self::Bf16 => "BF16",
            Self::F32 => "F32",
            Self::I32 => "I32",
        }
    }
}

/// Prints an allowed-dtype list as `BF16`, `BF16 or F32`, ...
pub fn dtype_list(dtypes: &[DType]) -> String {
    let names: Vec<&str> = dtypes.iter().map(|d| d.name()).collect();
    match names.split_last() {
        None => String::new(),
        Some((last, [])) => (*last).to_string(),
        Some((last, rest)) => format!("{} or {last}", rest.join(", ")),
    }
}

impl fmt::Display for DType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Typed element storage of a [`HostTensor`].
#[derive(Clone, Debug, PartialEq)]
pub enum HostData {
    Bf16(Vec<bf16>),
    F32(Vec<f32>),
    I32(Vec<i32>),
}

impl HostData {
    pub fn dtype(&self) -> DType {
        match self {
            Self::Bf16(_) => DType::Bf16,
            Self::F32(_) => DType::F32,
            Self::I32(_) => DType::I32,
        }
    }

    pub fn len(&self) -> usize {
        match self {
            Self::Bf16(v) => v.len(),
            Self::F32(v) => v.len(),
            Self::I32(v) => v.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Element `i` of the storage, converted exactly to f64.
    fn at(&self, i: usize) -> f64 {
        match self {
            Self::Bf16(v) => v[i].to_f64(),
            Self::F32(v) => f64::from(v[i]),
            Self::I32(v) => f64::from(v[i]),
        }
    }
}

impl From<Vec<bf16>> for HostData {
    fn from(v: Vec<bf16>) -> Self {
        Self::Bf16(v)
    }
}

impl From<Vec<f32>> for HostData {
    fn from(v: Vec<f32>) -> Self {
        Self::F32(v)
    }
}

impl From<Vec<i32>> for HostData {
    fn from(v: Vec<i32>) -> Self {
        Self::I32(v)
    }
}

#[derive(Clone, Debug, Error, PartialEq, Eq)]
pub enum TensorError {
    #[error("shape {shape:?} has {expected} elements but the data has {found}")]
    Length {
        shape: Vec<usize>,
        expected: usize,
        found: usize,
    },
    #[error("{dtype} shape {shape:?} needs {expected} bytes but {found} were given")]
    Bytes {
        shape: Vec<usize>,
        dtype: DType,
        expected: usize,
        found: usize,
    },
    #[error("shape {shape:?} and strides {strides:?} differ in rank")]
    Rank {
        shape: Vec<usize>,
        strides: Vec<usize>,
    },
    #[error("shape {shape:?} with strides {strides:?} reaches element {last} of {len} stored")]
    OutOfBounds {
        shape: Vec<usize>,
        strides: Vec<usize>,
        last: usize,
        len: usize,
    },
}

/// A strided view over typed host storage. Strides count elements.
#[derive(Clone, Debug, PartialEq)]
pub struct HostTensor {
    data: HostData,
    shape: Vec<usize>,
    strides: Vec<usize>,
}

/// Row-major strides of `shape`. Saturating: an empty tensor read from a file
/// may have absurd extents next to its zero, and its strides are never used.
pub fn contiguous_strides(shape: &[usize]) -> Vec<usize> {
    let mut strides = vec![1usize; shape.len()];
    for i in (0..shape.len().saturating_sub(1)).rev() {
        strides[i] = strides[i + 1].saturating_mul(shape[i + 1]);
    }
    strides
}

/// Element count of `shape` (saturating, 0 if any extent is 0).
pub fn element_count(shape: &[usize]) -> usize {
    if shape.contains(&0) {
        return 0;
    }
    shape.iter().fold(1usize, |n, &d| n.saturating_mul(d))
}

impl HostTensor {
    /// A row-major tensor; `data` must hold exactly the shape's element count.
    pub fn new(data: impl Into<HostData>, shape: Vec<usize>) -> Result<Self, TensorError> {
        let data = data.into();
        let expected = element_count(&shape);
        if data.len() != expected {
            return Err(TensorError::Length {
                shape,
                expected,
                found: data.len(),
            });
        }
        let strides = contiguous_strides(&shape);
        Ok(Self {
            data,
            shape,
            strides,
        })
    }

    /// A strided view; every addressed element must lie inside `data`.
    pub fn strided(
        data: impl Into<HostData>,
        shape: Vec<usize>,
        strides: Vec<usize>,
    ) -> Result<Self, TensorError> {
        let data = data.into();
        if shape.len() != strides.len() {
            return Err(TensorError::Rank { shape, strides });
        }
        let tensor = Self {
            data,
            shape,
            strides,
        };
        if let Some(last) = tensor.max_offset()
            && last >= tensor.data.len()
        {
            return Err(TensorError::OutOfBounds {
                len: tensor.data.len(),
                shape: tensor.shape,
                strides: tensor.strides,
                last,
            });
        }
        Ok(tensor)
    }

    /// A row-major tensor of zeros.
    pub fn zeros(dtype: DType, shape: Vec<usize>) -> Self {
        let n = element_count(&shape);
        let data = match dtype {
            DType::Bf16 => HostData::Bf16(vec![bf16::ZERO; n]),
            DType::F32 => HostData::F32(vec![0.0; n]),
            DType::I32 => HostData::I32(vec![0; n]),
        };
        Self::new(data, shape).expect("zeros has the shape's length")
    }

    pub fn dtype(&self) -> DType {
        self.data.dtype()
    }

    pub fn shape(&self) -> &[usize] {
        &self.shape
    }

    pub fn strides(&self) -> &[usize] {
        &self.strides
    }

    pub fn data(&self) -> &HostData {
        &self.data
    }

    pub fn numel(&self) -> usize {
        element_count(&self.shape)
    }

    /// Largest storage offset the view addresses; `None` for an empty view.
    pub fn max_offset(&self) -> Option<usize> {
        if self.shape.contains(&0) {
            return None;
        }
        Some(
            self.shape
                .iter()
                .zip(&self.strides)
                .fold(0usize, |sum, (&n, &s)| {
                    sum.saturating_add((n - 1).saturating_mul(s))
                }),
        )
    }

    /// Storage offset of a multi-index. Panics if the index is out of the shape,
    /// like slice indexing: callers check shapes first (see `validate`).
    pub fn offset(&self, index: &[usize]) -> usize {
        assert_eq!(index.len(), self.shape.len(), "index rank");
        index
            .iter()
            .zip(&self.shape)
            .zip(&self.strides)
            .map(|((&i, &n), &s)| {
                assert!(i < n, "index {index:?} out of shape {:?}", self.shape);
                i * s
            })
            .sum()
    }

    /// Element at `index`, converted exactly to f64 (any dtype).
    pub fn get(&self, index: &[usize]) -> f64 {
        self.data.at(self.offset(index))
    }

    /// Element at `index` of an I32 tensor; `None` for float tensors.
    pub fn get_i32(&self, index: &[usize]) -> Option<i32> {
        match &self.data {
            HostData::I32(v) => Some(v[self.offset(index)]),
            _ => None,
        }
    }

    /// Storage offsets of all elements in logical row-major order.
    pub fn logical_offsets(&self) -> impl Iterator<Item = usize> + '_ {
        let n = self.numel();
        let mut index = vec![0usize; self.shape.len()];
        let mut offset = 0usize;
        (0..n).map(move |k| {
            if k > 0 {
                // Odometer increment, adjusting the offset incrementally.
                for d in (0..index.len()).rev() {
                    index[d] += 1;
                    offset += self.strides[d];
                    if index[d] < self.shape[d] {
                        break;
                    }
                    offset -= self.strides[d] * index[d];
                    index[d] = 0;
                }
            }
            offset
        })
    }

    /// All elements in logical row-major order, converted exactly to f64.
    pub fn values(&self) -> Vec<f64> {
        self.logical_offsets().map(|o| self.data.at(o)).collect()
    }

    /// Row-major copy of the logical contents (same dtype).
    pub fn to_contiguous(&self) -> Self {
        let data = match &self.data {
            HostData::Bf16(v) => HostData::Bf16(self.logical_offsets().map(|o| v[o]).collect()),
            HostData::F32(v) => HostData::F32(self.logical_offsets().map(|o| v[o]).collect()),
            HostData::I32(v) => HostData::I32(self.logical_offsets().map(|o| v[o]).collect()),
        };
        Self::new(data, self.shape.clone()).expect("logical copy has the shape's length")
    }

    /// Logical contents as little-endian bytes (the safetensors layout).
    pub fn to_le_bytes(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.numel() * self.dtype().size());
        for o in self.logical_offsets() {
            match &self.data {
                HostData::Bf16(v) => out.extend_from_slice(&v[o].to_le_bytes()),
                HostData::F32(v) => out.extend_from_slice(&v[o].to_le_bytes()),
                HostData::I32(v) => out.extend_from_slice(&v[o].to_le_bytes()),
            }
        }
        out
    }

    /// A row-major tensor from little-endian bytes.
    pub fn from_le_bytes(
        dtype: DType,
        shape: Vec<usize>,
        bytes: &[u8],
    ) -> Result<Self, TensorError> {
        let expected = element_count(&shape).saturating_mul(dtype.size());
        if bytes.len() != expected {
            return Err(TensorError::Bytes {
                shape,
                dtype,
                expected,
                found: bytes.len(),
            });
        }
        let data = match dtype {
            DType::Bf16 => HostData::Bf16(
                bytes
                    .chunks_exact(2)
                    .map(|b| bf16::from_le_bytes([b[0], b[1]]))
                    .collect(),
            ),
            DType::F32 => HostData::F32(
                bytes
                    .chunks_exact(4)
                    .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
                    .collect(),
            ),
            DType::I32 => HostData::I32(
                bytes
                    .chunks_exact(4)
                    .map(|b| i32::from_le_bytes([b[0], b[1], b[2], b[3]]))
                    .collect(),
            ),
        };
        Self::new(data, shape)
    }

    /// True if no two elements of the view share storage. The test is the
    /// usual sufficient one (sorted by stride, each stride steps over everything
    /// the smaller ones reach), which every permuted or padded dense layout meets.
    pub fn is_non_overlapping(&self) -> bool {
        let mut dims: Vec<(usize, usize)> = self
            .strides
            .iter()
            .copied()
            .zip(self.shape.iter().copied())
            .filter(|&(_, n)| n > 1)
            .collect();
        dims.sort_unstable();
        let mut reach = 0usize;
        for (stride, n) in dims {
            if stride <= reach {
                return false;
            }
            reach = reach.saturating_add(stride.saturating_mul(n - 1));
        }
        true
    }
}

/// The kernel's positional arguments (spec §1.1), in kernel order.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Arg {
    X,
    Weights,
    Bias,
    ConvState,
    RawGate,
    Beta,
    ALog,
    DtBias,
    Slots,
    State,
    Output,
    Gate,
    NormWeight,
    LowerBound,
    Scale,
    Eps,
    FBWeight,
    Accepted,
}

impl Arg {
    /// Every argument in kernel order; `Accepted` (T > 1 only) last.
    pub const ALL: [Arg; 18] = [
        Arg::X,
        Arg::Weights,
        Arg::Bias,
        Arg::ConvState,
        Arg::RawGate,
        Arg::Beta,
        Arg::ALog,
        Arg::DtBias,
        Arg::Slots,
        Arg::State,
        Arg::Output,
        Arg::Gate,
        Arg::NormWeight,
        Arg::LowerBound,
        Arg::Scale,
        Arg::Eps,
        Arg::FBWeight,
        Arg::Accepted,
    ];

    /// The arguments of a launch with `tokens` tokens per request.
    pub fn for_tokens(tokens: u32) -> &'static [Arg] {
        if tokens > 1 {
            &Self::ALL
        } else {
            &Self::ALL[..17]
        }
    }

    /// The name the seed's kernel gives the argument (and the case-file key).
    pub fn name(self) -> &'static str {
        match self {
            Arg::X => "x",
            Arg::Weights => "weights",
            Arg::Bias => "bias",
            Arg::ConvState => "conv_state",
            Arg::RawGate => "raw_gate",
            Arg::Beta => "beta",
            Arg::ALog => "a_log",
            Arg::DtBias => "dt_bias",
            Arg::Slots => "slots",
            Arg::State => "state",
            Arg::Output => "output",
            Arg::Gate => "gate",
            Arg::NormWeight => "norm_weight",
            Arg::LowerBound => "lower_bound",
            Arg::Scale => "scale",
            Arg::Eps => "eps",
            Arg::FBWeight => "f_b_weight",
            Arg::Accepted => "accepted",
        }
    }

    pub fn from_name(name: &str) -> Option<Arg> {
        Self::ALL.into_iter().find(|a| a.name() == name)
    }

    /// Scalars are passed by value, not as tensors.
    pub fn is_scalar(self) -> bool {
        matches!(self, Arg::LowerBound | Arg::Scale | Arg::Eps)
    }

    /// Dtypes the kernel accepts: bf16 where it loads bf16 vectors or stores
    /// bf16, f32 for f32 tensors and scalars, i32 for slot tables, and either
    /// float where every use converts to f32 (spec §8.3).
    pub fn dtypes(self) -> &'static [DType] {
        use DType::{Bf16, F32, I32};
        match self {
            Arg::X | Arg::ConvState | Arg::RawGate | Arg::Output | Arg::FBWeight => &[Bf16],
            Arg::Weights | Arg::Bias | Arg::Beta | Arg::Gate | Arg::NormWeight => &[Bf16, F32],
            Arg::ALog | Arg::DtBias | Arg::State | Arg::LowerBound | Arg::Scale | Arg::Eps => {
                &[F32]
            }
            Arg::Slots | Arg::Accepted => &[I32],
        }
    }
}

impl fmt::Display for Arg {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The arguments of one launch. `accepted` is present exactly when T > 1.
#[derive(Clone, Debug, PartialEq)]
pub struct KdaArgs {
    pub x: HostTensor,
    pub weights: HostTensor,
    pub bias: HostTensor,
    pub conv_state: HostTensor,
    /// f_a: the F_B activation row, not a gate (spec §8.2).
    pub raw_gate: HostTensor,
    pub beta: HostTensor,
    pub a_log: HostTensor,
    pub dt_bias: HostTensor,
    pub slots: HostTensor,
    pub state: HostTensor,
    pub output: HostTensor,
    pub gate: HostTensor,
    pub norm_weight: HostTensor,
    pub lower_bound: f32,
    pub scale: f32,
    pub eps: f32,
    pub f_b_weight: HostTensor,
    pub accepted: Option<HostTensor>,
}

impl KdaArgs {
    /// The tensor passed for `arg`; `None` for scalars and an absent `accepted`.
    pub fn tensor(&self, arg: Arg) -> Option<&HostTensor> {
        Some(match arg {
            Arg::X => &self.x,
            Arg::Weights => &self.weights,
            Arg::Bias => &self.bias,
            Arg::ConvState => &self.conv_state,
            Arg::RawGate => &self.raw_gate,
            Arg::Beta => &self.beta,
            Arg::ALog => &self.a_log,
            Arg::DtBias => &self.dt_bias,
            Arg::Slots => &self.slots,
            Arg::State => &self.state,
            Arg::Output => &self.output,
            Arg::Gate => &self.gate,
            Arg::NormWeight => &self.norm_weight,
            Arg::FBWeight => &self.f_b_weight,
            Arg::Accepted => return self.accepted.as_ref(),
            Arg::LowerBound | Arg::Scale | Arg::Eps => return None,
        })
    }

    /// The scalar passed for `arg`; `None` for tensors.
    pub fn scalar(&self, arg: Arg) -> Option<f32> {
        match arg {
            Arg::LowerBound => Some(self.lower_bound),
            Arg::Scale => Some(self.scale),
            Arg::Eps => Some(self.eps),
            _ => None,
        }
    }

    /// Number of requests B (rows of `slots`).
    pub fn requests(&self) -> usize {
        self.slots.shape().first().copied().unwrap_or(0)
    }

    /// Number of activation rows R = B * T (rows of `x`).
    pub fn rows(&self) -> usize {
        self.x.shape().first().copied().unwrap_or(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strided_view_reads_through_strides() {
        // A [2, 3] view of a [3, 2] row-major buffer (a transpose).
        let t = HostTensor::strided(vec![0i32, 1, 2, 3, 4, 5], vec![2, 3], vec![1, 2]).unwrap();
        assert_eq!(t.values(), vec![0.0, 2.0, 4.0, 1.0, 3.0, 5.0]);
        assert_eq!(t.get_i32(&[1, 2]), Some(5));
        assert_eq!(t.to_contiguous().strides(), &[3, 1]);
        assert!(t.is_non_overlapping());
    }

    #[test]
    fn views_must_stay_inside_storage() {
        let err = HostTensor::strided(vec![0f32; 5], vec![2, 3], vec![3, 1]).unwrap_err();
        assert!(matches!(
            err,
            TensorError::OutOfBounds {
                last: 5,
                len: 5,
                ..
            }
        ));
        let err = HostTensor::new(vec![0f32; 5], vec![2, 3]).unwrap_err();
        assert!(matches!(
            err,
            TensorError::Length {
                expected: 6,
                found: 5,
                ..
            }
        ));
    }

    #[test]
    fn overlap_detection() {
        let t = HostTensor::strided(vec![0f32; 4], vec![2, 3], vec![1, 1]).unwrap();
        assert!(!t.is_non_overlapping());
        let t = HostTensor::strided(vec![0f32; 1], vec![4], vec![0]).unwrap();
        assert!(!t.is_non_overlapping());
        // Padded rows are fine.
        let t = HostTensor::strided(vec![0f32; 12], vec![3, 2], vec![4, 1]).unwrap();
        assert!(t.is_non_overlapping());
    }

    #[test]
    fn bytes_round_trip() {
        let t =
            HostTensor::new(vec![bf16::from_f32(1.5), bf16::from_f32(-768.0)], vec![2]).unwrap();
        let back = HostTensor::from_le_bytes(DType::Bf16, vec![2], &t.to_le_bytes()).unwrap();
        assert_eq!(back, t);
        let scalar = HostTensor::new(vec![2.5f32], vec![]).unwrap();
        assert_eq!(scalar.get(&[]), 2.5);
    }

    #[test]
    fn arg_names_round_trip_in_kernel_order() {
        for (i, arg) in Arg::ALL.into_iter().enumerate() {
            assert_eq!(Arg::from_name(arg.name()), Some(arg));
            assert_eq!(Arg::ALL[i], arg);
        }
        assert_eq!(Arg::for_tokens(1).len(), 17);
        assert_eq!(Arg::for_tokens(2).last(), Some(&Arg::Accepted));
    }
}
