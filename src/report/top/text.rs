//! `tacho top --batch`: one block per sample, verdict first, columns named as iostat, free,
//! mpstat and pidstat name them. On a terminal narrower than a table, its least important
//! columns are left out (as on the screen); idle devices and connections are left out unless
//! asked for (as `iostat -z` does); a note is printed once, not with every sample.

use std::collections::HashSet;
use std::io::{self, Write};

use crate::diagnose::model::culprits::{Attribution, Culprit};
use crate::diagnose::model::{Disk, TopSample};
use crate::fit::{Col, table};
use crate::text::Escaped;
use crate::units::format_bytes_approx;

/// How the samples of one run are printed, and what was already said.
pub struct Batch {
    /// The terminal's width, for the tables; `None` when not a terminal.
    width: Option<usize>,
    /// List idle devices and connections too.
    show_idle: bool,
    /// Notes printed so far, by their words without figures: each is said once, and again only
    /// when it says something new (not when only a count in it changed).
    noted: HashSet<String>,
}

impl Batch {
    /// Samples for a terminal `width` wide (`None`: piped), idle rows listed when `show_idle`.
    pub fn new(width: Option<usize>, show_idle: bool) -> Batch {
        Batch {
            width,
            show_idle,
            noted: HashSet::new(),
        }
    }

    /// Writes one sample's block.
    pub fn write_sample(&mut self, out: &mut impl Write, s: &TopSample) -> io::Result<()> {
        self.head(out, s)?;
        cpu(out, s)?;
        memory(out, s, self.width)?;
        psi(out, s)?;
        disks(out, &s.disks, self.width, self.show_idle)?;
        block_io(out, s, self.width)?;
        processes(out, s, self.width)?;
        cgroups(out, s)?;
        write_amplification(out, s)?;
        network(out, s, self.show_idle, self.width)?;
        accumulated(out, s)?;
        writeln!(out)
    }

    /// `--net`: the verdicts, then only the network: interfaces and links, TCP by process,
    /// service and peer with the busiest connections, and DNS.
    pub fn write_network(&mut self, out: &mut impl Write, s: &TopSample) -> io::Result<()> {
        self.head(out, s)?;
        network(out, s, self.show_idle, self.width)?;
        writeln!(out)
    }

    /// The verdicts with their culprits, the notes not said before, and the time.
    fn head(&mut self, out: &mut impl Write, s: &TopSample) -> io::Result<()> {
        // Verdicts and notes quote process names and paths: any user chooses those.
        writeln!(out, "{}", Escaped(&s.verdict))?;
        for (i, f) in s.findings.iter().enumerate() {
            if i > 0 {
                writeln!(out, "  also: {}", Escaped(&f.message))?;
            }
            for c in &f.culprits {
                writeln!(out, "    {}", Escaped(&culprit_line(c)))?;
            }
        }
        for n in &s.notes {
            let words: String = n.chars().filter(|c| !c.is_ascii_digit()).collect();
            if self.noted.insert(words) {
                writeln!(out, "  note: {}", Escaped(n))?;
            }
        }
        let secs = s.time_unix_s as u64;
        writeln!(
            out,
            "{:02}:{:02}:{:02} UTC  interval {:.2} s",
            secs / 3600 % 24,
            secs / 60 % 60,
            secs % 60,
            s.interval_s
        )
    }
}

fn network(
    out: &mut impl Write,
    s: &TopSample,
    show_idle: bool,
    width: Option<usize>,
) -> io::Result<()> {
    net(out, s, width)?;
    super::conns::write(out, s.connections.as_ref(), show_idle, width)?;
    super::dns::write(out, s.dns.as_ref())
}

fn write_amplification(out: &mut impl Write, s: &TopSample) -> io::Result<()> {
    let wa = &s.write_amplification;
    writeln!(
        out,
        "\nwrite amplification: disks wrote {}, processes {}: {} (from {} of {} processes' /proc/PID/io)",
        format_bytes_approx(wa.device_write_bytes),
        format_bytes_approx(wa.process_write_bytes),
        wa.ratio.map_or("-".into(), |r| format!("{r:.2}x")),
        wa.processes_readable,
        wa.processes_total,
    )
}

fn cpu(out: &mut impl Write, s: &TopSample) -> io::Result<()> {
    writeln!(
        out,
        "\nCPU     %usr  %nice   %sys   %irq  %soft %iowait %steal %guest  %idle"
    )?;
    let row = |out: &mut dyn Write, name: &str, c: &crate::diagnose::model::cpu::CpuSplit| {
        writeln!(
            out,
            "{name:<5} {:>6.2} {:>6.2} {:>6.2} {:>6.2} {:>6.2} {:>7.2} {:>6.2} {:>6.2} {:>6.2}",
            c.user_pct,
            c.nice_pct,
            c.system_pct,
            c.irq_pct,
            c.softirq_pct,
            c.iowait_pct,
            c.steal_pct,
            c.guest_pct,
            c.idle_pct
        )
    };
    row(out, "all", &s.cpu.all)?;
    for p in &s.cpu.per_cpu {
        row(out, &p.cpu.to_string(), &p.split)?;
    }
    let l = &s.load;
    writeln!(
        out,
        "load {:.2} {:.2} {:.2}  runnable {}  blocked {}  cswch/s {}  intr/s {}  forks/s {}",
        l.load1,
        l.load5,
        l.load15,
        l.runnable,
        l.blocked,
        or_dash(l.context_switches_per_s, 0),
        or_dash(l.interrupts_per_s, 0),
        or_dash(l.forks_per_s, 1)
    )
}

/// free's columns, the least telling left out first on a narrow terminal.
const MEMORY_COLUMNS: [Col; 8] = [
    Col::text("", 0, 5),
    Col::num("total", 0, 11),
    Col::num("used", 0, 11),
    Col::num("free", 1, 11),
    Col::num("shared", 3, 11),
    Col::num("buffers", 3, 11),
    Col::num("cache", 2, 11),
    Col::num("available", 0, 11),
];

fn memory(out: &mut impl Write, s: &TopSample, width: Option<usize>) -> io::Result<()> {
    let m = &s.memory;
    let b = format_bytes_approx;
    writeln!(out)?;
    let rows = vec![
        vec![
            "Mem:".to_string(),
            b(m.total_bytes),
            b(m.used_bytes),
            b(m.free_bytes),
            b(m.shared_bytes),
            b(m.buffers_bytes),
            b(m.cache_bytes),
            b(m.available_bytes),
        ],
        vec![
            "Swap:".to_string(),
            b(m.swap_total_bytes),
            b(m.swap_used_bytes),
            b(m.swap_free_bytes),
        ],
    ];
    table(out, &MEMORY_COLUMNS, &rows, width)?;
    let p = &m.used_parts;
    let other = if p.other_bytes < 0 {
        format!("-{}", b(p.other_bytes.unsigned_abs()))
    } else {
        b(p.other_bytes as u64)
    };
    writeln!(
        out,
        "used = anon {} + shmem {} + unreclaimable slab {} + page tables {} + kernel stacks {} + hugetlb {} + other {}",
        b(p.anon_bytes),
        b(p.shmem_bytes),
        b(p.slab_unreclaimable_bytes),
        b(p.page_tables_bytes),
        b(p.kernel_stack_bytes),
        b(p.hugetlb_bytes),
        other
    )?;
    let swap = |v: Option<f64>| v.map_or("-".into(), |v| format!("{}/s", b(v as u64)));
    writeln!(
        out,
        "dirty {}  writeback {}  THP anon {}  swap in {}  out {}",
        b(m.dirty_bytes),
        b(m.writeback_bytes),
        b(m.anon_huge_bytes),
        swap(m.swap_in_bytes_per_s),
        swap(m.swap_out_bytes_per_s)
    )?;
    let events: Vec<String> = s
        .vm_events
        .iter()
        .filter(|(_, v)| **v > 0)
        .map(|(k, v)| format!("{} +{v}", Escaped(k)))
        .collect();
    writeln!(
        out,
        "vm events: {}",
        if events.is_empty() {
            "none".into()
        } else {
            events.join("  ")
        }
    )
}

fn psi(out: &mut impl Write, s: &TopSample) -> io::Result<()> {
    let line = |p: Option<&crate::diagnose::model::PsiLine>| {
        p.map_or("      -       -       -".to_string(), |p| {
            format!(
                "{:>7.2} {:>7.2} {:>7}",
                p.avg10_pct,
                p.avg60_pct,
                p.stall_pct.map_or("-".into(), |v| format!("{v:.2}"))
            )
        })
    };
    writeln!(
        out,
        "\nPSI     some avg10  avg60  stall%   full avg10  avg60  stall%"
    )?;
    for (name, r) in [
        ("cpu", &s.psi.cpu),
        ("io", &s.psi.io),
        ("memory", &s.psi.memory),
    ] {
        match r {
            Some(r) => writeln!(
                out,
                "{name:<7} {}    {}",
                line(Some(&r.some)),
                line(r.full.as_ref())
            )?,
            None => writeln!(out, "{name:<7} unavailable")?,
        }
    }
    Ok(())
}

/// iostat -x's columns, in its order, with its names; on a narrow terminal the screen's
/// priorities keep %util, queue, write and read figures and leave out merges, discards and
/// flushes first.
const DISK_COLUMNS: [Col; 23] = [
    Col::text("Device", 0, 16),
    Col::num("r/s", 3, 7),
    Col::num("rkB/s", 2, 9),
    Col::num("rrqm/s", 7, 8),
    Col::num("%rrqm", 8, 6),
    Col::num("r_await", 2, 7),
    Col::num("rareq-sz", 5, 8),
    Col::num("w/s", 3, 7),
    Col::num("wkB/s", 1, 9),
    Col::num("wrqm/s", 7, 8),
    Col::num("%wrqm", 8, 6),
    Col::num("w_await", 1, 7),
    Col::num("wareq-sz", 5, 8),
    Col::num("d/s", 9, 7),
    Col::num("dkB/s", 9, 9),
    Col::num("drqm/s", 10, 8),
    Col::num("%drqm", 10, 6),
    Col::num("d_await", 9, 7),
    Col::num("dareq-sz", 10, 8),
    Col::num("f/s", 6, 7),
    Col::num("f_await", 6, 7),
    Col::num("aqu-sz", 1, 7),
    Col::num("%util", 0, 6),
];

/// No request completed or in flight in the interval (what `iostat -z` leaves out).
fn idle(d: &Disk) -> bool {
    [d.r_per_s, d.w_per_s, d.d_per_s, d.f_per_s, d.util_pct]
        .iter()
        .all(|v| v.unwrap_or(0.0) == 0.0)
}

fn disks(
    out: &mut impl Write,
    disks: &[Disk],
    width: Option<usize>,
    show_idle: bool,
) -> io::Result<()> {
    let listed: Vec<&Disk> = disks.iter().filter(|d| show_idle || !idle(d)).collect();
    let rows: Vec<Vec<String>> = listed
        .iter()
        .map(|d| {
            let v = |x: Option<f64>| x.map_or("-".into(), |x| format!("{x:.2}"));
            let mut name = Escaped(&d.device.name).to_string();
            if d.device.display_name != d.device.name {
                name = format!("{name} {}", Escaped(&d.device.display_name));
            }
            vec![
                name,
                v(d.r_per_s),
                v(d.rkb_per_s),
                v(d.rrqm_per_s),
                v(d.rrqm_pct),
                v(d.r_await_ms),
                v(d.rareq_sz_kb),
                v(d.w_per_s),
                v(d.wkb_per_s),
                v(d.wrqm_per_s),
                v(d.wrqm_pct),
                v(d.w_await_ms),
                v(d.wareq_sz_kb),
                v(d.d_per_s),
                v(d.dkb_per_s),
                v(d.drqm_per_s),
                v(d.drqm_pct),
                v(d.d_await_ms),
                v(d.dareq_sz_kb),
                v(d.f_per_s),
                v(d.f_await_ms),
                v(d.aqu_sz),
                v(d.util_pct),
            ]
        })
        .collect();
    writeln!(out)?;
    table(out, &DISK_COLUMNS, &rows, width)?;
    let hidden = disks.len() - listed.len();
    if hidden > 0 {
        writeln!(
            out,
            "({hidden} idle device{} not listed; --show-idle lists them)",
            if hidden == 1 { "" } else { "s" }
        )?;
    }
    let traced: Vec<&&Disk> = listed
        .iter()
        .filter(|d| d.service_p50_ms.is_some())
        .collect();
    if !traced.is_empty() {
        // await = queue + service; eBPF tells them apart, which iostat's svctm could not.
        writeln!(
            out,
            "
Device           queue_p50  svc_p50  svc_p99   (ms, eBPF)"
        )?;
        for d in traced {
            let v = |x: Option<f64>, w: usize| {
                x.map_or(format!("{:>w$}", "-"), |x| format!("{x:>w$.3}"))
            };
            writeln!(
                out,
                "{:<16} {} {} {}",
                Escaped(&d.device.name).to_string(),
                v(d.queue_p50_ms, 9),
                v(d.service_p50_ms, 8),
                v(d.service_p99_ms, 8),
            )?;
        }
    }
    Ok(())
}

/// biotop's view per process and device (eBPF); on a narrow terminal the split by operation
/// and the unit go first.
const BLOCK_IO_COLUMNS: [Col; 11] = [
    Col::num("PID", 0, 7),
    Col::text("COMM", 0, 16),
    Col::text("UNIT", 3, 24),
    Col::text("DEVICE", 0, 10),
    Col::num("IOPS", 0, 8),
    Col::num("r/s", 2, 8),
    Col::num("w/s", 2, 8),
    Col::num("kB/s", 1, 10),
    Col::num("p50_ms", 1, 8),
    Col::num("p99_ms", 0, 8),
    Col::num("%queued", 0, 7),
];

/// Per process and device: requests per second, bytes, the p50/p99 of the requests' whole
/// time (submit → done) and the share of it queued, under the devices' latency table.
fn block_io(out: &mut impl Write, s: &TopSample, width: Option<usize>) -> io::Result<()> {
    if s.block_io_processes.is_empty() {
        return Ok(());
    }
    let ms = |v: Option<f64>| v.map_or("-".into(), |v| format!("{v:.3}"));
    let rows: Vec<Vec<String>> = s
        .block_io_processes
        .iter()
        .map(|p| {
            let f = &p.figures;
            vec![
                p.pid.map_or("-".into(), |p| p.to_string()),
                crate::text::exact(&p.comm, p.comm_hex.as_deref()),
                crate::text::escape(p.unit.as_deref().unwrap_or("-")).into_owned(),
                crate::text::escape(&p.device).into_owned(),
                format!("{:.1}", f.iops),
                format!("{:.1}", f.read_iops),
                format!("{:.1}", f.write_iops),
                format!("{:.1}", f.bytes_per_s / 1024.0),
                ms(f.lat_p50_ms),
                ms(f.lat_p99_ms),
                f.queued_pct.map_or("-".into(), |v| format!("{v:.0}")),
            ]
        })
        .collect();
    writeln!(
        out,
        "\nBlock I/O by process (eBPF; latency = submit→done, %queued = share before dispatch)"
    )?;
    table(out, &BLOCK_IO_COLUMNS, &rows, width)
}

/// pidstat's columns; on a narrow terminal the split of CPU time and cancelled writes go
/// first.
const PROCESS_COLUMNS: [Col; 9] = [
    Col::num("PID", 0, 7),
    Col::text("COMM", 0, 16),
    Col::num("%CPU", 0, 7),
    Col::num("%usr", 3, 6),
    Col::num("%sys", 3, 6),
    Col::num("kB_rd/s", 1, 10),
    Col::num("kB_wr/s", 1, 10),
    Col::num("kB_ccwr/s", 4, 10),
    Col::num("IO%", 2, 6),
];

fn processes(out: &mut impl Write, s: &TopSample, width: Option<usize>) -> io::Result<()> {
    let kb = |v: Option<f64>| v.map_or("-".into(), |v| format!("{:.2}", v / 1024.0));
    let rows: Vec<Vec<String>> = s
        .processes
        .iter()
        .map(|p| {
            vec![
                p.pid.to_string(),
                crate::text::exact(&p.comm, p.comm_hex.as_deref()),
                format!("{:.2}", p.cpu_pct),
                format!("{:.2}", p.user_pct),
                format!("{:.2}", p.system_pct),
                kb(p.read_bytes_per_s),
                kb(p.write_bytes_per_s),
                kb(p.cancelled_write_bytes_per_s),
                p.io_delay_pct.map_or("-".into(), |v| format!("{v:.2}")),
            ]
        })
        .collect();
    writeln!(out)?;
    table(out, &PROCESS_COLUMNS, &rows, width)
}

/// `dd (pid 4242, session-3.scope): 81%, exact: cgroup v1 blkio… of cgroup /job; …`.
fn culprit_line(c: &Culprit) -> String {
    let how = match &c.attribution {
        Attribution::Exact { source } => format!("exact: {source}"),
        Attribution::Likely { reason } => format!("likely: {reason}"),
    };
    format!("{}: {:.0}%, {how}", c.who(), c.share_pct)
}

fn accumulated(out: &mut impl Write, s: &TopSample) -> io::Result<()> {
    let Some(acc) = &s.accumulated else {
        return Ok(());
    };
    let secs = acc.since_unix_s as u64;
    writeln!(
        out,
        "\naccumulated since {:02}:{:02}:{:02} UTC\n    PID COMM                UNIT                        read     written      CPU s",
        secs / 3600 % 24,
        secs / 60 % 60,
        secs % 60
    )?;
    for p in &acc.processes {
        writeln!(
            out,
            "{:>7} {:<19} {:<24} {:>10} {:>10} {:>10.2}{}",
            p.pid,
            crate::text::exact(&p.comm, p.comm_hex.as_deref()),
            Escaped(p.unit.as_deref().unwrap_or("-")),
            format_bytes_approx(p.read_bytes),
            format_bytes_approx(p.write_bytes),
            p.user_s + p.system_s,
            if p.exited { "  (exited)" } else { "" },
        )?;
    }
    writeln!(
        out,
        "UNIT                                       read     written      CPU s  procs"
    )?;
    for u in &acc.services {
        writeln!(
            out,
            "{:<40} {:>10} {:>10} {:>10.2} {:>6}",
            Escaped(&u.unit),
            format_bytes_approx(u.read_bytes),
            format_bytes_approx(u.write_bytes),
            u.cpu_s,
            u.processes
        )?;
    }
    Ok(())
}

fn cgroups(out: &mut impl Write, s: &TopSample) -> io::Result<()> {
    if s.cgroups.is_empty() {
        return Ok(());
    }
    writeln!(
        out,
        "\ncgroup                                   device        kB_rd/s    kB_wr/s   rio/s   wio/s"
    )?;
    for c in &s.cgroups {
        for d in &c.devices {
            writeln!(
                out,
                "{:<40} {:<10} {:>10.2} {:>10.2} {:>7.1} {:>7.1}",
                Escaped(&c.path),
                Escaped(&d.device),
                d.rbytes_per_s / 1024.0,
                d.wbytes_per_s / 1024.0,
                d.rios_per_s,
                d.wios_per_s
            )?;
        }
    }
    Ok(())
}

/// sar -n DEV's columns and EDEV's error and drop rates; on a narrow terminal the drops go
/// first, then the errors, then the packet rates.
const NET_COLUMNS: [Col; 9] = [
    Col::text("IFACE", 0, 10),
    Col::num("rxkB/s", 0, 10),
    Col::num("txkB/s", 0, 10),
    Col::num("rxpck/s", 2, 9),
    Col::num("txpck/s", 2, 9),
    Col::num("rxerr/s", 3, 8),
    Col::num("txerr/s", 3, 8),
    Col::num("rxdrop/s", 4, 8),
    Col::num("txdrop/s", 4, 8),
];

fn net(out: &mut impl Write, s: &TopSample, width: Option<usize>) -> io::Result<()> {
    let rows: Vec<Vec<String>> = s
        .net
        .iter()
        .map(|n| {
            vec![
                Escaped(&n.name).to_string(),
                format!("{:.2}", n.rx_bytes_per_s / 1024.0),
                format!("{:.2}", n.tx_bytes_per_s / 1024.0),
                format!("{:.1}", n.rx_packets_per_s),
                format!("{:.1}", n.tx_packets_per_s),
                format!("{:.1}", n.rx_errors_per_s),
                format!("{:.1}", n.tx_errors_per_s),
                format!("{:.1}", n.rx_drops_per_s),
                format!("{:.1}", n.tx_drops_per_s),
            ]
        })
        .collect();
    writeln!(out)?;
    table(out, &NET_COLUMNS, &rows, width)?;
    for l in &s.links {
        if let (Some(mbps), Some(rx), Some(tx)) =
            (l.speed_mbps, l.rx_utilisation_pct, l.tx_utilisation_pct)
        {
            writeln!(
                out,
                "{:<10} link {mbps} Mb/s {}: {rx:.0}% in, {tx:.0}% out{}",
                Escaped(&l.name),
                l.duplex.as_deref().unwrap_or("duplex unknown"),
                shaping(l),
            )?;
        } else if let Some(tx) = l.tx_utilisation_pct {
            writeln!(
                out,
                "{:<10} link: {tx:.0}% out{}",
                Escaped(&l.name),
                shaping(l)
            )?;
        }
    }
    Ok(())
}

/// ` (shaped by tbf to 10 Mb/s)` after a link's outbound share, when a shaper sets it.
fn shaping(l: &crate::diagnose::model::net::Link) -> String {
    match (&l.shaper, l.shaped_mbps) {
        (Some(kind), Some(mbps)) => format!(" (shaped by {kind} to {mbps} Mb/s)"),
        _ => String::new(),
    }
}

/// A figure with `prec` decimals, or "-" where it could not be computed (as iostat's columns
/// above).
fn or_dash(x: Option<f64>, prec: usize) -> String {
    x.map_or_else(|| "-".into(), |x| format!("{x:.prec$}"))
}
