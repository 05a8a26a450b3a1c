//! Every key of the screen, in one list: the bottom line shows what fits of it, and `?` opens
//! an overlay listing all of it, so the two cannot disagree.

use ratatui::Frame;
use ratatui::layout::{Constraint, Flex, Layout, Rect};
use ratatui::style::{Modifier, Style};
use ratatui::text::Line;
use ratatui::widgets::{Block, Clear, Paragraph};
use unicode_width::UnicodeWidthStr;

use super::UiState;
use crate::choice::Choice;

/// One key or group of keys.
pub(crate) struct Key {
    /// As written on screen ("q Esc", "↑ ↓").
    pub keys: &'static str,
    /// The word on the bottom line; empty for keys shown only in the help.
    pub short: &'static str,
    /// What it does, for the help overlay.
    pub help: &'static str,
}

/// Every key, in the order of the bottom line (most needed first).
pub(crate) const KEYS: &[Key] = &[
    Key {
        keys: "q",
        short: "quit",
        help: "quit (also Esc, Ctrl-C)",
    },
    Key {
        keys: "?",
        short: "help",
        help: "this help; any key closes it",
    },
    Key {
        keys: "s",
        short: "sort",
        help: "sort processes by I/O, then CPU, then I/O delay",
    },
    Key {
        keys: "d",
        short: "idle devices",
        help: "show or hide idle loop, ram and zram devices",
    },
    Key {
        keys: "f",
        short: "findings",
        help: "show every finding (up to 3/4 of the screen), or fewer again",
    },
    Key {
        keys: "Tab",
        short: "disks/procs",
        help: "move the focus between the disk and process panels",
    },
    Key {
        keys: "\u{2191}\u{2193}",
        short: "scroll",
        help: "scroll the focused panel a row (PgUp PgDn: a page; Home End)",
    },
    Key {
        keys: "a",
        short: "totals",
        help: "process totals accumulated since the key was pressed, or rates again",
    },
    Key {
        keys: "p",
        short: "partitions",
        help: "show or hide partitions",
    },
    Key {
        keys: "c",
        short: "per-CPU",
        help: "show or hide one row per CPU",
    },
];

/// The bottom line: the keys that fit, each whole, then the sort order when it fits.
pub(crate) fn line(ui: &UiState, width: u16) -> Paragraph<'static> {
    let width = usize::from(width);
    // In a replay, which recorded moment this is comes first: the figures are not live.
    let mut text = ui
        .replaying
        .as_ref()
        .map(|at| format!(" replay {at}  \u{2190} \u{2192} step "))
        .unwrap_or_default();
    let sort = format!("   [sorted by {}]", ui.sort.word());
    for k in KEYS {
        let item = format!(" {} {} ", k.keys, k.short);
        if text.width() + item.width() > width {
            break;
        }
        text.push_str(&item);
    }
    if text.width() + sort.width() <= width {
        text.push_str(&sort);
    }
    Paragraph::new(text).style(Style::default().add_modifier(Modifier::REVERSED))
}

/// The help overlay, centred on `area`.
pub(crate) fn help(frame: &mut Frame, area: Rect) {
    let key_width = KEYS.iter().map(|k| k.keys.width()).max().unwrap_or(0);
    let lines: Vec<Line> = KEYS
        .iter()
        .map(|k| Line::raw(format!(" {:<key_width$}  {} ", k.keys, k.help)))
        .collect();
    let width = lines.iter().map(Line::width).max().unwrap_or(0) + 2;
    let height = lines.len() + 2;
    let [row] = Layout::vertical([Constraint::Length(height as u16)])
        .flex(Flex::Center)
        .areas(area);
    let [rect] = Layout::horizontal([Constraint::Length(width as u16)])
        .flex(Flex::Center)
        .areas(row);
    frame.render_widget(Clear, rect);
    frame.render_widget(
        Paragraph::new(lines).block(Block::bordered().title(" tacho top: keys ")),
        rect,
    );
}
