//! The trace context: the [`Builder`] a kernel body emits into while its
//! generated builder function runs.
//!
//! The builder lives in a thread-local so that operators (`a + b` on
//! [`Val`](super::Val)s) can emit instructions without a context argument.
//! Structured ops (`if`, `for`, roles) take the builder out, open a region
//! with the builder's closure API and *lend* the builder back to the
//! thread-local while the user's code for that region runs; the builder value
//! moves, so no reference to it is ever aliased.
//!
//! Every emitting function is `#[track_caller]` and stamps the builder with
//! the caller's location before it emits, so each instruction carries the
//! kernel author's `file:line:col` (the macro emits its calls with the user's
//! spans).

use std::cell::RefCell;
use std::collections::HashSet;

use kda_ir::{Builder, Kernel, LaunchDecl, Loc, Op};

thread_local! {
    static CX: RefCell<Option<Builder>> = const { RefCell::new(None) };
}

/// A kernel being traced on this thread; [`Trace::finish`] returns it.
///
/// Dropping a `Trace` (a panic in the kernel body) discards the kernel.
pub struct Trace {
    _private: (),
}

impl Trace {
    /// Start tracing kernel `name`. Panics when this thread is already tracing
    /// a kernel: a kernel body cannot build another kernel.
    #[track_caller]
    pub fn begin(name: &str, launch: LaunchDecl) -> Trace {
        CX.with(|c| {
            let mut c = c.borrow_mut();
            if c.is_some() {
                panic!(
                    "kda: kernel `{name}` built while another kernel is being traced on this thread"
                );
            }
            *c = Some(Builder::new(name, launch));
        });
        Trace { _private: () }
    }

    /// The traced kernel, with each tensor's access set from what the body did
    /// with it (loads make it readable, stores writable).
    pub fn finish(self) -> Kernel {
        let b = CX
            .with(|c| c.borrow_mut().take())
            .expect("kda: trace context lost");
        let mut k = b.finish();
        infer_access(&mut k);
        k
    }
}

impl Drop for Trace {
    fn drop(&mut self) {
        CX.with(|c| {
            if let Ok(mut c) = c.try_borrow_mut() {
                *c = None;
            }
        });
    }
}

fn infer_access(k: &mut Kernel) {
    use kda_ir::Access;
    let mut reads = HashSet::new();
    let mut writes = HashSet::new();
    for (_, inst) in k.insts.iter() {
        match &inst.op {
            Op::LdGlobal { tensor, .. }
            | Op::CpAsync { tensor, .. }
            | Op::BulkCopy { tensor, .. } => {
                reads.insert(*tensor);
            }
            Op::StGlobal { tensor, .. } | Op::BulkStore { tensor, .. } => {
                writes.insert(*tensor);
            }
            Op::AtomAdd { tensor } => {
                reads.insert(*tensor);
                writes.insert(*tensor);
            }
            _ => {}
        }
    }
    for (t, decl) in k.tensors.iter_mut() {
        decl.access = match (reads.contains(&t), writes.contains(&t)) {
            (_, false) => Access::Read,
            (false, true) => Access::Write,
            (true, true) => Access::ReadWrite,
        };
    }
}

/// Run `f` on the builder at the caller's location.
#[track_caller]
pub(crate) fn emit<R>(f: impl FnOnce(&mut Builder) -> R) -> R {
    let loc = Loc::caller();
    CX.with(|c| {
        let mut c = c.borrow_mut();
        match c.as_mut() {
            Some(b) => {
                b.at(Some(loc));
                f(b)
            }
            None => panic!(
                "kda: a kernel operation ran outside a kernel trace (DSL values and handles \
                 only exist while a #[cluster_kernel] builder function runs)"
            ),
        }
    })
}

/// Run `f` on the builder at `loc` (for emitting from inside closures, where
/// `#[track_caller]` does not reach).
pub(crate) fn emit_at<R>(loc: &Loc, f: impl FnOnce(&mut Builder) -> R) -> R {
    CX.with(|c| {
        let mut c = c.borrow_mut();
        let b = c
            .as_mut()
            .expect("kda: a kernel operation ran outside a kernel trace");
        b.at(Some(loc.clone()));
        f(b)
    })
}

fn take() -> Builder {
    match CX.with(|c| c.borrow_mut().take()) {
        Some(b) => b,
        None => panic!("kda: a kernel operation ran outside a kernel trace"),
    }
}

fn put(b: Builder) {
    CX.with(|c| *c.borrow_mut() = Some(b));
}

/// Build a structured op: `f` gets the builder itself (stamped with `loc`)
/// and calls its closure API, using [`lend`] inside each region.
pub(crate) fn structured<R>(loc: &Loc, f: impl FnOnce(&mut Builder) -> R) -> R {
    let mut b = take();
    b.at(Some(loc.clone()));
    let r = f(&mut b);
    put(b);
    r
}

/// Inside a region closure of the builder: make the builder available to the
/// kernel body's code while `f` runs, then take it back. The region's
/// terminator is stamped with `loc`.
pub(crate) fn lend<R>(b: &mut Builder, loc: &Loc, f: impl FnOnce() -> R) -> R {
    let placeholder = Builder::new(
        "",
        LaunchDecl {
            block: 0,
            cluster: 0,
            min_blocks_per_sm: None,
            cluster_policy: Default::default(),
        },
    );
    put(std::mem::replace(b, placeholder));
    let r = f();
    *b = take();
    b.at(Some(loc.clone()));
    r
}

/// The cluster size of the kernel being traced.
pub(crate) fn cluster_size() -> u32 {
    CX.with(|c| c.borrow().as_ref().map(|b| b.kernel().launch.cluster))
        .unwrap_or(1)
}
