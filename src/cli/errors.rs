//! Usage errors in one line a person would write: what is wrong, with which option, and the
//! way out. Clap's own text spans several lines, names type limits ("0 is not in
//! 1..18446744073709551615") and echoes whatever was typed, however long.

use clap::error::{ContextKind, ContextValue, ErrorKind};

/// Typed values longer than this are cut, with an ellipsis, when echoed back.
const ECHO_CHARS: usize = 40;

/// The one-line message for a usage error (without the `tacho: ` prefix).
pub fn one_line(e: &clap::Error) -> String {
    let text = match e.kind() {
        ErrorKind::ValueValidation => invalid_value(e),
        ErrorKind::InvalidValue => not_a_choice(e),
        ErrorKind::MissingRequiredArgument => missing(e),
        ErrorKind::ArgumentConflict => conflict(e),
        ErrorKind::InvalidSubcommand | ErrorKind::UnknownArgument => not_a_subcommand(e),
        _ => None,
    };
    let text = text.unwrap_or_else(|| rendered_one_line(&e.render().to_string()));
    // Whatever was typed, nothing reaches the terminal as a control character.
    text.chars()
        .map(|c| {
            if crate::text::needs_escape(c) {
                c.escape_default().to_string()
            } else {
                c.to_string()
            }
        })
        .collect()
}

fn string(e: &clap::Error, kind: ContextKind) -> Option<String> {
    match e.get(kind)? {
        ContextValue::String(s) => Some(s.clone()),
        ContextValue::Strings(v) => Some(v.join(", ")),
        ContextValue::StyledStr(s) => Some(s.to_string()),
        _ => None,
    }
}

/// `--count <N>` → `--count`: the placeholder repeats nothing the reader needs.
fn option_name(e: &clap::Error) -> Option<String> {
    string(e, ContextKind::InvalidArg).map(|a| option_name_of(&a))
}

/// A typed value as echoed in a message: quoted, control characters escaped, long ones cut.
pub fn echo(value: &str) -> String {
    format!("{:?}", cut(value))
}

/// Words of a message longer than an echo are cut, keeping a closing quote or punctuation.
fn cut_long_words(text: &str) -> String {
    text.split(' ')
        .map(|word| {
            if word.chars().count() <= ECHO_CHARS + 2 {
                return word.to_string();
            }
            let closing: Vec<char> = word
                .chars()
                .rev()
                .take_while(|c| "'\";,:)".contains(*c))
                .collect();
            let mut short = cut(word);
            short.extend(closing.into_iter().rev());
            short
        })
        .collect::<Vec<_>>()
        .join(" ")
}

fn cut(value: &str) -> String {
    let mut shown: String = value.chars().take(ECHO_CHARS).collect();
    if value.chars().count() > ECHO_CHARS {
        shown.push('…');
    }
    shown
}

fn invalid_value(e: &clap::Error) -> Option<String> {
    let arg = option_name(e)?;
    let value = string(e, ContextKind::InvalidValue).unwrap_or_default();
    let cause = std::error::Error::source(e).map(ToString::to_string)?;
    // A positional argument's placeholder (<ID>) says less than the message does.
    let prefix = if arg.starts_with('<') {
        String::new()
    } else {
        format!("{arg}: ")
    };
    if let Some(why) = number_problem(&cause) {
        return Some(format!("{prefix}{why} (got {}; see --help)", echo(&value)));
    }
    // Most of tacho's parsers name the value (or a part of it) themselves: do not repeat it.
    let names_it = !value.is_empty()
        && (cause.contains(value.as_str()) || cause.contains(&format!("{value:?}")));
    let cause = cut_long_words(&cause);
    Some(if names_it {
        format!("{prefix}{cause} (see --help)")
    } else {
        format!("{prefix}{cause} (got {}; see --help)", echo(&value))
    })
}

/// A value outside a fixed list, or none at all.
fn not_a_choice(e: &clap::Error) -> Option<String> {
    let arg = option_name(e)?;
    let value = string(e, ContextKind::InvalidValue).unwrap_or_default();
    let choices = match e.get(ContextKind::ValidValue) {
        Some(ContextValue::Strings(v)) => v.join(", "),
        _ => String::new(),
    };
    if value.is_empty() {
        let placeholder = string(e, ContextKind::InvalidArg)
            .and_then(|a| a.split_once(' ').map(|(_, p)| p.to_string()))
            .unwrap_or_else(|| "a value".into());
        return Some(format!("{arg} needs {placeholder} after it (see --help)"));
    }
    if choices.is_empty() {
        return None;
    }
    let hint = match e.get(ContextKind::SuggestedValue) {
        Some(ContextValue::String(s)) => format!("; did you mean {s}?"),
        _ => String::new(),
    };
    Some(format!(
        "{arg}: choose one of {choices} (got {}{hint}; see --help)",
        echo(&value)
    ))
}

/// Rewrites the integer parsers' messages ("N is not in A..=B", "invalid digit found in
/// string") into what to type instead.
fn number_problem(cause: &str) -> Option<String> {
    if cause == "invalid digit found in string" || cause == "cannot parse integer from empty string"
    {
        return Some("give a whole number, e.g. 1".into());
    }
    if cause == "number too large to fit in target type" {
        return Some("the number is too large".into());
    }
    let (_, range) = cause.split_once(" is not in ")?;
    let (low, high) = match range.split_once("..=") {
        Some((l, h)) => (l, Some(h.to_string())),
        None => {
            let (l, h) = range.split_once("..")?;
            // Clap shows an open range as ending, exclusively, at the type's largest value.
            let last = match h.parse::<u64>() {
                Ok(n) if !is_type_limit(h) => Some(n.saturating_sub(1).to_string()),
                _ => None,
            };
            (l, last)
        }
    };
    let high = high.filter(|h| !is_type_limit(h));
    Some(match (low, high) {
        ("" | "0", Some(h)) => format!("give a whole number from 0 to {h}"),
        (l, Some(h)) => format!("give a whole number from {l} to {h}"),
        (l, None) => format!("give a whole number of at least {l}"),
    })
}

/// The largest value of an integer type, which clap names as the end of an open range.
fn is_type_limit(text: &str) -> bool {
    [
        u8::MAX as u64,
        u16::MAX as u64,
        u32::MAX as u64,
        i64::MAX as u64,
        u64::MAX,
    ]
    .iter()
    .any(|max| text == max.to_string())
}

fn missing(e: &clap::Error) -> Option<String> {
    let ContextValue::Strings(args) = e.get(ContextKind::InvalidArg)? else {
        return None;
    };
    let usage = string(e, ContextKind::Usage)?;
    let usage = usage.trim().trim_start_matches("Usage:").trim();
    // The command is the usage up to its first option or argument.
    let command = usage.split(['<', '[']).next().unwrap_or(usage).trim();
    let command = command.strip_prefix("tacho ").unwrap_or(command);
    let wanted: Vec<String> = args.iter().map(|a| wanted(a)).collect();
    Some(format!(
        "{command} needs {} (usage: {usage}; see --help)",
        wanted.join(" and ")
    ))
}

fn conflict(e: &clap::Error) -> Option<String> {
    let first = option_name(e)?;
    let other = option_name_of(&string(e, ContextKind::PriorArg)?);
    let why = match (first.as_str(), other.as_str()) {
        ("--no-save", "--label") | ("--label", "--no-save") => {
            ": a label names a saved run; drop --label, or --no-save to keep the run"
        }
        _ => "; give only one of them",
    };
    Some(format!(
        "{first} cannot be used with {other}{why} (see --help)"
    ))
}

/// `<ID>...` → `one or more ID`, `<FILE>` → `FILE`, `--to <X>` → `--to`.
fn wanted(arg: &str) -> String {
    match arg.strip_prefix('<') {
        Some(rest) => match rest.strip_suffix(">...") {
            Some(name) => format!("one or more {name}"),
            None => rest.trim_end_matches('>').to_string(),
        },
        None => option_name_of(arg),
    }
}

fn option_name_of(arg: &str) -> String {
    arg.split_once(' ')
        .map_or(arg, |(name, _)| name)
        .to_string()
}

/// `tacho bench /data`: a path where a benchmark's name goes is most likely the disk to
/// benchmark.
fn not_a_subcommand(e: &clap::Error) -> Option<String> {
    let word =
        string(e, ContextKind::InvalidSubcommand).or_else(|| string(e, ContextKind::InvalidArg))?;
    let usage = string(e, ContextKind::Usage).unwrap_or_default();
    if !usage.contains("tacho bench <COMMAND>") || word.starts_with('-') {
        return None;
    }
    let looks_like_a_path = word.contains('/') || word.starts_with('.');
    // Only a printable path is repeated in the suggestion (quoted for the shell).
    Some(
        if looks_like_a_path && !word.chars().any(char::is_control) {
            format!(
                "{} is not a benchmark; to benchmark the storage it is on: tacho bench disk {}",
                echo(&word),
                shell_words::quote(&word)
            )
        } else {
            format!(
                "{} is not a benchmark; choose disk, cpu or mem, e.g. tacho bench disk /data",
                echo(&word)
            )
        },
    )
}

/// Clap's usage errors span several lines (problem, tip, usage): keep the problem and the tip.
fn rendered_one_line(rendered: &str) -> String {
    let problem: Vec<&str> = rendered
        .lines()
        .map(str::trim)
        .take_while(|l| !l.starts_with("Usage:"))
        .filter(|l| !l.is_empty() && !l.starts_with("For more information"))
        .map(|l| l.strip_prefix("error: ").unwrap_or(l))
        .collect();
    format!("{} (see --help)", problem.join("; "))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_read_as_limits() {
        let p = |s| number_problem(s).unwrap();
        assert_eq!(
            p("0 is not in 1..18446744073709551615"),
            "give a whole number of at least 1"
        );
        assert_eq!(
            p("5000 is not in 1..=4096"),
            "give a whole number from 1 to 4096"
        );
        assert_eq!(
            p("0 is not in 1..=4294967295"),
            "give a whole number of at least 1"
        );
        assert_eq!(number_problem("a label must be short"), None);
    }

    proptest::proptest! {
        #[test]
        fn an_echo_is_short_and_printable(value in "\\PC*|[\\x00-\\x1f\\x7f-\\u{9f}]{0,80}") {
            let shown = echo(&value);
            proptest::prop_assert!(!shown.chars().any(char::is_control));
            // 40 characters, each escaped to at most 10 (\u{10ffff}), quotes and ellipsis.
            proptest::prop_assert!(shown.chars().count() <= ECHO_CHARS * 10 + 3);
        }

        #[test]
        fn any_cause_is_rewritten_or_left_alone(cause in "\\PC*( is not in )?[0-9.=]*") {
            let _ = number_problem(&cause);
        }
    }

    #[test]
    fn long_words_of_a_message_are_cut() {
        let long = "x".repeat(100);
        let text = cut_long_words(&format!("unknown unit '{long}' in '{long}'; use s"));
        assert_eq!(text.matches('…').count(), 2, "{text}");
        assert!(
            text.contains("…' in '") && text.ends_with("…'; use s"),
            "{text}"
        );
    }

    #[test]
    fn long_values_are_cut() {
        let long = "x".repeat(300);
        let shown = echo(&long);
        assert!(
            shown.chars().count() < 50 && shown.ends_with("…\""),
            "{shown}"
        );
        assert_eq!(echo("a\u{1b}b"), "\"a\\u{1b}b\"");
    }
}
