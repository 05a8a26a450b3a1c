//! The panels of the screen.

// Control characters in cell text would drive the terminal under ratatui too: names that
// users or devices choose go through `escape`.
use crate::text::escape;
use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::Line;
use ratatui::widgets::{Block, Borders, Paragraph, Row, Table};

use super::UiState;
use crate::choice::Choice;
use crate::diagnose::findings::Severity;
use crate::diagnose::model::{Process, SortKey, TopSample};
use crate::kernel::blockdev::DeviceKind;
use crate::units::format_bytes_approx as bytes;

const KEYS: &str =
    " q quit  s sort (io/cpu/delay)  c per-CPU  p partitions  \u{2191}\u{2193} scroll processes";

pub fn draw(frame: &mut Frame, sample: Option<&TopSample>, ui: &UiState) {
    let area = frame.area();
    let Some(s) = sample else {
        let [top, _, keys] = Layout::vertical([
            Constraint::Length(1),
            Constraint::Min(0),
            Constraint::Length(1),
        ])
        .areas(area);
        frame.render_widget(
            Paragraph::new("tacho top: measuring the first interval…"),
            top,
        );
        frame.render_widget(keys_line(ui), keys);
        return;
    };
    let findings = s.findings.len().clamp(1, 4) as u16;
    let cpu_rows = if ui.per_cpu {
        s.cpu.per_cpu.len() as u16 + 1
    } else {
        1
    };
    let disks: Vec<_> = s
        .disks
        .iter()
        .filter(|d| ui.partitions || d.kind != DeviceKind::Partition)
        .collect();
    let [verdict, upper, disk_area, proc_area, net_area, keys] = Layout::vertical([
        Constraint::Length(findings),
        Constraint::Length((cpu_rows + 3).max(7) + 2),
        Constraint::Length(disks.len() as u16 + 3),
        Constraint::Min(5),
        Constraint::Length(s.net.len().min(4) as u16 + 3),
        Constraint::Length(1),
    ])
    .areas(area);
    frame.render_widget(verdict_lines(s), verdict);
    let [cpu_area, mem_area] =
        Layout::horizontal([Constraint::Percentage(50), Constraint::Percentage(50)]).areas(upper);
    frame.render_widget(cpu_panel(s, ui), cpu_area);
    frame.render_widget(memory_panel(s), mem_area);
    frame.render_widget(disk_table(&disks), disk_area);
    render_processes(frame, proc_area, s, ui);
    frame.render_widget(net_panel(s), net_area);
    frame.render_widget(keys_line(ui), keys);
}

fn keys_line(ui: &UiState) -> Paragraph<'static> {
    let sort = ui.sort.word();
    Paragraph::new(format!("{KEYS}   [sorted by {sort}]"))
        .style(Style::default().add_modifier(Modifier::REVERSED))
}

fn verdict_lines(s: &TopSample) -> Paragraph<'static> {
    let color = |sev: Severity| match sev {
        Severity::Critical => Color::Red,
        Severity::Warning => Color::Yellow,
        Severity::Info => Color::Cyan,
    };
    let lines: Vec<Line> = if s.findings.is_empty() {
        vec![Line::styled(
            escape(&s.verdict).into_owned(),
            Style::default().fg(Color::Green),
        )]
    } else {
        s.findings
            .iter()
            .take(4)
            .map(|f| {
                Line::styled(
                    escape(&f.message).into_owned(),
                    Style::default()
                        .fg(color(f.severity))
                        .add_modifier(Modifier::BOLD),
                )
            })
            .collect()
    };
    Paragraph::new(lines)
}

fn block(title: &str) -> Block<'_> {
    Block::default().borders(Borders::ALL).title(title)
}

fn cpu_panel(s: &TopSample, ui: &UiState) -> Paragraph<'static> {
    let row = |name: String, c: &crate::diagnose::model::cpu::CpuSplit| {
        format!(
            "{name:<4}{:>6.1}{:>6.1}{:>6.1}{:>6.1}{:>6.1}{:>6.1}{:>6.1}{:>6.1}",
            c.user_pct,
            c.nice_pct,
            c.system_pct,
            c.irq_pct,
            c.softirq_pct,
            c.iowait_pct,
            c.steal_pct,
            c.idle_pct
        )
    };
    let mut lines = vec![
        Line::styled(
            "     %usr %nice  %sys  %irq %soft %iowt %steal %idle",
            Style::default().add_modifier(Modifier::BOLD),
        ),
        Line::raw(row("all".into(), &s.cpu.all)),
    ];
    if ui.per_cpu {
        lines.extend(
            s.cpu
                .per_cpu
                .iter()
                .map(|p| Line::raw(row(p.cpu.to_string(), &p.split))),
        );
    }
    let l = &s.load;
    lines.push(Line::raw(format!(
        "load {:.2} {:.2} {:.2}  runq {}  blocked {}",
        l.load1, l.load5, l.load15, l.runnable, l.blocked
    )));
    lines.push(Line::raw(format!(
        "cswch/s {}  intr/s {}",
        or_dash(l.context_switches_per_s, 0),
        or_dash(l.interrupts_per_s, 0)
    )));
    let psi = |name: &str, r: &Option<crate::diagnose::model::PsiResource>| match r {
        Some(r) => format!(
            "{name} {:.1}/{}",
            r.some.avg10_pct,
            r.full
                .as_ref()
                .map_or("-".into(), |f| format!("{:.1}", f.avg10_pct))
        ),
        None => format!("{name} -"),
    };
    lines.push(Line::raw(format!(
        "PSI some/full avg10: {}  {}  {}",
        psi("cpu", &s.psi.cpu),
        psi("io", &s.psi.io),
        psi("mem", &s.psi.memory)
    )));
    Paragraph::new(lines).block(block(" CPU "))
}

fn memory_panel(s: &TopSample) -> Paragraph<'static> {
    let m = &s.memory;
    let p = &m.used_parts;
    let events: Vec<String> = s
        .vm_events
        .iter()
        .filter(|(_, v)| **v > 0)
        .map(|(k, v)| format!("{k} +{v}"))
        .collect();
    let lines = vec![
        Line::raw(format!(
            "total {}  used {}  free {}  avail {}",
            bytes(m.total_bytes),
            bytes(m.used_bytes),
            bytes(m.free_bytes),
            bytes(m.available_bytes)
        )),
        Line::raw(format!(
            "shared {}  buffers {}  cache {}  swap {}/{}",
            bytes(m.shared_bytes),
            bytes(m.buffers_bytes),
            bytes(m.cache_bytes),
            bytes(m.swap_used_bytes),
            bytes(m.swap_total_bytes)
        )),
        Line::raw(format!(
            "used: anon {} shmem {} slab {} ptables {}",
            bytes(p.anon_bytes),
            bytes(p.shmem_bytes),
            bytes(p.slab_unreclaimable_bytes),
            bytes(p.page_tables_bytes)
        )),
        Line::raw(format!(
            "dirty {}  writeback {}  THP {}",
            bytes(m.dirty_bytes),
            bytes(m.writeback_bytes),
            bytes(m.anon_huge_bytes)
        )),
        Line::raw(format!(
            "vm: {}",
            if events.is_empty() {
                "no THP/compaction/swap events".into()
            } else {
                events.join(" ")
            }
        )),
    ];
    Paragraph::new(lines).block(block(" Memory (as free computes it) "))
}

fn disk_table<'a>(disks: &[&'a crate::diagnose::model::Disk]) -> Table<'a> {
    let v = |x: Option<f64>| x.map_or("-".into(), |x| format!("{x:.2}"));
    let header = Row::new([
        "Device", "r/s", "rkB/s", "r_await", "rareq-sz", "w/s", "wkB/s", "w_await", "wareq-sz",
        "f/s", "aqu-sz", "%util", "group",
    ])
    .style(Style::default().add_modifier(Modifier::BOLD));
    let rows = disks.iter().map(|d| {
        let name = if d.display_name != d.name {
            format!("{} {}", escape(&d.name), escape(&d.display_name))
        } else {
            escape(&d.name).into_owned()
        };
        Row::new([
            name,
            v(d.r_per_s),
            v(d.rkb_per_s),
            v(d.r_await_ms),
            v(d.rareq_sz_kb),
            v(d.w_per_s),
            v(d.wkb_per_s),
            v(d.w_await_ms),
            v(d.wareq_sz_kb),
            v(d.f_per_s),
            v(d.aqu_sz),
            v(d.util_pct),
            d.group.clone().unwrap_or_default(),
        ])
    });
    let widths = [
        Constraint::Length(18),
        Constraint::Length(8),
        Constraint::Length(10),
        Constraint::Length(8),
        Constraint::Length(8),
        Constraint::Length(8),
        Constraint::Length(10),
        Constraint::Length(8),
        Constraint::Length(8),
        Constraint::Length(7),
        Constraint::Length(7),
        Constraint::Length(7),
        Constraint::Min(6),
    ];
    Table::new(rows, widths)
        .header(header)
        .block(block(" Disks (iostat -x) "))
}

fn render_processes(frame: &mut Frame, area: Rect, s: &TopSample, ui: &UiState) {
    let mut procs: Vec<&Process> = s.processes.iter().collect();
    let io = |p: &Process| p.read_bytes_per_s.unwrap_or(0.0) + p.write_bytes_per_s.unwrap_or(0.0);
    let key = |p: &Process| match ui.sort {
        SortKey::Io => io(p),
        SortKey::Cpu => p.cpu_pct,
        SortKey::Delay => p.io_delay_pct.unwrap_or(0.0),
    };
    procs.sort_by(|a, b| key(b).total_cmp(&key(a)).then(a.pid.cmp(&b.pid)));
    let kb = |v: Option<f64>| v.map_or("-".into(), |v| format!("{:.1}", v / 1024.0));
    let header = Row::new([
        "PID", "COMMAND", "%CPU", "kB_rd/s", "kB_wr/s", "IO%", "state",
    ])
    .style(Style::default().add_modifier(Modifier::BOLD));
    let rows = procs.iter().skip(ui.scroll).map(|p| {
        Row::new([
            p.pid.to_string(),
            escape(&p.comm).into_owned(),
            format!("{:.1}", p.cpu_pct),
            kb(p.read_bytes_per_s),
            kb(p.write_bytes_per_s),
            p.io_delay_pct.map_or("-".into(), |v| format!("{v:.1}")),
            p.state.clone(),
        ])
    });
    let widths = [
        Constraint::Length(8),
        Constraint::Length(17),
        Constraint::Length(7),
        Constraint::Length(10),
        Constraint::Length(10),
        Constraint::Length(6),
        Constraint::Length(5),
    ];
    let wa = &s.write_amplification;
    let title = format!(
        " Processes ({} active)  write amplification {} ",
        s.processes.len(),
        wa.ratio.map_or("-".into(), |r| format!("{r:.2}x"))
    );
    frame.render_widget(
        Table::new(rows, widths).header(header).block(block(&title)),
        area,
    );
}

fn net_panel(s: &TopSample) -> Table<'static> {
    let header = Row::new([
        "IFACE", "rxkB/s", "txkB/s", "rxpck/s", "txpck/s", "err/s", "drop/s",
    ])
    .style(Style::default().add_modifier(Modifier::BOLD));
    let mut nets: Vec<_> = s.net.iter().collect();
    nets.sort_by(|a, b| {
        (b.rx_bytes_per_s + b.tx_bytes_per_s).total_cmp(&(a.rx_bytes_per_s + a.tx_bytes_per_s))
    });
    let rows = nets.into_iter().take(4).map(|n| {
        Row::new([
            escape(&n.name).into_owned(),
            format!("{:.1}", n.rx_bytes_per_s / 1024.0),
            format!("{:.1}", n.tx_bytes_per_s / 1024.0),
            format!("{:.0}", n.rx_packets_per_s),
            format!("{:.0}", n.tx_packets_per_s),
            format!("{:.0}", n.rx_errors_per_s + n.tx_errors_per_s),
            format!("{:.0}", n.rx_drops_per_s + n.tx_drops_per_s),
        ])
    });
    let widths = [
        Constraint::Length(12),
        Constraint::Length(10),
        Constraint::Length(10),
        Constraint::Length(9),
        Constraint::Length(9),
        Constraint::Length(7),
        Constraint::Length(7),
    ];
    Table::new(rows, widths)
        .header(header)
        .block(block(" Network "))
}

/// A figure with `prec` decimals, or "-" where it could not be computed.
fn or_dash(x: Option<f64>, prec: usize) -> String {
    x.map_or_else(|| "-".into(), |x| format!("{x:.prec$}"))
}
