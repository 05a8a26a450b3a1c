//! Fitting text into a width without cutting words: a verdict wraps onto more lines, and a
//! panel's short items ("runq 2", "swap 0 B/1.0 GiB") flow onto as many lines as it has,
//! the least important items left out when they do not fit.
//!
//! Hand-written rather than ratatui's own wrapping: the screen must know how many lines a
//! verdict takes before laying out the panels below it, and ratatui only reports that behind
//! an unstable feature flag.

use unicode_width::{UnicodeWidthChar, UnicodeWidthStr};

/// `text` broken at spaces into lines at most `width` columns wide; lines after the first
/// start with `indent` spaces. A word wider than a whole line is split (the only cut).
pub(crate) fn wrap(text: &str, width: usize, indent: usize) -> Vec<String> {
    let width = width.max(indent + 1);
    let mut lines = Vec::new();
    let mut line = String::new();
    // Columns used on `line`, and whether it holds a word yet (not only the indent).
    let mut used = 0;
    let mut has_word = false;
    for word in text.split(' ').filter(|w| !w.is_empty()) {
        if has_word && used + 1 + word.width() > width {
            lines.push(std::mem::take(&mut line));
            has_word = false;
        }
        if has_word {
            line.push(' ');
            used += 1;
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
        assert_eq!(wrap("", 20, 2), [""]);
    }

    #[test]
    fn a_word_wider_than_the_line_is_split_not_lost() {
        assert_eq!(wrap("abcdefgh", 5, 1), ["abcde", " fgh"]);
    }

    #[test]
    fn flow_keeps_the_first_items_whole() {
        let items: Vec<String> = ["load 1.00", "runq 2", "blocked 0", "cswch/s 1234"]
            .map(String::from)
            .into();
        assert_eq!(flow(&items, 20, 2), ["load 1.00  runq 2", "blocked 0"]);
        assert_eq!(flow(&items, 40, 1), ["load 1.00  runq 2  blocked 0"]);
        assert!(flow(&items, 5, 3).is_empty());
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
    }
}
