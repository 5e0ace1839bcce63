//! Helpers shared by the verifier tests: small kernels built with the
//! builder API, and assertions on the errors the verifier reports.

#![allow(dead_code)]

use kda_ir::verifier::{VerifierError, verify};
use kda_ir::{
    Access, BinOp, Builder, CachePolicy, CmpOp, Dim, Kernel, LaunchDecl, Provenance, Scalar, Type,
};

/// A launch of `block` threads in clusters of `cluster`.
pub fn launch(block: u32, cluster: u32) -> LaunchDecl {
    LaunchDecl {
        block,
        cluster,
        min_blocks_per_sm: None,
        cluster_policy: Default::default(),
    }
}

/// The DSMEM exchange demo (`examples/dsmem-exchange`), rebuilt here with
/// knobs that break one thing at a time. `Demo::default()` builds exactly
/// the demo.
#[derive(Clone, Debug)]
pub struct Demo {
    pub cluster: u32,
    /// Transaction bytes the barrier declares per phase.
    pub tx: u32,
    /// Bytes the receiver's `mbarrier.arrive.expect_tx` expects.
    pub expect: u32,
    /// The receiver initialises the barrier.
    pub init: bool,
    /// `cluster.arrive` + `cluster.wait` between the init and the sends.
    pub cluster_sync: bool,
    /// The sender waits for the preceding launch before reading `input`.
    pub pdl_wait: bool,
    /// The receiver waits on the barrier before reading `inbox`.
    pub wait: bool,
    /// The value each sender lane sends: `f32` or a vector of them.
    pub send_lanes: u8,
}

impl Default for Demo {
    fn default() -> Demo {
        Demo {
            cluster: 2,
            tx: 128,
            expect: 128,
            init: true,
            cluster_sync: true,
            pdl_wait: true,
            wait: true,
            send_lanes: 1,
        }
    }
}

impl Demo {
    pub fn build(&self) -> Kernel {
        let cluster = self.cluster;
        let mut b = Builder::new("dsmem_exchange", launch(64, cluster));
        let rows = b.sym("rows");
        let input = b.tensor(
            "input",
            Scalar::F32,
            &[Dim::Sym(rows), Dim::Const(32)],
            &[Dim::Const(32), Dim::Const(1)],
            Provenance::Produced,
            Access::Read,
        );
        let output = b.tensor(
            "output",
            Scalar::F32,
            &[Dim::Sym(rows), Dim::Const(32)],
            &[Dim::Const(32), Dim::Const(1)],
            Provenance::Ready,
            Access::Write,
        );
        let sender = b.role("sender", 0, 32);
        let receiver = b.role("receiver", 32, 32);
        let full = b.mbarrier("inbox_full", 1, self.tx, &[sender, receiver]);
        // Each lane sends `send_lanes` elements: room for all of them.
        let inbox = b.shared(
            "inbox",
            Scalar::F32,
            32 * u32::from(self.send_lanes.max(1)),
            16,
            &[sender, receiver],
            Some(full),
        );

        b.pdl_launch_dependents();
        let tid = b.thread_idx();
        let lane_mask = b.u32(31);
        let lane = b.bin(BinOp::And, tid, lane_mask);
        let cta = b.block_idx(0);
        let rank = b.cluster_rank();

        b.in_role(receiver, |b| {
            let zero = b.u32(0);
            let first = b.cmp(CmpOp::Eq, lane, zero);
            b.if_(first, |b| {
                if self.init {
                    b.mbarrier_init(full);
                }
                b.mbarrier_arrive_expect_tx(full, self.expect);
            });
            b.fence_mbarrier_init();
        });
        if self.cluster_sync {
            b.cluster_arrive(true);
            b.cluster_wait();
        }

        b.in_role(sender, |b| {
            if self.pdl_wait {
                b.pdl_wait();
            }
            let x = b.ld_global(input, &[cta, lane], Type::F32, CachePolicy::Normal);
            let two = b.f32(2.0);
            let r = b.cvt(rank, Type::F32);
            let y = b.fma(x, two, r, false);
            let one = b.u32(1);
            let c = b.u32(cluster);
            let next = b.add(rank, one);
            let peer = b.bin(BinOp::Rem, next, c);
            let (sent, at) = match self.send_lanes {
                1 => (y, lane),
                n => {
                    // A vector lands at its own element index, not on the
                    // next lane's elements.
                    let w = b.u32(n.into());
                    (b.pack(&vec![y; n as usize]), b.mul(lane, w))
                }
            };
            b.st_async(inbox, at, sent, peer, full);
        });

        b.in_role(receiver, |b| {
            if self.wait {
                b.wait(full);
            }
            let v = b.ld_shared(inbox, lane, Type::F32);
            b.st_global(output, &[cta, lane], v, None, CachePolicy::Normal);
        });
        b.finish()
    }
}

/// The demo for a cluster of `cluster` CTAs.
pub fn demo(cluster: u32) -> Kernel {
    Demo {
        cluster,
        ..Demo::default()
    }
    .build()
}

/// A one-CTA kernel of `block` threads whose body `f` builds.
pub fn kernel(block: u32, f: impl FnOnce(&mut Builder)) -> Kernel {
    let mut b = Builder::new("t", launch(block, 1));
    f(&mut b);
    b.finish()
}

/// The one instruction of `k` whose op has this text-form name.
pub fn find(k: &Kernel, name: &str) -> kda_ir::Inst {
    let found: Vec<_> = k
        .insts
        .keys()
        .filter(|&i| k.insts[i].op.name() == name)
        .collect();
    assert_eq!(found.len(), 1, "expected one `{name}` in\n{k}");
    found[0]
}

/// The kernel verifies with no error.
#[track_caller]
pub fn assert_ok(k: &Kernel) {
    if let Err(e) = verify(k) {
        panic!("expected no verifier error, got:\n{e}");
    }
}

/// The kernel fails to verify, and one error's message contains `needle`.
#[track_caller]
pub fn assert_err(k: &Kernel, needle: &str) -> VerifierError {
    match verify(k) {
        Ok(()) => panic!("expected an error containing {needle:?}, the kernel verifies:\n{k}"),
        Err(e) => match e.errors.iter().find(|x| x.msg.contains(needle)) {
            Some(x) => x.clone(),
            None => panic!("expected an error containing {needle:?}, got:\n{e}"),
        },
    }
}
