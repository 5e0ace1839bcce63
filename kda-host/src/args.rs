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

    /// Positions of the output, the state and the conv state in
    /// [`KernelArgs::named_tensors`].
    fn written(&self) -> [usize; 3];

    /// The output, the state and the conv state, for writing results back.
    fn written_mut(&mut self) -> [&mut HostTensor; 3];
}
