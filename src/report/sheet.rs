//! CSV as every tacho document writes it: the `csv` crate's quoting (RFC 4180), and cells that
//! a spreadsheet would run as formulas written as text.

use crate::text::Escaped;

/// Text that a spreadsheet will show as text: names can come from imported files or be timed
/// commands, and a cell starting with `=`, `+`, `-` or `@` would run as a formula when the
/// CSV is opened (OWASP's CSV injection advice: prefix a quote). Control characters are
/// escaped too: `cat`ting the file must not drive the terminal.
pub fn spreadsheet_text(text: &str) -> String {
    if text.starts_with(['=', '+', '-', '@', '\t', '\r']) {
        format!("'{}", Escaped(text))
    } else {
        Escaped(text).to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::spreadsheet_text;

    #[test]
    fn formulas_become_text() {
        assert_eq!(spreadsheet_text("=HYPERLINK(\"x\")"), "'=HYPERLINK(\"x\")");
        assert_eq!(spreadsheet_text("@SUM(A1)"), "'@SUM(A1)");
        assert_eq!(spreadsheet_text("-2+3"), "'-2+3");
        assert_eq!(spreadsheet_text("RND4K Q32T1"), "RND4K Q32T1");
        assert_eq!(spreadsheet_text(""), "");
        assert_eq!(spreadsheet_text("a\u{1b}[2J\n"), r"a\e[2J\n");
    }
}
