//! Strided host tensors: typed storage plus shape and strides.
//!
//! Strides are kept because the kernels accept strided views for most
//! arguments (a conv state in particular may be vLLM's SD or DS layout); the
//! references and the checks read through them, and case files store the
//! logical (row-major) contents.

use std::fmt;

use half::bf16;
use thiserror::Error;

/// Element types of kernel arguments.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum DType {
    /// bfloat16.
    Bf16,
    /// IEEE binary32.
    F32,
    /// Signed 32-bit integer (slot tables).
    I32,
}

impl DType {
    /// Bytes per element.
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
    /// bf16 elements.
    Bf16(Vec<bf16>),
    /// f32 elements.
    F32(Vec<f32>),
    /// i32 elements.
    I32(Vec<i32>),
}

impl HostData {
    /// `n` zero elements of `dtype`.
    pub fn zeros(dtype: DType, n: usize) -> HostData {
        match dtype {
            DType::Bf16 => HostData::Bf16(vec![bf16::ZERO; n]),
            DType::F32 => HostData::F32(vec![0.0; n]),
            DType::I32 => HostData::I32(vec![0; n]),
        }
    }

    /// Elements of `dtype` from little-endian storage bytes (a trailing
    /// partial element is ignored).
    pub fn from_le_bytes(dtype: DType, bytes: &[u8]) -> HostData {
        match dtype {
            DType::Bf16 => bytes
                .chunks_exact(2)
                .map(|c| bf16::from_le_bytes([c[0], c[1]]))
                .collect::<Vec<_>>()
                .into(),
            DType::F32 => bytes
                .chunks_exact(4)
                .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
                .collect::<Vec<_>>()
                .into(),
            DType::I32 => bytes
                .chunks_exact(4)
                .map(|c| i32::from_le_bytes([c[0], c[1], c[2], c[3]]))
                .collect::<Vec<_>>()
                .into(),
        }
    }

    /// The element type.
    pub fn dtype(&self) -> DType {
        match self {
            Self::Bf16(_) => DType::Bf16,
            Self::F32(_) => DType::F32,
            Self::I32(_) => DType::I32,
        }
    }

    /// Stored elements (not the view's).
    pub fn len(&self) -> usize {
        match self {
            Self::Bf16(v) => v.len(),
            Self::F32(v) => v.len(),
            Self::I32(v) => v.len(),
        }
    }

    /// No element is stored.
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

/// Why storage and a shape (and strides) do not make a tensor.
#[derive(Clone, Debug, Error, PartialEq, Eq)]
pub enum TensorError {
    /// A row-major tensor's data does not fill its shape exactly.
    #[error("shape {shape:?} has {expected} elements but the data has {found}")]
    Length {
        /// The requested shape.
        shape: Vec<usize>,
        /// Its element count.
        expected: usize,
        /// Elements given.
        found: usize,
    },
    /// Little-endian bytes do not fill a shape exactly.
    #[error("{dtype} shape {shape:?} needs {expected} bytes but {found} were given")]
    Bytes {
        /// The requested shape.
        shape: Vec<usize>,
        /// The requested element type.
        dtype: DType,
        /// Bytes the shape needs.
        expected: usize,
        /// Bytes given.
        found: usize,
    },
    /// Shape and strides have different lengths.
    #[error("shape {shape:?} and strides {strides:?} differ in rank")]
    Rank {
        /// The requested shape.
        shape: Vec<usize>,
        /// The requested strides.
        strides: Vec<usize>,
    },
    /// The view addresses an element past the storage.
    #[error("shape {shape:?} with strides {strides:?} reaches element {last} of {len} stored")]
    OutOfBounds {
        /// The requested shape.
        shape: Vec<usize>,
        /// The requested strides.
        strides: Vec<usize>,
        /// Largest storage offset the view addresses.
        last: usize,
        /// Stored elements.
        len: usize,
    },
}

/// A strided view over typed host storage. Strides count elements.
///
/// ```
/// use kda_host::{DType, HostTensor};
///
/// // A [2, 3] transposed view of a [3, 2] row-major buffer.
/// let t = HostTensor::strided(vec![0i32, 1, 2, 3, 4, 5], vec![2, 3], vec![1, 2])?;
/// assert_eq!(t.dtype(), DType::I32);
/// assert_eq!(t.values(), [0.0, 2.0, 4.0, 1.0, 3.0, 5.0]);
/// assert_eq!(t.to_contiguous().strides(), [3, 1]);
/// # Ok::<(), kda_host::TensorError>(())
/// ```
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
        let data = HostData::zeros(dtype, element_count(&shape));
        Self::new(data, shape).expect("zeros has the shape's length")
    }

    /// The element type.
    pub fn dtype(&self) -> DType {
        self.data.dtype()
    }

    /// Extents, outermost first.
    pub fn shape(&self) -> &[usize] {
        &self.shape
    }

    /// Strides in elements, one per extent.
    pub fn strides(&self) -> &[usize] {
        &self.strides
    }

    /// The underlying storage (which a strided view may not cover fully).
    pub fn data(&self) -> &HostData {
        &self.data
    }

    /// Elements of the view (the shape's product).
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
}
