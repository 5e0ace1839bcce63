//! The two kernels behind one interface: how to generate a launch, build a
//! schedule's kernel, size its grid, count its state traffic (and the
//! same-bytes copy of it) and check it against the float64 reference.

use kda_host::bench::same_copy::{SameBytes, SizeError};
use kda_host::{HostTensor, KernelArgs, Report};
use kda_ir::Kernel;
use kda_runtime::{Device, ScalarArg};

/// A kernel family at one shape (heads, tokens), any batch.
pub trait Family {
    type Schedule: Copy + std::fmt::Debug + PartialEq;
    type Args: KernelArgs + Clone;

    /// `gdn HK4 HV8 T1`, `mamba2 H24 G1 P64 N128`.
    fn label(&self) -> String;
    /// Tokens per request (rows per request of the per-row tensors).
    fn tokens(&self) -> usize;
    /// Bytes of state one cache slot holds (every head).
    fn slot_bytes(&self) -> usize;
    /// State bytes one step moves at `batch` requests, every one active and
    /// every write slot positive: one page read and `T` written per request
    /// and head.
    fn state_bytes(&self, batch: usize) -> usize {
        batch * self.slot_bytes() * (1 + self.tokens())
    }
    /// The same-bytes copy of [`Family::state_bytes`] at `batch`: one slot
    /// of state (every head's page) read per request, `T` copies written.
    fn same_bytes(&self, batch: usize) -> Result<SameBytes, SizeError> {
        SameBytes::new(batch, self.slot_bytes(), self.tokens())
    }
    /// A launch of `requests` requests over `num_slots` slots, no padding and
    /// no write holes.
    fn generate(&self, requests: usize, num_slots: usize, seed: u64) -> Self::Args;
    /// Parameter names of the tensors with one row per token (`B·T` rows)
    /// and of those with one row per request (`B`).
    fn row_tensors(&self) -> &'static [&'static str];
    fn request_tensors(&self) -> &'static [&'static str];
    /// The parameter name of the slot table.
    fn slot_tensor(&self) -> &'static str;
    /// The scalar arguments.
    fn scalars(&self, args: &Self::Args) -> Vec<(&'static str, ScalarArg)>;
    /// `schedule`'s kernel for `args`' dtypes (not specialised).
    fn build(&self, args: &Self::Args, schedule: &Self::Schedule) -> Result<Kernel, String>;
    /// The launch grid of `schedule` at `requests` requests.
    fn grid(&self, schedule: &Self::Schedule, requests: usize) -> Result<[u32; 3], String>;
    fn schedule_label(&self, schedule: &Self::Schedule) -> String;
    /// The schedule a launch of `batch` requests gets by default.
    fn default_schedule(&self, batch: usize) -> Self::Schedule;
    /// The sweep list at `batch`, its default first.
    fn sweep_at(&self, batch: usize) -> Vec<Self::Schedule> {
        let default = self.default_schedule(batch);
        let mut list = vec![default];
        list.extend(self.sweep().into_iter().filter(|s| *s != default));
        list
    }
    /// The schedules the bench sweeps (the kernel's sweep list).
    fn sweep(&self) -> Vec<Self::Schedule>;
    /// The tensor passed as parameter `name` in `args`, for the bench to
    /// replace; `None` for one it never replaces or that `args` lacks.
    fn tensor_mut<'a>(&self, args: &'a mut Self::Args, name: &str) -> Option<&'a mut HostTensor>;
    /// Replace the tensor passed as parameter `name` in `args`.
    fn set(&self, args: &mut Self::Args, name: &str, tensor: HostTensor) {
        match self.tensor_mut(args, name) {
            Some(slot) => *slot = tensor,
            None => panic!("the bench does not replace `{name}`"),
        }
    }
    /// Run `schedule` once on `dev` on a generated launch of `requests`
    /// requests with padding and write holes (seeded) and compare everything
    /// it writes with the float64 reference; `Err` says what differed.
    fn check<D: Device>(
        &self,
        dev: &D,
        schedule: &Self::Schedule,
        requests: usize,
        seed: u64,
    ) -> Result<(), String>;
}

/// The check both families run: the reference of a launch (or why it
/// refused it), the kernel's run (or why it did not run), compared; `Err`
/// says what differed.
fn against_reference<X, A, E: std::fmt::Debug, R: std::fmt::Display>(
    expected: Result<X, E>,
    run: impl FnOnce() -> Result<A, R>,
    compare: impl FnOnce(&A, &X) -> Report,
) -> Result<(), String> {
    let expected = expected.map_err(|e| format!("{e:?}"))?;
    let actual = run().map_err(|e| e.to_string())?;
    let report = compare(&actual, &expected);
    if report.passed() {
        Ok(())
    } else {
        Err(report.to_string())
    }
}

/// GDN decode / verify at one head shape and token count.
#[derive(Clone, Copy, Debug)]
pub struct Gdn {
    pub cfg: gdn_decode::GdnConfig,
}

impl Gdn {
    pub fn new(num_k_heads: u32, num_v_heads: u32, tokens: u32) -> Gdn {
        Gdn {
            cfg: gdn_decode::GdnConfig::new(num_k_heads, num_v_heads, tokens, true)
                .expect("a valid GDN shape"),
        }
    }
}

impl Family for Gdn {
    type Schedule = gdn_decode::kernel::Schedule;
    type Args = gdn_decode::GdnArgs;

    fn label(&self) -> String {
        format!(
            "gdn HK{} HV{} T{}",
            self.cfg.num_k_heads, self.cfg.num_v_heads, self.cfg.tokens
        )
    }

    fn tokens(&self) -> usize {
        self.cfg.tokens as usize
    }

    fn slot_bytes(&self) -> usize {
        self.cfg.hv() * self.cfg.dv() * self.cfg.dk() * 4
    }

    fn generate(&self, requests: usize, num_slots: usize, seed: u64) -> Self::Args {
        let options = gdn_decode::GenOptions::new(requests)
            .seed(seed)
            .padding(0.0)
            .holes(0.0)
            .num_slots(num_slots);
        gdn_decode::generate(&self.cfg, &options)
    }

    fn row_tensors(&self) -> &'static [&'static str] {
        &["x", "a", "beta", "z", "output"]
    }

    fn request_tensors(&self) -> &'static [&'static str] {
        &["accepted"]
    }

    fn slot_tensor(&self) -> &'static str {
        "slots"
    }

    fn scalars(&self, args: &Self::Args) -> Vec<(&'static str, ScalarArg)> {
        gdn_decode::run::scalars(args).to_vec()
    }

    fn build(&self, args: &Self::Args, schedule: &Self::Schedule) -> Result<Kernel, String> {
        let dtypes = gdn_decode::run::dtypes(args);
        gdn_decode::kernel::build(&self.cfg, &dtypes, schedule).map_err(|e| e.to_string())
    }

    fn grid(&self, _: &Self::Schedule, requests: usize) -> Result<[u32; 3], String> {
        Ok([self.cfg.num_v_heads, requests as u32, 1])
    }

    fn schedule_label(&self, schedule: &Self::Schedule) -> String {
        schedule.label()
    }

    fn default_schedule(&self, batch: usize) -> Self::Schedule {
        gdn_decode::kernel::Schedule::for_batch(self.cfg.tokens, batch)
    }

    fn sweep(&self) -> Vec<Self::Schedule> {
        gdn_decode::kernel::sweep_schedules(self.cfg.tokens)
    }

    fn tensor_mut<'a>(&self, args: &'a mut Self::Args, name: &str) -> Option<&'a mut HostTensor> {
        Some(match name {
            "x" => &mut args.x,
            "a" => &mut args.a,
            "beta" => &mut args.beta,
            "z" => &mut args.z,
            "output" => &mut args.output,
            "slots" => &mut args.slots,
            "state" => &mut args.state,
            "conv_state" => &mut args.conv_state,
            "accepted" => return args.accepted.as_mut(),
            _ => return None,
        })
    }

    fn check<D: Device>(
        &self,
        dev: &D,
        schedule: &Self::Schedule,
        requests: usize,
        seed: u64,
    ) -> Result<(), String> {
        let args =
            gdn_decode::generate(&self.cfg, &gdn_decode::GenOptions::new(requests).seed(seed));
        against_reference(
            gdn_decode::reference(&self.cfg, &args),
            || gdn_decode::run::run_with(dev, &self.cfg, &args, schedule),
            |actual, expected| gdn_decode::compare(&self.cfg, &args, actual, expected),
        )
    }
}

/// Mamba-2 decode at one configuration.
#[derive(Clone, Copy, Debug)]
pub struct Mamba2 {
    pub cfg: mamba2_decode::Mamba2Config,
}

impl Mamba2 {
    pub fn new(heads: u32, n_groups: u32) -> Mamba2 {
        Mamba2 {
            cfg: mamba2_decode::Mamba2Config::new(heads, n_groups).expect("a valid Mamba-2 shape"),
        }
    }
}

impl Family for Mamba2 {
    type Schedule = mamba2_decode::kernel::Schedule;
    type Args = mamba2_decode::Mamba2Args;

    fn label(&self) -> String {
        let c = &self.cfg;
        format!(
            "mamba2 H{} G{} P{} N{}",
            c.heads, c.n_groups, c.head_dim, c.d_state
        )
    }

    fn tokens(&self) -> usize {
        1
    }

    fn slot_bytes(&self) -> usize {
        let c = &self.cfg;
        (c.heads * c.head_dim * c.d_state) as usize * 4
    }

    fn generate(&self, requests: usize, num_slots: usize, seed: u64) -> Self::Args {
        let options = mamba2_decode::GenOptions::new(requests)
            .seed(seed)
            .padding(0.0)
            .num_slots(num_slots);
        mamba2_decode::generate(&self.cfg, &options)
    }

    fn row_tensors(&self) -> &'static [&'static str] {
        &["xbc", "dt", "z", "output"]
    }

    fn request_tensors(&self) -> &'static [&'static str] {
        &[]
    }

    fn slot_tensor(&self) -> &'static str {
        "slots"
    }

    fn scalars(&self, _: &Self::Args) -> Vec<(&'static str, ScalarArg)> {
        Vec::new()
    }

    fn build(&self, args: &Self::Args, schedule: &Self::Schedule) -> Result<Kernel, String> {
        mamba2_decode::run::kernel_for(&self.cfg, args, schedule).map_err(|e| e.to_string())
    }

    fn grid(&self, schedule: &Self::Schedule, requests: usize) -> Result<[u32; 3], String> {
        let plan =
            mamba2_decode::kernel::Plan::with(&self.cfg, schedule).map_err(|e| e.to_string())?;
        Ok(plan.grid(&self.cfg, requests as u32))
    }

    fn schedule_label(&self, schedule: &Self::Schedule) -> String {
        schedule.label()
    }

    fn default_schedule(&self, batch: usize) -> Self::Schedule {
        mamba2_decode::kernel::Schedule::for_batch(&self.cfg, batch)
    }

    fn sweep(&self) -> Vec<Self::Schedule> {
        mamba2_decode::kernel::sweep_schedules()
    }

    fn tensor_mut<'a>(&self, args: &'a mut Self::Args, name: &str) -> Option<&'a mut HostTensor> {
        Some(match name {
            "xbc" => &mut args.xbc,
            "dt" => &mut args.dt,
            "output" => &mut args.output,
            "slots" => &mut args.slots,
            "state" => &mut args.state,
            "conv_state" => &mut args.conv_state,
            "z" => return args.z.as_mut(),
            _ => return None,
        })
    }

    fn check<D: Device>(
        &self,
        dev: &D,
        schedule: &Self::Schedule,
        requests: usize,
        seed: u64,
    ) -> Result<(), String> {
        let args = mamba2_decode::generate(
            &self.cfg,
            &mamba2_decode::GenOptions::new(requests).seed(seed),
        );
        against_reference(
            mamba2_decode::reference(&self.cfg, &args),
            || mamba2_decode::run::run_with(dev, &self.cfg, &args, schedule),
            |actual, expected| mamba2_decode::compare(&self.cfg, &args, actual, expected),
        )
    }
}
