use crate::cli::MemArgs;
use anyhow::Result;
use std::process::ExitCode;
pub fn run(_a: &MemArgs) -> Result<ExitCode> { todo!() }
