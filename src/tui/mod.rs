//! The interactive screen (ratatui): verdict and findings on top, then CPU, memory and PSI,
//! disks with iostat's columns, the process table, network; keys on the bottom line.
//!
//! [`draw`] is a pure function of the sample and the screen state, so tests render it into
//! ratatui's `TestBackend` and read the buffer; [`run`] owns the terminal and the clock.

mod columns;
mod keys;
mod panels;
mod tables;
mod wrap;

use std::sync::mpsc::TryRecvError;
use std::time::{Duration, SystemTime};

use anyhow::Result;
use ratatui::Frame;
use ratatui::crossterm::event::{self, Event, KeyCode, KeyEventKind, KeyModifiers};

use crate::diagnose::live::{Control, Feed};
use crate::diagnose::model::{SortKey, TopSample};
use crate::report::prom::top as prometheus;
use crate::report::top::server::Latest;

/// How often the screen looks for a new interval when no key is pressed.
const TICK: Duration = Duration::from_millis(50);

/// The panel that the arrow keys scroll.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Focus {
    /// The disk table.
    Disks,
    /// The process table.
    Processes,
}

/// What the user chose on screen.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UiState {
    /// What the process table is sorted by.
    pub sort: SortKey,
    /// One CPU row per CPU under the total.
    pub per_cpu: bool,
    /// Partitions listed with the disks.
    pub partitions: bool,
    /// Show idle loop, ram and zram devices (hidden by default: they crowd out real disks).
    pub idle_devices: bool,
    /// Every finding in the verdict box (up to three quarters of the screen), not only those
    /// that fit a quarter.
    pub all_findings: bool,
    /// The panel the arrow keys scroll.
    pub focus: Focus,
    /// First process row shown.
    pub scroll: usize,
    /// First disk row shown.
    pub disk_scroll: usize,
    /// The help overlay is open.
    pub help: bool,
    /// Accumulated mode (`a`): process totals since this time instead of rates.
    pub accumulated_since: Option<SystemTime>,
    /// In a replay: the recorded moment shown and its place ("2026-11-23 02:13:40, 12 of 345").
    pub replaying: Option<String>,
    /// Rows of the disk and process panels at the last draw, for paging and clamping.
    shown: Shown,
}

/// How many rows a scrolling panel has and how many it showed at the last draw.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Rows {
    /// Rows there are.
    pub total: usize,
    /// Rows that fit on screen.
    pub visible: usize,
}

/// The rows of both scrolling panels at one draw.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Shown {
    /// The disk panel.
    pub disks: Rows,
    /// The process panel.
    pub processes: Rows,
}

impl UiState {
    /// The screen as it opens: processes sorted by `sort`, focus on them, rates not totals.
    pub fn new(sort: SortKey) -> UiState {
        UiState {
            sort,
            per_cpu: false,
            partitions: false,
            idle_devices: false,
            all_findings: false,
            focus: Focus::Processes,
            scroll: 0,
            disk_scroll: 0,
            help: false,
            accumulated_since: None,
            replaying: None,
            shown: Shown::default(),
        }
    }

    /// Applies a key; returns false when the key asks to quit. With the help open, any key
    /// only closes it.
    pub fn key(&mut self, code: KeyCode) -> bool {
        if self.help {
            self.help = false;
            return true;
        }
        let (scroll, rows) = match self.focus {
            Focus::Disks => (&mut self.disk_scroll, self.shown.disks),
            Focus::Processes => (&mut self.scroll, self.shown.processes),
        };
        let page = rows.visible.max(1);
        match code {
            KeyCode::Char('q') | KeyCode::Esc => return false,
            KeyCode::Char('?') => self.help = true,
            KeyCode::Char('s') => {
                self.sort = match self.sort {
                    SortKey::Io => SortKey::Cpu,
                    SortKey::Cpu => SortKey::Delay,
                    SortKey::Delay => SortKey::Io,
                };
                self.scroll = 0;
            }
            KeyCode::Char('a') => {
                self.accumulated_since = match self.accumulated_since {
                    Some(_) => None,
                    None => Some(SystemTime::now()),
                };
            }
            KeyCode::Char('c') => self.per_cpu = !self.per_cpu,
            KeyCode::Char('p') => self.partitions = !self.partitions,
            KeyCode::Char('d') => self.idle_devices = !self.idle_devices,
            KeyCode::Char('f') => self.all_findings = !self.all_findings,
            KeyCode::Tab | KeyCode::BackTab => {
                self.focus = match self.focus {
                    Focus::Disks => Focus::Processes,
                    Focus::Processes => Focus::Disks,
                };
            }
            KeyCode::Down => *scroll = scroll.saturating_add(1),
            KeyCode::Up => *scroll = scroll.saturating_sub(1),
            KeyCode::PageDown => *scroll = scroll.saturating_add(page),
            KeyCode::PageUp => *scroll = scroll.saturating_sub(page),
            KeyCode::Home => *scroll = 0,
            // Clamped to the last page at the next draw.
            KeyCode::End => *scroll = usize::MAX,
            _ => {}
        }
        true
    }

    /// Remembers what the last draw showed and keeps each scroll within its rows.
    fn drawn(&mut self, shown: Shown) {
        self.shown = shown;
        let last = |r: Rows| r.total.saturating_sub(r.visible);
        self.scroll = self.scroll.min(last(shown.processes));
        self.disk_scroll = self.disk_scroll.min(last(shown.disks));
    }
}

/// Draws one screen; `sample` is `None` until the first interval has passed. Returns the
/// rows the scrolling panels had and showed.
pub fn draw(frame: &mut Frame, sample: Option<&TopSample>, ui: &UiState) -> Shown {
    panels::draw(frame, sample, ui)
}

/// Runs the screen on the intervals of `feed` until q, Esc, Ctrl-C or the feed's last
/// interval; `sort` and `accumulate` are what the session started with (the `s` and `a` keys
/// change them through the feed).
pub fn run(feed: Feed, sort: SortKey, metrics: Option<Latest>, accumulate: bool) -> Result<()> {
    let mut terminal = ratatui::try_init()?;
    let result = (|| -> Result<()> {
        let mut ui = UiState::new(sort);
        if accumulate {
            ui.accumulated_since = Some(SystemTime::now());
        }
        let mut shown: Option<Box<TopSample>> = None;
        let mut exporter = prometheus::Exporter::default();
        let mut changed = true;
        loop {
            if std::mem::take(&mut changed) {
                let mut drawn = Shown::default();
                terminal.draw(|f| drawn = draw(f, shown.as_deref(), &ui))?;
                ui.drawn(drawn);
            }
            // Keys (and resizes) are answered at once; a new interval is looked for every
            // tick.
            if event::poll(TICK)? {
                changed = true;
                if let Event::Key(k) = event::read()?
                    && k.kind == KeyEventKind::Press
                {
                    let ctrl_c =
                        k.modifiers.contains(KeyModifiers::CONTROL) && k.code == KeyCode::Char('c');
                    let (was, sort) = (ui.accumulated_since, ui.sort);
                    if ctrl_c || !ui.key(k.code) {
                        return Ok(());
                    }
                    if ui.accumulated_since != was {
                        feed.control(Control::Accumulate(ui.accumulated_since.is_some()));
                        if let Some(s) = &mut shown {
                            // Rates until the first interval under the mode arrives.
                            s.accumulated = None;
                        }
                    }
                    if ui.sort != sort {
                        feed.control(Control::Sort(ui.sort));
                    }
                }
                continue;
            }
            match feed.intervals.try_recv() {
                Ok(s) => {
                    let s = s?;
                    if let Some(m) = &metrics {
                        m.set(exporter.render(&s));
                        m.record(&s);
                    }
                    shown = Some(s);
                    changed = true;
                }
                Err(TryRecvError::Empty) => {}
                // The session has run its intervals: the last one stays on screen as drawn.
                Err(TryRecvError::Disconnected) => {
                    terminal.draw(|f| {
                        draw(f, shown.as_deref(), &ui);
                    })?;
                    return Ok(());
                }
            }
        }
    })();
    ratatui::restore();
    result
}

#[cfg(test)]
mod tests;

/// `YYYY-MM-DD HH:MM:SS` in local time: the moment a replayed interval ended.
fn moment(unix_s: f64) -> String {
    chrono::DateTime::from_timestamp(unix_s as i64, 0).map_or_else(
        || "an unknown time".into(),
        |t| {
            t.with_timezone(&chrono::Local)
                .format("%Y-%m-%d %H:%M:%S")
                .to_string()
        },
    )
}

/// Shows recorded intervals (`tacho top --replay`): starts at `index` of `count`, left/right
/// (or `[`/`]`) step one sample back/forward, Home/End jump; `load` judges interval `i` with
/// the chosen sort.
pub fn replay(
    count: usize,
    mut index: usize,
    sort: SortKey,
    mut load: impl FnMut(usize, SortKey) -> Result<TopSample>,
) -> Result<()> {
    let mut terminal = ratatui::try_init()?;
    let result = (|| -> Result<()> {
        let mut ui = UiState::new(sort);
        let mut shown = load(index, ui.sort)?;
        loop {
            ui.replaying = Some(format!(
                "{}, {} of {}",
                moment(shown.time_unix_s),
                index,
                count - 1
            ));
            let mut drawn = Shown::default();
            terminal.draw(|f| drawn = draw(f, Some(&shown), &ui))?;
            ui.drawn(drawn);
            let Event::Key(k) = event::read()? else {
                continue;
            };
            if k.kind != KeyEventKind::Press {
                continue;
            }
            let ctrl_c =
                k.modifiers.contains(KeyModifiers::CONTROL) && k.code == KeyCode::Char('c');
            let before = (index, ui.sort);
            match k.code {
                KeyCode::Left | KeyCode::Char('[') => index = index.saturating_sub(1).max(1),
                KeyCode::Right | KeyCode::Char(']') => index = (index + 1).min(count - 1),
                _ if ctrl_c || !ui.key(k.code) => return Ok(()),
                _ => {}
            }
            if (index, ui.sort) != before {
                shown = load(index, ui.sort)?;
            }
        }
    })();
    ratatui::restore();
    result
}
