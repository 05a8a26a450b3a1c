//! Links in `tacho top`, on traffic the test makes between two network namespaces of its own
//! (a veth pair): a link shaped with tc's tbf and filled by iperf3 is called saturated, at the
//! shaper's rate, naming the process that fills it.

use crate::common::netns::NetnsPair;
use crate::common::{have_tool, skip};
use serde_json::Value;

#[test]
fn a_link_shaped_by_tbf_and_filled_by_iperf3_is_saturated_at_the_shapers_rate() {
    for tool in ["iperf3", "tc"] {
        if !have_tool(tool) {
            return skip(&format!("shaped link: {tool} is not installed"));
        }
    }
    let Some(mut pair) = NetnsPair::new("shaped link") else {
        return;
    };
    let tc = NetnsPair::exec(&pair.a, "tc")
        .args(["qdisc", "add", "dev", &pair.veth_a, "root", "tbf"])
        .args(["rate", "10mbit", "burst", "32kbit", "latency", "400ms"])
        .output()
        .unwrap();
    assert!(
        tc.status.success(),
        "{}",
        String::from_utf8_lossy(&tc.stderr)
    );
    pair.iperf3_server(5201);
    let (a, addr_b) = (pair.a.clone(), pair.addr_b.clone());
    pair.spawn(&a, "iperf3", &["-c", &addr_b, "-t", "8"]);

    let o = NetnsPair::exec(&pair.a, env!("CARGO_BIN_EXE_tacho"))
        .args(["top", "--json", "--interval", "1s", "--count", "4"])
        .output()
        .unwrap();
    assert!(
        o.status.code().is_some_and(|c| c <= 1),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let samples: Vec<Value> = String::from_utf8_lossy(&o.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let link = |s: &Value| -> Value {
        s["links"]
            .as_array()
            .and_then(|l| l.iter().find(|l| l["name"] == pair.veth_a.as_str()))
            .cloned()
            .unwrap_or_else(|| panic!("no link {} in {s}", pair.veth_a))
    };
    let last = samples.last().expect("no sample");
    let l = link(last);
    assert_eq!(l["shaper"], "tbf", "{l}");
    assert_eq!(l["shaped_mbps"], 10.0, "{l}");
    // The busiest sample is at the shaper's rate (iperf3 keeps the bucket empty).
    let peak = samples
        .iter()
        .filter_map(|s| link(s)["tx_utilisation_pct"].as_f64())
        .fold(0.0, f64::max);
    assert!((90.0..=110.0).contains(&peak), "peak {peak}% of 10 Mb/s");
    let saturated: Vec<&Value> = samples
        .iter()
        .flat_map(|s| s["findings"].as_array().into_iter().flatten())
        .filter(|f| f["code"] == "link_saturated" && f["subject"] == pair.veth_a.as_str())
        .collect();
    let f = saturated.first().unwrap_or_else(|| {
        panic!(
            "no link_saturated finding for {}: {:?}",
            pair.veth_a,
            samples.iter().map(|s| &s["verdict"]).collect::<Vec<_>>()
        )
    });
    let message = f["message"].as_str().unwrap();
    assert!(
        message.contains("of 10 Mb/s out (shaped by tbf; link speed 10 Gb/s)"),
        "{message}"
    );
    // And who fills it: the sending process and its peer, from the connections.
    assert!(
        message.contains("% of TCP sent from iperf3 (pid ")
            && message.contains(&format!(", to {}:5201", pair.addr_b)),
        "{message}"
    );
}
