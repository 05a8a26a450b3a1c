//! Text read from the system or from files, made safe to print and lossless to store.
//!
//! Any local user names its own processes (`prctl(PR_SET_NAME)`), files and directories, and
//! an imported run brings its own labels. Printed raw, an ESC, CSI or OSC sequence rewrites the
//! admin's terminal (title, screen, clipboard) and an LF forges an output line. Every
//! human-readable renderer therefore prints such text through [`Escaped`] (or [`path`] for
//! paths), which writes control characters the way `ls --quoting-style=escape` does:
//!
//! | character | printed as |
//! |---|---|
//! | BEL BS TAB LF VT FF CR ESC | `\a` `\b` `\t` `\n` `\v` `\f` `\r` `\e` |
//! | other C0 controls, DEL | `\xNN` |
//! | C1 controls U+0080–U+009F, bidirectional overrides and isolates | `\u{NNNN}` |
//! | a byte that is not part of valid UTF-8 (paths, names) | `\xNN` |
//!
//! Backslashes are left alone so commands and regular expressions stay copyable; the escaped
//! form is for eyes, the exact bytes are in `--json` (see [`hex_if_not_utf8`]).
//!
//! JSON output keeps the readable string (invalid UTF-8 shown as U+FFFD) and, only when the
//! original bytes are not valid UTF-8, adds a sibling field `<name>_hex` holding those bytes in
//! lowercase hexadecimal, so two names that differ only in their invalid bytes stay distinct
//! (`bytes.fromhex(v)` in Python, `xxd -r -p` in a shell). Hand-written rather than taken from a
//! crate: the rules are a dozen lines and every crate found either escapes for a shell (with
//! quoting we do not want in a table) or only for one output (JSON, HTML).

use std::ffi::OsStr;
use std::fmt::{self, Display, Write as _};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

/// `text` with its control characters escaped when displayed.
#[derive(Debug, Clone, Copy)]
pub struct Escaped<'a>(pub &'a str);

impl Display for Escaped<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Honour width and alignment (`{:<16}`) on the escaped text, so tables stay aligned.
        if f.width().is_some() {
            return f.pad(&escape(self.0));
        }
        write_escaped(f, self.0)
    }
}

/// Bytes that are usually UTF-8 (a path, a process name), escaped when displayed; a byte that
/// is not part of valid UTF-8 shows as `\xNN`.
#[derive(Debug, Clone, Copy)]
pub struct EscapedBytes<'a>(pub &'a [u8]);

impl Display for EscapedBytes<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if f.width().is_some() {
            return f.pad(&self.to_string_plain());
        }
        for chunk in self.0.utf8_chunks() {
            write_escaped(f, chunk.valid())?;
            for b in chunk.invalid() {
                write!(f, "\\x{b:02x}")?;
            }
        }
        Ok(())
    }
}

impl EscapedBytes<'_> {
    fn to_string_plain(self) -> String {
        let mut s = String::new();
        for chunk in self.0.utf8_chunks() {
            s.push_str(&escape(chunk.valid()));
            for b in chunk.invalid() {
                let _ = write!(s, "\\x{b:02x}");
            }
        }
        s
    }
}

/// `text` with its control characters escaped.
pub fn escape(text: &str) -> std::borrow::Cow<'_, str> {
    if !text.chars().any(needs_escape) {
        return std::borrow::Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 8);
    let _ = write_escaped(&mut out, text);
    std::borrow::Cow::Owned(out)
}

/// A path for a terminal: control characters and bytes that are not UTF-8 escaped.
pub fn path(p: &Path) -> String {
    os(p.as_os_str())
}

/// An OS string (a path, a file name) for a terminal.
pub fn os(s: &OsStr) -> String {
    EscapedBytes(s.as_bytes()).to_string_plain()
}

/// A name kept as lossy text beside its `<name>_hex` (see [`hex_if_not_utf8`]), for a
/// terminal: escaped from its exact bytes when the hex holds them, so a byte that is not
/// UTF-8 shows as `\xNN`, never as U+FFFD.
pub fn exact(text: &str, hex: Option<&str>) -> String {
    match hex.and_then(unhex) {
        Some(bytes) => EscapedBytes(&bytes).to_string_plain(),
        None => escape(text).into_owned(),
    }
}

/// The bytes of lowercase or uppercase hexadecimal; `None` for anything else.
fn unhex(hex: &str) -> Option<Vec<u8>> {
    if !hex.len().is_multiple_of(2) {
        return None;
    }
    (0..hex.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(hex.get(i..i + 2)?, 16).ok())
        .collect()
}

/// The bytes in lowercase hexadecimal when they are not valid UTF-8, for the `<name>_hex`
/// field that sits beside a lossy string in JSON; `None` (field omitted) for valid UTF-8.
pub fn hex_if_not_utf8(bytes: &[u8]) -> Option<String> {
    if std::str::from_utf8(bytes).is_ok() {
        return None;
    }
    Some(hex(bytes))
}

/// The bytes in lowercase hexadecimal.
pub fn hex(bytes: &[u8]) -> String {
    let mut hex = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        let _ = write!(hex, "{b:02x}");
    }
    hex
}

/// Whether `c` is printed escaped: a control character or a bidirectional control. Every
/// escaper (terminal, Markdown, HTML, CSV) asks this one function, so none lets through what
/// another escapes.
pub(crate) fn needs_escape(c: char) -> bool {
    c.is_control() || is_bidi_control(c)
}

/// Characters that reorder the text around them on screen (the "Trojan Source" attack).
fn is_bidi_control(c: char) -> bool {
    matches!(c, '\u{200e}' | '\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
}

fn write_escaped(out: &mut impl fmt::Write, text: &str) -> fmt::Result {
    let mut rest = text;
    while let Some(i) = rest.find(needs_escape) {
        out.write_str(&rest[..i])?;
        let c = rest[i..].chars().next().unwrap_or_default();
        match c {
            '\u{7}' => out.write_str("\\a")?,
            '\u{8}' => out.write_str("\\b")?,
            '\t' => out.write_str("\\t")?,
            '\n' => out.write_str("\\n")?,
            '\u{b}' => out.write_str("\\v")?,
            '\u{c}' => out.write_str("\\f")?,
            '\r' => out.write_str("\\r")?,
            '\u{1b}' => out.write_str("\\e")?,
            c if (c as u32) < 0x80 => write!(out, "\\x{:02x}", c as u32)?,
            c => write!(out, "\\u{{{:04x}}}", c as u32)?,
        }
        rest = &rest[i + c.len_utf8()..];
    }
    out.write_str(rest)
}

/// What a JSON value is, for messages that name a wrong type without echoing the value
/// (which may be long or hostile): `a string`, `an array`.
pub fn json_kind(v: &serde_json::Value) -> &'static str {
    use serde_json::Value;
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// Text from runs is cut to this many characters in tables and headings (labels, test names,
/// hosts, paths), so a label of 100 MB prints as one short cell; JSON keeps it whole.
pub const SHOWN_CHARS: usize = 64;

/// `text` cut to `max` characters, the last of them an ellipsis when anything was left out.
/// Cut before escaping, so an escape is never split.
pub fn cut(text: &str, max: usize) -> std::borrow::Cow<'_, str> {
    match text.char_indices().nth(max) {
        None => std::borrow::Cow::Borrowed(text),
        Some(_) => {
            let keep = text
                .char_indices()
                .nth(max.saturating_sub(1))
                .map_or(0, |(i, _)| i);
            std::borrow::Cow::Owned(format!("{}…", &text[..keep]))
        }
    }
}

/// Sorts `db-2` before `db-10`: runs of digits compare as numbers.
pub fn natural_key(name: &str) -> Vec<(String, u128)> {
    let mut out = Vec::new();
    let mut text = String::new();
    let mut chars = name.chars().peekable();
    while let Some(c) = chars.next() {
        if c.is_ascii_digit() {
            let mut digits = c.to_string();
            while let Some(d) = chars.next_if(char::is_ascii_digit) {
                digits.push(d);
            }
            out.push((
                std::mem::take(&mut text),
                digits.parse().unwrap_or(u128::MAX),
            ));
        } else {
            text.push(c);
        }
    }
    out.push((text, 0));
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn a_name_with_its_hex_is_shown_from_its_exact_bytes() {
        let bytes = b"ab\xff\x1b";
        let lossy = String::from_utf8_lossy(bytes);
        let hex = hex_if_not_utf8(bytes);
        assert_eq!(exact(&lossy, hex.as_deref()), r"ab\xff\e");
        assert_eq!(exact("plain\n", None), r"plain\n");
        assert_eq!(
            exact("x\u{fffd}", Some("zz")),
            "x\u{fffd}",
            "not hex: the text"
        );
    }

    #[test]
    fn controls_are_escaped_like_ls() {
        assert_eq!(
            Escaped("\u{1b}]0;pwned\u{7}\u{1b}[2J").to_string(),
            r"\e]0;pwned\a\e[2J"
        );
        assert_eq!(
            Escaped("a\nb\rc\td\u{0}\u{7f}").to_string(),
            r"a\nb\rc\td\x00\x7f"
        );
        assert_eq!(Escaped("csi\u{9b}2J").to_string(), r"csi\u{009b}2J");
        assert_eq!(Escaped("rtl\u{202e}txt").to_string(), r"rtl\u{202e}txt");
        assert_eq!(Escaped(r"back\slash é ✓").to_string(), r"back\slash é ✓");
        assert_eq!(format!("[{:<6}]", Escaped("a\nb")), r"[a\nb  ]");
        assert_eq!(format!("[{:>5}]", Escaped("ab")), "[   ab]");
    }

    #[test]
    fn invalid_utf8_bytes_are_shown_as_hex() {
        assert_eq!(EscapedBytes(b"a\xffb\n\xc3\xa9").to_string(), r"a\xffb\né");
        assert_eq!(path(Path::new(OsStr::from_bytes(b"/x/\xfe"))), r"/x/\xfe");
        assert_eq!(format!("{:>4}", EscapedBytes(b"\xff")), r"\xff");
    }

    #[test]
    fn long_text_is_cut_with_an_ellipsis() {
        assert_eq!(cut("abc", 3), "abc");
        assert_eq!(cut("abcd", 3), "ab…");
        assert_eq!(cut("ééééé", 4), "ééé…");
        assert_eq!(cut("", 0), "");
    }

    #[test]
    fn hex_only_for_invalid_utf8() {
        assert_eq!(hex_if_not_utf8("é".as_bytes()), None);
        assert_eq!(hex_if_not_utf8(b"a\xff").as_deref(), Some("61ff"));
    }

    proptest! {
        #[test]
        fn escaped_text_has_no_control_characters(s in any::<String>()) {
            let e = Escaped(&s).to_string();
            prop_assert!(!e.chars().any(needs_escape), "{e:?}");
        }

        #[test]
        fn escaped_bytes_are_printable_and_distinct(
            a in proptest::collection::vec(any::<u8>(), 0..16),
            b in proptest::collection::vec(any::<u8>(), 0..16),
        ) {
            let (ea, eb) = (EscapedBytes(&a).to_string(), EscapedBytes(&b).to_string());
            prop_assert!(!ea.chars().any(needs_escape), "{ea:?}");
            // Backslashes stay unescaped, so distinct inputs may only coincide through one.
            if a != b && !a.contains(&b'\\') && !b.contains(&b'\\') {
                prop_assert_ne!(ea, eb);
            }
        }
    }
}
