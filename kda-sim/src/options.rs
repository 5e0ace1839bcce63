//! [`SimOptions`]: how the simulator schedules warps and what it checks.
//! Its own module so that `sched` need not import the crate root.

/// How the simulator runs.
#[derive(Clone, Debug)]
pub struct SimOptions {
    /// `None`: deterministic round-robin scheduling (each warp runs until it
    /// blocks). `Some(seed)`: seeded random interleavings of the warps of a
    /// cluster, in slices of 1..=`max_slice` instructions.
    pub seed: Option<u64>,
    /// Longest slice a warp runs before another is picked, with a seed.
    pub max_slice: u32,
    /// With a seed, an adversarial schedule: in each cluster one CTA chosen
    /// at random (one warp, if the cluster has a single CTA) is held back,
    /// not scheduled at all, until every other warp of the cluster has
    /// exited or is blocked, then released. A CTA's early accesses then come
    /// after its peers' late ones unless something (a cluster barrier, an
    /// mbarrier) orders them, which exposes cross-CTA races that plain
    /// random interleavings rarely hit. It never causes a deadlock of its
    /// own: the held warps run as soon as no other warp can make progress.
    /// Ignored without a seed.
    pub hold_back: bool,
    /// Host threads running clusters in parallel (0: all available cores).
    pub threads: usize,
    /// Warp-instructions one cluster may execute before it is stopped as an
    /// endless loop.
    pub max_steps: u64,
    /// In `load`, run the compile pipeline's verifier and scheduling passes
    /// (`kda_ir::pipeline::schedule`) and simulate the scheduled kernel, as
    /// the GPU runs it. Off: simulate the kernel as given, unverified (to see
    /// how a kernel the verifier rejects fails).
    pub verify: bool,
    /// Options of the scheduling pipeline (passes to skip, dumps).
    pub pipeline: kda_ir::pipeline::Options,
    /// Report reads of `produced` tensors before `griddepcontrol.wait` in PDL launches.
    pub check_pdl: bool,
    /// What `max_resident_clusters` answers: the grid of persistent
    /// launches. Small, so that every cluster loops over several work items.
    pub resident_clusters: u32,
    /// The race detector (`race` module): every shared access is checked
    /// against the accesses it conflicts with for an ordering by
    /// synchronisation, asynchronous writes stay invisible until the wait
    /// that covers them, and CTAs that exit with transactions incoming or
    /// delivered data unwaited are reported. On by default; off runs about
    /// as fast as before the detector existed.
    pub race_check: bool,
}

impl Default for SimOptions {
    fn default() -> SimOptions {
        SimOptions {
            seed: None,
            max_slice: 16,
            hold_back: false,
            threads: 0,
            max_steps: 1 << 32,
            verify: true,
            pipeline: kda_ir::pipeline::Options::default(),
            check_pdl: true,
            resident_clusters: 2,
            race_check: true,
        }
    }
}
