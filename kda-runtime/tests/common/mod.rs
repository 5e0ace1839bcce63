//! Shared by the GPU tests: open the GPU or skip, and tensors as bytes.
#![allow(dead_code)] // each test binary uses its own subset

use kda_runtime::CudaDevice;

pub mod kernels;

/// GPU 0, or `None` after printing why the test is skipped. With
/// `KDA_REQUIRE_GPU=1` (the staged GPU run sets it) a missing GPU fails the
/// test instead, so a GPU run cannot pass by skipping.
pub fn gpu() -> Option<CudaDevice> {
    kda_runtime::cuda::gpu_or_skip()
}

pub fn f32_bytes(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

pub fn bytes_f32(b: &[u8]) -> Vec<f32> {
    b.chunks_exact(4)
        .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect()
}

pub fn bytes_u32(b: &[u8]) -> Vec<u32> {
    b.chunks_exact(4)
        .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect()
}
