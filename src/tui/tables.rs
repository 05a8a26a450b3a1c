//! The tables of the screen: disks (busiest first, idle virtual devices hidden), processes and
//! network, each with as many of its reference tool's columns as the width allows.

use std::time::SystemTime;

use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::style::{Color, Modifier, Style};
use ratatui::widgets::Block;
use unicode_width::UnicodeWidthStr;

use super::columns::{Column, Fitted, figure};
use super::wrap::flow;
use super::{Focus, Rows, UiState};
use crate::choice::Choice;
use crate::diagnose::model::accumulate::Accumulated;
use crate::diagnose::model::{Disk, Process, SortKey, TopSample};
use crate::kernel::blockdev::DeviceKind;
use crate::text::Escaped;

/// The disks to list, busiest first, and how many idle virtual devices were left out.
pub(crate) struct DiskList<'a> {
    /// The disks listed, busiest first.
    pub rows: Vec<&'a Disk>,
    /// Idle loop, ram and zram devices left out (the title counts them).
    pub hidden: usize,
}

/// A RAM disk (`ram0`, brd) or compressed RAM swap (`zram0`): no storage behind them.
fn ram_backed(name: &str) -> bool {
    let digits = |rest: &str| !rest.is_empty() && rest.bytes().all(|b| b.is_ascii_digit());
    name.strip_prefix("zram").is_some_and(digits) || name.strip_prefix("ram").is_some_and(digits)
}

/// A loop, ram or zram device, or a partition of one.
fn virtual_device(d: &Disk) -> bool {
    let named = |n: &str| n.starts_with("loop") || ram_backed(n);
    d.device.kind == DeviceKind::Loop
        || ram_backed(&d.device.name)
        || d.device.parent.as_deref().is_some_and(named)
}

/// No request completed or in flight in the interval.
fn idle(d: &Disk) -> bool {
    [d.r_per_s, d.w_per_s, d.d_per_s, d.f_per_s, d.util_pct]
        .iter()
        .all(|v| v.unwrap_or(0.0) == 0.0)
}

/// The disks the panel lists: partitions only when asked, idle loop, ram and zram devices
/// only when asked (ten idle loop devices once pushed the only real disk off the screen),
/// sorted by %util, then by throughput, then by name.
pub(crate) fn disk_list<'a>(s: &'a TopSample, ui: &UiState) -> DiskList<'a> {
    let mut hidden = 0;
    let mut rows: Vec<&Disk> = s
        .disks
        .iter()
        .filter(|d| ui.partitions || d.device.kind != DeviceKind::Partition)
        .filter(|d| {
            let hide = !ui.idle_devices && virtual_device(d) && idle(d);
            hidden += usize::from(hide);
            !hide
        })
        .collect();
    let util = |d: &Disk| d.util_pct.unwrap_or(0.0);
    let kb = |d: &Disk| d.rkb_per_s.unwrap_or(0.0) + d.wkb_per_s.unwrap_or(0.0);
    rows.sort_by(|a, b| {
        util(b)
            .total_cmp(&util(a))
            .then(kb(b).total_cmp(&kb(a)))
            .then(a.device.name.cmp(&b.device.name))
    });
    DiskList { rows, hidden }
}

/// iostat -x's columns in its order; priorities keep %util, queue, write and read figures on
/// a narrow screen and add merges, discards and flushes on a wide one.
pub(super) const DISK_COLUMNS: [Column; 24] = [
    Column::text("Device", 0, 6),
    Column::num("r/s", 3, 8),
    Column::num("rkB/s", 2, 9),
    Column::num("rrqm/s", 7, 8),
    Column::num("%rrqm", 8, 6),
    Column::num("r_await", 2, 7),
    Column::num("rareq-sz", 5, 8),
    Column::num("w/s", 3, 8),
    Column::num("wkB/s", 1, 9),
    Column::num("wrqm/s", 7, 8),
    Column::num("%wrqm", 8, 6),
    Column::num("w_await", 1, 7),
    Column::num("wareq-sz", 5, 8),
    Column::num("d/s", 9, 8),
    Column::num("dkB/s", 9, 9),
    Column::num("drqm/s", 10, 8),
    Column::num("%drqm", 10, 6),
    Column::num("d_await", 9, 7),
    Column::num("dareq-sz", 10, 8),
    Column::num("f/s", 6, 7),
    Column::num("f_await", 6, 7),
    Column::num("aqu-sz", 1, 6),
    Column::num("%util", 0, 6),
    Column::text("group", 4, 5),
];

/// A panel with the title parts that fit on its border, most important first; the panel
/// the arrow keys scroll is marked (▸, and a bold coloured border where colours show).
fn block(parts: &[String], width: u16, focused: bool) -> Block<'static> {
    let mark = if focused { "▸ " } else { "" };
    let line = flow(parts, usize::from(width.saturating_sub(4 + 2)), 1);
    let block = Block::bordered().title(format!(" {mark}{} ", line.concat()));
    if focused {
        block.border_style(
            Style::default()
                .fg(Color::Cyan)
                .add_modifier(Modifier::BOLD),
        )
    } else {
        block
    }
}

/// "rows 3-8 of 12" when the rows do not all fit.
fn range(scroll: usize, visible: usize, total: usize) -> Option<String> {
    (total > visible).then(|| {
        format!(
            "rows {}-{} of {total}",
            scroll + 1,
            (scroll + visible).min(total)
        )
    })
}

/// Widest of `names` (and `header`), at most `cap`.
fn name_width<'a>(header: &str, names: impl Iterator<Item = &'a String>, cap: usize) -> u16 {
    let widest = names.map(|n| n.width()).max().unwrap_or(0);
    widest.clamp(header.width(), cap.max(header.width())) as u16
}

/// Draws the disk panel; returns its rows.
pub(crate) fn render_disks(frame: &mut Frame, area: Rect, list: &DiskList, ui: &UiState) -> Rows {
    let names: Vec<String> = list
        .rows
        .iter()
        .map(|d| {
            if d.device.display_name != d.device.name {
                format!(
                    "{} {}",
                    Escaped(&d.device.name),
                    Escaped(&d.device.display_name)
                )
            } else {
                Escaped(&d.device.name).to_string()
            }
        })
        .collect();
    let groups: Vec<String> = list
        .rows
        .iter()
        .map(|d| {
            d.group
                .as_deref()
                .map(|g| Escaped(g).to_string())
                .unwrap_or_default()
        })
        .collect();
    let wide = area.width >= 120;
    let mut columns = DISK_COLUMNS;
    columns[0].width = name_width("Device", names.iter(), if wide { 28 } else { 14 });
    columns[23].width = name_width("group", groups.iter(), 16);
    let fit = Fitted::new(&columns, area.width.saturating_sub(2));
    let visible = usize::from(area.height.saturating_sub(3));
    let total = list.rows.len();
    let scroll = ui.disk_scroll.min(total.saturating_sub(visible));
    let rows = list
        .rows
        .iter()
        .zip(names.into_iter().zip(groups))
        .skip(scroll)
        .take(visible)
        .map(|(d, (name, group))| {
            let v = [
                d.r_per_s,
                d.rkb_per_s,
                d.rrqm_per_s,
                d.rrqm_pct,
                d.r_await_ms,
                d.rareq_sz_kb,
                d.w_per_s,
                d.wkb_per_s,
                d.wrqm_per_s,
                d.wrqm_pct,
                d.w_await_ms,
                d.wareq_sz_kb,
                d.d_per_s,
                d.dkb_per_s,
                d.drqm_per_s,
                d.drqm_pct,
                d.d_await_ms,
                d.dareq_sz_kb,
                d.f_per_s,
                d.f_await_ms,
                d.aqu_sz,
                d.util_pct,
            ];
            let mut cells = vec![name];
            cells.extend(
                v.iter()
                    .zip(&columns[1..])
                    .map(|(x, c)| figure(*x, c.width.max(c.name.len() as u16))),
            );
            cells.push(group);
            fit.row(cells)
        });
    let mut parts = vec!["Disks, busiest first".to_string()];
    parts.extend(range(scroll, visible, total));
    if list.hidden > 0 {
        parts.push(format!(
            "{} idle loop/ram/zram hidden: d shows",
            list.hidden
        ));
    } else if ui.idle_devices {
        parts.push("d hides idle loop/ram/zram".into());
    }
    frame.render_widget(
        fit.table(rows)
            .block(block(&parts, area.width, ui.focus == Focus::Disks)),
        area,
    );
    Rows { total, visible }
}

/// pidstat -u -d's columns and iotop's IO%; priorities keep the command, CPU and I/O rates.
pub(super) const PROCESS_COLUMNS: [Column; 10] = [
    Column::num("PID", 0, 7),
    Column::text("COMMAND", 0, 7),
    Column::num("%usr", 5, 6),
    Column::num("%sys", 5, 6),
    Column::num("%CPU", 0, 6),
    Column::num("kB_rd/s", 1, 9),
    Column::num("kB_wr/s", 1, 9),
    Column::num("kB_ccwr/s", 6, 9),
    Column::num("IO%", 2, 6),
    Column::text("state", 3, 5),
];

/// iotop -a's columns: what each process did since accumulation started.
pub(super) const ACCUMULATED_COLUMNS: [Column; 9] = [
    Column::num("PID", 0, 7),
    Column::text("COMMAND", 0, 7),
    Column::num("usr_s", 4, 8),
    Column::num("sys_s", 3, 8),
    Column::num("CPU_s", 0, 8),
    Column::num("kB_read", 1, 10),
    Column::num("kB_wrtn", 0, 10),
    Column::num("IO_s", 5, 7),
    Column::text("unit", 2, 4),
];

/// Draws the process panel; returns its rows. In accumulated mode (`a`, `--accumulate`) the
/// rows are totals since the mode started, once the first interval has added to them.
pub(crate) fn render_processes(frame: &mut Frame, area: Rect, s: &TopSample, ui: &UiState) -> Rows {
    if let (Some(since), Some(acc)) = (ui.accumulated_since, &s.accumulated) {
        return render_accumulated(frame, area, acc, since, ui);
    }
    let mut procs: Vec<&Process> = s.processes.iter().collect();
    let io = |p: &Process| p.read_bytes_per_s.unwrap_or(0.0) + p.write_bytes_per_s.unwrap_or(0.0);
    let key = |p: &Process| match ui.sort {
        SortKey::Io => io(p),
        SortKey::Cpu => p.cpu_pct,
        SortKey::Delay => p.io_delay_pct.unwrap_or(0.0),
    };
    procs.sort_by(|a, b| key(b).total_cmp(&key(a)).then(a.pid.cmp(&b.pid)));
    let comms: Vec<String> = procs.iter().map(|p| Escaped(&p.comm).to_string()).collect();
    let mut columns = PROCESS_COLUMNS;
    let cap = if area.width >= 120 { 32 } else { 16 };
    columns[1].width = name_width("COMMAND", comms.iter(), cap);
    let fit = Fitted::new(&columns, area.width.saturating_sub(2));
    let visible = usize::from(area.height.saturating_sub(3));
    let total = procs.len();
    let scroll = ui.scroll.min(total.saturating_sub(visible));
    let kb = |v: Option<f64>| figure(v.map(|v| v / 1024.0), 9);
    let rows = procs
        .iter()
        .zip(comms)
        .skip(scroll)
        .take(visible)
        .map(|(p, comm)| {
            fit.row(vec![
                p.pid.to_string(),
                comm,
                figure(Some(p.user_pct), 6),
                figure(Some(p.system_pct), 6),
                figure(Some(p.cpu_pct), 6),
                kb(p.read_bytes_per_s),
                kb(p.write_bytes_per_s),
                kb(p.cancelled_write_bytes_per_s),
                figure(p.io_delay_pct, 6),
                Escaped(&p.state).to_string(),
            ])
        });
    let mut parts = vec![format!("Processes by {}", ui.sort.word())];
    if let Some(since) = ui.accumulated_since {
        // Before the first interval under the mode has been added: say so, show rates.
        parts.push(format!("accumulating since {}", clock(since)));
    }
    parts.extend(range(scroll, visible, total));
    parts.push(format!("{} active", s.processes.len()));
    let wa = &s.write_amplification;
    parts.push(format!(
        "write amplification {}",
        wa.ratio.map_or("-".into(), |r| format!("{r:.2}x"))
    ));
    frame.render_widget(
        fit.table(rows)
            .block(block(&parts, area.width, ui.focus == Focus::Processes)),
        area,
    );
    Rows { total, visible }
}

/// `HH:MM:SS` of a moment, local time.
fn clock(t: SystemTime) -> String {
    let c = crate::report::files::local_time_of_day(t);
    c.get(..8).unwrap_or(&c).to_string()
}

/// The process panel in accumulated mode: totals per process, sorted by the sort key.
fn render_accumulated(
    frame: &mut Frame,
    area: Rect,
    acc: &Accumulated,
    since: SystemTime,
    ui: &UiState,
) -> Rows {
    let comms: Vec<String> = acc
        .processes
        .iter()
        .map(|p| {
            let comm = Escaped(&p.comm).to_string();
            if p.exited {
                format!("{comm} (exited)")
            } else {
                comm
            }
        })
        .collect();
    let units: Vec<String> = acc
        .processes
        .iter()
        .map(|p| {
            p.unit
                .as_deref()
                .map_or("-".into(), |u| Escaped(u).to_string())
        })
        .collect();
    let mut columns = ACCUMULATED_COLUMNS;
    let cap = if area.width >= 120 { 32 } else { 16 };
    columns[1].width = name_width("COMMAND", comms.iter(), cap);
    columns[8].width = name_width("unit", units.iter(), 40);
    let fit = Fitted::new(&columns, area.width.saturating_sub(2));
    let visible = usize::from(area.height.saturating_sub(3));
    let total = acc.processes.len();
    let scroll = ui.scroll.min(total.saturating_sub(visible));
    let kb = |b: u64| figure(Some(b as f64 / 1024.0), 10);
    let rows = acc
        .processes
        .iter()
        .zip(comms)
        .zip(units)
        .skip(scroll)
        .take(visible)
        .map(|((p, comm), unit)| {
            fit.row(vec![
                p.pid.to_string(),
                comm,
                figure(Some(p.user_s), 8),
                figure(Some(p.system_s), 8),
                figure(Some(p.user_s + p.system_s), 8),
                kb(p.read_bytes),
                kb(p.write_bytes),
                figure(Some(p.io_delay_s), 7),
                unit,
            ])
        });
    let mut parts = vec![
        format!("Process totals by {}", ui.sort.word()),
        format!("accumulated since {}", clock(since)),
    ];
    parts.extend(range(scroll, visible, total));
    frame.render_widget(
        fit.table(rows)
            .block(block(&parts, area.width, ui.focus == Focus::Processes)),
        area,
    );
    Rows { total, visible }
}

/// sar -n DEV's columns.
pub(super) const NET_COLUMNS: [Column; 7] = [
    Column::text("IFACE", 0, 5),
    Column::num("rxkB/s", 0, 9),
    Column::num("txkB/s", 0, 9),
    Column::num("rxpck/s", 1, 8),
    Column::num("txpck/s", 1, 8),
    Column::num("err/s", 2, 6),
    Column::num("drop/s", 2, 6),
];

/// Draws the four busiest interfaces.
pub(crate) fn render_net(frame: &mut Frame, area: Rect, s: &TopSample) {
    let mut nets: Vec<_> = s.net.iter().collect();
    nets.sort_by(|a, b| {
        (b.rx_bytes_per_s + b.tx_bytes_per_s).total_cmp(&(a.rx_bytes_per_s + a.tx_bytes_per_s))
    });
    nets.truncate(4);
    let names: Vec<String> = nets.iter().map(|n| Escaped(&n.name).to_string()).collect();
    let mut columns = NET_COLUMNS;
    columns[0].width = name_width("IFACE", names.iter(), 16);
    let fit = Fitted::new(&columns, area.width.saturating_sub(2));
    let rows = nets.iter().zip(names).map(|(n, name)| {
        fit.row(vec![
            name,
            figure(Some(n.rx_bytes_per_s / 1024.0), 9),
            figure(Some(n.tx_bytes_per_s / 1024.0), 9),
            figure(Some(n.rx_packets_per_s), 8),
            figure(Some(n.tx_packets_per_s), 8),
            figure(Some(n.rx_errors_per_s + n.tx_errors_per_s), 6),
            figure(Some(n.rx_drops_per_s + n.tx_drops_per_s), 6),
        ])
    });
    frame.render_widget(
        fit.table(rows)
            .block(block(&net_title(s), area.width, false)),
        area,
    );
}

/// The network panel's title: the top TCP sender and DNS at a glance, when known.
fn net_title(s: &TopSample) -> Vec<String> {
    let mut parts = vec!["Network".to_string()];
    if let Some(c) = &s.connections {
        let mut tcp = format!("TCP {} out", rate(c.tx_bytes_per_s));
        if let Some(p) = c.by_process.iter().find(|p| p.pid.is_some()) {
            tcp.push_str(&format!(", {:.0}% {}", p.tx_share_pct, Escaped(&p.key)));
        }
        parts.push(format!("· {tcp}"));
    }
    if let Some(d) = &s.dns {
        let answers: u64 = d.rcodes.values().sum();
        let failed = answers - d.rcodes.get("NOERROR").copied().unwrap_or(0);
        let mut dns = format!("DNS {:.0} q/s", d.queries_per_s);
        if answers > 0 {
            dns.push_str(&format!(
                ", {:.0}% not NOERROR",
                failed as f64 / answers as f64 * 100.0
            ));
        }
        if let Some(p99) = d.response_p99_ms {
            dns.push_str(&format!(", p99 {p99:.1} ms"));
        }
        parts.push(format!("· {dns}"));
    }
    parts
}

/// `1.2 MB/s`, `340 kB/s`.
fn rate(bytes_per_s: f64) -> String {
    if bytes_per_s >= 1e6 {
        format!("{:.1} MB/s", bytes_per_s / 1e6)
    } else {
        format!("{:.0} kB/s", bytes_per_s / 1e3)
    }
}
