//! Typed launches: named arguments checked against the kernel's declarations.
//!
//! `#[cluster_kernel]` generates, beside the builder function `name(..)`, a
//! module `name` with an `Args` struct (one field per kernel parameter:
//! [`TensorArg`](crate::TensorArg)s typed by element and rank, scalars by
//! type, `Option`s for `#[when]` tensors) whose `launch` method comes here.
//! [`bind`] matches the arguments to the loaded kernel's tensors and
//! scalars *by name*, so the parameter list is written once, in the kernel
//! signature, and checks every extent, stride, alignment and element type
//! against the declaration, naming the parameter and dimension on error.

use kda_ir::{Dim, Kernel};

use crate::error::RuntimeError;
pub use crate::error::arg::{ArgError, ArgIssue, Part};
use crate::launch::{Device, LaunchConfig, ScalarArg};
use crate::tensor::ErasedArg;

/// Where and how a launch runs, besides its arguments.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct Launch {
    /// Grid in CTAs; `grid[0]` must be a multiple of the kernel's cluster size.
    pub grid: [u32; 3],
    /// Programmatic dependent launch: may start before the preceding launch
    /// on the stream finishes (the kernel's `pdl_wait` orders its reads).
    pub pdl: bool,
}

impl Launch {
    /// A launch on `grid`, without PDL.
    pub fn grid(grid: [u32; 3]) -> Launch {
        Launch { grid, pdl: false }
    }

    /// A persistent launch for `work` independent work items of one
    /// cluster each: as many clusters as the device holds at once
    /// ([`Device::max_resident_clusters`]), at most `work` (at least one),
    /// each looping over items `cluster_id, cluster_id + clusters, ..`.
    pub fn persistent<D: Device>(
        dev: &D,
        module: &D::Module,
        work: u64,
    ) -> Result<Launch, RuntimeError> {
        let kernel = dev.module_kernel(module);
        let resident = dev.max_resident_clusters(module)?;
        if resident == 0 {
            return Err(RuntimeError::BadLaunch {
                kernel: kernel.name.clone(),
                msg: "no cluster of this kernel fits on the device (registers or shared memory)"
                    .into(),
            });
        }
        let clusters = (resident as u64).min(work.max(1)) as u32;
        let ctas =
            clusters
                .checked_mul(kernel.launch.cluster)
                .ok_or_else(|| RuntimeError::BadLaunch {
                    kernel: kernel.name.clone(),
                    msg: format!(
                        "{clusters} clusters of {} CTAs overflow the grid",
                        kernel.launch.cluster
                    ),
                })?;
        Ok(Launch::grid([ctas, 1, 1]))
    }

    /// The same launch with PDL on or off.
    pub fn pdl(self, pdl: bool) -> Launch {
        Launch { pdl, ..self }
    }
}

/// The arguments of one launch, matched to the kernel: buffers, symbol
/// values and scalars in the kernel's order.
pub struct Bound<'a, D: Device> {
    /// One buffer per kernel tensor, in the kernel's order.
    pub buffers: Vec<&'a D::Buffer>,
    /// For each kernel tensor, in the kernel's order, its position in the
    /// argument list given to [`bind`].
    pub order: Vec<usize>,
    /// The value of each kernel symbol, in order.
    pub syms: Vec<i64>,
    /// The scalar arguments, in the kernel's order.
    pub scalars: Vec<ScalarArg>,
}

impl<D: Device> Bound<'_, D> {
    /// The launch configuration for `launch` with these values.
    pub fn config(&self, launch: Launch) -> LaunchConfig {
        LaunchConfig {
            grid: launch.grid,
            pdl: launch.pdl,
            syms: self.syms.clone(),
            scalars: self.scalars.clone(),
        }
    }
}

/// Match named tensor and scalar arguments to `kernel`'s declarations (see
/// the module doc). Tensors given as `None` are absent `#[when]` parameters.
pub fn bind<'a, D: Device>(
    kernel: &Kernel,
    tensors: &[(&str, Option<ErasedArg<'a, D>>)],
    scalars: &[(&str, ScalarArg)],
) -> Result<Bound<'a, D>, RuntimeError> {
    let err = |param: &str, issue: ArgIssue| {
        RuntimeError::Arg(Box::new(ArgError {
            kernel: kernel.name.clone(),
            param: param.to_string(),
            issue,
        }))
    };
    for (name, arg) in tensors {
        if arg.is_some() && !kernel.tensors.values().any(|t| t.name == *name) {
            return Err(err(name, ArgIssue::NotDeclared));
        }
    }
    let mut syms: Vec<Option<(i64, &str)>> = vec![None; kernel.syms.len()];
    let mut buffers = Vec::with_capacity(kernel.tensors.len());
    let mut order = Vec::with_capacity(kernel.tensors.len());
    for (_, decl) in kernel.tensors.iter() {
        let name = decl.name.as_str();
        // Two `#[when]` forms of one argument share its ABI name: the one
        // given binds.
        let Some((at, arg)) = tensors
            .iter()
            .enumerate()
            .filter(|(_, (n, _))| *n == name)
            .find_map(|(at, (_, a))| a.as_ref().map(|a| (at, a)))
        else {
            return Err(err(name, ArgIssue::Missing));
        };
        if arg.dtype != decl.dtype {
            return Err(err(
                name,
                ArgIssue::Dtype {
                    want: decl.dtype,
                    got: arg.dtype,
                },
            ));
        }
        let (shape, strides) = (&arg.shape.shape, &arg.shape.strides);
        if shape.len() != decl.shape.len() || strides.len() != decl.strides.len() {
            return Err(err(
                name,
                ArgIssue::Rank {
                    want: decl.shape.len(),
                    got: shape.len(),
                },
            ));
        }
        let parts = decl
            .shape
            .iter()
            .zip(shape)
            .enumerate()
            .map(|(d, (decl, &n))| (Part::Extent, d, decl, n))
            .chain(
                decl.strides
                    .iter()
                    .zip(strides)
                    .enumerate()
                    .map(|(d, (decl, &n))| (Part::Stride, d, decl, n)),
            );
        for (what, dim, want, got) in parts {
            match *want {
                Dim::Const(c) if c != got as u64 => {
                    return Err(err(
                        name,
                        ArgIssue::Fixed {
                            what,
                            dim,
                            want: c,
                            got,
                        },
                    ));
                }
                Dim::Const(_) => {}
                Dim::Sym(s) => {
                    let value = i64::try_from(got)
                        .map_err(|_| err(name, ArgIssue::TooLarge { what, dim, got }))?;
                    let slot = &mut syms[s.as_u32() as usize];
                    match *slot {
                        Some((bound, by)) if bound != value => {
                            return Err(err(
                                name,
                                ArgIssue::Symbol {
                                    what,
                                    dim,
                                    got,
                                    sym: kernel.syms[s].name.clone(),
                                    bound,
                                    by: by.to_string(),
                                },
                            ));
                        }
                        Some(_) => {}
                        None => *slot = Some((value, name)),
                    }
                }
            }
        }
        // Every innermost row starts at a multiple of the outer strides.
        let elem = decl.dtype.bytes() as usize;
        if decl.align as usize > elem {
            for d in 0..strides.len().saturating_sub(1) {
                let bytes = strides[d].saturating_mul(elem);
                if shape[d] > 1 && !bytes.is_multiple_of(decl.align as usize) {
                    return Err(err(
                        name,
                        ArgIssue::Unaligned {
                            dim: d,
                            stride_bytes: bytes,
                            align: decl.align,
                        },
                    ));
                }
            }
        }
        buffers.push(arg.buf);
        order.push(at);
    }
    let syms = syms
        .into_iter()
        .zip(kernel.syms.values())
        .map(|(v, d)| {
            v.map(|(v, _)| v).ok_or_else(|| RuntimeError::BadLaunch {
                kernel: kernel.name.clone(),
                msg: format!("symbol `{}` is not bound by any tensor", d.name),
            })
        })
        .collect::<Result<Vec<_>, _>>()?;
    let scalars = kernel
        .scalars
        .values()
        .map(|decl| {
            let Some(&(_, v)) = scalars.iter().find(|(n, _)| *n == decl.name) else {
                return Err(err(&decl.name, ArgIssue::Missing));
            };
            if v.scalar() != decl.ty {
                return Err(err(
                    &decl.name,
                    ArgIssue::Dtype {
                        want: decl.ty,
                        got: v.scalar(),
                    },
                ));
            }
            Ok(v)
        })
        .collect::<Result<Vec<_>, _>>()?;
    Ok(Bound {
        buffers,
        order,
        syms,
        scalars,
    })
}

/// Bind the arguments to the kernel `module` runs and launch it on `dev`.
pub fn launch<D: Device>(
    dev: &D,
    module: &D::Module,
    launch: Launch,
    tensors: &[(&str, Option<ErasedArg<'_, D>>)],
    scalars: &[(&str, ScalarArg)],
) -> Result<(), RuntimeError> {
    let bound = bind::<D>(dev.module_kernel(module), tensors, scalars)?;
    dev.launch(module, &bound.config(launch), &bound.buffers)
}

/// Scalar argument conversion for the generated `Args::launch`.
pub trait IntoScalarArg: Copy {
    /// This value as a launch scalar of its own type.
    fn into_scalar_arg(self) -> ScalarArg;
}

macro_rules! scalar_args {
    ($($t:ty => $v:ident),*) => {$(
        impl IntoScalarArg for $t {
            fn into_scalar_arg(self) -> ScalarArg {
                ScalarArg::$v(self)
            }
        }
    )*};
}

scalar_args!(f32 => F32, i32 => I32, u32 => U32, i64 => I64, u64 => U64);
