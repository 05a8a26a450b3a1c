use super::*;
use crate::diagnose::findings::tests::fixture_top_sample;
use ratatui::Terminal;
use ratatui::backend::TestBackend;

fn screen(sample: Option<&TopSample>, ui: &UiState, w: u16, h: u16) -> String {
    let mut terminal = Terminal::new(TestBackend::new(w, h)).unwrap();
    terminal.draw(|f| draw(f, sample, ui)).unwrap();
    let buf = terminal.backend().buffer().clone();
    (0..h)
        .map(|y| {
            (0..w)
                .map(|x| buf[(x, y)].symbol().to_string())
                .collect::<String>()
        })
        .collect::<Vec<_>>()
        .join("\n")
}

#[test]
fn renders_every_panel_with_the_verdict_first() {
    let s = fixture_top_sample();
    let ui = UiState::new(SortKey::Io);
    let text = screen(Some(&s), &ui, 150, 45);
    let first = text.lines().next().unwrap();
    let headline = s
        .findings
        .first()
        .map_or(s.verdict.as_str(), |f| f.message.as_str());
    assert!(
        first.starts_with(&headline[..40.min(headline.len())]),
        "{first}"
    );
    for needle in [
        " CPU ",
        "%soft",
        "Memory (as free computes it)",
        "Disks (iostat -x)",
        "w_await",
        "vda",
        "Processes",
        "dd",
        "Network",
        "eth0",
        "q quit",
        "[sorted by io]",
    ] {
        assert!(text.contains(needle), "missing {needle:?} in\n{text}");
    }
    // Partitions and per-CPU rows appear only when asked.
    assert!(!text.contains("\n1   "), "{text}");
    let mut ui = ui;
    ui.key(KeyCode::Char('c'));
    let text = screen(Some(&s), &ui, 150, 45);
    assert!(
        text.lines().any(|l| l.starts_with("│1 ")),
        "per-CPU row for cpu1:\n{text}"
    );
}

#[test]
fn keys_change_sort_and_quit() {
    let mut ui = UiState::new(SortKey::Io);
    assert!(ui.key(KeyCode::Char('s')));
    assert_eq!(ui.sort, SortKey::Cpu);
    let s = fixture_top_sample();
    assert!(screen(Some(&s), &ui, 150, 45).contains("[sorted by cpu]"));
    ui.key(KeyCode::Down);
    assert_eq!(ui.scroll, 1);
    ui.key(KeyCode::Up);
    ui.key(KeyCode::Up);
    assert_eq!(ui.scroll, 0);
    assert!(!ui.key(KeyCode::Char('q')));
}

#[test]
fn before_the_first_interval_and_on_a_tiny_terminal() {
    let ui = UiState::new(SortKey::Io);
    let text = screen(None, &ui, 80, 10);
    assert!(text.contains("measuring the first interval"));
    assert!(text.contains("q quit"));
    // Too small for the panels: drawn clipped, never a panic.
    let s = fixture_top_sample();
    let _ = screen(Some(&s), &ui, 20, 5);
}

#[test]
fn control_characters_in_names_are_drawn_escaped() {
    let mut s = fixture_top_sample();
    let hostile = "\u{1b}]0;pwned\u{7}\u{1b}[2J";
    s.processes[0].comm = hostile.to_string();
    s.findings.clear();
    s.verdict = format!("busy: {hostile}");
    let ui = UiState::new(SortKey::Io);
    let text = screen(Some(&s), &ui, 150, 45);
    assert!(
        !text.contains('\u{1b}') && !text.contains('\u{7}'),
        "{text:?}"
    );
    assert!(text.contains(r"\e]0;pwned\a\e[2J"), "{text}");
    assert!(text.starts_with(r"busy: \e]0;pwned"), "{text}");
}
