//! `decode-bench`: the GDN / Mamba-2 schedule sweep (see the library doc).
//! Exit status 0 when every row was measured, checked and fully written
//! (and every copy verified); 1 when one was not; 2 for an argument it does
//! not know; 4 without a GPU (nothing measured must not pass for a
//! measurement). `KDA_SWEEP_SECONDS` (default
//! [`DEFAULT_SWEEP_SECONDS`](decode_bench::DEFAULT_SWEEP_SECONDS)) bounds
//! the time after which no new row or copy starts. `--no-same-bytes-copy`
//! skips the per-point same-bytes copies (`--help` says more).

use std::time::{Duration, Instant};

use decode_bench::gpu::Budget;
use decode_bench::{Command, DEFAULT_SWEEP_SECONDS, Options, USAGE};
use kda_runtime::{CudaDevice, RuntimeError};

fn main() {
    let start = Instant::now();
    // Before the GPU is opened: a mistyped flag costs nothing.
    let opts = match Options::parse(std::env::args_os().skip(1)) {
        Ok(Command::Run(opts)) => opts,
        Ok(Command::Help) => {
            println!("{USAGE}");
            return;
        }
        Err(e) => {
            eprintln!("{e}");
            std::process::exit(2);
        }
    };
    let seconds: u64 = std::env::var("KDA_SWEEP_SECONDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(DEFAULT_SWEEP_SECONDS);
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
    let results = decode_bench::run(&dev, deadline, &Budget::default(), &opts);
    println!("\n{}", results.markdown());
    if results.failed() {
        println!("decode-bench: some rows or copies FAILED (see above)");
        std::process::exit(1);
    }
}
