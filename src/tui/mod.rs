//! The interactive screen (ratatui): verdict and findings on top, then CPU, memory and PSI,
//! disks with iostat's columns, the process table, network; keys on the bottom line.
//!
//! [`draw`] is a pure function of the sample and the screen state, so tests render it into
//! ratatui's `TestBackend` and read the buffer; [`run`] owns the terminal and the clock.

mod panels;

use std::time::{Duration, Instant};

use anyhow::Result;
use ratatui::Frame;
use ratatui::crossterm::event::{self, Event, KeyCode, KeyEventKind, KeyModifiers};

use crate::diagnose::findings::Judge;
use crate::diagnose::model::{self, ModelOptions, SortKey, TopSample};
use crate::diagnose::sample::Sampler;
use crate::report::prom::top as prometheus;
use crate::report::top::server::Latest;

/// What the user chose on screen.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UiState {
    pub sort: SortKey,
    pub per_cpu: bool,
    pub partitions: bool,
    /// First process row shown.
    pub scroll: usize,
}

impl UiState {
    pub fn new(sort: SortKey) -> UiState {
        UiState {
            sort,
            per_cpu: false,
            partitions: false,
            scroll: 0,
        }
    }

    /// Applies a key; returns false when the key asks to quit.
    pub fn key(&mut self, code: KeyCode) -> bool {
        match code {
            KeyCode::Char('q') | KeyCode::Esc => return false,
            KeyCode::Char('s') => {
                self.sort = match self.sort {
                    SortKey::Io => SortKey::Cpu,
                    SortKey::Cpu => SortKey::Delay,
                    SortKey::Delay => SortKey::Io,
                };
                self.scroll = 0;
            }
            KeyCode::Char('c') => self.per_cpu = !self.per_cpu,
            KeyCode::Char('p') => self.partitions = !self.partitions,
            KeyCode::Down => self.scroll = self.scroll.saturating_add(1),
            KeyCode::Up => self.scroll = self.scroll.saturating_sub(1),
            _ => {}
        }
        true
    }
}

/// Draws one screen; `sample` is `None` until the first interval has passed.
pub fn draw(frame: &mut Frame, sample: Option<&TopSample>, ui: &UiState) {
    panels::draw(frame, sample, ui);
}

/// Runs the screen until q, Esc, Ctrl-C or `count` samples.
pub fn run(
    sampler: &mut Sampler,
    mut opts: ModelOptions,
    interval: Duration,
    count: Option<u64>,
    metrics: Option<Latest>,
) -> Result<()> {
    let mut terminal = ratatui::try_init()?;
    let result = (|| -> Result<()> {
        let mut ui = UiState::new(opts.sort);
        // Many processes are listed so the table can scroll; the screen shows what fits.
        opts.top = opts.top.max(200);
        let mut judge = Judge::new();
        let mut prev = sampler.sample()?;
        let mut shown: Option<TopSample> = None;
        let start = Instant::now();
        let mut n: u64 = 0;
        loop {
            terminal.draw(|f| draw(f, shown.as_ref(), &ui))?;
            let due = start + interval.saturating_mul(u32::try_from(n + 1).unwrap_or(u32::MAX));
            let wait = due.saturating_duration_since(Instant::now());
            if event::poll(wait)? {
                if let Event::Key(k) = event::read()?
                    && k.kind == KeyEventKind::Press
                {
                    let ctrl_c =
                        k.modifiers.contains(KeyModifiers::CONTROL) && k.code == KeyCode::Char('c');
                    if ctrl_c || !ui.key(k.code) {
                        return Ok(());
                    }
                    opts.sort = ui.sort;
                }
                continue;
            }
            let cur = sampler.sample()?;
            let mut s = model::between(&prev, &cur, sampler.devices(), &opts);
            judge.judge(&mut s);
            if let Some(m) = &metrics {
                m.set(prometheus::render(&s));
            }
            shown = Some(s);
            prev = cur;
            n += 1;
            if count.is_some_and(|c| n >= c) {
                terminal.draw(|f| draw(f, shown.as_ref(), &ui))?;
                return Ok(());
            }
        }
    })();
    ratatui::restore();
    result
}

#[cfg(test)]
mod tests;
