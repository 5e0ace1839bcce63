//! Run step 5 on GPU 0 (else the simulator) and check it against the
//! float64 reference: `cargo run --release -p guide --example run`.

use guide::host::{Problem, max_error, run};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let chosen = kda_host::gpu_or_sim(0)?; // the simulator where there is no GPU, saying why
    println!("device: {}", chosen.describe());
    for cluster in [1, 2, 4, 8] {
        let kernel = guide::step_5::ema_step(cluster, true);
        let p = Problem::new(64, 32 * cluster as usize, 3);
        let (state, y) = run(&chosen.device, &kernel, &p)?;
        let (want_state, want_y) = p.reference();
        let err = max_error(&state, &want_state).max(max_error(&y, &want_y));
        println!("cluster {cluster}: max error {err:.1e}");
        if err > 1e-6 {
            return Err(format!("cluster {cluster}: error {err:e} against the reference").into());
        }
    }
    Ok(())
}
