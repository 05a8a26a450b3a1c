//! A host's labels (`role=db`, `dc=fra1`): given with `--label KEY=VALUE` (repeatable), as
//! `TACHO_LABELS=role=db,dc=fra1`, or in the config file's `[labels]` (in that order), stored with every run, snapshot and history row of the
//! shared store, and matched by the `--label` selectors of the commands that read it.

use std::collections::BTreeMap;

/// Labels by key.
pub type Labels = BTreeMap<String, String>;

/// The environment variable holding this host's labels.
pub const ENV: &str = "TACHO_LABELS";

/// Parses one `KEY=VALUE`: the key of letters, digits, `_`, `.` and `-` (at most 64), the
/// value any printable text of at most 256 characters.
pub fn parse(text: &str) -> Result<(String, String), String> {
    let fix = "write a label as KEY=VALUE, e.g. role=db (key: letters, digits, _ . -)";
    let (key, value) = text
        .split_once('=')
        .ok_or_else(|| format!("the label {text:?} has no '='; {fix}"))?;
    if !valid_key(key) {
        return Err(format!("the label key {key:?} is not usable; {fix}"));
    }
    if value.chars().count() > 256 || value.chars().any(char::is_control) {
        return Err(format!(
            "the value of label {key} is longer than 256 characters or holds control characters; {fix}"
        ));
    }
    Ok((key.to_owned(), value.to_owned()))
}

/// Whether `key` can be a label's key: 1 to 64 letters, digits, `_`, `.` and `-`.
pub fn valid_key(key: &str) -> bool {
    !key.is_empty()
        && key.len() <= 64
        && key
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-'))
}

/// `KEY=VALUE` items (a later key wins) as labels.
pub fn collect<'a>(items: impl IntoIterator<Item = &'a str>) -> Result<Labels, String> {
    items.into_iter().map(parse).collect()
}

/// The labels of `TACHO_LABELS` (comma-separated `KEY=VALUE`); empty when it is unset.
pub fn from_env() -> Result<Labels, String> {
    match std::env::var(ENV) {
        Ok(text) => collect(text.split(',').map(str::trim).filter(|t| !t.is_empty()))
            .map_err(|e| format!("{ENV}: {e}")),
        Err(_) => Ok(Labels::new()),
    }
}

/// The config file's labels (`[labels]`), set once when a command starts.
static CONFIGURED: std::sync::OnceLock<Labels> = std::sync::OnceLock::new();

/// Sets the config file's labels (once; a second call changes nothing).
pub fn configure(labels: Labels) {
    let _ = CONFIGURED.set(labels);
}

/// This host's labels: `TACHO_LABELS` when it is set, else the config file's.
pub fn of_host() -> Result<Labels, String> {
    if std::env::var_os(ENV).is_some() {
        return from_env();
    }
    Ok(CONFIGURED.get().cloned().unwrap_or_default())
}

/// Whether `labels` has every key of `wanted` with its value.
pub fn matches(labels: &Labels, wanted: &Labels) -> bool {
    wanted.iter().all(|(k, v)| labels.get(k) == Some(v))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn labels_parse_and_match() {
        let l = collect(["role=db", "dc=fra1", "role=web"]).unwrap();
        assert_eq!(l.get("role").map(String::as_str), Some("web"));
        assert!(matches(&l, &collect(["dc=fra1"]).unwrap()));
        assert!(!matches(&l, &collect(["dc=ams"]).unwrap()));
        assert!(parse("noequals").unwrap_err().contains("KEY=VALUE"));
        assert!(parse("bad key=x").is_err());
        assert!(parse("k=a\nb").is_err());
        assert_eq!(parse("k=").unwrap(), ("k".into(), String::new()));
    }

    proptest! {
        #[test]
        fn parsing_never_panics(text in ".{0,300}") {
            let _ = parse(&text);
        }
    }
}
