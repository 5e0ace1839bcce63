//! `cuLaunchKernelEx` behind a typed interface: the launch geometry and
//! attributes as plain values, the kernel parameters packed in `.entry` order.
//!
//! cudarc 0.19 has no safe launch with cluster dimensions or PDL, so this is
//! the one place that builds a `CUlaunchConfig` by hand.

use std::ffi::c_void;

use cudarc::driver::{DriverError, sys};
use kda_ir::ClusterPolicy;

use kda_device::launch::ScalarArg;

/// Geometry and attributes of one launch.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub(crate) struct LaunchDims {
    pub grid: [u32; 3],
    pub block: [u32; 3],
    /// CTAs per cluster; `None` launches without the cluster attribute (no
    /// cluster, or cluster dimensions fixed in the PTX by `.reqnctapercluster`).
    pub cluster: Option<[u32; 3]>,
    pub dyn_smem_bytes: u32,
    /// Programmatic stream serialization: the launch may begin while the
    /// preceding one on the stream runs; its `griddepcontrol.wait` waits for it.
    pub pdl: bool,
    /// The cluster scheduling policy preference; `Default` adds no
    /// attribute.
    pub cluster_policy: ClusterPolicy,
}

// The parameter slots below hold narrower values in the low bytes of a u64.
#[cfg(not(target_endian = "little"))]
compile_error!("kda-cuda packs kernel parameters for little-endian hosts only");

/// Kernel parameters in `.entry` order, each in its own 8-byte slot: the driver
/// reads as many bytes from each slot as the parameter's PTX type has.
#[derive(Clone, Debug, Default)]
pub(crate) struct KernelParams {
    slots: Vec<u64>,
}

impl KernelParams {
    pub fn with_capacity(n: usize) -> KernelParams {
        KernelParams {
            slots: Vec::with_capacity(n),
        }
    }

    /// A `.u64` parameter: a device pointer or a symbol value.
    pub fn push_u64(&mut self, v: u64) {
        self.slots.push(v);
    }

    /// A scalar parameter of the scalar's own PTX type.
    pub fn push_scalar(&mut self, a: ScalarArg) {
        self.slots.push(match a {
            ScalarArg::F32(v) => v.to_bits() as u64,
            ScalarArg::I32(v) => v as u32 as u64,
            ScalarArg::U32(v) => v as u64,
            ScalarArg::I64(v) => v as u64,
            ScalarArg::U64(v) => v,
        });
    }
}

/// The launch attributes of `dims` (cluster shape, PDL, cluster scheduling
/// policy), kept alive while a `CUlaunchConfig` points at them.
struct Attributes {
    attrs: [sys::CUlaunchAttribute; 3],
    n: usize,
}

impl Attributes {
    fn of(dims: &LaunchDims) -> Attributes {
        // SAFETY: an all-zero attribute is a valid value of the C struct (the value is a union of PODs).
        let mut attrs: [sys::CUlaunchAttribute; 3] = unsafe { std::mem::zeroed() };
        let mut n = 0;
        if let Some([x, y, z]) = dims.cluster {
            attrs[n].id = sys::CUlaunchAttributeID::CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION;
            attrs[n].value.clusterDim = sys::CUlaunchAttributeValue_union__bindgen_ty_1 { x, y, z };
            n += 1;
        }
        if dims.pdl {
            attrs[n].id =
                sys::CUlaunchAttributeID::CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION;
            attrs[n].value.programmaticStreamSerializationAllowed = 1;
            n += 1;
        }
        // Per launch, not on the function: kernels loaded from one PTX text
        // share a function, and a graph's captured node keeps its own.
        use sys::CUclusterSchedulingPolicy::*;
        let policy = match dims.cluster_policy {
            ClusterPolicy::Default => None,
            ClusterPolicy::Spread => Some(CU_CLUSTER_SCHEDULING_POLICY_SPREAD),
            ClusterPolicy::LoadBalancing => Some(CU_CLUSTER_SCHEDULING_POLICY_LOAD_BALANCING),
        };
        if let Some(p) = policy {
            attrs[n].id =
                sys::CUlaunchAttributeID::CU_LAUNCH_ATTRIBUTE_CLUSTER_SCHEDULING_POLICY_PREFERENCE;
            attrs[n].value.clusterSchedulingPolicyPreference = p;
            n += 1;
        }
        Attributes { attrs, n }
    }

    /// The launch configuration; it points into `self`.
    fn config(&mut self, dims: &LaunchDims, stream: sys::CUstream) -> sys::CUlaunchConfig {
        sys::CUlaunchConfig {
            gridDimX: dims.grid[0],
            gridDimY: dims.grid[1],
            gridDimZ: dims.grid[2],
            blockDimX: dims.block[0],
            blockDimY: dims.block[1],
            blockDimZ: dims.block[2],
            sharedMemBytes: dims.dyn_smem_bytes,
            hStream: stream,
            attrs: self.attrs.as_mut_ptr(),
            numAttrs: self.n as u32,
        }
    }
}

/// How many clusters of `cluster` CTAs of `func` launched with `dims`
/// (their grid is ignored) can be resident on the whole device at once: the driver's
/// occupancy calculator over registers, shared memory, `.minnctapersm` and
/// the cluster shape (`cuOccupancyMaxActiveClusters`).
///
/// # Safety
///
/// `func` must be a live function of the context bound to the calling thread.
pub(crate) unsafe fn max_active_clusters(
    func: sys::CUfunction,
    dims: &LaunchDims,
    cluster: u32,
) -> Result<u32, DriverError> {
    let probe = LaunchDims {
        grid: [cluster, 1, 1],
        pdl: false,
        ..*dims
    };
    let mut attrs = Attributes::of(&probe);
    let cfg = attrs.config(&probe, std::ptr::null_mut());
    let mut n: std::ffi::c_int = 0;
    // SAFETY: `cfg` and its attributes outlive the call; the caller vouches for `func`.
    unsafe { sys::cuOccupancyMaxActiveClusters(&mut n, func, &cfg).result()? };
    Ok(n.max(0) as u32)
}

/// Enqueue one launch of `func` on `stream`.
///
/// # Safety
///
/// `func` must be a live function of the stream's context (bound to the calling
/// thread) whose `.entry` parameters match `params` in number, order and type,
/// and every pointer parameter must address device memory large enough for
/// the kernel's accesses, alive until the kernel finishes.
pub(crate) unsafe fn launch_ex(
    stream: sys::CUstream,
    func: sys::CUfunction,
    dims: &LaunchDims,
    params: &KernelParams,
) -> Result<(), DriverError> {
    let mut ptrs: Vec<*mut c_void> = params
        .slots
        .iter()
        .map(|s| s as *const u64 as *mut c_void)
        .collect();
    let mut attrs = Attributes::of(dims);
    let cfg = attrs.config(dims, stream);
    // SAFETY: `cfg`, `attrs` and the parameter slots outlive the call (the
    // driver copies them); the caller vouches for `func` and the parameters.
    unsafe { sys::cuLaunchKernelEx(&cfg, func, ptrs.as_mut_ptr(), std::ptr::null_mut()).result() }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scalars_sit_in_the_low_bytes_of_their_slot() {
        let mut p = KernelParams::default();
        p.push_scalar(ScalarArg::F32(1.5));
        p.push_scalar(ScalarArg::I32(-2));
        p.push_u64(0xdead_beef_0000_0001);
        let read4 = |i: usize| {
            // What the driver does for a 4-byte parameter: read 4 bytes at the slot's address.
            let bytes = p.slots[i].to_le_bytes();
            [bytes[0], bytes[1], bytes[2], bytes[3]]
        };
        assert_eq!(f32::from_le_bytes(read4(0)), 1.5);
        assert_eq!(i32::from_le_bytes(read4(1)), -2);
        assert_eq!(p.slots[2], 0xdead_beef_0000_0001);
    }
}
