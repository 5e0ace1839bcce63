//! Run step 5 once on GPU 0, or on the CPU simulator where there is none,
//! and check it against the float64 reference.
//!
//! `cargo run --release -p guide --example run`

use guide::host::{Problem, max_error, run};
use kda::runtime::{AnyDevice, Device};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let dev = AnyDevice::gpu_or_sim(0)?;
    println!("device: {}", dev.describe());
    for cluster in [1, 2, 4, 8] {
        let kernel = guide::step_5::ema_step(cluster, true);
        let p = Problem::new(64, 32 * cluster as usize, 3);
        let (state, y) = run(&dev, &kernel, &p)?;
        let (want_state, want_y) = p.reference();
        let err = max_error(&state, &want_state).max(max_error(&y, &want_y));
        println!(
            "cluster {cluster}: {} channels, max error {err:.1e}",
            p.channels
        );
        if err > 1e-6 {
            return Err(format!("cluster {cluster}: error {err:e} against the reference").into());
        }
    }
    Ok(())
}
