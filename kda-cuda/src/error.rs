//! Driver errors as [`RuntimeError::Driver`]: the call, the kernel it concerns
//! and the driver's own name and text for the error.

use cudarc::driver::DriverError;

use kda_device::RuntimeError;

/// What `RuntimeError::Driver::kernel` says for calls that concern no kernel
/// (allocation, copies, graph management).
pub(crate) const NO_KERNEL: &str = "<no kernel>";

pub(crate) fn driver_error(call: &'static str, kernel: &str, e: DriverError) -> RuntimeError {
    RuntimeError::Driver {
        call,
        kernel: kernel.to_string(),
        msg: driver_msg(e),
    }
}

/// The driver's name and description of an error: `CUDA_ERROR_X: text`.
pub(crate) fn driver_msg(e: DriverError) -> String {
    let name = e.error_name().map(|s| s.to_string_lossy().into_owned());
    let text = e.error_string().map(|s| s.to_string_lossy().into_owned());
    match (name, text) {
        (Ok(name), Ok(text)) => format!("{name}: {text}"),
        _ => format!("{:?}", e.0),
    }
}

/// `result.driver("cuFoo", kernel)?` instead of a `map_err` at every call.
pub(crate) trait DriverResult<T> {
    fn driver(self, call: &'static str, kernel: &str) -> Result<T, RuntimeError>;
}

impl<T> DriverResult<T> for Result<T, DriverError> {
    fn driver(self, call: &'static str, kernel: &str) -> Result<T, RuntimeError> {
        self.map_err(|e| driver_error(call, kernel, e))
    }
}
