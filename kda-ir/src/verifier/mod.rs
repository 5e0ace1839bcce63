//! The IR verifier. [`verify`] checks every invariant listed here on a whole
//! kernel, collects every broken one (each with its instruction and DSL source
//! location) and reprints the kernel with each error inline: `;! error: ...`
//! under the instruction, declaration errors above the `kernel` line
//! ([`VerifierErrors::listing`]). Its `Display` shows only each failing
//! instruction with the headers of its enclosing regions and a few
//! neighbours ([`VerifierErrors::excerpt`]).
//!
//! The structure checks run first: every other family walks the region tree
//! and indexes declarations, which is only safe on a well-formed tree, so a
//! broken structure stops there. All other families run independently and
//! report together.
//!
//! # Structure (`structure.rs`)
//!
//! * every entity a declaration or instruction names exists: syms in tensor
//!   shapes and strides, the roles and guard barrier of a buffer, the roles of
//!   a barrier, and the tensor, scalar, role, buffer, barrier, region, value
//!   and instruction references of every instruction;
//! * the layout is a tree: the top-level region has no parameters and belongs
//!   to no instruction; every other region reached from it belongs to exactly
//!   one instruction; every instruction appears in exactly one region;
//! * every nested region ends with a `yield`; `yield` appears nowhere else
//!   (in particular not in the top-level region);
//! * every value is defined exactly once, as one instruction result or one
//!   region parameter, and its recorded definition (`ValueDef`) agrees.
//!
//! # SSA scoping (`ssa.rs`)
//!
//! * every operand is defined before its use, earlier in the same region or
//!   in an enclosing region (structured dominance); a region op's results are
//!   not visible inside its own regions; region parameters are visible only
//!   inside their region.
//!
//! # Operand and result types (`signature.rs`), per the op table's signatures (`op/table.rs`)
//!
//! * every value's type is a scalar or a vector of 2, 4 or 8 lanes, bool only
//!   as a scalar;
//! * every op has its number of operands and results;
//! * `iconst`: an integer or bool scalar whose value fits the type;
//!   `fconst`: f32 or bf16; `special`: u32, `ctaid`/`nctaid` dimension 0..3;
//!   `param`: the scalar's declared type;
//! * arithmetic: `add sub mul div min max` on ints or floats, `rem shl shr`
//!   on ints, `and or xor` on ints or bool, both operands and the result of
//!   one type; `fma`: three f32 operands, f32 result; `neg abs`: signed ints
//!   or floats; `not`: ints or bool; `exp exp2 rsqrt sqrt sigmoid rcp`: f32;
//!   `cmp`: two scalars of one type (bool only with `eq`/`ne`), bool result;
//!   `select`: bool condition, two operands and the result of one type;
//!   `cvt`: numeric to numeric (no bool) with equal lane counts; `bitcast`:
//!   no bool, equal byte sizes; `pack`: 2, 4 or 8 scalars of one non-bool
//!   type into that vector; `extract`: a lane index below the vector's lanes,
//!   result the element type;
//! * `ld.global`/`st.global`/`cp.async`/`cp.async.bulk`: one integer index per
//!   tensor dimension; the accessed type's element is the tensor's dtype, a
//!   scalar or a vector of 4, 8 or 16 bytes; a vector access needs the tensor
//!   aligned to its size and a unit innermost stride; loads need a readable
//!   tensor (`read`/`readwrite`), stores a writable one; a store predicate is
//!   a bool scalar;
//! * `ld.shared`/`st.shared`/`st.async`: an integer index and the buffer's
//!   element type, a scalar or a vector of 4, 8 or 16 bytes whose size the
//!   buffer's alignment covers; `st.async` stores 4, 8 or 16 bytes and takes
//!   an integer destination cta; `cp.async` copies 16 bytes, `cp.async.bulk`
//!   a positive multiple of 16 bytes, into a 16-byte aligned buffer from a
//!   16-byte aligned tensor, and no more than the buffer holds;
//!   `cp.async.bulk.store` likewise from the buffer into a writable tensor;
//! * `shfl`: a 32-bit value and an integer lane or mask, result the value's
//!   type; `elect`: bool; `mma.m16n8k16`: a u32x4, b u32x2, c f32x4 -> f32x4;
//! * `mbarrier.arrive.remote`: an integer scalar destination cta (and, on
//!   a ring, a u32 index); `mbarrier.arrive.expect_tx`: 1 to 2^20 - 1 bytes; `bar.sync`: id below
//!   16 and a positive multiple of 32 threads, at most the block;
//! * `if`: a bool scalar condition, both regions without parameters yield the
//!   result types; `for`: lo, hi and step of one integer scalar type, the body
//!   takes `(iv, carried..)` and yields the carried types, which are the
//!   results; `while`: the cond region takes the carried types and yields
//!   `bool, carried..`, the body takes and yields the carried types, which
//!   are the results; `role`: a body without parameters that yields nothing;
//!   `yield`: no results.
//!
//! # Declarations (`decls.rs`)
//!
//! * launch: the block is a positive multiple of 32 up to 1024 threads, the
//!   cluster 1 to 16 CTAs, `min_blocks` positive, a cluster policy other
//!   than the default only with clusters of more than one CTA;
//! * tensors: as many strides as dimensions, a non-bool dtype, a power-of-two
//!   alignment of at least the dtype's size; scalars: not bool;
//! * buffers: a non-bool element, a positive length, a power-of-two
//!   alignment of at least the element's size; barriers: 1 to 2^20 - 1
//!   arrivals and at most 2^20 - 1 transaction bytes per phase;
//! * shared memory: all buffers plus 8 bytes per mbarrier, each at its
//!   alignment (largest alignment first), fit in 227 KiB per CTA.
//!
//! # Roles (`roles.rs`)
//!
//! * every role is warp-aligned and non-empty (`first` and `threads`
//!   multiples of 32, `threads > 0`) and ends within the block;
//! * no two roles overlap;
//! * a `role` region is not nested in the region of a different role;
//! * an op that touches a buffer (`ld.shared`, `st.shared`, `st.async`,
//!   `cp.async`, `cp.async.bulk`, `cp.async.bulk.store`) or a barrier
//!   (`mbarrier.*`, `st.async`, `cp.async.bulk`) declared with a non-empty
//!   `roles` list runs inside a `role` region of one of those roles (the
//!   innermost one).
//!
//! # Register budgets (`regs.rs`)
//!
//! * the kernel's `maxnreg` (its starting per-thread register count), when
//!   declared, is a multiple of 8 in 24..=248, and `block × maxnreg` (×
//!   `min_blocks`) fits the 65536-register file;
//! * a role's `regs` budget is a multiple of 8 in 24..=256; the role covers
//!   whole warpgroups (starts at a multiple of 128 threads and covers a
//!   multiple of 128, so every thread of its warpgroups is in it); the kernel
//!   declares `maxnreg`;
//! * the budgets times their roles' threads, plus `maxnreg` for every other
//!   thread, add up to at most `block × maxnreg` (what the CTA starts with:
//!   `setmaxnreg.inc` only takes what `.dec` released);
//! * `setmaxnreg.inc/.dec N` runs in a role that declares regs N, nested
//!   only in role regions (not in an `if`, `for` or `while`: every warp of
//!   the warpgroup executes it once, converged), before any region op of its
//!   region, at most once per role; `.inc` raises and `.dec` lowers the count
//!   from `maxnreg`; every role whose budget differs from `maxnreg` executes
//!   one.
//!
//! # Warp-uniform collectives (`uniform.rs`)
//!
//! * `shfl`, `elect` and `mma.m16n8k16` are not inside an `if` whose
//!   condition, a `for` whose bounds or a `while` whose condition depends on
//!   a lane-varying value. Lane-varying: `tid`, `laneid`, `elect`, `mma`
//!   fragments, `shfl.bfly`, `shfl.idx` from a varying lane, loads at varying
//!   indices, and everything computed from them (through region parameters
//!   and results too). Uniform: constants, parameters, block, grid and
//!   cluster indices, and the warp index `tid / 32k`, `tid >> (5+)`,
//!   `tid & ~31`. Role regions are warp-aligned, so entering one keeps the
//!   warp converged.
//!
//! # Mbarriers (`mbarrier.rs`)
//!
//! * a barrier that is waited on is initialised by some `mbarrier.init`,
//!   arrived on by some `mbarrier.arrive[.expect_tx]`, and, when it declares
//!   transaction bytes, armed by some `mbarrier.arrive.expect_tx` and
//!   targeted by some `st.async` or `cp.async.bulk`;
//! * an `mbarrier.arrive.expect_tx` expects at most the declared bytes per
//!   phase, and exactly them when the barrier completes on one arrival;
//! * transaction bytes: the bytes provably sent into a barrier per phase
//!   equal the declared `tx`. The sends are grouped by their innermost
//!   enclosing loop (or the kernel body); a group's phases are the distinct
//!   phases its `mbarrier.wait`s name (at least one). An `st.async` of N
//!   bytes sends N × the threads of its role (the block outside roles); under
//!   thread-divergent control flow it sends an unknown amount. A
//!   `cp.async.bulk` sends its bytes once (one thread issues it). A uniform
//!   `if` sends what its branches send when they agree (else unknown); a
//!   divergent one the sum of both. Exchanges are assumed symmetric (every
//!   CTA sends what every CTA receives), so one CTA's sends are one barrier's
//!   receipts. Groups with an unknown total are not checked;
//! * waits follow a barrier's phases in non-decreasing order: no
//!   `mbarrier.wait` names a phase below one the same threads (its role, or
//!   the whole block outside roles) may already have waited for on that
//!   barrier (a parity wait cannot go back; waiting for the same phase again
//!   is harmless, so exclusive branches may each wait for it).
//!
//! # Arrivals (`arrivals.rs`)
//!
//! * a barrier declared with `arrivals = k` that is waited on gets exactly
//!   `k` arrivals per phase: the arrivals are grouped like the sends of the
//!   byte check (by innermost loop, a ring by its first element, a group's
//!   phases the distinct `mbarrier.wait` phases in it, at least one); each
//!   `mbarrier.arrive[.expect_tx]` counts once per thread that runs it: its
//!   role's threads (the block outside roles), narrowed under an `if` whose
//!   condition is a function of `tid`/`laneid` and constants (evaluated
//!   thread by thread) and to one lane per warp under `elect`. Groups whose
//!   count is unknown (other lane-varying conditions, uniform branches that
//!   disagree) and the kernel body's group when it holds parity waits on
//!   the barrier are not checked.
//!
//! # Ordering (`order.rs`): what must have happened on the same threads
//!
//! * reading a `produced` tensor (`ld.global`, `cp.async`, `cp.async.bulk`)
//!   is dominated by a `pdl.wait`;
//! * `ld.shared` (or a `cp.async.bulk.store` reading) a buffer with a guard
//!   barrier is dominated by an `mbarrier.wait` on that barrier;
//! * no `st.shared` into a bulk store's source reaches the
//!   `cp.async.bulk.store` (in program order, or around a loop enclosing
//!   both, on the same threads) without a `fence.proxy.async` between them;
//! * `st.async` targets a barrier that some `mbarrier.init` initialises, and
//!   is dominated by a `cluster.wait` that comes after (in layout order) the
//!   first `mbarrier.init` of that barrier: the peer's barrier may not exist
//!   before.
//!
//! "Dominated" follows the structured regions: a fact holds for the rest of
//! the region it is established in and for the regions nested there; after an
//! `if` when both branches establish it; after a `while` when its condition
//! region does (it runs at least once); never after a `for` (it may run zero
//! times); facts established in a `role` region hold again in later regions
//! of the same role, never outside it.
//!
//! # Bounds (`bounds.rs`)
//!
//! * the ring index of a ring op (`barN[%s of K]`) whose range is provable
//!   (as below) lies in `0..K`;
//! * an `ld.shared`, `st.shared`, `st.async`, `cp.async`, `cp.async.bulk`
//!   or `cp.async.bulk.store` whose element index has a range provable from
//!   constants, `tid` (its role's threads), `laneid`, the cluster rank,
//!   constant `for` loops and `+ - * << >> / % & min max cvt` of those
//!   (narrowed by enclosing `if` comparisons with constants) stays inside
//!   its buffer, counting the value's lanes or the copy's bytes; `st.async`
//!   sends to a rank below the cluster size; a `cp.async.bulk` from (a
//!   `cp.async.bulk.store` into) a tensor with constant extents and strides
//!   reads (writes) no element past the tensor's last. Reported when both
//!   ends of the range are reached by some thread or iteration, or when no
//!   part of it lies inside; over-approximated ranges are left to
//!   the simulator.

mod arrivals;
mod bounds;
mod decls;
mod mbarrier;
mod order;
mod regs;
mod report;
mod roles;
mod signature;
mod ssa;
mod structure;
mod uniform;
mod wgmma;

use std::fmt;

use crate::entities::{Barrier, Buffer, Inst, Role, Tensor, Value};
use crate::kernel::Kernel;
use crate::loc::Loc;
use crate::write;

pub(crate) use structure::Layout;

/// One broken invariant, at an instruction (or at a declaration: `inst: None`).
#[derive(Clone, Debug)]
pub struct VerifierError {
    /// The instruction that breaks it; `None` for a declaration.
    pub inst: Option<Inst>,
    /// The DSL location of the instruction or declaration.
    pub loc: Loc,
    /// What is wrong, without the location.
    pub msg: String,
}

/// Every error found, with the kernel printed and each error inline.
#[derive(Clone, Debug)]
pub struct VerifierErrors {
    /// Every error, in layout order: declarations first, then instructions as
    /// printed.
    pub errors: Vec<VerifierError>,
    /// The kernel in the text form with each error as a `;! error: ...` line under
    /// its instruction (declaration errors on top); only the errors, when the
    /// region tree is too broken to print. The filetests hold it; the pipeline
    /// writes it to `KDA_DUMP`.
    pub listing: String,
    /// Each error under its instruction, with the headers of the enclosing
    /// regions and a few neighbours: what `Display` shows.
    pub excerpt: String,
}

impl fmt::Display for VerifierErrors {
    /// The errors with their locations, then each in its context; the whole
    /// listing only where asked for (it buried the one useful line).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for e in &self.errors {
            writeln!(f, "error: {} (at {})", e.msg, e.loc)?;
        }
        f.write_str(&self.excerpt)?;
        f.write_str(
            "(the whole kernel with each error inline: set KDA_DUMP=<dir>, or print VerifierErrors::listing)\n",
        )
    }
}

impl std::error::Error for VerifierErrors {}

/// Check every invariant; collect all errors.
pub fn verify(k: &Kernel) -> Result<(), VerifierErrors> {
    let mut cx = Ctx {
        k,
        errors: Vec::new(),
    };
    let (layout, printable) = structure::check(&mut cx);
    if let Some(layout) = &layout {
        ssa::check(&mut cx, layout);
        signature::check(&mut cx, layout);
        decls::check(&mut cx);
        roles::check(&mut cx, layout);
        regs::check(&mut cx, layout);
        wgmma::check(&mut cx, layout);
        let uni = uniform::Uniformity::compute(k, layout);
        uniform::check(&mut cx, layout, &uni);
        mbarrier::check(&mut cx, layout, &uni);
        arrivals::check(&mut cx, layout, &uni);
        order::check(&mut cx, layout);
        bounds::check(&mut cx, layout);
    }
    if cx.errors.is_empty() {
        return Ok(());
    }
    let mut errors = cx.errors;
    // Report in layout order: declarations first, then instructions as printed.
    let rank = |e: &VerifierError| match (e.inst, &layout) {
        (None, _) => 0,
        (Some(i), Some(l)) => l.pos(i).map_or(usize::MAX, |p| p + 1),
        (Some(i), None) => i.as_u32() as usize + 1,
    };
    errors.sort_by_key(rank);
    let (listing, excerpt) = if printable {
        let layout = layout.as_ref();
        (listing(k, &errors), report::excerpt(k, layout, &errors))
    } else {
        let l = unprintable_listing(&errors);
        (l.clone(), l)
    };
    Err(VerifierErrors {
        errors,
        listing,
        excerpt,
    })
}

/// The kernel printed with each error under its instruction.
fn listing(k: &Kernel, errors: &[VerifierError]) -> String {
    // An instruction outside the layout is never printed: its errors go on top.
    let mut in_layout = std::collections::HashSet::new();
    k.walk(|i, _| {
        in_layout.insert(i);
    });
    let notes = |at: Option<Inst>| {
        errors
            .iter()
            .filter(|e| match (at, e.inst) {
                (None, None) => true,
                (None, Some(i)) => !in_layout.contains(&i),
                (Some(a), Some(i)) => a == i,
                (Some(_), None) => false,
            })
            .map(|e| format!("error: {}", e.msg))
            .collect()
    };
    write::write_annotated(k, &notes)
}

/// When the layout itself is broken (a dangling region, value or instruction,
/// a region reached twice), printing the kernel could fail or not terminate:
/// the listing is the errors alone.
fn unprintable_listing(errors: &[VerifierError]) -> String {
    let mut s = String::from(";! the kernel cannot be printed: its region tree is broken\n");
    for e in errors {
        s.push_str(&format!(";! error: {}  ; @{}\n", e.msg, e.loc));
    }
    s
}

/// The verifier's state: the kernel and the errors found so far.
pub(crate) struct Ctx<'k> {
    pub k: &'k Kernel,
    pub errors: Vec<VerifierError>,
}

impl Ctx<'_> {
    /// An error at an instruction (located at its DSL line).
    pub fn error(&mut self, inst: Inst, msg: impl Into<String>) {
        let loc = self
            .k
            .insts
            .get(inst)
            .map_or_else(Loc::synthetic, |d| d.loc.clone());
        self.errors.push(VerifierError {
            inst: Some(inst),
            loc,
            msg: msg.into(),
        });
    }

    /// An error at a declaration.
    pub fn decl_error(&mut self, loc: &Loc, msg: impl Into<String>) {
        self.errors.push(VerifierError {
            inst: None,
            loc: loc.clone(),
            msg: msg.into(),
        });
    }

    /// `bar0 "full"`.
    pub fn barrier(&self, b: Barrier) -> String {
        match self.k.barriers.get(b) {
            Some(d) => format!("{b} {:?}", d.name),
            None => b.to_string(),
        }
    }

    /// `buf0 "inbox"`.
    pub fn buffer(&self, b: Buffer) -> String {
        match self.k.buffers.get(b) {
            Some(d) => format!("{b} {:?}", d.name),
            None => b.to_string(),
        }
    }

    /// `t0 "input"`.
    pub fn tensor(&self, t: Tensor) -> String {
        match self.k.tensors.get(t) {
            Some(d) => format!("{t} {:?}", d.name),
            None => t.to_string(),
        }
    }

    /// `role0 "sender"`.
    pub fn role(&self, r: Role) -> String {
        match self.k.roles.get(r) {
            Some(d) => format!("{r} {:?}", d.name),
            None => r.to_string(),
        }
    }

    /// `v3:f32`.
    pub fn value(&self, v: Value) -> String {
        match self.k.values.get(v) {
            Some(d) => format!("{v}:{}", d.ty),
            None => v.to_string(),
        }
    }

    /// The op's text-form mnemonic.
    pub fn mnemonic(&self, i: Inst) -> String {
        write::mnemonic(&self.k.insts[i].op)
    }

    /// `the if at lib.rs:57:11`.
    pub fn at(&self, i: Inst) -> String {
        format!("the `{}` at {}", self.mnemonic(i), self.k.insts[i].loc)
    }
}
