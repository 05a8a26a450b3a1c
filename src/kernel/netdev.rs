//! /proc/net/dev: cumulative per-interface traffic counters.

use std::path::Path;

use super::{KernelError, Result, SysRoot, read_text};

/// One interface's counters since it appeared.
#[derive(Debug, Clone, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
pub struct NetCounters {
    /// Interface name (`eth0`, `lo`), without the trailing colon.
    pub name: String,
    /// Bytes received.
    pub rx_bytes: u64,
    /// Packets received.
    pub rx_packets: u64,
    /// Receive errors the driver counted.
    pub rx_errors: u64,
    /// Received packets dropped (`drop` column), e.g. for lack of buffer space.
    pub rx_drops: u64,
    /// Bytes sent.
    pub tx_bytes: u64,
    /// Packets sent.
    pub tx_packets: u64,
    /// Transmit errors the driver counted.
    pub tx_errors: u64,
    /// Packets dropped on the way out (`drop` column of the transmit half).
    pub tx_drops: u64,
}

/// Reads `<proc>/net/dev`: one entry per interface, in file order.
pub fn read_netdev(root: &SysRoot) -> Result<Vec<NetCounters>> {
    let path = root.proc.join("net/dev");
    parse_netdev(&read_text(&path)?, &path)
}

/// Parses /proc/net/dev: two header lines, then `name: 8 receive and 8 transmit counters`.
/// Interface names cannot contain ':' (the kernel refuses such names), so the first ':' ends
/// the name even when a wide counter touches it.
pub fn parse_netdev(text: &str, path: &Path) -> Result<Vec<NetCounters>> {
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate().skip(2) {
        if line.trim().is_empty() {
            continue;
        }
        let err =
            |reason: &str| KernelError::parse(path, Some(i + 1), format!("{reason}: {line:?}"));
        let (name, rest) = line
            .split_once(':')
            .ok_or_else(|| err("expected 'name: counters'"))?;
        let v: Vec<u64> = rest
            .split_whitespace()
            .map(str::parse)
            .collect::<std::result::Result<_, _>>()
            .map_err(|_| err("a counter is not a number"))?;
        if v.len() != 16 {
            return Err(err(&format!("expected 16 counters, found {}", v.len())));
        }
        out.push(NetCounters {
            name: name.trim().to_string(),
            rx_bytes: v[0],
            rx_packets: v[1],
            rx_errors: v[2],
            rx_drops: v[3],
            tx_bytes: v[8],
            tx_packets: v[9],
            tx_errors: v[10],
            tx_drops: v[11],
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn reads_real_capture() {
        let real = include_str!("../../tests/fixtures/top/firecracker/a/proc/net/dev");
        let n = parse_netdev(real, Path::new("/proc/net/dev")).unwrap();
        let lo = n.iter().find(|n| n.name == "lo").unwrap();
        // Loopback receives exactly what it sends.
        assert_eq!(lo.rx_bytes, lo.tx_bytes);
        assert!(n.iter().any(|n| n.name == "eth0" && n.rx_bytes > 0));
    }

    #[test]
    fn malformed_lines_name_the_line() {
        let head = "h1\nh2\n";
        let ok = "  lo:1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16\n";
        let n = parse_netdev(&format!("{head}{ok}"), Path::new("/p")).unwrap();
        assert_eq!((n[0].rx_bytes, n[0].tx_drops), (1, 12));
        for bad in [
            "eth0 1 2",
            "eth0: 1 2 3",
            "eth0: 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 x",
        ] {
            let err = parse_netdev(&format!("{head}{ok}{bad}\n"), Path::new("/proc/net/dev"))
                .unwrap_err()
                .to_string();
            assert!(err.contains("/proc/net/dev line 4"), "{err}");
        }
    }

    proptest! {
        #[test]
        fn never_panics(s in "\\PC{0,200}") {
            let _ = parse_netdev(&s, Path::new("/x"));
        }
    }
}
