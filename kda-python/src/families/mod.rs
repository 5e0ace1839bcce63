//! The kernel crates as [`crate::engine::Family`]s.

/// A family's checks, the crate's own: its `ArgError` as the `Error`, and
/// `validate_layout`, `validate` and `is_type_error` of crate `$krate`,
/// whose functions take the crate's config `$crate_cfg` (an expression of
/// the family's `Config` `$cfg`).
macro_rules! crate_checks {
    ($krate:ident, |$cfg:ident| $crate_cfg:expr) => {
        type Error = $krate::ArgError;

        fn validate_layout($cfg: &Self::Config, args: &Self::Args) -> Vec<Self::Error> {
            $krate::validate_layout($crate_cfg, args)
        }

        fn validate($cfg: &Self::Config, args: &Self::Args) -> Vec<Self::Error> {
            $krate::validate($crate_cfg, args)
        }

        fn is_type_error(e: &Self::Error) -> bool {
            matches!(e, $krate::ArgError::Dtype { .. })
        }
    };
}

pub mod gdn;
pub mod kda;
pub mod mamba2;

use kda_host::{DType, HostTensor};

/// The tensors of a call by parameter name: what `Family::assemble`
/// receives in `Family::params` order, scalars left out.
pub struct Named {
    tensors: Vec<(&'static str, Option<HostTensor>)>,
}

impl Named {
    pub fn new(params: &[(&'static str, bool)], tensors: Vec<HostTensor>) -> Self {
        let names = params.iter().filter(|(_, s)| !s).map(|(n, _)| *n);
        Named {
            tensors: names.zip(tensors.into_iter().map(Some)).collect(),
        }
    }

    /// The tensor passed as `name`, if the call passes it.
    pub fn optional(&mut self, name: &str) -> Option<HostTensor> {
        self.tensors
            .iter_mut()
            .find(|(n, _)| *n == name)
            .and_then(|(_, t)| t.take())
    }

    /// The tensor passed as `name`; the engine passes every parameter, so
    /// an empty stand-in only ever shows up in a failing check.
    pub fn take(&mut self, name: &str) -> HostTensor {
        self.optional(name)
            .unwrap_or_else(|| HostTensor::zeros(DType::F32, vec![0]))
    }
}

/// The scalar at `index` of a call's scalars (the engine passes them all).
pub fn scalar(scalars: &[f32], index: usize) -> f32 {
    scalars.get(index).copied().unwrap_or(0.0)
}
