//! /sys/class/net/IFACE: what the kernel knows of each link's capacity (speed, duplex) and the
//! counters /proc/net/dev folds together or leaves out (FIFO overruns, carrier changes).

use super::{SysRoot, read_text};

/// One interface's link attributes and extra counters, as read.
#[derive(Debug, Clone, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
pub struct LinkInfo {
    /// Interface name, as in /proc/net/dev.
    pub name: String,
    /// Negotiated speed in Mb/s; `None` when the kernel does not know it (link down, virtual
    /// device, `-1`, or reading it fails with EINVAL as it does for `lo`).
    pub speed_mbps: Option<u64>,
    /// `full` or `half` when the driver reports it.
    pub duplex: Option<String>,
    /// Times the carrier went up or down since the interface appeared.
    pub carrier_changes: Option<u64>,
    /// Receive FIFO overruns (`statistics/rx_fifo_errors`).
    pub rx_fifo_errors: Option<u64>,
    /// Receive ring overruns (`statistics/rx_over_errors`).
    pub rx_over_errors: Option<u64>,
    /// Transmit FIFO errors (`statistics/tx_fifo_errors`).
    pub tx_fifo_errors: Option<u64>,
    /// Interface index (`ifindex`), which rtnetlink answers by.
    #[serde(default)]
    pub ifindex: Option<u32>,
    /// A shaper on its egress (the qdisc's name and its rate in bytes/s), from
    /// [`super::tc`]; absent from fixture trees and history recorded before it was read.
    #[serde(default)]
    pub shaper: Option<(String, u64)>,
}

/// Reads the link attributes of each named interface. Nothing here is an error: every
/// attribute is optional (drivers differ, and `speed` fails with EINVAL on a link that is
/// down), so an unreadable one is `None`.
pub fn read_links<'a>(root: &SysRoot, names: impl IntoIterator<Item = &'a str>) -> Vec<LinkInfo> {
    names
        .into_iter()
        // The kernel refuses '/', whitespace, "." and ".." in interface names; checked again
        // here because a name read from a fixture tree is only text.
        .filter(|n| !n.is_empty() && *n != "." && *n != ".." && !n.contains('/'))
        .map(|name| read_link(root, name))
        .collect()
}

fn read_link(root: &SysRoot, name: &str) -> LinkInfo {
    let dir = root.sys.join("class/net").join(name);
    let text = |rel: &str| read_text(&dir.join(rel)).ok().map(|t| t.trim().to_string());
    let number = |rel: &str| text(rel).and_then(|t| t.parse::<u64>().ok());
    LinkInfo {
        name: name.to_string(),
        speed_mbps: parse_speed(text("speed").as_deref()),
        duplex: text("duplex").filter(|d| d == "full" || d == "half"),
        carrier_changes: number("carrier_changes"),
        rx_fifo_errors: number("statistics/rx_fifo_errors"),
        rx_over_errors: number("statistics/rx_over_errors"),
        tx_fifo_errors: number("statistics/tx_fifo_errors"),
        ifindex: number("ifindex").and_then(|i| u32::try_from(i).ok()),
        shaper: None,
    }
}

/// `speed` holds Mb/s, or `-1` (or 0 on some drivers) when unknown.
fn parse_speed(text: Option<&str>) -> Option<u64> {
    text?.parse::<u64>().ok().filter(|&s| s > 0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn write(dir: &std::path::Path, rel: &str, text: &str) {
        let p = dir.join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    }

    #[test]
    fn reads_a_fixture_link() {
        let t = tempfile::tempdir().unwrap();
        let root = SysRoot::under(t.path());
        let eth = t.path().join("sys/class/net/eth0");
        write(&eth, "speed", "1000\n");
        write(&eth, "duplex", "full\n");
        write(&eth, "carrier_changes", "3\n");
        write(&eth, "statistics/rx_fifo_errors", "7\n");
        let lo = t.path().join("sys/class/net/lo");
        write(&lo, "speed", "-1\n");
        let links = read_links(&root, ["eth0", "lo", "../etc", "gone"]);
        assert_eq!(links.len(), 3);
        assert_eq!(links[0].speed_mbps, Some(1000));
        assert_eq!(links[0].duplex.as_deref(), Some("full"));
        assert_eq!(links[0].carrier_changes, Some(3));
        assert_eq!(links[0].rx_fifo_errors, Some(7));
        assert_eq!(links[0].rx_over_errors, None);
        assert_eq!(links[1].speed_mbps, None);
        assert_eq!(
            links[2],
            LinkInfo {
                name: "gone".into(),
                ..LinkInfo::default()
            }
        );
    }

    #[test]
    fn reads_this_machine() {
        // lo always exists; its speed is unknown to the kernel.
        let links = read_links(&SysRoot::real(), ["lo"]);
        assert_eq!(links[0].speed_mbps, None);
    }

    proptest! {
        #[test]
        fn speed_never_panics(s in ".{0,20}") {
            let v = parse_speed(Some(&s));
            prop_assert!(v.is_none_or(|v| v > 0));
        }
    }
}
