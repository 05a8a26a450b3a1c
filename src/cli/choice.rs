//! The command line's side of [`crate::choice::Choice`]: a clap value parser that accepts the
//! library's words, lists them (with their help) in `--help` and completions, and reports a
//! wrong word with clap's usual "possible values" message.

use crate::choice::Choice;
use clap::builder::{PossibleValue, PossibleValuesParser, TypedValueParser};
use std::marker::PhantomData;

/// `value_parser = choice::<Rw>()`.
pub fn choice<T: Choice>() -> ChoiceParser<T> {
    ChoiceParser(PhantomData)
}

#[derive(Clone)]
pub struct ChoiceParser<T>(PhantomData<T>);

fn possible_values<T: Choice>() -> impl Iterator<Item = PossibleValue> {
    T::ALL.iter().map(|v| {
        let value = PossibleValue::new(v.word()).aliases(v.aliases().iter().copied());
        match v.help() {
            Some(help) => value.help(help),
            None => value,
        }
    })
}

impl<T: Choice> TypedValueParser for ChoiceParser<T> {
    type Value = T;

    fn parse_ref(
        &self,
        cmd: &clap::Command,
        arg: Option<&clap::Arg>,
        value: &std::ffi::OsStr,
    ) -> Result<T, clap::Error> {
        // Clap's own parser checks the word and words the error; it returns the word as typed.
        let word = PossibleValuesParser::new(possible_values::<T>()).parse_ref(cmd, arg, value)?;
        T::from_word(&word)
            .ok_or_else(|| clap::Error::new(clap::error::ErrorKind::InvalidValue).with_cmd(cmd))
    }

    fn possible_values(&self) -> Option<Box<dyn Iterator<Item = PossibleValue> + '_>> {
        Some(Box::new(possible_values::<T>()))
    }
}
