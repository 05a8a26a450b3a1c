//! `top --profile` in a build without the `profile` feature: refused before top starts
//! (`cmd::needs`); this stands in for the profiler so top builds unchanged.

use crate::diagnose::model::TopSample;
use crate::features::{Feature, Missing};
use std::io::Write;
use std::sync::atomic::AtomicBool;

/// Never profiles: says the feature is missing. (Not a unit struct: top makes it with
/// `default()`, as it makes the real one.)
#[derive(Default)]
pub struct OnCpuVerdict {
    _none: (),
}

impl OnCpuVerdict {
    /// The missing feature's error (unreachable in practice: `--profile` was refused first).
    pub fn after(
        &mut self,
        _: &TopSample,
        _: &mut impl Write,
        _: &AtomicBool,
    ) -> anyhow::Result<()> {
        Err(Missing(Feature::Profile).into())
    }
}
