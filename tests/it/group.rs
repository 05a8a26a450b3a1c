//! `bench disk --group NAME --hosts N --db postgres://…`: three processes, each on its own loop
//! device, meet at a start barrier in one PostgreSQL store and start within 100 ms of each
//! other; `runs show --group` merges them, its p99 that of the union of their histograms
//! (computed here bucket by bucket); a group that never fills times out naming who came and,
//! with --hosts a,b,c, who did not (and named hosts that all come start together, each in a UTS
//! namespace of its own name); a host not named is refused; a member killed while waiting
//! stops counting once its lease runs out.

use crate::common::pg::TestDb;
use crate::common::*;
use serde_json::Value;
use std::io::{BufRead, BufReader};
use std::process::Command;
use std::time::Duration;

/// The hosts' write histograms (`[highest value of a bucket, count]`) together: the value at
/// rank ceil(q·n) of every request, at most the slowest request.
fn union_quantile(reports: &[Value], q: f64) -> u64 {
    let mut buckets: Vec<(u64, u64)> = reports
        .iter()
        .flat_map(|r| {
            r["tests"][0]["histograms"]["write"]
                .as_array()
                .unwrap()
                .clone()
        })
        .map(|b| (b[0].as_u64().unwrap(), b[1].as_u64().unwrap()))
        .collect();
    buckets.sort();
    let n: u64 = buckets.iter().map(|b| b.1).sum();
    let rank = ((q * n as f64).ceil() as u64).max(1);
    let max = reports
        .iter()
        .map(|r| r["tests"][0]["write"]["lat_ns"]["max"].as_u64().unwrap())
        .max()
        .unwrap();
    let mut seen = 0;
    for (value, count) in buckets {
        seen += count;
        if seen >= rank {
            return value.min(max);
        }
    }
    unreachable!("rank {rank} of {n}")
}

fn bench(dev: &str, url: &str, group: &str, hosts: &str, timeout: &str) -> std::process::Child {
    bench_cmd(dev, url, group, hosts, timeout).spawn_piped()
}

fn bench_cmd(dev: &str, url: &str, group: &str, hosts: &str, timeout: &str) -> Command {
    let mut cmd = tacho();
    cmd.args([
        "bench",
        "disk",
        dev,
        "--rw",
        "randwrite",
        "--bs",
        "4k",
        "--iodepth",
        "4",
        "--runtime",
        "1s",
        "--destroy-data",
        "--json",
        "--db",
        url,
        "--group",
        group,
        "--hosts",
        hosts,
        "--group-timeout",
        timeout,
    ]);
    cmd
}

/// `cmd` run as host `name`: in a UTS namespace of its own whose host name is `name` (root).
fn as_host(name: &str, cmd: &Command) -> Command {
    let mut wrapped = Command::new("unshare");
    wrapped
        .args(["--uts", "sh", "-c", "hostname \"$0\" && exec \"$@\"", name])
        .arg(cmd.get_program())
        .args(cmd.get_args())
        .stdin(std::process::Stdio::null());
    for (k, v) in cmd.get_envs() {
        if let Some(v) = v {
            wrapped.env(k, v);
        }
    }
    wrapped
}

#[test]
fn three_hosts_start_together_and_their_percentiles_merge_from_the_union() {
    let Some(pg) = TestDb::new("group") else {
        return;
    };
    let devs: Vec<LoopDev> = (0..3)
        .map_while(|_| LoopDev::new("group test", 16 << 20))
        .collect();
    if devs.len() < 3 {
        return;
    }
    let children: Vec<_> = devs
        .iter()
        .map(|d| bench(d.path(), &pg.url, "g1", "3", "60s"))
        .collect();
    let reports: Vec<Value> = children
        .into_iter()
        .map(|c| json_ok(&wait_output(c, Duration::from_secs(120))))
        .collect();
    let started: Vec<u64> = reports
        .iter()
        .map(|r| r["group"]["started_unix_ns"].as_u64().expect("started"))
        .collect();
    let spread = started.iter().max().unwrap() - started.iter().min().unwrap();
    assert!(spread <= 100_000_000, "started {spread} ns apart");
    let runs = &reports[0]["group"]["runs"];
    assert_eq!(runs.as_array().unwrap().len(), 3, "{runs}");
    assert!(reports.iter().all(|r| &r["group"]["runs"] == runs));

    let o = run(&["runs", "show", "--group", "g1", "--db", &pg.url, "--json"]);
    let merged = json_ok(&o);
    let write = &merged["group"]["tests"][0]["directions"][0];
    assert_eq!(write["direction"], "write", "{merged}");
    assert_eq!(
        write["lat_ns"]["p99"],
        union_quantile(&reports, 0.99),
        "{write}"
    );
    assert_eq!(
        write["lat_ns"]["p50"],
        union_quantile(&reports, 0.5),
        "{write}"
    );
    let iops: Vec<f64> = reports
        .iter()
        .map(|r| r["tests"][0]["write"]["iops"].as_f64().unwrap())
        .collect();
    let total = write["iops"].as_f64().unwrap();
    assert!(
        (total - iops.iter().sum::<f64>()).abs() < 1e-6 * total,
        "{write}"
    );
    let shares: f64 = write["hosts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| h["share_pct"].as_f64().unwrap())
        .sum();
    assert!((shares - 100.0).abs() < 1e-6, "{write}");
    // Each host's IOPS as it measured them, and the slowest named is the one with the fewest.
    let hosts = write["hosts"].as_array().unwrap();
    let mut theirs: Vec<f64> = hosts.iter().map(|h| h["iops"].as_f64().unwrap()).collect();
    let mut ours = iops.clone();
    theirs.sort_by(f64::total_cmp);
    ours.sort_by(f64::total_cmp);
    assert_eq!(theirs, ours, "{write}");
    let fewest = hosts
        .iter()
        .min_by(|a, b| {
            a["iops"]
                .as_f64()
                .unwrap()
                .total_cmp(&b["iops"].as_f64().unwrap())
        })
        .unwrap();
    assert_eq!(write["slowest"]["run"], fewest["run"], "{write}");
    let text = stdout(&run(&["runs", "show", "--group", "g1", "--db", &pg.url]));
    let named = text
        .lines()
        .find(|l| l.contains("slowest: "))
        .unwrap_or_default();
    assert!(
        named.ends_with(&format!("(run {})", fewest["run"])),
        "{text}"
    );
}

#[test]
fn a_group_that_never_fills_times_out_naming_the_hosts_that_came() {
    let Some(pg) = TestDb::new("group_timeout") else {
        return;
    };
    let Some(dev) = LoopDev::new("group timeout test", 8 << 20) else {
        return;
    };
    let o = wait_output(
        bench(dev.path(), &pg.url, "g2", "3", "1s"),
        Duration::from_secs(60),
    );
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    let err = stderr(&o);
    let last = err.trim().lines().last().unwrap();
    assert!(
        last.contains("group g2 waited 1 s with 1 of 3 hosts")
            && last.contains("(run 1)")
            && last.contains("the other 2 did not come"),
        "{err}"
    );
    assert!(err.trim().lines().count() <= 2, "{err}");
}

#[test]
fn named_hosts_that_never_come_are_named_and_a_stranger_is_refused() {
    let Some(pg) = TestDb::new("group_named") else {
        return;
    };
    let Some(dev) = LoopDev::new("group named test", 8 << 20) else {
        return;
    };
    let o = wait_output(
        as_host(
            "ga",
            &bench_cmd(dev.path(), &pg.url, "g3", "ga,gb,gc", "1s"),
        )
        .spawn_piped(),
        Duration::from_secs(60),
    );
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    let err = stderr(&o);
    let last = err.trim().lines().last().unwrap();
    assert!(
        last.contains("group g3 waited 1 s with 1 of 3 hosts (ga (run ")
            && last.contains("did not come: gb, gc:"),
        "{err}"
    );
    assert!(err.trim().lines().count() <= 2, "{err}");

    let o = wait_output(
        as_host("gx", &bench_cmd(dev.path(), &pg.url, "g3", "ga,gb", "1s")).spawn_piped(),
        Duration::from_secs(60),
    );
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    let err = stderr(&o);
    let last = err.trim().lines().last().unwrap();
    assert!(
        last.contains("this host, gx, is not one of group g3's hosts (ga,gb)"),
        "{err}"
    );
}

#[test]
fn named_hosts_start_together_once_each_has_come() {
    let Some(pg) = TestDb::new("group_named_all") else {
        return;
    };
    let devs: Vec<LoopDev> = (0..3)
        .map_while(|_| LoopDev::new("group named all test", 8 << 20))
        .collect();
    if devs.len() < 3 {
        return;
    }
    let names = ["na", "nb", "nc"];
    let children: Vec<_> = devs
        .iter()
        .zip(names)
        .map(|(d, n)| {
            as_host(n, &bench_cmd(d.path(), &pg.url, "g5", "na,nb,nc", "60s")).spawn_piped()
        })
        .collect();
    let reports: Vec<Value> = children
        .into_iter()
        .map(|c| json_ok(&wait_output(c, Duration::from_secs(120))))
        .collect();
    let runs = &reports[0]["group"]["runs"];
    assert_eq!(runs.as_array().unwrap().len(), 3, "{runs}");
    for (r, n) in reports.iter().zip(names) {
        assert_eq!(&r["group"]["runs"], runs, "{r}");
        assert_eq!(r["group"]["names"], serde_json::json!(names), "{r}");
        assert_eq!(r["host"]["hostname"], n, "{r}");
    }
}

#[test]
fn a_member_killed_while_waiting_no_longer_counts() {
    let Some(pg) = TestDb::new("group_killed") else {
        return;
    };
    let Some(dev) = LoopDev::new("group killed test", 8 << 20) else {
        return;
    };
    let mut first = bench(dev.path(), &pg.url, "g4", "2", "60s");
    let mut line = String::new();
    BufReader::new(first.stderr.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    assert!(line.contains("waiting for 2 hosts"), "{line}");
    // Its first mark is made right after that line; then it dies without a word.
    std::thread::sleep(Duration::from_millis(500));
    first.kill().unwrap();
    first.wait().unwrap();
    // Past its lease (3 s), the second waits alone.
    std::thread::sleep(Duration::from_millis(3200));
    let o = wait_output(
        bench(dev.path(), &pg.url, "g4", "2", "1s"),
        Duration::from_secs(60),
    );
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    let err = stderr(&o);
    assert!(err.contains("waited 1 s with 1 of 2 hosts"), "{err}");
    assert!(
        !err.contains("(run 1)"),
        "the killed run 1 still counted: {err}"
    );
}
