//! CUDA graphs: capture a chain of launches once, replay it with one driver
//! call, time replays with events.

use std::sync::Arc;

use cudarc::driver::{CudaGraph, CudaStream, DriverError};

use crate::device::{Captured, CudaDevice};
use crate::error::{DriverResult, NO_KERNEL};
use kda_device::RuntimeError;

/// A captured, instantiated chain of launches of one [`CudaDevice`].
///
/// The graph keeps the buffers and modules of its launches alive, so replaying
/// it is always sound; it replays on the device's stream, in order with the
/// device's other work.
pub struct Graph {
    exec: CudaGraph,
    stream: Arc<CudaStream>,
    /// What the captured launches use; never read, dropped with the graph.
    _captured: Captured,
    launches: usize,
    /// "graph[k1, k2, ...]": names the graph in errors.
    label: String,
}

/// Ends a capture that `f` left open by failing or panicking, so the stream
/// stays usable.
struct Capturing<'a> {
    dev: &'a CudaDevice,
    open: bool,
}

impl Capturing<'_> {
    fn end(mut self) -> (Result<Option<CudaGraph>, DriverError>, Captured) {
        self.open = false;
        self.dev.end_capture()
    }
}

impl Drop for Capturing<'_> {
    fn drop(&mut self) {
        if self.open {
            drop(self.dev.end_capture());
        }
    }
}

impl Graph {
    /// Capture the launches `f` issues on `dev` into a graph (they do not run
    /// now). Inside `f`, only launches are allowed: uploads, downloads and
    /// synchronisation fail, as does dropping a buffer (its free would be
    /// captured too).
    pub fn capture(
        dev: &CudaDevice,
        f: impl FnOnce(&CudaDevice) -> Result<(), RuntimeError>,
    ) -> Result<Graph, RuntimeError> {
        dev.begin_capture()?;
        let capturing = Capturing { dev, open: true };
        let body = f(dev);
        let (graph, captured) = capturing.end();
        body?;
        let label = format!(
            "graph[{}]",
            captured
                .kernels
                .iter()
                .map(|k| k.name())
                .collect::<Vec<_>>()
                .join(", ")
        );
        let exec =
            graph
                .driver("cuStreamEndCapture", &label)?
                .ok_or_else(|| RuntimeError::Driver {
                    call: "cuStreamEndCapture",
                    kernel: label.clone(),
                    msg: "the capture produced no graph".into(),
                })?;
        // Move the graph to the device now rather than in the first replay.
        exec.upload().driver("cuGraphUpload", &label)?;
        Ok(Graph {
            exec,
            stream: dev.stream().clone(),
            launches: captured.kernels.len(),
            _captured: captured,
            label,
        })
    }

    /// Enqueue one replay on the device's stream (asynchronous).
    pub fn replay(&self) -> Result<(), RuntimeError> {
        self.exec.launch().driver("cuGraphLaunch", &self.label)
    }

    /// Launches captured in the graph.
    pub fn launches(&self) -> usize {
        self.launches
    }

    /// Replay `n` times back to back and return the GPU time of each replay in
    /// milliseconds (event to event, so a replay also counts any gap before
    /// it). Waits for the replays to finish. Warm up with [`Graph::replay`]
    /// first; divide by [`Graph::launches`] for a per-kernel figure.
    pub fn time_replays(&self, dev: &CudaDevice, n: usize) -> Result<Vec<f32>, RuntimeError> {
        if !Arc::ptr_eq(dev.stream(), &self.stream) {
            return Err(RuntimeError::Driver {
                call: "cuEventRecord",
                kernel: self.label.clone(),
                msg: "the graph was captured on another device".into(),
            });
        }
        let events = (0..=n)
            .map(|_| dev.timing_event())
            .collect::<Result<Vec<_>, _>>()?;
        events[0]
            .record(&self.stream)
            .driver("cuEventRecord", NO_KERNEL)?;
        for e in &events[1..] {
            self.replay()?;
            e.record(&self.stream).driver("cuEventRecord", NO_KERNEL)?;
        }
        events
            .windows(2)
            .map(|w| {
                w[0].elapsed_ms(&w[1])
                    .driver("cuEventElapsedTime", &self.label)
            })
            .collect()
    }
}

/// The median of `samples` (the mean of the middle two for an even count;
/// NaN for none).
pub fn median(samples: &[f32]) -> f32 {
    let mut s = samples.to_vec();
    s.sort_by(f32::total_cmp);
    match s.len() {
        0 => f32::NAN,
        n if n % 2 == 1 => s[n / 2],
        n => (s[n / 2 - 1] + s[n / 2]) / 2.0,
    }
}

#[cfg(test)]
mod tests {
    use super::median;

    #[test]
    fn median_of_odd_even_and_empty() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&[4.0, 1.0, 3.0, 2.0]), 2.5);
        assert!(median(&[]).is_nan());
    }
}
