//! The compile pipeline, as data: verify the kernel, run each pass of
//! [`PASSES`] in order (verifying after each in debug builds and tests), then
//! lower to PTX. `KDA_DUMP=<dir>` (or [`Options::dump`]) writes every stage:
//! `<kernel>.0-input.ir`, `<kernel>.<n>-<pass>.ir` after pass n, and
//! `<kernel>.ptx`; a stage that fails to verify writes the whole kernel with
//! each error inline to `<kernel>.verify-<stage>.ir` (the error itself shows
//! only each failing instruction in its context). `KDA_SKIP_PASSES=<pass>,...` (or [`Options::skip`]) leaves
//! passes out, to bisect a scheduling problem.
//!
//! The program is written once: a `pdl.wait` right before each role's first
//! read of a *produced* tensor, `cluster.arrive` + `cluster.wait` right after
//! each role's mbarrier setup, a releasing `cluster.arrive` right after the
//! loads it orders. The kernel's [`ScheduleHints`] pick the
//! schedule the passes derive from it (the seed's `early` and its trigger):
//!
//! 0. `place_pdl_trigger` (`trigger_at_entry`): every `pdl.launch_dependents`
//!    of the program (stated after its last produced read) replaced by one at
//!    the kernel's entry.
//! 1. `place_pdl_wait` (not early): one `pdl.wait` at the kernel's entry,
//!    every other one deleted — the whole kernel waits for the preceding
//!    launch first thing.
//! 2. `sink_pdl_wait` (early): each `pdl.wait` moves down its region to the
//!    first read of a produced tensor or global store, so the ready work the
//!    program puts after it (loads under `if`s and loops, bulk copies,
//!    mbarrier setup) is issued before it.
//! 3. `hoist_ready_loads` (early): ready `ld.global`s that still follow the
//!    wait (after the first produced read) move above it.
//! 4. `sink_cluster_wait` (early): each `cluster.wait` moves down its region
//!    to the first DSMEM send (or cluster op, global store, `mbarrier.wait`,
//!    or the region's end), so each
//!    role syncs the cluster only right before it needs the peers' barriers.
//!
//! 5. `sink_cluster_release` (`late_release`): each releasing
//!    `cluster.arrive` (the program states it right after the loads whose
//!    ordering it announces) moves down its region past loads and the work
//!    that consumes them, to the first write or signal (a store, an
//!    mbarrier arrival, a DSMEM send, a cluster op) or wait (`bar.sync`, an
//!    mbarrier wait, a `while`), or the region's end, so the membar ptxas
//!    emits for the release finds no load in flight.
//!
//! 6. `mark_evict_first` (`evict_first`): every global access and bulk copy
//!    of a tensor the hint names gets the L2 evict-first policy; the program
//!    writes its accesses without one.
//!
//! 7. `stage_through_shared` (`stage_through_shared`): the 16-byte
//!    `ld.global`s of a named tensor that a role issues before its PDL wait
//!    become `cp.async`s into per-thread shared slots, read back with
//!    `ld.shared` before the first use after the wait (the seed's F_B rows
//!    at `early = 3`). Tiles of such a tensor are staged by the trace.
//!
//! Without `early` only the PDL passes, `sink_cluster_release` and
//! `mark_evict_first` change anything: cluster waits stay right after the
//! setup, as the program writes them.
//!
//! [`ScheduleHints`]: crate::kernel::ScheduleHints

use std::path::{Path, PathBuf};

use crate::kernel::Kernel;
use crate::passes;
use crate::ptx::{self, Layout, PtxError};
use crate::verifier::{self, VerifierErrors};
use crate::write::write_kernel;

/// One scheduling pass.
pub struct Pass {
    /// The pass's module name: in dump file names and [`Options::skip`].
    pub name: &'static str,
    /// Rewrite the kernel in place; a verified kernel stays verified.
    pub run: fn(&mut Kernel),
}

/// The scheduling passes, in the order they run.
pub const PASSES: &[Pass] = &[
    Pass {
        name: "place_pdl_trigger",
        run: passes::place_pdl_trigger::run,
    },
    Pass {
        name: "place_pdl_wait",
        run: passes::place_pdl_wait::run,
    },
    Pass {
        name: "sink_pdl_wait",
        run: passes::sink_pdl_wait::run,
    },
    Pass {
        name: "hoist_ready_loads",
        run: passes::hoist_ready_loads::run,
    },
    Pass {
        name: "sink_cluster_wait",
        run: passes::sink_cluster_wait::run,
    },
    Pass {
        name: "sink_cluster_release",
        run: passes::sink_cluster_release::run,
    },
    Pass {
        name: "mark_evict_first",
        run: passes::mark_evict_first::run,
    },
    Pass {
        name: "stage_through_shared",
        run: passes::stage_through_shared::run,
    },
];

/// How [`compile`] and [`schedule`] run; [`Options::default`] reads
/// `KDA_DUMP` and `KDA_SKIP_PASSES`.
#[derive(Clone, Debug)]
pub struct Options {
    /// Verify after every pass (default: in debug builds). The input and the
    /// final kernel are always verified.
    pub verify_each_pass: bool,
    /// Write each stage's IR and the PTX here (default: `$KDA_DUMP`).
    pub dump: Option<PathBuf>,
    /// Passes to leave out, by name (e.g. `sink_cluster_wait`; default:
    /// `$KDA_SKIP_PASSES`, comma-separated), for bisecting a scheduling
    /// problem. The schedule itself is chosen by the kernel's
    /// [`ScheduleHints`], not here.
    ///
    /// [`ScheduleHints`]: crate::kernel::ScheduleHints
    pub skip: Vec<String>,
    /// Emit CTA timeline probes (`ptx::EmitOptions::probes`; default:
    /// `$KDA_PROBES` set to `1`). Measurement only.
    pub probes: bool,
}

impl Default for Options {
    fn default() -> Options {
        Options {
            verify_each_pass: cfg!(debug_assertions),
            dump: std::env::var_os("KDA_DUMP")
                .filter(|d| !d.is_empty())
                .map(PathBuf::from),
            skip: std::env::var("KDA_SKIP_PASSES")
                .map(|v| {
                    v.split(',')
                        .map(str::trim)
                        .filter(|p| !p.is_empty())
                        .map(String::from)
                        .collect()
                })
                .unwrap_or_default(),
            probes: std::env::var("KDA_PROBES").is_ok_and(|v| v == "1"),
        }
    }
}

/// Why a kernel did not compile.
#[derive(Debug, thiserror::Error)]
pub enum CompileError {
    /// The input, or the kernel after a pass, breaks an IR invariant.
    #[error("kernel `{kernel}` does not verify ({stage}):\n{errors}{}", dumped_to(.dumped))]
    Verify {
        /// The kernel's name.
        kernel: String,
        /// `input`, or `after <pass>`: a failure after a pass is a pass bug.
        stage: String,
        /// The broken invariants (boxed: the whole listing and the excerpt
        /// travel with them).
        errors: Box<VerifierErrors>,
        /// Where the whole annotated listing was written (`KDA_DUMP`).
        dumped: Option<PathBuf>,
    },
    /// The verified, scheduled kernel has something the backend cannot lower.
    #[error(transparent)]
    Ptx(#[from] PtxError),
    /// [`Options::skip`] names no pass of [`PASSES`].
    #[error(
        "unknown pass `{name}` to skip (Options::skip or KDA_SKIP_PASSES); the passes are {known}"
    )]
    UnknownPass {
        /// The name given.
        name: String,
        /// The pass names, comma-separated.
        known: String,
    },
    /// Writing a stage to [`Options::dump`] failed.
    #[error("KDA_DUMP: writing {path}: {source}")]
    Dump {
        /// The file being written.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
}

/// The scheduled kernel, its PTX and its shared-memory layout.
#[derive(Clone, Debug)]
pub struct Compiled {
    /// The kernel after the passes, which the PTX implements (what
    /// [`schedule`] alone returns).
    pub scheduled: Kernel,
    /// The PTX module (one `.visible .entry` named after the kernel).
    pub ptx: String,
    /// Where each buffer and mbarrier sits in dynamic shared memory, and how
    /// much to request at launch.
    pub layout: Layout,
    /// The probe sites, when [`Options::probes`] was on.
    pub probes: Option<Vec<ptx::ProbeSite>>,
}

fn dump(opts: &Options, file: String, text: &str) -> Result<(), CompileError> {
    let Some(dir) = &opts.dump else { return Ok(()) };
    let path = Path::new(dir).join(file);
    std::fs::create_dir_all(dir)
        .and_then(|()| std::fs::write(&path, text))
        .map_err(|source| CompileError::Dump { path, source })
}

fn dumped_to(p: &Option<PathBuf>) -> String {
    p.as_ref()
        .map(|p| format!("the annotated kernel: {}\n", p.display()))
        .unwrap_or_default()
}

/// Verify; on failure write the whole annotated listing to the dump folder
/// (`<kernel>.verify-<stage>.ir`), since the error shows only an excerpt.
fn check(k: &Kernel, stage: &str, opts: &Options) -> Result<(), CompileError> {
    let Err(errors) = verifier::verify(k) else {
        return Ok(());
    };
    let slug: String = stage
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .collect();
    let file = format!("{}.verify-{slug}.ir", k.name);
    dump(opts, file.clone(), &errors.listing)?;
    Err(CompileError::Verify {
        kernel: k.name.clone(),
        stage: stage.to_string(),
        errors: Box::new(errors),
        dumped: opts.dump.as_ref().map(|d| d.join(file)),
    })
}

/// Verify `k` and run the scheduling passes on a copy of it.
pub fn schedule(k: &Kernel, opts: &Options) -> Result<Kernel, CompileError> {
    if let Some(name) = opts
        .skip
        .iter()
        .find(|s| !PASSES.iter().any(|p| p.name == s.as_str()))
    {
        let known: Vec<&str> = PASSES.iter().map(|p| p.name).collect();
        return Err(CompileError::UnknownPass {
            name: name.clone(),
            known: known.join(", "),
        });
    }
    check(k, "input", opts)?;
    dump(opts, format!("{}.0-input.ir", k.name), &write_kernel(k))?;
    let mut k = k.clone();
    let mut last = "input";
    for (n, pass) in PASSES.iter().enumerate() {
        if opts.skip.iter().any(|s| s == pass.name) {
            continue;
        }
        (pass.run)(&mut k);
        last = pass.name;
        if opts.verify_each_pass {
            check(&k, &format!("after {}", pass.name), opts)?;
        }
        dump(
            opts,
            format!("{}.{}-{}.ir", k.name, n + 1, pass.name),
            &write_kernel(&k),
        )?;
    }
    if !opts.verify_each_pass && last != "input" {
        check(&k, &format!("after {last}"), opts)?;
    }
    Ok(k)
}

/// Schedule `k` and lower it to PTX.
///
/// ```
/// use kda_ir::pipeline::{Options, compile};
///
/// let k = kda_ir::parse::parse_kernel(
///     r#"kernel square block=64 cluster=1 {
///   tensor t0 "x": f32[64] strides[1] ready read align 4
///   tensor t1 "y": f32[64] strides[1] ready write align 4
///   v0:u32 = special tid
///   v1:f32 = ld.global t0[v0]
///   v2:f32 = mul v1, v1
///   st.global t1[v0], v2
/// }"#,
/// )?;
/// let out = compile(&k, &Options::default())?;
/// assert!(out.ptx.contains(".visible .entry square("));
/// assert_eq!(out.layout.bytes, 0); // no shared memory
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn compile(k: &Kernel, opts: &Options) -> Result<Compiled, CompileError> {
    let scheduled = schedule(k, opts)?;
    let ptx::Emitted { ptx, probes } = ptx::emit_with(
        &scheduled,
        &ptx::EmitOptions {
            probes: opts.probes,
        },
    )?;
    dump(opts, format!("{}.ptx", scheduled.name), &ptx)?;
    let layout = Layout::try_of(&scheduled).map_err(|e| PtxError {
        loc: crate::loc::Loc::synthetic(),
        msg: e.to_string(),
    })?;
    Ok(Compiled {
        scheduled,
        ptx,
        layout,
        probes,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::builder::Builder;
    use crate::entities::{Region, Tensor};
    use crate::kernel::{Access, Dim, LaunchDecl, Provenance};
    use crate::op::{BinOp, CachePolicy, CmpOp, Op};
    use crate::parse::parse_kernel;
    use crate::types::{Scalar, Type};

    /// The flagship's shape, written once: a 128-thread `state` role and a
    /// `gate` warp in a cluster of 2. Each role sets up (state: the mbarrier),
    /// arrives on and waits at the cluster barrier, waits for the preceding
    /// launch right before its first produced read, loads, and sends to the
    /// peer over DSMEM.
    fn flagship(early: bool) -> Kernel {
        let mut b = Builder::new(
            "flagship",
            LaunchDecl {
                block: 160,
                cluster: 2,
                min_blocks_per_sm: None,
                cluster_policy: Default::default(),
            },
        );
        b.set_early(early);
        let vector = |b: &mut Builder, name: &str, prov, access| -> Tensor {
            b.tensor(
                name,
                Scalar::F32,
                &[Dim::Const(256)],
                &[Dim::Const(1)],
                prov,
                access,
            )
        };
        let state_t = vector(&mut b, "state", Provenance::Ready, Access::ReadWrite);
        let weights = vector(&mut b, "weights", Provenance::Ready, Access::Read);
        let norm = vector(&mut b, "norm_weight", Provenance::Ready, Access::Read);
        let x = vector(&mut b, "x", Provenance::Produced, Access::Read);
        let gate_in = vector(&mut b, "gate", Provenance::Produced, Access::Read);
        let out = vector(&mut b, "out", Provenance::Ready, Access::Write);
        let state = b.role("state", 0, 128);
        let gate = b.role("gate", 128, 32);
        let full = b.mbarrier("full", 1, 640, &[state, gate]);
        let inbox = b.shared("inbox", Scalar::F32, 160, 16, &[state, gate], Some(full));
        let tid = b.thread_idx();
        let rank = b.cluster_rank();
        let one = b.u32(1);
        let peer = b.bin(BinOp::Xor, rank, one);
        b.in_role(state, |b| {
            let zero = b.u32(0);
            let first = b.cmp(CmpOp::Eq, tid, zero);
            b.if_(first, |b| {
                b.mbarrier_init(full);
                b.mbarrier_arrive_expect_tx(full, 640);
            });
            b.fence_mbarrier_init();
            b.cluster_arrive(true);
            b.cluster_wait();
            b.pdl_wait();
            let half = b.u32(64);
            let low = b.cmp(CmpOp::Lt, tid, half);
            b.if_(low, |b| {
                let _ = b.ld_global(state_t, &[tid], Type::F32, CachePolicy::Normal);
            });
            let w = b.ld_global(weights, &[tid], Type::F32, CachePolicy::Normal);
            let v = b.ld_global(x, &[tid], Type::F32, CachePolicy::Normal);
            let nw = b.ld_global(norm, &[tid], Type::F32, CachePolicy::Normal);
            let y = b.fma(v, w, nw, false);
            b.st_async(inbox, tid, y, peer, full);
            b.wait(full);
            let r = b.ld_shared(inbox, tid, Type::F32);
            b.st_global(out, &[tid], r, None, CachePolicy::Normal);
        });
        b.in_role(gate, |b| {
            b.cluster_arrive(true);
            b.cluster_wait();
            b.pdl_wait();
            let w = b.ld_global(weights, &[tid], Type::F32, CachePolicy::Normal);
            let g = b.ld_global(gate_in, &[tid], Type::F32, CachePolicy::Normal);
            let d = b.mul(w, g);
            b.st_async(inbox, tid, d, peer, full);
        });
        b.finish()
    }

    fn role_bodies(k: &Kernel) -> Vec<Region> {
        k.regions[k.body]
            .insts
            .iter()
            .filter_map(|&i| match k.insts[i].op {
                Op::InRole { body, .. } => Some(body),
                _ => None,
            })
            .collect()
    }

    fn names(k: &Kernel, r: Region) -> Vec<String> {
        k.regions[r]
            .insts
            .iter()
            .map(|&i| crate::write::mnemonic(&k.insts[i].op))
            .collect()
    }

    fn opts() -> Options {
        Options {
            verify_each_pass: true,
            dump: None,
            skip: Vec::new(),
            probes: false,
        }
    }

    #[test]
    fn the_passes_run_in_order() {
        let order: Vec<&str> = PASSES.iter().map(|p| p.name).collect();
        assert_eq!(
            order,
            [
                "place_pdl_trigger",
                "place_pdl_wait",
                "sink_pdl_wait",
                "hoist_ready_loads",
                "sink_cluster_wait",
                "sink_cluster_release",
                "mark_evict_first",
                "stage_through_shared"
            ]
        );
    }

    #[test]
    fn not_early_waits_for_the_preceding_launch_at_the_entry() {
        let k = flagship(false);
        let s = schedule(&k, &opts()).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(s.insts[s.regions[s.body].insts[0]].op, Op::GridDepWait);
        let roles = role_bodies(&s);
        assert_eq!(
            names(&s, roles[0]),
            [
                "iconst",
                "cmp.eq",
                "if",
                "fence.mbarrier_init",
                "cluster.arrive.relaxed",
                "cluster.wait",
                "iconst",
                "cmp.lt",
                "if",
                "ld.global",
                "ld.global",
                "ld.global",
                "fma",
                "st.async",
                "mbarrier.wait",
                "ld.shared",
                "st.global",
                "yield"
            ],
            "{s}"
        );
        assert_eq!(
            names(&s, roles[1]),
            [
                "cluster.arrive.relaxed",
                "cluster.wait",
                "ld.global",
                "ld.global",
                "mul",
                "st.async",
                "yield"
            ],
            "{s}"
        );
        compile(&k, &opts()).unwrap_or_else(|e| panic!("{e}"));
    }

    #[test]
    fn early_issues_ready_loads_first_and_syncs_the_cluster_at_the_first_send() {
        let k = flagship(true);
        let s = schedule(&k, &opts()).unwrap_or_else(|e| panic!("{e}"));
        let roles = role_bodies(&s);
        assert_eq!(
            names(&s, roles[0]),
            [
                "iconst",
                "cmp.eq",
                "if",
                "fence.mbarrier_init",
                "cluster.arrive.relaxed",
                "iconst",
                "cmp.lt",
                "if",
                "ld.global",
                // norm_weight, hoisted over the produced read
                "ld.global",
                "pdl.wait",
                "ld.global",
                "fma",
                "cluster.wait",
                "st.async",
                "mbarrier.wait",
                "ld.shared",
                "st.global",
                "yield"
            ],
            "{s}"
        );
        assert_eq!(
            names(&s, roles[1]),
            [
                "cluster.arrive.relaxed",
                "ld.global",
                "pdl.wait",
                "ld.global",
                "mul",
                "cluster.wait",
                "st.async",
                "yield"
            ],
            "{s}"
        );
        // The produced loads are the ones after the waits.
        for r in roles {
            let insts = &s.regions[r].insts;
            let wait = insts
                .iter()
                .position(|&i| s.insts[i].op == Op::GridDepWait)
                .unwrap();
            for (n, &i) in insts.iter().enumerate() {
                if let Op::LdGlobal { tensor, .. } = s.insts[i].op {
                    let produced = s.tensors[tensor].provenance == Provenance::Produced;
                    assert_eq!(produced, n > wait, "{s}");
                }
            }
        }
        // The schedule survives the text form.
        let text = s.to_string();
        assert!(text.starts_with("kernel flagship block=160 cluster=2 early {"));
        let back = parse_kernel(&text).unwrap_or_else(|e| panic!("{e}"));
        assert!(back.schedule.early);
        compile(&k, &opts()).unwrap_or_else(|e| panic!("{e}"));
    }
}
