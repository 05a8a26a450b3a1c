//! A table of text cells, printed aligned for terminals or as a Markdown table.

use std::borrow::Cow;
use std::io::{self, Write};
use unicode_width::UnicodeWidthStr;

use crate::text::{SHOWN_CHARS, cut, escape, needs_escape};

/// The first column is never cut narrower than this to fit a terminal.
const NARROWEST_NAMES: usize = 12;

pub struct Grid {
    pub header: Vec<String>,
    pub rows: Vec<Vec<String>>,
    /// Columns aligned right (numbers).
    pub right: Vec<bool>,
}

impl Grid {
    /// Columns padded to their widest cell, two spaces apart; control characters in cells
    /// (labels, test names, hosts and paths come from runs, imported ones included) escaped,
    /// and cells longer than [`SHOWN_CHARS`] cut with an ellipsis. Rows wider than `width` (a
    /// terminal's) cut the first column (the names) first, to no fewer than
    /// [`NARROWEST_NAMES`] columns.
    pub fn write_text(&self, out: &mut impl Write, width: Option<usize>) -> io::Result<()> {
        write_text_rows(
            &self.header,
            &self.right,
            || self.rows.iter().cloned(),
            out,
            width,
        )
    }

    /// A GitHub-flavoured Markdown table; every cell escaped, and cut as in text.
    pub fn write_markdown(&self, out: &mut impl Write) -> io::Result<()> {
        write_markdown_rows(&self.header, &self.right, self.rows.iter().cloned(), out)
    }
}

/// A cell as a table shows it: cut to [`SHOWN_CHARS`] and escaped; borrowed when it needs
/// neither.
fn shown(cell: &str) -> Cow<'_, str> {
    match cut(cell, SHOWN_CHARS) {
        Cow::Borrowed(whole) => escape(whole),
        Cow::Owned(cut) => Cow::Owned(escape(&cut).into_owned()),
    }
}

/// As [`Grid::write_text`], for rows made by `rows` twice, once to measure the columns and
/// once to write them, so that a table of many rows is never held whole.
pub fn write_text_rows<I: Iterator<Item = Vec<String>>>(
    header: &[String],
    right: &[bool],
    rows: impl Fn() -> I,
    out: &mut impl Write,
    width: Option<usize>,
) -> io::Result<()> {
    // Cut and escaped in place: most cells need neither, and are kept as they came.
    let escaped = |mut row: Vec<String>| -> Vec<String> {
        for cell in &mut row {
            if let Cow::Owned(shown) = shown(cell) {
                *cell = shown;
            }
        }
        row
    };
    let header = escaped(header.to_vec());
    let mut widths = vec![0; header.len()];
    let mut measure = |row: &[String]| {
        for (i, cell) in row.iter().enumerate() {
            if i < widths.len() {
                // Columns on screen, not characters: CJK and emoji take two.
                widths[i] = widths[i].max(cell.width());
            }
        }
    };
    measure(&header);
    for row in rows() {
        measure(&escaped(row));
    }
    let total = widths.iter().sum::<usize>() + 2 * widths.len().saturating_sub(1);
    let mut keep = None;
    if let (Some(width), Some(first)) = (width, widths.first().copied())
        && total > width
    {
        let cut = first
            .saturating_sub(total - width)
            .max(NARROWEST_NAMES)
            .min(first);
        widths[0] = cut;
        keep = Some(cut);
    }
    // One line's text, kept from line to line.
    let mut line = String::new();
    let mut write = |mut row: Vec<String>| -> io::Result<()> {
        if let (Some(keep), Some(cell)) = (keep, row.first_mut()) {
            *cell = crate::fit::ellipsis(cell, keep);
        }
        line.clear();
        let spaces = |line: &mut String, n: usize| line.extend(std::iter::repeat_n(' ', n));
        for (i, cell) in row.iter().enumerate() {
            if i > 0 {
                line.push_str("  ");
            }
            let pad = widths[i].saturating_sub(cell.width());
            if right.get(i).copied().unwrap_or(false) {
                spaces(&mut line, pad);
                line.push_str(cell);
            } else {
                line.push_str(cell);
                spaces(&mut line, pad);
            }
        }
        out.write_all(line.trim_end().as_bytes())?;
        out.write_all(b"\n")
    };
    write(header)?;
    for row in rows() {
        write(escaped(row))?;
    }
    Ok(())
}

/// As [`Grid::write_markdown`], for rows made as they are written.
pub fn write_markdown_rows(
    header: &[String],
    right: &[bool],
    rows: impl Iterator<Item = Vec<String>>,
    out: &mut impl Write,
) -> io::Result<()> {
    let line = |cells: &[String]| {
        let escaped: Vec<String> = cells
            .iter()
            .map(|c| markdown_escape(&cut(c, SHOWN_CHARS)))
            .collect();
        format!("| {} |", escaped.join(" | "))
    };
    writeln!(out, "{}", line(header))?;
    let rule: Vec<&str> = (0..header.len())
        .map(|i| {
            if right.get(i).copied().unwrap_or(false) {
                "---:"
            } else {
                "---"
            }
        })
        .collect();
    writeln!(out, "| {} |", rule.join(" | "))?;
    for row in rows {
        writeln!(out, "{}", line(&row))?;
    }
    Ok(())
}

/// Text from runs (labels, paths) made inert in Markdown: renderers pass raw HTML through and
/// treat `|`, `*`, `_`, `` ` ``, `[` and friends as markup. Newlines would end the table row,
/// other control characters reach the terminal of whoever reads the file, and bidirectional
/// overrides reorder what the reader sees: all escaped.
pub fn markdown_escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '&' => out.push_str("&amp;"),
            c if needs_escape(c) => out.push_str(&escape(&c.to_string())),
            // Enough to neutralise emphasis, code, links (no `[`, no link), tables, strikeout.
            '\\' | '`' | '*' | '_' | '[' | ']' | '|' | '~' => {
                out.push('\\');
                out.push(c);
            }
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markdown_cells_cannot_inject_markup() {
        assert_eq!(
            markdown_escape("<script>a|b</script> *x* [l](u)"),
            "&lt;script&gt;a\\|b&lt;/script&gt; \\*x\\* \\[l\\](u)"
        );
        assert_eq!(markdown_escape("a\u{202e}b"), "a\\u{202e}b");
    }

    #[test]
    fn control_characters_are_escaped_in_both_forms() {
        let g = Grid {
            header: vec!["label".into()],
            rows: vec![vec!["a\u{1b}[2J\nb".into()]],
            right: vec![false],
        };
        let mut out = Vec::new();
        g.write_text(&mut out, None).unwrap();
        assert_eq!(String::from_utf8(out).unwrap(), "label\na\\e[2J\\nb\n");
        let mut out = Vec::new();
        g.write_markdown(&mut out).unwrap();
        let md = String::from_utf8(out).unwrap();
        assert!(md.ends_with("| a\\e\\[2J\\nb |\n"), "{md}");
    }

    #[test]
    fn text_is_aligned() {
        let g = Grid {
            header: vec!["test".into(), "IOPS".into()],
            rows: vec![vec!["long name".into(), "1".into()]],
            right: vec![false, true],
        };
        let mut out = Vec::new();
        g.write_text(&mut out, None).unwrap();
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "test       IOPS\nlong name     1\n"
        );
    }
}
