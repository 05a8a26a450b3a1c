//! Tables that fit their width: each column has a priority, the least important columns are
//! left out when the screen is narrow, and a column is never narrower than its name, so a
//! header is shown whole or not at all. Figures get fewer decimals rather than being cut.

use ratatui::layout::Constraint;
use ratatui::style::{Modifier, Style};
use ratatui::text::Line;
use ratatui::widgets::{Cell, Row, Table};
use unicode_width::UnicodeWidthStr;

/// One column of a table.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Column {
    /// The header, as the reference tool (iostat, pidstat, sar) names it.
    pub name: &'static str,
    /// 0 is shown always; higher numbers are left out first.
    pub priority: u8,
    /// Columns for the values (the name's width wins when larger).
    pub width: u16,
    /// Text (left-aligned, the first column) rather than a figure (right-aligned).
    pub text: bool,
}

impl Column {
    /// A right-aligned figure column.
    pub const fn num(name: &'static str, priority: u8, width: u16) -> Column {
        Column {
            name,
            priority,
            width,
            text: false,
        }
    }

    /// A left-aligned text column.
    pub const fn text(name: &'static str, priority: u8, width: u16) -> Column {
        Column {
            name,
            priority,
            width,
            text: true,
        }
    }

    fn full_width(&self) -> u16 {
        self.width.max(self.name.width() as u16)
    }
}

/// The columns shown in `width` (their indexes, in table order), one space apart: the
/// least important left out first, as every plain-text table does ([`crate::fit::choose`]).
pub(crate) fn choose(columns: &[Column], width: u16) -> Vec<usize> {
    let sizes: Vec<(usize, u8)> = columns
        .iter()
        .map(|c| (usize::from(c.full_width()), c.priority))
        .collect();
    crate::fit::choose(&sizes, 1, usize::from(width))
}

/// A fitted table: the header row, the widths, and a function making body rows.
pub(crate) struct Fitted<'c> {
    columns: &'c [Column],
    shown: Vec<usize>,
}

impl<'c> Fitted<'c> {
    /// The columns of `columns` that fit in `width`.
    pub fn new(columns: &'c [Column], width: u16) -> Fitted<'c> {
        Fitted {
            columns,
            shown: choose(columns, width),
        }
    }

    /// The header row, bold.
    pub fn header(&self) -> Row<'static> {
        self.row(self.columns.iter().map(|c| c.name.to_string()).collect())
            .style(Style::default().add_modifier(Modifier::BOLD))
    }

    /// A table of `rows` under the header, in the shown columns' widths.
    pub fn table(&self, rows: impl IntoIterator<Item = Row<'static>>) -> Table<'static> {
        Table::new(rows, self.widths()).header(self.header())
    }

    /// The widths of the shown columns.
    pub fn widths(&self) -> Vec<Constraint> {
        self.shown
            .iter()
            .map(|&i| Constraint::Length(self.columns[i].full_width()))
            .collect()
    }

    /// A body row from one cell per column of the full list (hidden ones are dropped).
    /// Text cells wider than their column end in "…"; figures are fitted by [`figure`].
    pub fn row(&self, mut cells: Vec<String>) -> Row<'static> {
        let cells: Vec<Cell> = self
            .shown
            .iter()
            .map(|&i| {
                let c = &self.columns[i];
                let text = std::mem::take(cells.get_mut(i).unwrap_or(&mut String::new()));
                let text = ellipsis(text, usize::from(c.full_width()));
                if c.text {
                    Cell::from(Line::from(text))
                } else {
                    Cell::from(Line::from(text).right_aligned())
                }
            })
            .collect();
        Row::new(cells)
    }
}

/// `text` cut to `width` columns with a final "…" when wider ([`crate::fit::ellipsis`]).
pub(crate) fn ellipsis(text: String, width: usize) -> String {
    if text.width() <= width {
        return text;
    }
    crate::fit::ellipsis(&text, width)
}

/// A figure in at most `width` columns: two decimals where they fit (as iostat prints), then
/// one, then none; "-" for a figure that could not be computed.
pub(crate) fn figure(x: Option<f64>, width: u16) -> String {
    let Some(x) = x else {
        return "-".into();
    };
    for prec in [2, 1, 0] {
        let s = format!("{x:.prec$}");
        if s.len() <= usize::from(width) {
            return s;
        }
    }
    format!("{x:.0}")
}

#[cfg(test)]
mod tests {
    use super::*;

    const COLS: [Column; 4] = [
        Column::text("Device", 0, 6),
        Column::num("r_await", 3, 7),
        Column::num("wkB/s", 1, 9),
        Column::num("%util", 0, 6),
    ];

    #[test]
    fn the_least_important_columns_go_first_and_order_is_kept() {
        assert_eq!(choose(&COLS, 200), [0, 1, 2, 3]);
        // Device 6 + %util 7 + wkB/s 10 = 23; r_await needs 8 more.
        assert_eq!(choose(&COLS, 30), [0, 2, 3]);
        assert_eq!(choose(&COLS, 23), [0, 2, 3]);
        assert_eq!(choose(&COLS, 22), [0, 3]);
        // The first column is shown even when nothing fits.
        assert_eq!(choose(&COLS, 2), [0]);
    }

    #[test]
    fn figures_lose_decimals_before_being_cut() {
        assert_eq!(figure(Some(1.5), 7), "1.50");
        assert_eq!(figure(Some(123456.78), 7), "123457");
        assert_eq!(figure(Some(12345.678), 7), "12345.7");
        assert_eq!(figure(None, 7), "-");
        assert_eq!(ellipsis("vg0-very-long-volume".into(), 8), "vg0-ver…");
        assert_eq!(ellipsis("vda".into(), 8), "vda");
    }
}
