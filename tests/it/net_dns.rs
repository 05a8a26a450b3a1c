//! `tacho top --dns` on DNS traffic the test makes between two network namespaces of its own:
//! a scripted resolver (tests/helpers/dns_server.py) answers by name, so every count is known.

use crate::common::netns::NetnsPair;
use crate::common::{as_nobody, have_tool, is_root, skip, tacho, wait_limited};
use serde_json::Value;
use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::process::Stdio;

fn helper(name: &str) -> String {
    format!("{}/tests/helpers/{name}", env!("CARGO_MANIFEST_DIR"))
}

/// Runs the client in namespace `a` against the server; returns its summary line.
fn ask(pair: &NetnsPair, specs: &[&str]) -> String {
    let o = NetnsPair::exec(&pair.a, "python3")
        .arg(helper("dns_client.py"))
        .arg(&pair.addr_b)
        .args(specs)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    String::from_utf8_lossy(&o.stdout).trim().to_string()
}

/// Adds up a map-valued field of `dns` over the samples.
fn total(samples: &[Value], field: &str) -> BTreeMap<String, u64> {
    let mut out = BTreeMap::new();
    for s in samples {
        if let Some(m) = s["dns"][field].as_object() {
            for (k, v) in m {
                *out.entry(k.clone()).or_default() += v.as_u64().unwrap();
            }
        }
    }
    out
}

#[test]
fn dns_counts_match_what_the_resolver_answered() {
    if !have_tool("python3") {
        return skip("dns: python3 is not installed");
    }
    let Some(mut pair) = NetnsPair::new("dns") else {
        return;
    };
    let (b, addr_b) = (pair.b.clone(), pair.addr_b.clone());
    pair.spawn(&b, "python3", &[&helper("dns_server.py"), &addr_b]);
    // The server is up once a query is answered (before tacho starts: not counted).
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while ask(&pair, &["warm.test:1"]) != "answered 1 of 1" {
        assert!(
            std::time::Instant::now() < deadline,
            "the test resolver never answered"
        );
    }

    // Long enough for the dropped queries to be given up (5 s) after the traffic.
    let mut top = NetnsPair::exec(&pair.a, env!("CARGO_BIN_EXE_tacho"))
        .args(["top", "--dns", "--json", "--interval", "1s", "--count", "9"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(top.stdout.take().unwrap()).lines();
    // The first sample is out: the capture has been running for a second.
    let first = lines.next().expect("a first sample").unwrap();
    let summary = ask(
        &pair,
        &[
            "good.test:20",
            "nx.test:7",
            "fail.test:5",
            "slow.test:3",
            "drop.test:2",
        ],
    );
    assert_eq!(summary, "answered 35 of 37");
    let mut samples: Vec<Value> = vec![serde_json::from_str(&first).unwrap()];
    samples.extend(lines.map(|l| serde_json::from_str(&l.unwrap()).unwrap()));
    let _ = top.wait();
    assert_eq!(samples.len(), 9);

    assert_eq!(total(&samples, "qtypes").get("A"), Some(&37), "{samples:?}");
    let rcodes = total(&samples, "rcodes");
    assert_eq!(rcodes.get("NOERROR"), Some(&23), "{rcodes:?}");
    assert_eq!(rcodes.get("NXDOMAIN"), Some(&7), "{rcodes:?}");
    assert_eq!(rcodes.get("SERVFAIL"), Some(&5), "{rcodes:?}");
    let unanswered: u64 = samples
        .iter()
        .map(|s| s["dns"]["unanswered"].as_u64().unwrap())
        .sum();
    assert_eq!(unanswered, 2);
    assert_eq!(
        total(&samples, "sources").get(&pair.addr_a),
        Some(&37),
        "queries by client"
    );

    // By name: the failing names with their codes, and the slow one among the slowest.
    let mut failing: BTreeMap<(String, String), u64> = BTreeMap::new();
    let mut slow_ms: f64 = 0.0;
    for s in &samples {
        for n in s["dns"]["failing"].as_array().unwrap() {
            for (code, k) in n["failures"].as_object().unwrap() {
                *failing
                    .entry((n["name"].as_str().unwrap().into(), code.clone()))
                    .or_default() += k.as_u64().unwrap();
            }
        }
        for n in s["dns"]["slowest"].as_array().unwrap() {
            if n["name"] == "slow.test" {
                slow_ms = slow_ms.max(n["max_ms"].as_f64().unwrap());
            }
        }
    }
    assert_eq!(
        failing.get(&("nx.test".into(), "NXDOMAIN".into())),
        Some(&7)
    );
    assert_eq!(
        failing.get(&("fail.test".into(), "SERVFAIL".into())),
        Some(&5)
    );
    assert!(slow_ms >= 50.0, "slow.test answered in {slow_ms} ms");
}

#[test]
fn without_root_dns_is_named_in_a_note() {
    if !is_root() || !have_tool("setpriv") {
        return skip("dns without root: needs root to drop to nobody");
    }
    let o = as_nobody(tacho().get_program())
        .args([
            "top",
            "--dns",
            "--json",
            "--interval",
            "200ms",
            "--count",
            "1",
        ])
        .output()
        .unwrap();
    let s: Value = serde_json::from_slice(&o.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&o.stderr)));
    let notes: Vec<&str> = s["notes"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert!(
        notes
            .iter()
            .any(|n| n.contains("no DNS figures") && n.contains("CAP_NET_RAW")),
        "{notes:?}"
    );
    assert!(s.get("dns").is_none());
}

/// Sends, as nobody, 50 datagrams to 127.0.0.1:53 that say they are SERVFAIL answers.
const FORGE: &str = r#"
import socket, struct
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
q = b"".join(bytes([len(p)]) + p for p in [b"forged", b"test"]) + b"\0" + struct.pack(">HH", 1, 1)
for i in range(50):
    s.sendto(struct.pack(">HHHHHH", i, 0x8182, 1, 0, 0, 0) + q, ("127.0.0.1", 53))
"#;

#[test]
fn answers_forged_by_another_user_make_no_dns_verdict() {
    if !is_root() || !have_tool("setpriv") || !have_tool("python3") {
        return skip("forged dns answers: needs root, setpriv and python3");
    }
    let mut top = tacho()
        .args(["top", "--dns", "--json", "--interval", "1s", "--count", "4"])
        .args(["--no-ebpf"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(top.stdout.take().unwrap()).lines();
    // The capture is running once the first sample is out.
    let first = lines.next().expect("a first sample").unwrap();
    let o = as_nobody("/usr/bin/python3")
        .args(["-c", FORGE])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let mut samples: Vec<Value> = vec![serde_json::from_str(&first).unwrap()];
    samples.extend(lines.map(|l| serde_json::from_str(&l.unwrap()).unwrap()));
    let _ = top.wait();
    assert_eq!(samples.len(), 4);
    for s in &samples {
        let codes: Vec<&str> = s["findings"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|f| f["code"].as_str())
            .collect();
        assert!(!codes.contains(&"dns_failures"), "{codes:?}: {}", s["dns"]);
    }
    assert_eq!(total(&samples, "rcodes").get("SERVFAIL"), None);
    let unmatched: u64 = samples
        .iter()
        .map(|s| s["dns"]["unmatched"].as_u64().unwrap_or(0))
        .sum();
    assert_eq!(unmatched, 50, "{samples:?}");
}

/// Sends, as nobody, one query from each of 12,000 loopback addresses to another each: split
/// over at most two of the test's 5 s intervals, one of them still holds over 4,096.
const SPREAD: &str = r#"
import socket, struct
q = struct.pack(">HHHHHH", 1, 0x0100, 1, 0, 0, 0) + b"\x06spread\x04test\x00" + struct.pack(">HH", 1, 1)
for i in range(12000):
    a, b = divmod(i, 250)
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.bind(("127.1.%d.%d" % (a, b + 1), 0))
    s.sendto(q, ("127.2.%d.%d" % (a, b + 1), 53))
    s.close()
"#;

#[test]
fn clients_and_servers_by_the_thousand_are_bounded_and_counted() {
    if !is_root() || !have_tool("setpriv") || !have_tool("python3") {
        return skip("dns spread: needs root, setpriv and python3");
    }
    // The same traffic seen by top in JSON and as text.
    let start = |format: &str| {
        let mut top = tacho()
            .args(["top", "--dns", format, "--interval", "5s", "--count", "3"])
            .args(["--no-ebpf"])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let lines = BufReader::new(top.stdout.take().unwrap()).lines();
        (top, lines)
    };
    let (mut top, mut lines) = start("--json");
    let (mut text_top, mut text_lines) = start("--batch");
    let first = lines.next().expect("a first sample").unwrap();
    // The text top has drawn its first sample too: both watch before the traffic starts.
    let text_first = text_lines.next().expect("a first text sample").unwrap();
    let o = as_nobody("/usr/bin/python3")
        .args(["-c", SPREAD])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let mut samples: Vec<Value> = vec![serde_json::from_str(&first).unwrap()];
    samples.extend(lines.map(|l| serde_json::from_str(&l.unwrap()).unwrap()));
    let _ = top.wait();
    let text: String = std::iter::once(Ok(text_first))
        .chain(text_lines)
        .map(|l| l.unwrap() + "\n")
        .collect();
    let status = wait_limited(&mut text_top, std::time::Duration::from_secs(60));
    let mut err = String::new();
    let _ = std::io::Read::read_to_string(&mut text_top.stderr.take().unwrap(), &mut err);
    // 1: a sample warned (the spread's queries go unanswered).
    assert!(
        matches!(status.code(), Some(0 | 1)),
        "top --batch: {status}: {err}"
    );
    let sum = |field: &str| -> u64 {
        samples
            .iter()
            .map(|s| s["dns"][field].as_u64().unwrap_or(0))
            .sum()
    };
    let dns: Vec<&Value> = samples.iter().map(|s| &s["dns"]).collect();
    // 4,096 clients and servers are kept per interval; the queries of the rest are counted.
    assert!(sum("sources_dropped") > 0, "{dns:?}");
    assert!(sum("destinations_dropped") > 0, "{dns:?}");
    for s in &samples {
        let d = &s["dns"];
        // The lists name the busiest ten of those kept.
        for list in ["sources", "destinations"] {
            let n = d[list].as_object().map_or(0, |m| m.len());
            assert!(n <= 10, "{list}: {n} listed");
        }
        // Each spread client sends one query to its own server: in an interval whose tables
        // filled, the queries of kept clients (and of kept servers) are the 4,096 kept, give
        // or take the machine's own few queries; a larger table would keep more.
        let queries = (d["queries_per_s"].as_f64().unwrap_or(0.0)
            * s["interval_s"].as_f64().unwrap())
        .round() as u64;
        for dropped in ["sources_dropped", "destinations_dropped"] {
            let dropped = d[dropped].as_u64().unwrap_or(0);
            if dropped > 0 {
                let kept = queries - dropped;
                assert!(
                    (4096..4096 + 64).contains(&kept),
                    "{kept} queries of kept ones, {dropped} dropped: {d}"
                );
            }
        }
    }
    // The text says how many queries were not listed, and by what.
    let said: Vec<&str> = text
        .lines()
        .filter(|l| l.contains("dropped  queries not listed (table full)"))
        .collect();
    assert!(
        said.iter()
            .any(|l| l.contains(" by client") && l.contains(" by server")),
        "{text}"
    );
}
