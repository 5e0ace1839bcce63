//! One benchmark point (heads × batch × tokens) on a device: the launch's
//! small tensors from the seeded generator, and a state (and conv state) of
//! `groups` disjoint slot groups, filled on the device, that the steps of a
//! graph rotate through so that successive steps never find their state in
//! L2.
//!
//! The slot groups, their tables and the plan are [`kda_host::bench`]'s
//! (shared with `decode-bench`). Every request is active (no padding, no
//! write holes), so each step reads one state page and writes `T` per
//! request and head: `B·H·64 KiB·(1 + T)` bytes of state.

use half::bf16;
use kda_host::KernelArgs;
pub use kda_host::bench::{BenchDevice, Plan};
use kda_host::bench::{GEN_REQUESTS, Rotation, bad_outputs, gather_rows, slot_tables};
use kda_ir::{Kernel, Scalar};
use kda_runtime::{Device, ErasedArg, Launch, LaunchConfig, RuntimeError, TensorShape};

use crate::args::{Arg, DType, HostTensor, KdaArgs, contiguous_strides};
use crate::compare::Actual;
use crate::config::{HEAD_DIM, KdaConfig};
use crate::generator::{GenOptions, generate};
use crate::run::{kernel_for, tensor_args};

use super::error::BenchError;
use super::kernels::{FILL_MAX, fill, fill_kernel};
use super::same_copy::SameBytes;

/// Bytes of one state page: one head of one slot, `128 × 128` f32.
pub const PAGE_BYTES: usize = HEAD_DIM * HEAD_DIM * 4;

/// The generator's state is N(0, 0.1); a uniform of the same deviation.
const STATE_AMP: f32 = 0.173;
/// Conv state ~ N(0, 1) in the generator; uniform of the same deviation.
const CONV_AMP: f32 = 1.73;
/// Two groups of state beyond this are not worth the memory: one group
/// alone is then far larger than L2.
const TWO_GROUP_LIMIT: usize = 8 << 30;

/// heads × batch × tokens.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Point {
    pub heads: u32,
    pub batch: u32,
    pub tokens: u32,
}

impl Point {
    pub const fn new(heads: u32, batch: u32, tokens: u32) -> Point {
        Point {
            heads,
            batch,
            tokens,
        }
    }

    /// State bytes one step moves (see the module doc).
    pub fn state_bytes_per_step(&self) -> usize {
        [self.heads as usize, PAGE_BYTES, 1 + self.tokens as usize]
            .into_iter()
            .fold(self.batch as usize, usize::saturating_mul)
    }

    /// Bytes of state one slot holds (all heads).
    pub fn slot_bytes(&self) -> usize {
        (self.heads as usize).saturating_mul(PAGE_BYTES)
    }

    /// Slots one step uses: `B·T`.
    pub fn slots_per_group(&self) -> usize {
        self.batch as usize * self.tokens as usize
    }

    /// The same-bytes copy of the point's state traffic: `B·H` pages read,
    /// `T` copies written, [`Point::state_bytes_per_step`] in all. Fails,
    /// naming the point, when a size overflows or the source is larger than
    /// one copy step reads.
    pub fn same_bytes(&self) -> Result<SameBytes, BenchError> {
        let pages = (self.batch as usize).saturating_mul(self.heads as usize);
        SameBytes::new(pages, PAGE_BYTES, self.tokens as usize)
            .map_err(|why| BenchError::SameCopySize { point: *self, why })
    }
}

impl std::fmt::Display for Point {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "H{} B{} T{}", self.heads, self.batch, self.tokens)
    }
}

/// `(groups, steps)` of `point`'s workload under `plan`
/// ([`rotation_of`] of its `B·T` slots of state per group).
pub fn rotation(plan: &Plan, point: &Point) -> (usize, usize) {
    rotation_of(
        plan,
        point.slots_per_group().saturating_mul(point.slot_bytes()),
    )
}

/// `(groups, steps)` of slot groups of `group` bytes of state under `plan`
/// ([`Plan::shape`]), but one group where two would exceed
/// `TWO_GROUP_LIMIT` and one already holds `plan.rotate_bytes`. The
/// same-bytes copy rotates as the KdaSplit workload of its point does.
pub fn rotation_of(plan: &Plan, group: usize) -> (usize, usize) {
    let mut groups = plan.groups(group);
    if groups
        .checked_mul(group)
        .is_none_or(|b| b > TWO_GROUP_LIMIT)
        && plan.rotate_bytes <= group
    {
        groups = 1;
    }
    (groups, plan.steps(groups))
}

/// The tensors of one point on a device, ready for launches of any schedule.
pub struct Workload<D: Device> {
    pub point: Point,
    /// Slot groups, and steps per graph.
    pub groups: usize,
    pub steps: usize,
    /// Cache slots `S` (`groups · B · T + 1`).
    pub num_slots: usize,
    /// The generated launch; `state` and `conv_state` are placeholders of
    /// one slot (the real ones live only on the device).
    pub args: KdaArgs,
    /// Shapes of the tensors as launched (`S` slots).
    pub shapes: Vec<TensorShape>,
    /// Every tensor under its kernel parameter name on the device
    /// (`KernelArgs::named_tensors`), and each group's slot table.
    pub rotation: Rotation<D::Buffer>,
    /// The slot table of each group, as host tensors.
    pub host_tables: Vec<HostTensor>,
    /// Positions of these arguments in `rotation.names`.
    state_at: usize,
    conv_at: usize,
    output_at: usize,
}

/// Grow a generated launch of `b0` requests to `b`: request `r` takes the
/// inputs of request `r mod b0`. `slots` only gets its shape (the workload
/// writes its own tables).
fn repeat_requests(args: &mut KdaArgs, b: usize, t: usize) {
    let b0 = args.requests();
    let row = |r: usize| (r / t % b0) * t + r % t;
    for x in [
        &mut args.x,
        &mut args.raw_gate,
        &mut args.beta,
        &mut args.gate,
        &mut args.output,
    ] {
        *x = gather_rows(x, b * t, row);
    }
    if let Some(acc) = &mut args.accepted {
        *acc = gather_rows(acc, b, |r| r % b0);
    }
    let mut shape = args.slots.shape().to_vec();
    shape[0] = b;
    args.slots = HostTensor::new(vec![0i32; shape.iter().product()], shape).expect("slots shape");
}

fn position(args: &KdaArgs, arg: Arg) -> usize {
    Arg::ALL
        .iter()
        .filter(|a| args.tensor(**a).is_some())
        .position(|&a| a == arg)
        .expect("the argument is a tensor of this launch")
}

fn bytes_of(t: &HostTensor) -> Vec<u8> {
    assert_eq!(
        t.strides(),
        contiguous_strides(t.shape()).as_slice(),
        "generated tensors are row-major"
    );
    t.to_le_bytes()
}

impl<D: BenchDevice> Workload<D> {
    /// Generate the point's launch (seeded), allocate and fill the rotating
    /// state on `dev` and upload everything else.
    pub fn new(dev: &D, point: Point, plan: &Plan) -> Result<Self, RuntimeError> {
        // One slot group's state, checked before anything is generated or
        // allocated (`--batch 4000000000` is a mistake, not an abort).
        if point
            .slots_per_group()
            .checked_mul(point.slot_bytes())
            .is_none_or(|bytes| bytes / 4 > FILL_MAX)
        {
            return Err(RuntimeError::BadLaunch {
                kernel: "bench".into(),
                msg: format!(
                    "{point}: one slot group's state (B·T·H·64 KiB) is more than {FILL_MAX} f32 elements"
                ),
            });
        }
        let (h, b, t) = (point.heads, point.batch as usize, point.tokens);
        let (groups, steps) = rotation(plan, &point);
        let per_group = point.slots_per_group();
        let num_slots = groups * per_group + 1;
        // Generate GEN_REQUESTS requests and repeat them: the generator draws
        // the whole state on the host, seconds at batch 512; the values do not
        // change the work.
        let b0 = b.min(GEN_REQUESTS);
        let mut args = generate(
            &GenOptions::new(h, b0, t)
                .seed(plan.seed)
                .padding(0.0)
                .holes(0.0)
                .num_slots(b0 * t as usize + 1),
        );
        if b0 < b {
            repeat_requests(&mut args, b, t as usize);
        }
        // The launch's shapes with S slots.
        let mut shapes: Vec<TensorShape> = tensor_args(&args)
            .iter()
            .map(|t| TensorShape {
                shape: t.shape().to_vec(),
                strides: t.strides().to_vec(),
            })
            .collect();
        let (slots_at, state_at, conv_at, output_at) = (
            position(&args, Arg::Slots),
            position(&args, Arg::State),
            position(&args, Arg::ConvState),
            position(&args, Arg::Output),
        );
        shapes[state_at].shape[0] = num_slots;
        shapes[conv_at].shape[0] = num_slots;
        let conv_row: usize = args.conv_state.shape()[1..].iter().product();
        // Free the generated state: the device holds the real one.
        args.state = HostTensor::zeros(DType::F32, vec![1, h as usize, HEAD_DIM, HEAD_DIM]);
        args.conv_state = HostTensor::zeros(DType::Bf16, {
            let mut s = args.conv_state.shape().to_vec();
            s[0] = 1;
            s
        });

        // Slot tables.
        let host_tables = slot_tables(num_slots, per_group, args.slots.shape(), plan.seed);
        let tables = host_tables
            .iter()
            .map(|t| dev.upload(&bytes_of(t)))
            .collect::<Result<Vec<_>, _>>()?;

        // State and conv state, filled on the device.
        let state_elems = num_slots * point.slot_bytes() / 4;
        let conv_elems = num_slots * conv_row;
        for (what, n) in [("state", state_elems), ("conv_state", conv_elems)] {
            if n > FILL_MAX {
                return Err(RuntimeError::BadLaunch {
                    kernel: "bench".into(),
                    msg: format!("{point}: {what} of {n} elements is too large to fill"),
                });
            }
        }
        let state = dev.alloc(state_elems * 4)?;
        let conv = dev.alloc(conv_elems * 2)?;
        let fill_f32 = dev.load(&fill_kernel(Scalar::F32))?;
        let fill_bf16 = dev.load(&fill_kernel(Scalar::BF16))?;
        let seed = plan.seed as u32;
        fill(
            dev,
            &fill_f32,
            &state,
            state_elems,
            seed ^ 0x57a7e,
            STATE_AMP,
        )?;
        fill(dev, &fill_bf16, &conv, conv_elems, seed ^ 0xc0de, CONV_AMP)?;

        let mut state = Some(state);
        let mut conv = Some(conv);
        let buffers = tensor_args(&args)
            .iter()
            .enumerate()
            .map(|(i, t)| {
                if i == state_at {
                    Ok(state.take().expect("one state"))
                } else if i == conv_at {
                    Ok(conv.take().expect("one conv state"))
                } else if i == slots_at {
                    dev.upload(&bytes_of(&host_tables[0]))
                } else {
                    dev.upload(&bytes_of(t))
                }
            })
            .collect::<Result<Vec<_>, _>>()?;
        dev.synchronize()?;
        let names = args.named_tensors().iter().map(|&(n, _)| n).collect();
        Ok(Workload {
            point,
            groups,
            steps,
            num_slots,
            args,
            shapes,
            rotation: Rotation {
                names,
                buffers,
                tables,
                slot_at: slots_at,
            },
            host_tables,
            state_at,
            conv_at,
            output_at,
        })
    }

    /// The kernel of `cfg` for this point and its launch configuration.
    pub fn kernel(&self, cfg: &KdaConfig) -> Result<(Kernel, LaunchConfig), RuntimeError> {
        let kernel = kernel_for(cfg, &self.args).map_err(|e| RuntimeError::Build {
            kernel: "kda_split".into(),
            msg: e.to_string(),
        })?;
        // Bound by name, with the S-slot shapes (the host args hold one slot).
        let tensors: Vec<(&str, Option<ErasedArg<'_, D>>)> = self
            .rotation
            .names
            .iter()
            .zip(self.args.tensors())
            .zip(self.shapes.iter().zip(&self.rotation.buffers))
            .map(|((&name, t), (shape, buf))| {
                let dtype = crate::run::scalar(t.dtype());
                let shape = shape.clone();
                (name, Some(ErasedArg { buf, dtype, shape }))
            })
            .collect();
        let scalars = crate::run::scalars(&self.args);
        let bound = kda_runtime::typed::bind::<D>(&kernel, &tensors, &scalars)?;
        let grid = [cfg.cluster(), cfg.heads, self.point.batch];
        Ok((kernel, bound.config(Launch::grid(grid).pdl(true))))
    }

    /// Refill `output` with the generator's sentinel (every element must be
    /// overwritten by the next step).
    pub fn poison_output(&mut self, dev: &D) -> Result<(), RuntimeError> {
        self.rotation.buffers[self.output_at] = dev.upload(&bytes_of(&self.args.output))?;
        Ok(())
    }

    /// Download `output`: the number of elements that are not finite or still
    /// hold the sentinel (0 when the last step wrote every element).
    pub fn bad_outputs(&self, dev: &D) -> Result<usize, RuntimeError> {
        Ok(bad_outputs(
            &dev.download(&self.rotation.buffers[self.output_at])?,
        ))
    }

    /// The whole launch of step `step` on the host, with the device's current
    /// state and conv state (downloads them: for small points only).
    pub fn host_args(&self, dev: &D, step: usize) -> Result<KdaArgs, RuntimeError> {
        let mut args = self.args.clone();
        let state = dev.download(&self.rotation.buffers[self.state_at])?;
        let conv = dev.download(&self.rotation.buffers[self.conv_at])?;
        let output = dev.download(&self.rotation.buffers[self.output_at])?;
        args.state = HostTensor::new(f32s(&state), self.shapes[self.state_at].shape.clone())
            .expect("state shape");
        args.conv_state = HostTensor::new(bf16s(&conv), self.shapes[self.conv_at].shape.clone())
            .expect("conv state shape");
        args.output =
            HostTensor::new(bf16s(&output), args.output.shape().to_vec()).expect("output shape");
        args.slots = self.host_tables[step % self.groups].clone();
        Ok(args)
    }

    /// What the kernel wrote, as [`Actual`] (downloads the whole state).
    pub fn actual(&self, dev: &D) -> Result<Actual, RuntimeError> {
        Ok(Actual {
            output: bf16s(&dev.download(&self.rotation.buffers[self.output_at])?),
            output_f32: None,
            state: f32s(&dev.download(&self.rotation.buffers[self.state_at])?),
            conv_state: bf16s(&dev.download(&self.rotation.buffers[self.conv_at])?),
        })
    }
}

fn f32s(b: &[u8]) -> Vec<f32> {
    b.chunks_exact(4)
        .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect()
}

fn bf16s(b: &[u8]) -> Vec<bf16> {
    b.chunks_exact(2)
        .map(|c| bf16::from_le_bytes([c[0], c[1]]))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_bytes_are_the_points_state_traffic() {
        for p in [
            Point::new(12, 128, 1),
            Point::new(12, 64, 4),
            Point::new(32, 512, 1),
        ] {
            let same = p.same_bytes().unwrap();
            assert_eq!(same.bytes_per_step(), p.state_bytes_per_step(), "{p}");
            assert_eq!(same.read_bytes(), (p.batch * p.heads) as usize * 65536);
            assert_eq!(same.copies(), p.tokens);
            // The copy rotates over the workload's groups: each holds the
            // `W` bytes of a slot group of state.
            assert_eq!(
                same.write_bytes(),
                p.slots_per_group() * p.slot_bytes(),
                "{p}"
            );
        }
        // Points of the same B·H and T share a copy.
        let same = Point::new(12, 128, 1).same_bytes().unwrap();
        assert_eq!(same, Point::new(6, 256, 1).same_bytes().unwrap());
        assert_ne!(same, Point::new(6, 256, 2).same_bytes().unwrap());
    }

    #[test]
    fn points_past_the_copys_limits_are_errors_naming_them() {
        // B·H·64 KiB past usize.
        let e = Point::new(u32::MAX, u32::MAX, 1).same_bytes().unwrap_err();
        let msg = e.to_string();
        assert!(matches!(e, BenchError::SameCopySize { .. }), "{msg}");
        assert!(msg.contains("H4294967295 B4294967295 T1"), "{msg}");
        // Read fits usize, T copies of it do not.
        let e = Point::new(1 << 16, 1 << 16, u32::MAX)
            .same_bytes()
            .unwrap_err();
        assert!(e.to_string().contains("written overflow"), "{e}");
        // Fits usize, but more floats than one launch reads.
        let e = Point::new(32, 1 << 19, 1).same_bytes().unwrap_err();
        assert!(e.to_string().contains("reads at most"), "{e}");
        let e = Point::new(12, 8, 0).same_bytes().unwrap_err();
        assert!(e.to_string().contains("moves no bytes"), "{e}");
        // The largest default point fits.
        assert!(Point::new(32, 512, 4).same_bytes().is_ok());
    }
}
