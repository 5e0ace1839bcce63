//! One (family, batch) point on a device: the launch's small tensors from
//! the seeded generator, and a state and conv state of `groups` disjoint
//! slot groups (zero-filled on the device) that the steps of a graph rotate
//! through, so that successive steps never find their state in L2 — the
//! scheme of KdaSplit's bench, shared in [`kda_host::bench`] (slot groups,
//! plan, slot tables). Every request is active (no padding, no write holes).
//! The state starts at zero; the warm-up replays write every group before
//! anything is timed.

use half::bf16;
pub use kda_host::bench::{BenchDevice, Plan};
use kda_host::bench::{GEN_REQUESTS, Rotation, bad_outputs, gather_rows, slot_tables};
use kda_host::{DType, HostTensor, KernelArgs};
use kda_ir::Kernel;
use kda_runtime::{Device, ErasedArg, Launch, LaunchConfig, RuntimeError, ScalarArg, TensorShape};

use crate::family::Family;

/// The GPU's plan: 4 × L2 of state, three groups at least (with PDL a step
/// may start its ready loads — its group's state — while the step before the
/// previous one still runs, where the trigger is at the kernel's entry), 32
/// steps.
pub fn plan_for_l2(l2_bytes: usize) -> Plan {
    Plan {
        rotate_bytes: 4 * l2_bytes,
        min_groups: 3,
        min_steps: 32,
        seed: 1,
    }
}

/// `(groups, steps)` of `family`'s workload at `batch` under `plan`: slot
/// groups of `B·T` slots of state ([`Plan::shape`]). The point's same-bytes
/// copy rotates over as many groups (each holding its `T` copies, as many
/// bytes) in graphs of as many steps.
pub fn rotation<F: Family>(plan: &Plan, family: &F, batch: usize) -> (usize, usize) {
    plan.shape(batch * family.tokens() * family.slot_bytes())
}

fn le_bytes(t: &HostTensor) -> Vec<u8> {
    t.to_contiguous().to_le_bytes()
}

fn scalar(d: DType) -> kda_ir::Scalar {
    kda_host::run::scalar(d)
}

/// The tensors of one point on a device, ready for launches of any schedule.
pub struct Workload<F: Family, D: Device> {
    pub batch: usize,
    pub groups: usize,
    pub steps: usize,
    /// Cache slots `S` (`groups · B · T + 1`).
    pub num_slots: usize,
    /// The generated launch at `batch` requests; its `state` and
    /// `conv_state` hold one slot (the real ones live only on the device).
    pub args: F::Args,
    /// Every tensor under its parameter name on the device, as launched
    /// (`S` slots), and each group's slot table.
    pub rotation: Rotation<D::Buffer>,
    /// The shape and dtype of each of `rotation`'s tensors.
    shapes: Vec<TensorShape>,
    dtypes: Vec<DType>,
    /// The slot table of each group, on the host.
    pub host_tables: Vec<HostTensor>,
    scalars: Vec<(&'static str, ScalarArg)>,
    state_at: usize,
    conv_at: usize,
    output_at: usize,
}

impl<F: Family, D: BenchDevice> Workload<F, D> {
    /// Generate `family`'s launch at `batch` requests (seeded; batches above
    /// 16 repeat the inputs of 16 requests), allocate the rotating state and
    /// conv state on `dev` (zeroed) and upload everything else.
    pub fn new(dev: &D, family: &F, batch: usize, plan: &Plan) -> Result<Self, RuntimeError> {
        let t = family.tokens();
        let per_group = batch * t;
        let (groups, steps) = rotation(plan, family, batch);
        let num_slots = groups * per_group + 1;
        let b0 = batch.min(GEN_REQUESTS);
        let mut args = family.generate(b0, b0 * t + 1, plan.seed);
        if b0 < batch {
            let named: Vec<(&'static str, HostTensor)> = args
                .named_tensors()
                .into_iter()
                .map(|(n, t)| (n, t.clone()))
                .collect();
            for (name, tensor) in named {
                if family.row_tensors().contains(&name) {
                    let row = |r: usize| (r / t % b0) * t + r % t;
                    family.set(&mut args, name, gather_rows(&tensor, batch * t, row));
                } else if family.request_tensors().contains(&name) {
                    family.set(&mut args, name, gather_rows(&tensor, batch, |r| r % b0));
                }
            }
        }
        // Slot tables: group g takes pool[g·B·T ..][..B·T].
        let slot_shape = args
            .named_tensors()
            .into_iter()
            .find(|&(n, _)| n == family.slot_tensor())
            .map(|(_, t)| {
                let mut s = t.shape().to_vec();
                s[0] = batch;
                s
            })
            .expect("every launch has a slot table");
        family.set(
            &mut args,
            family.slot_tensor(),
            HostTensor::new(vec![0i32; slot_shape.iter().product()], slot_shape.clone())
                .expect("slot shape"),
        );
        let host_tables = slot_tables(num_slots, per_group, &slot_shape, plan.seed);
        let tables = host_tables
            .iter()
            .map(|t| dev.upload(&le_bytes(t)))
            .collect::<Result<Vec<_>, _>>()?;

        // Keep one slot of state and conv state on the host (their shapes
        // and dtypes); the device holds S slots.
        let one_slot = |t: &HostTensor| {
            let mut s = t.shape().to_vec();
            s[0] = 1;
            HostTensor::zeros(t.dtype(), s)
        };
        let named = args.named_tensors();
        let find = |name: &str| {
            named
                .iter()
                .position(|&(n, _)| n == name)
                .expect("the launch has the tensor")
        };
        let (slot_at, state_at, conv_at, output_at) = (
            find(family.slot_tensor()),
            find("state"),
            find("conv_state"),
            find("output"),
        );
        let mut shapes = Vec::new();
        let mut dtypes = Vec::new();
        let mut buffers = Vec::new();
        let mut names = Vec::new();
        for (i, &(name, t)) in named.iter().enumerate() {
            let t = t.to_contiguous();
            let mut shape = TensorShape {
                shape: t.shape().to_vec(),
                strides: t.strides().to_vec(),
            };
            let buffer = if i == state_at || i == conv_at {
                shape.shape[0] = num_slots;
                let row: usize = t.shape()[1..].iter().product();
                dev.alloc(num_slots * row * t.dtype().size())?
            } else if i == slot_at {
                dev.upload(&le_bytes(&host_tables[0]))?
            } else {
                dev.upload(&le_bytes(&t))?
            };
            names.push(name);
            shapes.push(shape);
            dtypes.push(t.dtype());
            buffers.push(buffer);
        }
        let scalars = family.scalars(&args);
        let (state, conv) = (one_slot(named[state_at].1), one_slot(named[conv_at].1));
        drop(named);
        family.set(&mut args, "state", state);
        family.set(&mut args, "conv_state", conv);
        dev.synchronize()?;
        Ok(Workload {
            batch,
            groups,
            steps,
            num_slots,
            args,
            rotation: Rotation {
                names,
                buffers,
                tables,
                slot_at,
            },
            shapes,
            dtypes,
            host_tables,
            scalars,
            state_at,
            conv_at,
            output_at,
        })
    }

    /// `schedule`'s kernel specialised on this point's strides, and its
    /// launch configuration (PDL on).
    pub fn kernel(
        &self,
        family: &F,
        schedule: &F::Schedule,
    ) -> Result<(Kernel, LaunchConfig), String> {
        let mut kernel = family.build(&self.args, schedule)?;
        let grid = family.grid(schedule, self.batch)?;
        let bound = self.bind(&kernel).map_err(|e| e.to_string())?;
        kernel.specialize_strides(&bound.syms);
        // Bind again: specialised strides are checked against the shapes.
        let bound = self.bind(&kernel).map_err(|e| e.to_string())?;
        Ok((kernel, bound.config(Launch::grid(grid).pdl(true))))
    }

    fn bind(&self, kernel: &Kernel) -> Result<kda_runtime::typed::Bound<'_, D>, RuntimeError> {
        let tensors: Vec<(&str, Option<ErasedArg<'_, D>>)> = self
            .rotation
            .names
            .iter()
            .zip(&self.shapes)
            .zip(self.dtypes.iter().zip(&self.rotation.buffers))
            .map(|((&name, shape), (&dtype, buf))| {
                let arg = ErasedArg {
                    buf,
                    dtype: scalar(dtype),
                    shape: shape.clone(),
                };
                (name, Some(arg))
            })
            .collect();
        kda_runtime::typed::bind::<D>(kernel, &tensors, &self.scalars)
    }

    /// Refill `output` with the generator's sentinel.
    pub fn poison_output(&mut self, dev: &D) -> Result<(), RuntimeError> {
        let n: usize = self.shapes[self.output_at].shape.iter().product();
        let sentinel = bf16::from_f32(kda_host::generator::OUTPUT_SENTINEL);
        let bytes: Vec<u8> = (0..n).flat_map(|_| sentinel.to_le_bytes()).collect();
        self.rotation.buffers[self.output_at] = dev.upload(&bytes)?;
        Ok(())
    }

    /// Output elements that are not finite or still hold the sentinel (0
    /// when the last step wrote every element).
    pub fn bad_outputs(&self, dev: &D) -> Result<usize, RuntimeError> {
        Ok(bad_outputs(
            &dev.download(&self.rotation.buffers[self.output_at])?,
        ))
    }

    /// The whole launch of step `step` on the host, with the device's
    /// current state, conv state and output (downloads them: small points
    /// only).
    pub fn host_args(&self, dev: &D, family: &F, step: usize) -> Result<F::Args, RuntimeError> {
        let mut args = self.args.clone();
        for (at, name) in [
            (self.state_at, "state"),
            (self.conv_at, "conv_state"),
            (self.output_at, "output"),
        ] {
            let bytes = dev.download(&self.rotation.buffers[at])?;
            let shape = self.shapes[at].shape.clone();
            let t = HostTensor::from_le_bytes(self.dtypes[at], shape, &bytes);
            family.set(&mut args, name, t.expect("downloaded shape"));
        }
        family.set(
            &mut args,
            family.slot_tensor(),
            self.host_tables[step % self.groups].clone(),
        );
        Ok(args)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plan_rotates_over_four_l2_in_three_groups_at_least() {
        let l2 = 50 << 20;
        let plan = plan_for_l2(l2);
        // GDN HK4 HV8 T1 at batch 1: 512 KiB a group, 400 groups.
        let (groups, steps) = plan.shape(512 << 10);
        assert!(groups * (512 << 10) >= 4 * l2 && steps == groups);
        // Batch 128: 64 MiB groups, 4 of them, 32 steps.
        assert_eq!(plan.shape(64 << 20), (4, 32));
        // Batch 512: one group is over 4 × L2; still three.
        assert_eq!(plan.shape(256 << 20), (3, 32));
    }
}
