//! TCP connections in `tacho top`, on iperf3 traffic between two network namespaces the test
//! makes: each sender named with its share, loss injected with nftables seen as retransmits,
//! and an unprivileged run naming what it could not see.

use crate::common::cgroup::Cgroup;
use crate::common::netns::NetnsPair;
use crate::common::{have_tool, skip};
use serde_json::Value;

/// `tacho top --json` in namespace `a` for `count` one-second samples, run by `user` (or
/// root).
fn top(pair: &NetnsPair, count: u32, user: Option<&str>) -> Vec<Value> {
    let mut cmd = NetnsPair::exec(&pair.a, "setpriv");
    if let Some(u) = user {
        cmd.args([
            format!("--reuid={u}"),
            "--regid=nogroup".into(),
            "--clear-groups".into(),
        ]);
    }
    let o = cmd
        .arg(env!("CARGO_BIN_EXE_tacho"))
        .args([
            "top",
            "--json",
            "--interval",
            "1s",
            "--count",
            &count.to_string(),
        ])
        .output()
        .unwrap();
    assert!(
        o.status.code().is_some_and(|c| c <= 1),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8_lossy(&o.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

fn tools_or_skip(test: &str) -> bool {
    for tool in ["iperf3", "setpriv"] {
        if !have_tool(tool) {
            skip(&format!("{test}: {tool} is not installed"));
            return false;
        }
    }
    true
}

#[test]
fn two_senders_are_each_named_with_their_share() {
    if !tools_or_skip("two senders") {
        return;
    }
    // The 6 Mb/s sender runs in a service of its own (a cgroup of the v1 name=systemd
    // hierarchy, as systemd makes for a unit), removed after the pair's processes are gone.
    let unit = format!("tacho-conns-{}.service", std::process::id());
    let Some(cgroup) = Cgroup::new("systemd", &unit) else {
        return;
    };
    let Some(mut pair) = NetnsPair::new("two senders") else {
        return;
    };
    pair.iperf3_server(5201);
    pair.iperf3_server(5202);
    let (a, addr) = (pair.a.clone(), pair.addr_b.clone());
    pair.spawn(
        &a,
        "iperf3",
        &["-c", &addr, "-p", "5201", "-b", "2M", "-t", "9"],
    );
    // Into the cgroup first, then into the namespace: `ip netns exec` hides /sys/fs/cgroup.
    let join = format!(
        "echo $$ > '{}/cgroup.procs' && exec \"$@\"",
        cgroup.0.display()
    );
    let sender = std::process::Command::new("sh")
        .args([
            "-c", &join, "sh", "ip", "netns", "exec", &a, "iperf3", "-c", &addr,
        ])
        .args(["-p", "5202", "-b", "6M", "-t", "9"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    pair.adopt(sender);
    pair.wait_connected(&[5201, 5202]);
    let samples = top(&pair, 6, None);
    // The first interval may hold the start; the rest are steady.
    let mut share = [0.0f64; 2];
    let mut counted = 0;
    for s in &samples[2..] {
        let c = &s["connections"];
        let pid_to = |port: &str| {
            c["top"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|t| t["remote"].as_str().unwrap().ends_with(port))
                .max_by(|x, y| {
                    x["tx_bytes_per_s"]
                        .as_f64()
                        .unwrap()
                        .total_cmp(&y["tx_bytes_per_s"].as_f64().unwrap())
                })
                .and_then(|t| t["pid"].as_u64())
                .unwrap_or_else(|| panic!("no sender to {port} with a pid: {c}"))
        };
        for (i, port) in [":5201", ":5202"].iter().enumerate() {
            let pid = pid_to(port);
            let g = c["by_process"]
                .as_array()
                .unwrap()
                .iter()
                .find(|g| g["pid"].as_u64() == Some(pid))
                .unwrap_or_else(|| panic!("pid {pid} not among the processes: {c}"));
            assert_eq!(g["key"], format!("iperf3 (pid {pid})"));
            if i == 1 {
                assert_eq!(g["unit"], unit.as_str(), "{g}");
                let service = c["by_service"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .find(|g| g["key"] == unit.as_str())
                    .unwrap_or_else(|| panic!("{unit} not among the services: {c}"));
                assert!(
                    service["tx_share_pct"].as_f64().unwrap() > 50.0,
                    "{service}"
                );
            }
            share[i] += g["tx_share_pct"].as_f64().unwrap();
        }
        counted += 1;
    }
    let share = share.map(|s| s / counted as f64);
    assert!(
        (share[0] - 25.0).abs() <= 5.0 && (share[1] - 75.0).abs() <= 5.0,
        "shares of TCP sent: 2 Mb/s sender {:.1}%, 6 Mb/s sender {:.1}%",
        share[0],
        share[1]
    );
}

#[test]
fn loss_on_the_path_shows_as_retransmits_to_that_peer() {
    if !tools_or_skip("loss") || !have_tool("nft") {
        return skip("loss: nft is not installed");
    }
    let Some(mut pair) = NetnsPair::new("loss") else {
        return;
    };
    pair.iperf3_server(5201);
    // The server's side drops 5% of what arrives for it: lost on the path, as far as the
    // sender knows (a drop in the sender's own output hook is not a loss to TCP: the
    // segment stays queued and is sent again without counting as a retransmission).
    let nft = |args: &str| {
        let o = NetnsPair::exec(&pair.b, "nft").arg(args).output().unwrap();
        assert!(
            o.status.success(),
            "nft {args}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
    };
    nft("add table inet tacho_loss");
    nft("add chain inet tacho_loss in { type filter hook input priority 0; }");
    nft("add rule inet tacho_loss in tcp dport 5201 numgen random mod 100 < 5 drop");
    let (a, addr) = (pair.a.clone(), pair.addr_b.clone());
    pair.spawn(
        &a,
        "iperf3",
        &["-c", &addr, "-p", "5201", "-b", "20M", "-t", "8"],
    );
    pair.wait_connected(&[5201]);
    let samples = top(&pair, 5, None);
    let subject = format!("{addr}:5201");
    let found: Vec<&Value> = samples
        .iter()
        .flat_map(|s| s["findings"].as_array().into_iter().flatten())
        .filter(|f| f["code"] == "tcp_retransmits" && f["subject"] == subject.as_str())
        .collect();
    let f = found.first().unwrap_or_else(|| {
        panic!(
            "no retransmit verdict for {subject}: {:?}",
            samples
                .iter()
                .map(|s| &s["connections"]["by_remote"])
                .collect::<Vec<_>>()
        )
    });
    let msg = f["message"].as_str().unwrap();
    assert!(
        msg.starts_with(&format!("TCP retransmits to {addr} at "))
            && msg.contains("packet loss on the path (from iperf3 (pid"),
        "{msg}"
    );
}

#[test]
fn without_root_connections_show_and_unknown_owners_are_named() {
    if !tools_or_skip("unprivileged") {
        return;
    }
    let Some(mut pair) = NetnsPair::new("unprivileged") else {
        return;
    };
    pair.iperf3_server(5201);
    let (a, addr) = (pair.a.clone(), pair.addr_b.clone());
    pair.spawn(
        &a,
        "iperf3",
        &["-c", &addr, "-p", "5201", "-b", "4M", "-t", "6"],
    );
    let samples = top(&pair, 3, Some("nobody"));
    let last = samples.last().unwrap();
    let c = &last["connections"];
    let to_server = c["top"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["remote"] == format!("{addr}:5201").as_str())
        .unwrap_or_else(|| panic!("root's connection not shown to nobody: {c}"));
    assert!(to_server["tx_bytes_per_s"].as_f64().unwrap() > 0.0);
    assert!(to_server["pid"].is_null(), "{to_server}");
    let notes: Vec<&str> = samples
        .iter()
        .flat_map(|s| s["notes"].as_array().into_iter().flatten())
        .filter_map(Value::as_str)
        .collect();
    assert!(
        notes
            .iter()
            .any(|n| n.contains("processes of some connections are unknown")
                && n.contains("needs root")),
        "{notes:?}"
    );
}
