//! A value parser that offers words to `--help` and shell completions without refusing others:
//! for names the library checks itself, with a message naming the fix (`--suite`).

use crate::bench::suite;
use clap::builder::{PossibleValue, TypedValueParser};

/// `value_parser = suite_name()`: completions offer the suites; the plan refuses an unknown
/// name with the list (as `--list-suites` gives it).
pub fn suite_name() -> SuiteName {
    SuiteName
}

#[derive(Clone)]
pub struct SuiteName;

impl TypedValueParser for SuiteName {
    type Value = String;

    fn parse_ref(
        &self,
        cmd: &clap::Command,
        arg: Option<&clap::Arg>,
        value: &std::ffi::OsStr,
    ) -> Result<String, clap::Error> {
        clap::builder::StringValueParser::new().parse_ref(cmd, arg, value)
    }

    fn possible_values(&self) -> Option<Box<dyn Iterator<Item = PossibleValue> + '_>> {
        Some(Box::new(
            suite::all()
                .into_iter()
                .map(|s| PossibleValue::new(s.name).help(s.about)),
        ))
    }
}
