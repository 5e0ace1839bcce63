//! The guide's kernel on the GPU: every cluster size and schedule against
//! the float64 reference, and a PDL chain of two layers captured in a graph.
//! Skips (printing why) where there is no CUDA driver.

use guide::host::{Problem, max_error, run, upload};
use guide::step_5::ema_step::Args;
use kda::runtime::cuda::gpu_or_skip;
use kda::runtime::{Device, Graph};

#[test]
fn step_5_on_the_gpu_matches_the_reference() {
    let Some(dev) = gpu_or_skip() else { return };
    for cluster in [1, 2, 4, 8] {
        for early in [false, true] {
            let kernel = guide::step_5::ema_step(cluster, early);
            let p = Problem::new(300, 32 * cluster as usize, 5);
            let (state, y) = run(&dev, &kernel, &p).unwrap();
            let (want_state, want_y) = p.reference();
            assert!(
                max_error(&state, &want_state) < 1e-6,
                "cluster {cluster} early {early}"
            );
            assert!(
                max_error(&y, &want_y) < 1e-6,
                "cluster {cluster} early {early}"
            );
        }
    }
}

#[test]
fn a_pdl_chain_in_a_graph() {
    let Some(dev) = gpu_or_skip() else { return };
    let kernel = guide::step_5::ema_step(2, true);
    let module = dev.load(&kernel).unwrap();
    let first = Problem::new(128, 64, 1);
    let mut second = Problem::new(128, 64, 2);
    let one = upload(&dev, &first).unwrap();
    let two = upload(&dev, &second).unwrap();
    let graph = Graph::capture(&dev, |dev| {
        one.args().launch(dev, &module, first.launch(true))?;
        Args {
            x: one.y.arg(),
            ..two.args()
        }
        .launch(dev, &module, second.launch(true))
    })
    .unwrap();
    graph.replay().unwrap();
    let (_, y1) = first.reference();
    second.x = y1.iter().map(|&v| v as f32).collect();
    let (_, y2) = second.reference();
    let got = two.y.to_vec(&dev).unwrap();
    assert!(max_error(&got, &y2) < 1e-5);
}
