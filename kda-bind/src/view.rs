//! A Python array's memory as the kernels see it: element type, shape,
//! strides (in elements) and the address of element 0, on the host (NumPy
//! and anything with `__array_interface__`, CPU DLPack) or on a GPU (DLPack,
//! `__cuda_array_interface__`). Nothing is copied here; the object (and the
//! DLPack capsule) stay referenced while the view lives.

use std::ffi::{CStr, c_void};

use kda_host::DType;
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyCapsule, PyDict, PyTuple};

/// Where an array's memory lives.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Place {
    Host,
    /// CUDA device ordinal.
    Cuda(usize),
}

/// One argument's memory, borrowed from its Python object.
pub struct View {
    pub dtype: DType,
    pub shape: Vec<usize>,
    /// Element strides (never negative: refused at extraction).
    pub strides: Vec<usize>,
    /// Address of element 0.
    pub ptr: u64,
    pub place: Place,
    pub readonly: bool,
    /// Keeps a DLPack capsule (and so the producer's export) alive.
    _keep: Option<Py<PyAny>>,
}

/// DLPack's C structs (v0.8, the unversioned `dltensor` capsule).
#[repr(C)]
struct DlDevice {
    device_type: i32,
    device_id: i32,
}

#[repr(C)]
struct DlDataType {
    code: u8,
    bits: u8,
    lanes: u16,
}

#[repr(C)]
struct DlTensor {
    data: *mut c_void,
    device: DlDevice,
    ndim: i32,
    dtype: DlDataType,
    shape: *const i64,
    strides: *const i64,
    byte_offset: u64,
}

const DL_CPU: i32 = 1;
const DL_CUDA: i32 = 2;
const DL_CUDA_HOST: i32 = 3;
const DLTENSOR: &CStr = c"dltensor";

fn type_err(name: &str, what: String) -> PyErr {
    PyTypeError::new_err(format!("{name}: {what}"))
}

fn value_err(name: &str, what: String) -> PyErr {
    PyValueError::new_err(format!("{name}: {what}"))
}

impl View {
    /// The span of storage the view addresses, in elements: one past the
    /// largest offset (0 for an empty view); an error where it overflows.
    pub fn span(&self) -> PyResult<usize> {
        if self.shape.contains(&0) {
            return Ok(0);
        }
        let overflow = || PyValueError::new_err("the array's extent overflows the address space");
        self.shape
            .iter()
            .zip(&self.strides)
            .try_fold(1usize, |acc, (&n, &s)| {
                (n - 1).checked_mul(s).and_then(|o| acc.checked_add(o))
            })
            .ok_or_else(overflow)
    }

    /// [`View::span`] in bytes.
    pub fn span_bytes(&self) -> PyResult<usize> {
        self.span()?
            .checked_mul(self.dtype.size())
            .ok_or_else(|| PyValueError::new_err("the array's size overflows the address space"))
    }

    /// Storage offsets (elements) of every element of the view.
    pub fn offsets(&self) -> Vec<usize> {
        let mut out = vec![0usize];
        for (&n, &s) in self.shape.iter().zip(&self.strides) {
            out = out
                .iter()
                .flat_map(|&o| (0..n).map(move |i| o + i * s))
                .collect();
        }
        out
    }

    /// Read the view of `obj` (argument `name`).
    pub fn extract(name: &str, obj: &Bound<'_, PyAny>) -> PyResult<View> {
        if obj.hasattr("__array_interface__")? {
            return from_interface(name, obj, &obj.getattr("__array_interface__")?, Place::Host);
        }
        if obj.hasattr("__dlpack_device__")? {
            return from_dlpack(name, obj);
        }
        if obj.hasattr("__cuda_array_interface__")? {
            let cai = obj.getattr("__cuda_array_interface__")?;
            // The interface does not name the device: the pointer does.
            let ptr = interface_ptr(name, &cai)?;
            let ordinal = crate::gpu::pointer_device(ptr).map_err(|e| value_err(name, e))?;
            return from_interface(name, obj, &cai, Place::Cuda(ordinal));
        }
        Err(type_err(
            name,
            format!(
                "expected an array (NumPy, or a CUDA tensor with DLPack or __cuda_array_interface__); got {}",
                obj.get_type().name()?
            ),
        ))
    }
}

fn interface_ptr(name: &str, iface: &Bound<'_, PyAny>) -> PyResult<u64> {
    let data = iface.get_item("data")?;
    let data = data.cast::<PyTuple>().map_err(|_| {
        type_err(
            name,
            "the array interface's data is not a (pointer, readonly) tuple".into(),
        )
    })?;
    Ok(data.get_item(0)?.extract::<Option<u64>>()?.unwrap_or(0))
}

/// `__array_interface__` / `__cuda_array_interface__` (same layout).
fn from_interface(
    name: &str,
    obj: &Bound<'_, PyAny>,
    iface: &Bound<'_, PyAny>,
    place: Place,
) -> PyResult<View> {
    let iface = iface
        .cast::<PyDict>()
        .map_err(|_| type_err(name, "the array interface is not a dict".into()))?;
    let get = |key: &str| -> PyResult<Bound<'_, PyAny>> {
        iface
            .get_item(key)?
            .ok_or_else(|| type_err(name, format!("the array interface has no `{key}`")))
    };
    let typestr: String = get("typestr")?.extract()?;
    // NumPy has no bfloat16: ml_dtypes' shows as void of 2 bytes.
    let dtype_name: Option<String> = obj
        .getattr("dtype")
        .and_then(|d| d.getattr("name"))
        .and_then(|n| n.extract())
        .ok();
    let dtype = interface_dtype(&typestr, dtype_name.as_deref())
        .ok_or_else(|| type_err(name, unsupported(dtype_name.as_deref().unwrap_or(&typestr))))?;
    let shape: Vec<usize> = get("shape")?.extract()?;
    let data = get("data")?;
    let data = data.cast::<PyTuple>().map_err(|_| {
        type_err(
            name,
            "the array interface's data is not a (pointer, readonly) tuple".into(),
        )
    })?;
    let ptr = data.get_item(0)?.extract::<Option<u64>>()?.unwrap_or(0);
    let readonly: bool = data.get_item(1)?.extract()?;
    let itemsize = dtype.size();
    let strides = match iface.get_item("strides")? {
        Some(s) if !s.is_none() => {
            let bytes: Vec<i64> = s.extract()?;
            element_strides(name, &bytes, itemsize as i64)?
        }
        _ => kda_host::tensor::contiguous_strides(&shape),
    };
    if let Some(mask) = iface.get_item("mask")?
        && !mask.is_none()
    {
        return Err(type_err(name, "masked arrays are not supported".into()));
    }
    if shape.len() != strides.len() {
        return Err(type_err(name, "shape and strides differ in rank".into()));
    }
    Ok(View {
        dtype,
        shape,
        strides,
        ptr,
        place,
        readonly,
        _keep: None,
    })
}

fn unsupported(what: &str) -> String {
    format!(
        "dtype {what} is not supported; the kernels take bfloat16 (torch.bfloat16, ml_dtypes.bfloat16 or its uint16 bit pattern in NumPy), float32 and int32"
    )
}

fn interface_dtype(typestr: &str, name: Option<&str>) -> Option<DType> {
    if name == Some("bfloat16") {
        return Some(DType::Bf16);
    }
    // `|` is "not applicable" (one byte), `=` native; only little-endian hosts run this.
    match typestr.trim_start_matches(['<', '=', '|']) {
        "f4" => Some(DType::F32),
        "i4" => Some(DType::I32),
        // bf16 bit patterns: NumPy's stand-in for a bfloat16 array.
        "u2" => Some(DType::Bf16),
        _ => None,
    }
}

fn element_strides(name: &str, bytes: &[i64], itemsize: i64) -> PyResult<Vec<usize>> {
    bytes
        .iter()
        .map(|&b| {
            if b < 0 {
                Err(value_err(
                    name,
                    format!("negative strides are not supported; got byte strides {bytes:?}"),
                ))
            } else if b % itemsize != 0 {
                Err(value_err(
                    name,
                    format!(
                        "byte strides {bytes:?} are not multiples of the element size {itemsize}"
                    ),
                ))
            } else {
                Ok((b / itemsize) as usize)
            }
        })
        .collect()
}

fn from_dlpack(name: &str, obj: &Bound<'_, PyAny>) -> PyResult<View> {
    let (device_type, device_id): (i32, i32) = obj.call_method0("__dlpack_device__")?.extract()?;
    let capsule = if device_type == DL_CUDA {
        // -1: no synchronisation by the producer. The launch goes on the
        // stream the caller chose (torch's current one by default); an event
        // recorded here would also break a graph capture.
        let kwargs = PyDict::new(obj.py());
        kwargs.set_item("stream", -1)?;
        obj.call_method("__dlpack__", (), Some(&kwargs))?
    } else {
        obj.call_method0("__dlpack__")?
    };
    let cap = capsule
        .cast::<PyCapsule>()
        .map_err(|_| type_err(name, "__dlpack__ did not return a capsule".into()))?;
    let raw = cap.pointer_checked(Some(DLTENSOR)).map_err(|_| {
        type_err(
            name,
            "__dlpack__ returned a capsule that is not a `dltensor`".into(),
        )
    })?;
    // SAFETY: a `dltensor` capsule holds a DLManagedTensor whose first member
    // is the DLTensor; it stays valid while the capsule is alive (we keep it).
    let t = unsafe { &*(raw.as_ptr() as *const DlTensor) };
    let place = match t.device.device_type {
        DL_CPU | DL_CUDA_HOST => Place::Host,
        DL_CUDA => Place::Cuda(t.device.device_id.max(0) as usize),
        other => {
            return Err(value_err(
                name,
                format!(
                    "arrays on DLPack device type {other} (id {device_id}) are not supported; use CUDA or host memory"
                ),
            ));
        }
    };
    let dtype = match (t.dtype.code, t.dtype.bits, t.dtype.lanes) {
        (2, 32, 1) => DType::F32,
        (0, 32, 1) => DType::I32,
        (4, 16, 1) => DType::Bf16,
        (code, bits, lanes) => {
            let what = match code {
                0 => format!("int{bits}"),
                1 => format!("uint{bits}"),
                2 => format!("float{bits}"),
                4 => format!("bfloat{bits}"),
                _ => format!("DLPack code {code} ({bits} bits)"),
            };
            let what = if lanes == 1 {
                what
            } else {
                format!("{what}x{lanes}")
            };
            return Err(type_err(name, unsupported(&what)));
        }
    };
    let ndim = t.ndim.max(0) as usize;
    // SAFETY: shape (and strides, unless null) hold ndim int64 each.
    let shape_i: &[i64] = if ndim == 0 {
        &[]
    } else {
        unsafe { std::slice::from_raw_parts(t.shape, ndim) }
    };
    if shape_i.iter().any(|&n| n < 0) {
        return Err(value_err(
            name,
            format!("negative extent in shape {shape_i:?}"),
        ));
    }
    let shape: Vec<usize> = shape_i.iter().map(|&n| n as usize).collect();
    let strides = if t.strides.is_null() || ndim == 0 {
        kda_host::tensor::contiguous_strides(&shape)
    } else {
        // SAFETY: as above.
        let s = unsafe { std::slice::from_raw_parts(t.strides, ndim) };
        if let Some(bad) = s.iter().find(|&&s| s < 0) {
            return Err(value_err(
                name,
                format!("negative strides are not supported; got stride {bad} in {s:?}"),
            ));
        }
        s.iter().map(|&s| s as usize).collect()
    };
    Ok(View {
        dtype,
        shape,
        strides,
        ptr: (t.data as u64).wrapping_add(t.byte_offset),
        place,
        readonly: false,
        _keep: Some(capsule.unbind()),
    })
}
