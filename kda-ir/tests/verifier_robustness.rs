//! The verifier reports, never panics: thousands of random corruptions of the
//! demo kernel (dangling values and entities, wrong types and arities,
//! reordered and dropped instructions) all come back as errors or Ok.

mod verifier_support;

use cranelift_entity::EntityRef;
use kda_ir::op::Op;
use kda_ir::verifier::verify;
use kda_ir::{Barrier, Buffer, Inst, Region, Role, Scalar, Tensor, Type, Value};
use verifier_support::*;

/// A small deterministic generator (64-bit LCG).
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: usize) -> usize {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        ((self.0 >> 33) as usize) % n.max(1)
    }
}

fn corrupt(k: &mut kda_ir::Kernel, rng: &mut Rng) {
    let ninst = k.insts.len();
    let i = Inst::new(rng.below(ninst));
    let nval = k.values.len() + 2;
    match rng.below(8) {
        0 => {
            if !k.insts[i].args.is_empty() {
                let a = rng.below(k.insts[i].args.len());
                k.insts[i].args[a] = Value::new(rng.below(nval));
            }
        }
        1 => {
            let v = Value::new(rng.below(k.values.len()));
            let elem = Scalar::ALL[rng.below(Scalar::ALL.len())];
            k.values[v].ty = Type::vec(elem, [1, 2, 3, 4, 8, 0][rng.below(6)]);
        }
        2 => {
            let r = Region::new(rng.below(k.regions.len()));
            if !k.regions[r].insts.is_empty() {
                let n = rng.below(k.regions[r].insts.len());
                k.regions[r].insts.remove(n);
            }
        }
        3 => {
            let r = Region::new(rng.below(k.regions.len()));
            let len = k.regions[r].insts.len();
            if len > 1 {
                let (a, b) = (rng.below(len), rng.below(len));
                k.regions[r].insts.swap(a, b);
            }
        }
        4 => {
            if k.insts[i].args.is_empty() || rng.below(2) == 0 {
                k.insts[i].args.push(Value::new(rng.below(nval)));
            } else {
                k.insts[i].args.pop();
            }
        }
        5 => {
            let n = rng.below(4);
            k.insts[i].op = match k.insts[i].op.clone() {
                Op::LdGlobal { policy, .. } => Op::LdGlobal {
                    tensor: Tensor::new(n),
                    policy,
                },
                Op::StAsync { ring, .. } => Op::StAsync {
                    buffer: Buffer::new(n),
                    barrier: Barrier::new(rng.below(3)),
                    ring,
                },
                Op::MbarWait { phase, .. } => Op::MbarWait {
                    barrier: Barrier::new(n),
                    phase,
                },
                Op::InRole { body, .. } => Op::InRole {
                    role: Role::new(n),
                    body,
                },
                Op::If { els, .. } => Op::If {
                    then: els,
                    els: Region::new(rng.below(k.regions.len() + 1)),
                },
                op => op,
            };
        }
        6 => {
            k.insts[i].results.clear();
        }
        _ => {
            let b = Buffer::new(0);
            k.buffers[b].guard = Some(Barrier::new(rng.below(3)));
            k.roles[Role::new(rng.below(2))].first = rng.below(96) as u32;
        }
    }
}

#[test]
fn random_corruptions_are_reported_not_panics() {
    let mut rng = Rng(0x6b6461);
    let mut failed = 0;
    for round in 0..3000 {
        let mut k = demo(2);
        for _ in 0..1 + round % 4 {
            corrupt(&mut k, &mut rng);
        }
        let result = std::panic::catch_unwind(|| verify(&k));
        match result {
            Ok(Ok(())) => {}
            Ok(Err(e)) => {
                failed += 1;
                assert!(!e.errors.is_empty() && !e.listing.is_empty());
            }
            Err(_) => panic!("the verifier panicked on round {round}:\n{k:#?}"),
        }
    }
    assert!(failed > 2000, "most corruptions are errors ({failed})");
}
