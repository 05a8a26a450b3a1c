//! Fitting text into a width without cutting words: a verdict wraps onto more lines (through
//! the shared [`crate::fit::wrap`]), and a panel's short items ("runq 2", "swap 0 B/1.0 GiB") flow onto as many lines as it has,
//! the least important items left out when they do not fit.
//!
//! Hand-written rather than ratatui's own wrapping: the screen must know how many lines a
//! verdict takes before laying out the panels below it, and ratatui only reports that behind
//! an unstable feature flag.

use unicode_width::UnicodeWidthStr;

/// Items (most important first) joined by two spaces onto at most `max_lines` lines of
/// `width` columns; an item that does not fit on any line left is left out, with all after it.
pub(crate) fn flow(items: &[String], width: usize, max_lines: usize) -> Vec<String> {
    let mut lines: Vec<String> = Vec::new();
    for item in items {
        let w = item.width();
        let fits_last = lines.last().is_some_and(|l| l.width() + 2 + w <= width);
        if fits_last && let Some(last) = lines.last_mut() {
            last.push_str("  ");
            last.push_str(item);
        } else if lines.len() < max_lines && w <= width {
            lines.push(item.clone());
        } else {
            break;
        }
    }
    lines
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flow_keeps_the_first_items_whole() {
        let items: Vec<String> = ["load 1.00", "runq 2", "blocked 0", "cswch/s 1234"]
            .map(String::from)
            .into();
        assert_eq!(flow(&items, 20, 2), ["load 1.00  runq 2", "blocked 0"]);
        assert_eq!(flow(&items, 40, 1), ["load 1.00  runq 2  blocked 0"]);
        assert!(flow(&items, 5, 3).is_empty());
    }
}
