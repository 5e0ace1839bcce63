//! What the shared runner and references need to know about a kernel's
//! argument struct.

use crate::tensor::HostTensor;

/// A kernel's arguments as the shared host code sees them: the tensors it
/// uploads, each under its kernel parameter name, and the three it writes
/// (output, state cache, conv-state cache). Launches bind them to the
/// kernel by name (`kda_runtime::typed::bind`), so the order in which they
/// are listed does not matter and a name the kernel does not declare (or a
/// declared one missing) is an error naming the parameter.
pub trait KernelArgs {
    /// The tensor arguments under their kernel parameter names (scalars and
    /// absent optional tensors left out).
    fn named_tensors(&self) -> Vec<(&'static str, &HostTensor)>;

    /// The tensor arguments as [`KernelArgs::named_tensors`] lists them.
    fn tensors(&self) -> Vec<&HostTensor> {
        self.named_tensors().into_iter().map(|(_, t)| t).collect()
    }

    /// Parameter names of the output, the state and the conv state.
    const WRITTEN: [&'static str; 3] = ["output", "state", "conv_state"];

    /// Positions of the output, the state and the conv state in
    /// [`KernelArgs::named_tensors`].
    fn written(&self) -> [usize; 3] {
        let named = self.named_tensors();
        Self::WRITTEN.map(|w| {
            named
                .iter()
                .position(|&(n, _)| n == w)
                .expect("output, state and conv state are passed to every launch")
        })
    }

    /// The output, the state and the conv state, for writing results back.
    fn written_mut(&mut self) -> [&mut HostTensor; 3];
}

/// The tensors of a call in the order of `all` (a kernel's argument enum,
/// scalars included: they have no tensor), each under `name(arg)`: what
/// [`KernelArgs::named_tensors`] returns for an argument struct with a
/// `tensor(arg)` accessor.
pub fn named_in_order<'a, A: Copy>(
    all: &[A],
    tensor: impl Fn(A) -> Option<&'a HostTensor>,
    name: impl Fn(A) -> &'static str,
) -> Vec<(&'static str, &'a HostTensor)> {
    all.iter()
        .filter_map(|&a| tensor(a).map(|t| (name(a), t)))
        .collect()
}
