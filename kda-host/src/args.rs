//! What the shared runner and references need to know about a kernel's
//! argument struct.

use crate::tensor::HostTensor;

/// A kernel's arguments as the shared host code sees them: the tensors it
/// uploads, in kernel parameter order, and the three it writes (output, state
/// cache, conv-state cache).
pub trait KernelArgs {
    /// The tensor arguments in kernel parameter order (scalars and absent
    /// optional tensors left out).
    fn tensors(&self) -> Vec<&HostTensor>;

    /// Positions of the output, the state and the conv state in
    /// [`KernelArgs::tensors`].
    fn written(&self) -> [usize; 3];

    /// The output, the state and the conv state, for writing results back.
    fn written_mut(&mut self) -> [&mut HostTensor; 3];
}
