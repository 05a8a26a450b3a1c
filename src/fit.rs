//! Output that fits the terminal it is read on. Every reporter writes its lines as wide as
//! they come; when stdout is a terminal narrower than a line, [`Fit`] wraps that line at
//! spaces, its continuation indented, and tables leave out their least important columns
//! ([`choose`]) before they get there. Piped output is left alone: a script or a log keeps
//! one record per line.
//!
//! The width is the terminal's (`TIOCGWINSZ` on the stream itself), `COLUMNS` overriding it
//! (as `ls` and `ps` honour it), so a test or a user can ask for a width.

use std::io::{self, IsTerminal, Write};
use std::os::fd::AsFd;

use unicode_width::{UnicodeWidthChar, UnicodeWidthStr};

/// Narrower than this is not honoured: a label and a figure would no longer fit on a line.
const NARROWEST: usize = 20;

/// Columns of stdout when it is a terminal; `None` when it is a pipe or a file.
pub(crate) fn stdout_width() -> Option<usize> {
    width_of(&io::stdout())
}

/// Columns of stderr when it is a terminal; `None` when it is a pipe or a file.
pub(crate) fn stderr_width() -> Option<usize> {
    width_of(&io::stderr())
}

fn width_of(stream: &(impl IsTerminal + AsFd)) -> Option<usize> {
    if !stream.is_terminal() {
        return None;
    }
    let from_env = std::env::var("COLUMNS")
        .ok()
        .and_then(|v| v.trim().parse::<usize>().ok());
    let cols = from_env.or_else(|| {
        rustix::termios::tcgetwinsize(stream)
            .ok()
            .map(|w| usize::from(w.ws_col))
    })?;
    // A terminal that reports no size (a bare pseudo-terminal says 0): as if not known.
    (cols > 0).then_some(cols.max(NARROWEST))
}

/// `text` broken at spaces into lines at most `width` columns wide; lines after the first
/// start with `indent` spaces. Spaces between words on one line are kept as they were (a
/// table's alignment survives); a break drops them. A word wider than a whole line is split
/// (the only cut).
pub(crate) fn wrap(text: &str, width: usize, indent: usize) -> Vec<String> {
    let width = width.max(indent + 1);
    let mut lines = Vec::new();
    let mut line = String::new();
    // Columns used on `line`, and whether it holds a word yet (not only the indent).
    let mut used = 0;
    let mut has_word = false;
    // Spaces seen since the last word, beyond the one that separates every two.
    let mut more_spaces = 0;
    for word in text.split(' ') {
        if word.is_empty() {
            more_spaces += 1;
            continue;
        }
        let spaces = if has_word { more_spaces + 1 } else { 0 };
        more_spaces = 0;
        if has_word && used + spaces + word.width() > width {
            lines.push(std::mem::take(&mut line));
            has_word = false;
        }
        if has_word {
            line.push_str(&" ".repeat(spaces));
            used += spaces;
        } else {
            used = if lines.is_empty() { 0 } else { indent };
            line = " ".repeat(used);
        }
        for c in word.chars() {
            let cw = c.width().unwrap_or(0);
            if used + cw > width && used > indent {
                lines.push(std::mem::take(&mut line));
                line = " ".repeat(indent);
                used = indent;
            }
            line.push(c);
            used += cw;
        }
        has_word = true;
    }
    if has_word || lines.is_empty() {
        lines.push(line);
    }
    lines
}

/// `text` cut to `width` columns, its last an ellipsis when anything was left out.
pub(crate) fn ellipsis(text: &str, width: usize) -> String {
    if text.width() <= width {
        return text.to_string();
    }
    let mut out = String::new();
    let mut used = 0;
    for c in text.chars() {
        let cw = c.width().unwrap_or(0);
        if used + cw + 1 > width {
            break;
        }
        out.push(c);
        used += cw;
    }
    out.push('…');
    out
}

/// One line fitted into `width`: as it is when it fits, else wrapped at spaces, every piece
/// keeping the line's own indent and the continuations two more.
fn fit_line(line: &str, width: usize) -> Vec<String> {
    if line.width() <= width {
        return vec![line.to_string()];
    }
    let body = line.trim_start_matches(' ');
    let lead = (line.len() - body.len()).min(width / 2);
    let pad = " ".repeat(lead);
    wrap(body, width - lead, 2)
        .into_iter()
        .map(|l| format!("{pad}{l}"))
        .collect()
}

/// The columns of a table that fit in `width` (their indexes, in table order), given each
/// column's width and priority (0 always shown, higher left out first) and `gap` columns
/// between two: by priority, stopping at the first that does not fit, so a column is never
/// shown while a more important one is not. The first by priority is shown whatever the width.
pub(crate) fn choose(columns: &[(usize, u8)], gap: usize, width: usize) -> Vec<usize> {
    let mut by_priority: Vec<usize> = (0..columns.len()).collect();
    by_priority.sort_by_key(|&i| columns[i].1);
    let mut used = 0;
    let mut shown = Vec::new();
    for i in by_priority {
        let need = columns[i].0 + if shown.is_empty() { 0 } else { gap };
        if used + need > width && !shown.is_empty() {
            break;
        }
        used += need;
        shown.push(i);
    }
    shown.sort_unstable();
    shown
}

/// A column of a plain-text table.
pub(crate) struct Col {
    pub name: &'static str,
    /// Columns for the values (the name's width wins when larger).
    pub width: usize,
    /// 0 is shown always; higher numbers are left out first (see [`choose`]).
    pub priority: u8,
    /// Text, aligned left (a name), rather than a figure, aligned right.
    pub left: bool,
}

impl Col {
    /// A right-aligned figure column.
    pub const fn num(name: &'static str, priority: u8, width: usize) -> Col {
        Col {
            name,
            priority,
            width,
            left: false,
        }
    }

    /// A left-aligned text column.
    pub const fn text(name: &'static str, priority: u8, width: usize) -> Col {
        Col {
            name,
            priority,
            width,
            left: true,
        }
    }

    fn full_width(&self) -> usize {
        self.width.max(self.name.width())
    }
}

/// A header and `rows` (one cell per column, already escaped) in the columns that fit in
/// `width` (all of them without one), one space apart.
pub(crate) fn table(
    out: &mut impl Write,
    cols: &[Col],
    rows: &[Vec<String>],
    width: Option<usize>,
) -> io::Result<()> {
    let names = header_cells(cols);
    for row in std::iter::once(&names).chain(rows) {
        writeln!(out, "{}", table_line(cols, row, width))?;
    }
    Ok(())
}

/// One line of a table (its header: the columns' names) in the columns that fit in `width`,
/// for tables printed a line at a time; a cell wider than its column pushes the rest of its
/// line right, as printf's padding does.
pub(crate) fn table_line(cols: &[Col], cells: &[String], width: Option<usize>) -> String {
    let sizes: Vec<(usize, u8)> = cols.iter().map(|c| (c.full_width(), c.priority)).collect();
    let mut line = String::new();
    for (n, i) in choose(&sizes, 1, width.unwrap_or(usize::MAX))
        .into_iter()
        .enumerate()
    {
        if n > 0 {
            line.push(' ');
        }
        let cell = cells.get(i).map_or("", String::as_str);
        let pad = " ".repeat(cols[i].full_width().saturating_sub(cell.width()));
        if cols[i].left {
            line.push_str(cell);
            line.push_str(&pad);
        } else {
            line.push_str(&pad);
            line.push_str(cell);
        }
    }
    line.trim_end().to_string()
}

/// The names of `cols`, as a table's header cells for [`table_line`].
pub(crate) fn header_cells(cols: &[Col]) -> Vec<String> {
    cols.iter().map(|c| c.name.to_string()).collect()
}

/// A writer that fits each line it is given into a width (see [`fit_line`]); with no width
/// (not a terminal) it passes everything through unchanged.
pub(crate) struct Fit<W: Write> {
    out: W,
    width: Option<usize>,
    /// Bytes of a line not ended yet.
    pending: Vec<u8>,
    /// Lines are wrapped (off for text that must stay whole: a command to copy).
    wrapping: bool,
}

impl<W: Write> Fit<W> {
    /// Lines written to `out` fitted into `width` columns (`None`: as they are).
    pub fn new(out: W, width: Option<usize>) -> Fit<W> {
        Fit {
            out,
            width,
            pending: Vec::new(),
            wrapping: true,
        }
    }

    /// Lines ended from now on are wrapped (`true`) or kept whole (`false`): a shell command
    /// broken over lines could not be copied and run, so a terminal's own soft wrap shows it.
    pub fn set_wrapping(&mut self, on: bool) {
        self.wrapping = on;
    }

    fn emit(&mut self, line: &[u8], end: &[u8]) -> io::Result<()> {
        let Some(width) = self.width.filter(|_| self.wrapping) else {
            self.out.write_all(line)?;
            return self.out.write_all(end);
        };
        let text = String::from_utf8_lossy(line);
        for piece in fit_line(&text, width) {
            self.out.write_all(piece.trim_end().as_bytes())?;
            self.out.write_all(b"\n")?;
        }
        Ok(())
    }
}

impl<W: Write> Write for Fit<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        if self.width.is_none() {
            return self.out.write(buf);
        }
        self.pending.extend_from_slice(buf);
        while let Some(end) = self.pending.iter().position(|&b| b == b'\n') {
            let rest = self.pending.split_off(end + 1);
            let line = std::mem::replace(&mut self.pending, rest);
            self.emit(&line[..end], b"\n")?;
        }
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        if !self.pending.is_empty() {
            let line = std::mem::take(&mut self.pending);
            self.emit(&line, b"")?;
        }
        self.out.flush()
    }
}

impl<W: Write> Drop for Fit<W> {
    fn drop(&mut self) {
        // A last line without its newline is still shown; an error here has nowhere to go.
        let _ = self.flush();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn wraps_at_spaces_and_indents_what_follows() {
        let lines = wrap(
            "vda saturated: aqu-sz 31, await 4.1 ms vs 0.3 ms usual",
            20,
            2,
        );
        assert_eq!(
            lines,
            [
                "vda saturated:",
                "  aqu-sz 31, await",
                "  4.1 ms vs 0.3 ms",
                "  usual"
            ]
        );
        assert_eq!(wrap("short", 20, 2), ["short"]);
        assert_eq!(
            wrap("ok    thp    THP madvise as recommended", 20, 4),
            ["ok    thp    THP", "    madvise as", "    recommended"]
        );
        assert_eq!(wrap("", 20, 2), [""]);
    }

    #[test]
    fn a_word_wider_than_the_line_is_split_not_lost() {
        assert_eq!(wrap("abcdefgh", 5, 1), ["abcde", " fgh"]);
    }

    #[test]
    fn the_least_important_columns_go_first_and_order_is_kept() {
        let cols = [(6, 0), (7, 3), (9, 1), (6, 0)];
        assert_eq!(choose(&cols, 1, 200), [0, 1, 2, 3]);
        // 6 + 7 + 10 = 23; the column of priority 3 needs 8 more.
        assert_eq!(choose(&cols, 1, 30), [0, 2, 3]);
        assert_eq!(choose(&cols, 1, 23), [0, 2, 3]);
        assert_eq!(choose(&cols, 1, 22), [0, 3]);
        assert_eq!(choose(&cols, 1, 2), [0]);
    }

    #[test]
    fn a_table_leaves_out_its_least_important_columns() {
        let cols = [
            Col::text("Device", 0, 6),
            Col::num("r_await", 3, 7),
            Col::num("%util", 0, 6),
        ];
        let rows = vec![vec!["vda".to_string(), "1.50".into(), "12.00".into()]];
        let mut out = Vec::new();
        table(&mut out, &cols, &rows, None).unwrap();
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "Device r_await  %util\nvda       1.50  12.00\n"
        );
        let mut out = Vec::new();
        table(&mut out, &cols, &rows, Some(16)).unwrap();
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "Device  %util\nvda     12.00\n"
        );
    }

    #[test]
    fn a_fit_writer_wraps_long_lines_keeps_short_ones_and_whole_ones() {
        let mut out = Vec::new();
        {
            let mut fit = Fit::new(&mut out, Some(20));
            write!(fit, "short\n  indented words that go on and on\n").unwrap();
            fit.set_wrapping(false);
            writeln!(fit, "echo a command that stays whole").unwrap();
            fit.set_wrapping(true);
            write!(fit, "no newline at the very end").unwrap();
        }
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "short\n  indented words\n    that go on and\n    on\n\
             echo a command that stays whole\nno newline at the\n  very end\n"
        );
        let mut piped = Vec::new();
        writeln!(Fit::new(&mut piped, None), "{}", "x ".repeat(100)).unwrap();
        assert_eq!(piped, format!("{}\n", "x ".repeat(100)).as_bytes());
    }

    proptest! {
        #[test]
        fn wrapping_loses_no_word_and_keeps_the_width(
            words in proptest::collection::vec("[a-zé→]{1,12}", 0..30),
            width in 4usize..120,
        ) {
            let text = words.join(" ");
            let lines = wrap(&text, width, 2);
            for l in &lines {
                prop_assert!(l.width() <= width, "{l:?} wider than {width}");
            }
            let back: String = lines.concat().chars().filter(|c| *c != ' ').collect();
            let want: String = text.chars().filter(|c| *c != ' ').collect();
            prop_assert_eq!(back, want);
            if words.iter().all(|w| w.width() + 2 <= width) {
                // No word split: every word is found whole on some line.
                for w in &words {
                    prop_assert!(lines.iter().any(|l| l.split(' ').any(|x| x == w)));
                }
            }
        }

        #[test]
        fn fitted_lines_are_never_wider_than_asked(
            line in "[ a-z]{0,300}",
            width in NARROWEST..120,
        ) {
            for piece in fit_line(&line, width) {
                prop_assert!(piece.width() <= width, "{piece:?} wider than {width}");
            }
        }
    }
}
