//! The launch API shared by every device: what a launch needs besides the
//! kernel (grid, PDL, bound symbols, scalar arguments, tensor buffers) and the
//! [`Device`] trait the CUDA device and the simulator both implement.

use kda_ir::{Dim, Kernel, Scalar};

use crate::error::RuntimeError;

/// A scalar kernel argument.
#[derive(Copy, Clone, Debug, PartialEq)]
pub enum ScalarArg {
    /// A `.f32` parameter.
    F32(f32),
    /// A `.s32` parameter.
    I32(i32),
    /// A `.u32` parameter.
    U32(u32),
    /// A `.s64` parameter.
    I64(i64),
    /// A `.u64` parameter.
    U64(u64),
}

impl ScalarArg {
    /// The IR type of the value, checked against the kernel's declaration.
    pub fn scalar(self) -> Scalar {
        match self {
            ScalarArg::F32(_) => Scalar::F32,
            ScalarArg::I32(_) => Scalar::I32,
            ScalarArg::U32(_) => Scalar::U32,
            ScalarArg::I64(_) => Scalar::I64,
            ScalarArg::U64(_) => Scalar::U64,
        }
    }
}

/// Everything about one launch except the kernel and the tensor buffers.
#[derive(Clone, Debug, Default)]
pub struct LaunchConfig {
    /// Grid in CTAs; `grid[0]` must be a multiple of the kernel's cluster size.
    pub grid: [u32; 3],
    /// Launch with programmatic stream serialization (PDL) so this launch may
    /// start before the preceding one on the stream finishes.
    pub pdl: bool,
    /// Values of the kernel's symbols (`kernel.syms`), in order.
    pub syms: Vec<i64>,
    /// Scalar arguments (`kernel.scalars`), in order.
    pub scalars: Vec<ScalarArg>,
}

/// A device that runs kda kernels: an NVIDIA GPU or the CPU simulator.
pub trait Device {
    /// Device memory holding one tensor.
    type Buffer;
    /// A kernel prepared for launching (a loaded module, a scheduled IR).
    type Module;

    /// A one-line description ("NVIDIA H200 (sm_90)", "CPU simulator").
    fn describe(&self) -> String;
    /// Copy host bytes to a new device buffer.
    fn upload(&self, bytes: &[u8]) -> Result<Self::Buffer, RuntimeError>;
    /// Copy a device buffer back to the host (waits for pending work).
    fn download(&self, buf: &Self::Buffer) -> Result<Vec<u8>, RuntimeError>;
    /// Prepare a kernel for launching.
    fn load(&self, kernel: &Kernel) -> Result<Self::Module, RuntimeError>;
    /// The kernel `module` was loaded from (as scheduled for this device).
    fn module_kernel<'m>(&self, module: &'m Self::Module) -> &'m Kernel;
    /// Clusters of `module` that run at once on the whole device: the grid
    /// (in clusters) of a persistent launch, whose clusters loop over the
    /// work with a runtime stride ([`crate::Launch::persistent`]).
    fn max_resident_clusters(&self, module: &Self::Module) -> Result<u32, RuntimeError>;
    /// Launch `module` with one buffer per kernel tensor (`kernel.tensors`, in order).
    fn launch(
        &self,
        module: &Self::Module,
        cfg: &LaunchConfig,
        tensors: &[&Self::Buffer],
    ) -> Result<(), RuntimeError>;
    /// Wait until every launch issued so far has finished.
    fn synchronize(&self) -> Result<(), RuntimeError>;
}

/// The largest grid CUDA launches, per dimension (x, y, z).
pub const MAX_GRID: [u32; 3] = [i32::MAX as u32, 65535, 65535];

/// Check a launch against the kernel's declarations before any device sees it:
/// counts and types of symbols, scalars and tensors, the grid against the
/// cluster size, and that every tensor's extent fits its buffer.
pub fn check_launch(
    kernel: &Kernel,
    cfg: &LaunchConfig,
    buffer_bytes: &[usize],
) -> Result<(), RuntimeError> {
    let bad = |msg: String| {
        Err(RuntimeError::BadLaunch {
            kernel: kernel.name.clone(),
            msg,
        })
    };
    if cfg.syms.len() != kernel.syms.len() {
        return bad(format!(
            "{} symbol values given, kernel declares {}",
            cfg.syms.len(),
            kernel.syms.len()
        ));
    }
    if cfg.scalars.len() != kernel.scalars.len() {
        return bad(format!(
            "{} scalar arguments given, kernel declares {}",
            cfg.scalars.len(),
            kernel.scalars.len()
        ));
    }
    for ((_, decl), arg) in kernel.scalars.iter().zip(&cfg.scalars) {
        if decl.ty != arg.scalar() {
            return bad(format!(
                "scalar `{}` is {}, got a {} argument",
                decl.name,
                decl.ty,
                arg.scalar()
            ));
        }
    }
    if buffer_bytes.len() != kernel.tensors.len() {
        return bad(format!(
            "{} tensor buffers given, kernel declares {}",
            buffer_bytes.len(),
            kernel.tensors.len()
        ));
    }
    if cfg.grid.contains(&0) {
        return bad(format!("empty grid {:?}", cfg.grid));
    }
    // CUDA's limits; past them the driver refuses the launch and the
    // simulator's CTA count would overflow.
    if cfg.grid[0] > MAX_GRID[0] || cfg.grid[1] > MAX_GRID[1] || cfg.grid[2] > MAX_GRID[2] {
        return bad(format!(
            "grid {:?} exceeds the device limits {MAX_GRID:?}",
            cfg.grid
        ));
    }
    if !cfg.grid[0].is_multiple_of(kernel.launch.cluster) {
        return bad(format!(
            "grid.x = {} is not a multiple of the cluster size {}",
            cfg.grid[0], kernel.launch.cluster
        ));
    }
    // A constant past i64::MAX is out of range, not negative.
    let value = |d: &Dim| -> Option<i64> {
        match *d {
            Dim::Const(c) => i64::try_from(c).ok(),
            Dim::Sym(s) => cfg.syms.get(s.as_u32() as usize).copied(),
        }
    };
    for ((_, t), &bytes) in kernel.tensors.iter().zip(buffer_bytes) {
        // The last element reachable through shape and strides must lie in the buffer.
        let overflow = || {
            bad(format!(
                "tensor `{}`: its extents and strides overflow a 64-bit byte span",
                t.name
            ))
        };
        let mut last = Some(0i64);
        for (d, s) in t.shape.iter().zip(&t.strides) {
            let (Some(n), Some(st)) = (value(d), value(s)) else {
                return overflow();
            };
            if n < 0 || st < 0 {
                return bad(format!(
                    "tensor `{}` has a negative extent or stride",
                    t.name
                ));
            }
            if n == 0 {
                last = Some(-1);
                break;
            }
            last = last.and_then(|l| l.checked_add((n - 1).checked_mul(st)?));
        }
        let need = last
            .and_then(|l| l.checked_add(1))
            .and_then(|n| usize::try_from(n).ok())
            .and_then(|n| n.checked_mul(t.dtype.bytes() as usize));
        let Some(need) = need else {
            return overflow();
        };
        if need > bytes {
            return bad(format!(
                "tensor `{}` spans {need} bytes but its buffer holds {bytes}",
                t.name
            ));
        }
    }
    Ok(())
}

/// A host view of one tensor argument: its extents and element strides.
#[derive(Clone, Debug)]
pub struct TensorShape {
    /// Extents, outermost first.
    pub shape: Vec<usize>,
    /// Element strides, one per extent.
    pub strides: Vec<usize>,
}

/// Bind the kernel's symbols from the actual tensors: every `Dim::Sym` in a
/// tensor's shape or strides takes the matching extent or stride, constants
/// must match exactly, and a symbol used in several places must agree.
pub fn bind_syms(kernel: &Kernel, tensors: &[TensorShape]) -> Result<Vec<i64>, RuntimeError> {
    let bad = |msg: String| {
        Err(RuntimeError::BadLaunch {
            kernel: kernel.name.clone(),
            msg,
        })
    };
    if tensors.len() != kernel.tensors.len() {
        return bad(format!(
            "{} tensors given, kernel declares {}",
            tensors.len(),
            kernel.tensors.len()
        ));
    }
    let mut syms: Vec<Option<i64>> = vec![None; kernel.syms.len()];
    for ((_, decl), actual) in kernel.tensors.iter().zip(tensors) {
        if actual.shape.len() != decl.shape.len() || actual.strides.len() != decl.strides.len() {
            return bad(format!(
                "tensor `{}` has rank {}, kernel declares rank {}",
                decl.name,
                actual.shape.len(),
                decl.shape.len()
            ));
        }
        let pairs = decl
            .shape
            .iter()
            .zip(&actual.shape)
            .map(|(d, &n)| (d, n, "extent"))
            .chain(
                decl.strides
                    .iter()
                    .zip(&actual.strides)
                    .map(|(d, &n)| (d, n, "stride")),
            );
        for (i, (d, n, what)) in pairs.enumerate() {
            let dim = i % decl.shape.len().max(1);
            match *d {
                Dim::Const(c) if c as usize != n => {
                    return bad(format!(
                        "tensor `{}` {what} {dim} is {n}, kernel was built for {c}",
                        decl.name
                    ));
                }
                Dim::Const(_) => {}
                Dim::Sym(s) => {
                    let slot = &mut syms[s.as_u32() as usize];
                    match *slot {
                        Some(prev) if prev != n as i64 => {
                            return bad(format!(
                                "symbol `{}` is {prev} elsewhere but tensor `{}` {what} {dim} is {n}",
                                kernel.syms[s].name, decl.name
                            ));
                        }
                        _ => *slot = Some(n as i64),
                    }
                }
            }
        }
    }
    syms.into_iter()
        .zip(kernel.syms.values())
        .map(|(v, d)| match v {
            Some(v) => Ok(v),
            None => Err(RuntimeError::BadLaunch {
                kernel: kernel.name.clone(),
                msg: format!("symbol `{}` is not bound by any tensor", d.name),
            }),
        })
        .collect()
}
