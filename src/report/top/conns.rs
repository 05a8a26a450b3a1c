//! The TCP section of `tacho top --batch`: traffic by process, by peer, and the busiest
//! connections (iftop and nethogs in one). Process names come from processes and are escaped.

use std::io::{self, Write};

use crate::diagnose::model::conns::{ConnGroup, Conns};
use crate::fit::{Col, table};
use crate::text::exact;

/// The busiest connections' columns (an empty first one indents the table under its
/// section); on a narrow terminal the local address goes first, then the round trip time.
const CONNECTION_COLUMNS: [Col; 8] = [
    Col::text("", 0, 1),
    Col::text("LOCAL", 3, 24),
    Col::text("PEER", 0, 24),
    Col::text("PROCESS", 0, 20),
    Col::num("txkB/s", 0, 10),
    Col::num("rxkB/s", 0, 10),
    Col::num("retr%", 1, 7),
    Col::num("rtt_ms", 2, 8),
];

/// Writes the section when connections moved data in the interval; a connection or group
/// that moved none is listed only when `show_idle`. The busiest connections' table fits
/// `width` (a terminal's).
pub fn write(
    out: &mut impl Write,
    conns: Option<&Conns>,
    show_idle: bool,
    width: Option<usize>,
) -> io::Result<()> {
    let Some(c) = conns.filter(|c| !c.top.is_empty()) else {
        return Ok(());
    };
    let moved = |tx: f64, rx: f64| show_idle || tx > 0.0 || rx > 0.0;
    let kb = |b: f64| b / 1024.0;
    writeln!(
        out,
        "\nTCP     {} established, {:.1} kB/s sent, {:.1} kB/s received{}",
        c.established,
        kb(c.tx_bytes_per_s),
        kb(c.rx_bytes_per_s),
        if c.owners_unknown > 0 {
            format!(", {} busy without a known process", c.owners_unknown)
        } else {
            String::new()
        }
    )?;
    for (title, list) in [
        ("PROCESS", &c.by_process),
        ("SERVICE", &c.by_service),
        ("PEER", &c.by_remote),
    ] {
        let busy = list
            .iter()
            .filter(|g| moved(g.tx_bytes_per_s, g.rx_bytes_per_s));
        groups(out, title, busy)?;
    }
    let rows: Vec<Vec<String>> = c
        .top
        .iter()
        .filter(|t| moved(t.tx_bytes_per_s, t.rx_bytes_per_s))
        .map(|t| {
            let who = match (&t.comm, t.pid) {
                (Some(comm), Some(pid)) => {
                    format!("{} ({pid})", exact(comm, t.comm_hex.as_deref()))
                }
                _ => "?".into(),
            };
            vec![
                String::new(),
                t.local.clone(),
                t.remote.clone(),
                who,
                format!("{:.1}", kb(t.tx_bytes_per_s)),
                format!("{:.1}", kb(t.rx_bytes_per_s)),
                t.retrans_pct.map_or("-".into(), |p| format!("{p:.1}")),
                format!("{:.2}", t.rtt_ms),
            ]
        })
        .collect();
    table(out, &CONNECTION_COLUMNS, &rows, width)?;
    Ok(())
}

fn groups<'a>(
    out: &mut impl Write,
    title: &str,
    list: impl Iterator<Item = &'a ConnGroup>,
) -> io::Result<()> {
    writeln!(
        out,
        "  {title:<32} {:>5} {:>10} {:>10} {:>6} {:>7}",
        "conns", "txkB/s", "rxkB/s", "tx%", "retr%"
    )?;
    for g in list.take(5) {
        let retr = if g.segs_out > 0 {
            format!("{:.1}", g.retrans as f64 / g.segs_out as f64 * 100.0)
        } else {
            "-".into()
        };
        writeln!(
            out,
            "  {:<32} {:>5} {:>10.1} {:>10.1} {:>6.0} {:>7}",
            exact(&g.key, g.key_hex.as_deref()),
            g.connections,
            g.tx_bytes_per_s / 1024.0,
            g.rx_bytes_per_s / 1024.0,
            g.tx_share_pct,
            retr
        )?;
    }
    Ok(())
}
