use crate::cli::CpuArgs;
use anyhow::Result;
use std::process::ExitCode;
pub fn run(_a: &CpuArgs) -> Result<ExitCode> { todo!() }
