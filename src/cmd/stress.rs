use crate::cli::StressArgs;
use anyhow::Result;
use std::process::ExitCode;
pub fn run(_a: &StressArgs) -> Result<ExitCode> { todo!() }
