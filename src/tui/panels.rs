//! The layout of the screen and its text panels: the verdict (wrapped, never cut), CPU and
//! memory. The tables (disks, processes, network) are in `super::tables`.
//!
//! Heights are given in order of need: the keys line, the verdict, a CPU and memory summary
//! of a few lines, then the disks (at most what leaves the processes six rows), the processes,
//! and the network only when room is left.

use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::Line;
use ratatui::widgets::{Block, Paragraph, Table};

use super::columns::{Column, Fitted, figure};
use super::wrap::flow;
use super::{Shown, UiState, keys, tables};
use crate::diagnose::findings::Severity;
use crate::diagnose::model::TopSample;
use crate::diagnose::model::cpu::CpuSplit;
use crate::fit::wrap;
use crate::text::Escaped;
use crate::units::format_bytes_approx as bytes;

/// The process panel's least height: borders, header and three rows.
const PROCESS_MIN: u16 = 6;

/// Draws the screen; returns the rows of the scrolling panels.
pub(crate) fn draw(frame: &mut Frame, sample: Option<&TopSample>, ui: &UiState) -> Shown {
    let area = frame.area();
    let [body, keys_area] =
        Layout::vertical([Constraint::Min(0), Constraint::Length(1)]).areas(area);
    frame.render_widget(keys::line(ui, area.width), keys_area);
    let shown = match sample {
        Some(s) => draw_sample(frame, body, s, ui),
        None => {
            frame.render_widget(
                Paragraph::new("tacho top: measuring the first interval…"),
                body,
            );
            Shown::default()
        }
    };
    if ui.help {
        keys::help(frame, area);
    }
    shown
}

fn draw_sample(frame: &mut Frame, area: Rect, s: &TopSample, ui: &UiState) -> Shown {
    let verdict = verdict_lines(s, area.width, area.height, ui.all_findings);
    let verdict_h = verdict.len() as u16;
    // Lines inside the CPU and memory boxes: fewer on a short screen.
    let budget = if area.height < 30 { 4 } else { 6 };
    let half = area.width / 2;
    let cpu = cpu_panel(s, ui, half.saturating_sub(2), budget, area.height / 3);
    let mem = memory_lines(s, (area.width - half).saturating_sub(2), budget);
    let summary_h = cpu.height().max(mem.len() as u16) + 2;

    let disks = tables::disk_list(s, ui);
    let mut rest = area.height.saturating_sub(verdict_h + summary_h);
    let disk_h = (disks.rows.len() as u16 + 3)
        .min(rest.saturating_sub(PROCESS_MIN))
        .max(4.min(rest));
    rest = rest.saturating_sub(disk_h);
    let net_rows = s.net.len().min(4) as u16;
    let net_h = if net_rows > 0 && rest >= PROCESS_MIN + 4 + net_rows + 3 {
        net_rows + 3
    } else {
        0
    };
    let [verdict_area, upper, disk_area, proc_area, net_area] = Layout::vertical([
        Constraint::Length(verdict_h),
        Constraint::Length(summary_h),
        Constraint::Length(disk_h),
        Constraint::Min(0),
        Constraint::Length(net_h),
    ])
    .areas(area);
    frame.render_widget(Paragraph::new(verdict), verdict_area);
    let [cpu_area, mem_area] =
        Layout::horizontal([Constraint::Length(half), Constraint::Min(0)]).areas(upper);
    cpu.render(frame, cpu_area);
    frame.render_widget(
        Paragraph::new(mem.into_iter().map(Line::raw).collect::<Vec<_>>())
            .block(Block::bordered().title(" Memory (as free computes it) ")),
        mem_area,
    );
    let shown = Shown {
        disks: tables::render_disks(frame, disk_area, &disks, ui),
        processes: tables::render_processes(frame, proc_area, s, ui),
    };
    if net_h > 0 {
        tables::render_net(frame, net_area, s);
    }
    shown
}

/// The findings, most severe first, each wrapped whole (continuation lines indented). Up to
/// a quarter of the screen is used (three quarters once `f` asked for all), always enough for
/// the first finding; findings that do not fit are counted on a last line.
fn verdict_lines(s: &TopSample, width: u16, height: u16, all: bool) -> Vec<Line<'static>> {
    let width = usize::from(width.max(1));
    if s.findings.is_empty() {
        return wrap(&Escaped(&s.verdict).to_string(), width, 2)
            .into_iter()
            .map(|l| Line::styled(l, Style::default().fg(Color::Green)))
            .collect();
    }
    let cap = usize::from(if all { height * 3 / 4 } else { height / 4 }).max(1);
    let mut lines = Vec::new();
    for (i, f) in s.findings.iter().enumerate() {
        let wrapped = wrap(&Escaped(&f.message).to_string(), width, 2);
        let after = s.findings.len() - i - 1;
        if i > 0 && lines.len() + wrapped.len() + usize::from(after > 0) > cap {
            let more = s.findings.len() - i;
            let hint = if all {
                "tacho top --batch lists them all"
            } else {
                "f shows them"
            };
            lines.push(Line::raw(format!(
                "  +{more} more {} ({hint})",
                if more == 1 { "finding" } else { "findings" }
            )));
            break;
        }
        let style = Style::default()
            .fg(match f.severity {
                Severity::Critical => Color::Red,
                Severity::Warning => Color::Yellow,
                Severity::Info => Color::Cyan,
            })
            .add_modifier(Modifier::BOLD);
        lines.extend(wrapped.into_iter().map(|l| Line::styled(l, style)));
    }
    lines
}

/// The CPU box: mpstat's columns (as many as fit) for all CPUs, and each CPU when asked,
/// then load, run queue and pressure figures flowed below.
struct CpuPanel {
    table: Table<'static>,
    table_rows: u16,
    text: Vec<String>,
}

impl CpuPanel {
    fn height(&self) -> u16 {
        self.table_rows + self.text.len() as u16
    }

    fn render(self, frame: &mut Frame, area: Rect) {
        let block = Block::bordered().title(" CPU ");
        let inner = block.inner(area);
        frame.render_widget(block, area);
        let [table_area, text_area] =
            Layout::vertical([Constraint::Length(self.table_rows), Constraint::Min(0)])
                .areas(inner);
        frame.render_widget(self.table, table_area);
        let text: Vec<Line> = self.text.into_iter().map(Line::raw).collect();
        frame.render_widget(Paragraph::new(text), text_area);
    }
}

pub(super) const CPU_COLUMNS: [Column; 9] = [
    Column::text("CPU", 0, 3),
    Column::num("%usr", 0, 6),
    Column::num("%nice", 3, 6),
    Column::num("%sys", 0, 6),
    Column::num("%iowait", 1, 6),
    Column::num("%irq", 3, 6),
    Column::num("%soft", 3, 6),
    Column::num("%steal", 2, 6),
    Column::num("%idle", 1, 6),
];

fn cpu_panel(s: &TopSample, ui: &UiState, width: u16, budget: u16, most: u16) -> CpuPanel {
    let fit = Fitted::new(&CPU_COLUMNS, width);
    let row = |name: String, c: &CpuSplit| {
        let mut cells = vec![name];
        cells.extend(
            [
                c.user_pct,
                c.nice_pct,
                c.system_pct,
                c.iowait_pct,
                c.irq_pct,
                c.softirq_pct,
                c.steal_pct,
                c.idle_pct,
            ]
            .map(|v| figure(Some(v), 6)),
        );
        fit.row(cells)
    };
    let mut rows = vec![row("all".into(), &s.cpu.all)];
    if ui.per_cpu {
        let room = usize::from(most.saturating_sub(2).max(1));
        rows.extend(
            s.cpu
                .per_cpu
                .iter()
                .take(room)
                .map(|p| row(p.cpu.to_string(), &p.split)),
        );
    }
    let table_rows = rows.len() as u16 + 1;
    let l = &s.load;
    let psi = |name: &str, r: &Option<crate::diagnose::model::PsiResource>| match r {
        Some(r) => format!(
            "PSI {name} {:.1}/{}",
            r.some.avg10_pct,
            r.full
                .as_ref()
                .map_or("-".into(), |f| format!("{:.1}", f.avg10_pct))
        ),
        None => format!("PSI {name} -"),
    };
    let items = [
        format!("load {:.2} {:.2} {:.2}", l.load1, l.load5, l.load15),
        format!("runq {}", l.runnable),
        format!("blocked {}", l.blocked),
        psi("io", &s.psi.io),
        psi("cpu", &s.psi.cpu),
        psi("mem", &s.psi.memory),
        format!("cswch/s {}", figure(l.context_switches_per_s, 0)),
        format!("intr/s {}", figure(l.interrupts_per_s, 0)),
    ];
    let room = budget.saturating_sub(2).max(1);
    CpuPanel {
        table: fit.table(rows),
        table_rows,
        text: flow(&items, usize::from(width), usize::from(room)),
    }
}

/// free's figures and the VM events of the interval, most telling first, flowed into
/// `budget` lines of `width`.
fn memory_lines(s: &TopSample, width: u16, budget: u16) -> Vec<String> {
    let m = &s.memory;
    let p = &m.used_parts;
    let mut items = vec![
        format!("avail {}", bytes(m.available_bytes)),
        format!("used {}", bytes(m.used_bytes)),
        format!("total {}", bytes(m.total_bytes)),
        format!("free {}", bytes(m.free_bytes)),
        format!(
            "swap {}/{}",
            bytes(m.swap_used_bytes),
            bytes(m.swap_total_bytes)
        ),
        format!("dirty {}", bytes(m.dirty_bytes)),
        format!("writeback {}", bytes(m.writeback_bytes)),
        format!("cache {}", bytes(m.cache_bytes)),
        format!("buffers {}", bytes(m.buffers_bytes)),
        format!("shared {}", bytes(m.shared_bytes)),
        format!("anon {}", bytes(p.anon_bytes)),
        format!("shmem {}", bytes(p.shmem_bytes)),
        format!("slab {}", bytes(p.slab_unreclaimable_bytes)),
        format!("ptables {}", bytes(p.page_tables_bytes)),
        format!("THP {}", bytes(m.anon_huge_bytes)),
    ];
    items.extend(
        s.vm_events
            .iter()
            .filter(|(_, v)| **v > 0)
            .map(|(k, v)| format!("{} +{v}", Escaped(k))),
    );
    flow(&items, usize::from(width), usize::from(budget))
}
