//! `tacho top --batch`: one block per sample, verdict first, columns named as iostat, free,
//! mpstat and pidstat name them.

use std::io::{self, Write};

use crate::diagnose::model::culprits::{Attribution, Culprit};
use crate::diagnose::model::{Disk, TopSample};
use crate::text::Escaped;
use crate::units::format_bytes_approx;

/// Writes one sample's block.
pub fn write_sample(out: &mut impl Write, s: &TopSample) -> io::Result<()> {
    head(out, s)?;
    cpu(out, s)?;
    memory(out, s)?;
    psi(out, s)?;
    disks(out, &s.disks)?;
    processes(out, s)?;
    cgroups(out, s)?;
    write_amplification(out, s)?;
    network(out, s)?;
    accumulated(out, s)?;
    writeln!(out)
}

/// `--net`: the verdicts, then only the network: interfaces and links, TCP by process,
/// service and peer with the busiest connections, and DNS.
pub fn write_network(out: &mut impl Write, s: &TopSample) -> io::Result<()> {
    head(out, s)?;
    network(out, s)?;
    writeln!(out)
}

fn network(out: &mut impl Write, s: &TopSample) -> io::Result<()> {
    net(out, s)?;
    super::conns::write(out, s.connections.as_ref())?;
    super::dns::write(out, s.dns.as_ref())
}

/// The verdicts with their culprits, the notes and the time.
fn head(out: &mut impl Write, s: &TopSample) -> io::Result<()> {
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
        writeln!(out, "  note: {}", Escaped(n))?;
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

fn memory(out: &mut impl Write, s: &TopSample) -> io::Result<()> {
    let m = &s.memory;
    let b = format_bytes_approx;
    writeln!(
        out,
        "\n{:<6}{:>12}{:>12}{:>12}{:>12}{:>12}{:>12}{:>12}",
        "", "total", "used", "free", "shared", "buffers", "cache", "available"
    )?;
    writeln!(
        out,
        "{:<6}{:>12}{:>12}{:>12}{:>12}{:>12}{:>12}{:>12}",
        "Mem:",
        b(m.total_bytes),
        b(m.used_bytes),
        b(m.free_bytes),
        b(m.shared_bytes),
        b(m.buffers_bytes),
        b(m.cache_bytes),
        b(m.available_bytes)
    )?;
    writeln!(
        out,
        "{:<6}{:>12}{:>12}{:>12}",
        "Swap:",
        b(m.swap_total_bytes),
        b(m.swap_used_bytes),
        b(m.swap_free_bytes)
    )?;
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

/// iostat -x's columns, in its order, with its names.
const DISK_HEADER: &str = "Device              r/s     rkB/s   rrqm/s  %rrqm r_await rareq-sz     w/s     wkB/s   wrqm/s  %wrqm w_await wareq-sz     d/s     dkB/s   drqm/s  %drqm d_await dareq-sz     f/s f_await  aqu-sz  %util";

fn disks(out: &mut impl Write, disks: &[Disk]) -> io::Result<()> {
    writeln!(out, "\n{DISK_HEADER}")?;
    for d in disks {
        let v = |x: Option<f64>, w: usize| match x {
            Some(x) => format!("{x:>w$.2}"),
            None => format!("{:>w$}", "-"),
        };
        let mut name = Escaped(&d.name).to_string();
        if d.display_name != d.name {
            name = format!("{name} {}", Escaped(&d.display_name));
        }
        writeln!(
            out,
            "{name:<16} {} {} {} {} {} {} {} {} {} {} {} {} {} {} {} {} {} {} {} {} {} {}",
            v(d.r_per_s, 7),
            v(d.rkb_per_s, 9),
            v(d.rrqm_per_s, 8),
            v(d.rrqm_pct, 6),
            v(d.r_await_ms, 7),
            v(d.rareq_sz_kb, 8),
            v(d.w_per_s, 7),
            v(d.wkb_per_s, 9),
            v(d.wrqm_per_s, 8),
            v(d.wrqm_pct, 6),
            v(d.w_await_ms, 7),
            v(d.wareq_sz_kb, 8),
            v(d.d_per_s, 7),
            v(d.dkb_per_s, 9),
            v(d.drqm_per_s, 8),
            v(d.drqm_pct, 6),
            v(d.d_await_ms, 7),
            v(d.dareq_sz_kb, 8),
            v(d.f_per_s, 7),
            v(d.f_await_ms, 7),
            v(d.aqu_sz, 7),
            v(d.util_pct, 6),
        )?;
    }
    let traced: Vec<&Disk> = disks
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
                Escaped(&d.name).to_string(),
                v(d.queue_p50_ms, 9),
                v(d.service_p50_ms, 8),
                v(d.service_p99_ms, 8),
            )?;
        }
    }
    Ok(())
}

fn processes(out: &mut impl Write, s: &TopSample) -> io::Result<()> {
    writeln!(
        out,
        "\n    PID COMM                %CPU   %usr   %sys    kB_rd/s    kB_wr/s  kB_ccwr/s    IO%"
    )?;
    let kb = |v: Option<f64>| v.map_or(format!("{:>10}", "-"), |v| format!("{:>10.2}", v / 1024.0));
    for p in &s.processes {
        writeln!(
            out,
            "{:>7} {:<16} {:>7.2} {:>6.2} {:>6.2} {} {} {} {:>6}",
            p.pid,
            crate::text::exact(&p.comm, p.comm_hex.as_deref()),
            p.cpu_pct,
            p.user_pct,
            p.system_pct,
            kb(p.read_bytes_per_s),
            kb(p.write_bytes_per_s),
            kb(p.cancelled_write_bytes_per_s),
            p.io_delay_pct.map_or("-".into(), |v| format!("{v:.2}")),
        )?;
    }
    Ok(())
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

fn net(out: &mut impl Write, s: &TopSample) -> io::Result<()> {
    writeln!(
        out,
        "\nIFACE          rxkB/s     txkB/s   rxpck/s   txpck/s  rxerr/s  txerr/s rxdrop/s txdrop/s"
    )?;
    for n in &s.net {
        writeln!(
            out,
            "{:<10} {:>10.2} {:>10.2} {:>9.1} {:>9.1} {:>8.1} {:>8.1} {:>8.1} {:>8.1}",
            Escaped(&n.name),
            n.rx_bytes_per_s / 1024.0,
            n.tx_bytes_per_s / 1024.0,
            n.rx_packets_per_s,
            n.tx_packets_per_s,
            n.rx_errors_per_s,
            n.tx_errors_per_s,
            n.rx_drops_per_s,
            n.tx_drops_per_s
        )?;
    }
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
