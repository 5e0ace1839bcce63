// `#[when]`, `#[align]` and `#[strides]` shape a launch parameter; a
// comptime parameter is Rust configuration, always present and never passed
// at launch, so on one they would be silently ignored: each is an error.
use kda::cluster_kernel;

#[cluster_kernel(block = 32)]
fn scale(
    #[comptime] wide: bool,
    #[when(wide)]
    #[comptime]
    rows: u32,
    #[align(16)]
    #[comptime]
    cols: u32,
    #[strides(1)]
    #[comptime]
    pitch: u32,
    x: Tensor<f32, n>,
) {
    let t = thread_idx();
    x[t % (rows * cols * pitch)] = x[t] * 2.0;
}

fn main() {
    let _ = scale(true, 1, 1, 1);
}
