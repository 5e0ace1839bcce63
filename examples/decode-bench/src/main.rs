//! `decode-bench`: the GDN / Mamba-2 schedule sweep (see the library doc).
//! Exit status 0 when every row was measured, checked and fully written;
//! 1 when one was not; 4 without a GPU (nothing measured must not pass for a
//! measurement). `KDA_SWEEP_SECONDS` (default 50) bounds the time after
//! which no new row starts.

use std::time::{Duration, Instant};

use decode_bench::gpu::Budget;
use kda_runtime::{CudaDevice, RuntimeError};

fn main() {
    let start = Instant::now();
    let seconds: u64 = std::env::var("KDA_SWEEP_SECONDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(50);
    let dev = match CudaDevice::new(0) {
        Ok(dev) => dev,
        Err(RuntimeError::NoDriver(why)) => {
            println!("decode-bench: no usable GPU ({why}); nothing measured.");
            std::process::exit(4);
        }
        Err(e) => {
            println!("decode-bench: cannot open GPU 0: {e}");
            std::process::exit(1);
        }
    };
    let deadline = start + Duration::from_secs(seconds);
    let results = decode_bench::run(&dev, deadline, &Budget::default());
    println!("\n{}", results.markdown());
    if results.failed() {
        println!("decode-bench: some rows FAILED (see above)");
        std::process::exit(1);
    }
}
