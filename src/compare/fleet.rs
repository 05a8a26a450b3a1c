//! Hosts against their peers: one run per host lined up as [`compare`](super::compare) lines
//! up runs, each headline figure's peer median, and the host whose figure stands out from its
//! peers by robust statistics (median and MAD, as the hot-disk finding judges an array's
//! members), with the fingerprint entries where it differs from most peers — usually the
//! cause.

use super::fingerprint::FingerprintRow;
use super::{Comparison, Row};
use crate::stats::{mad, median};
use crate::store::StoredRun;
use std::collections::HashMap;

/// A host's figure must be worse than the peers' median by this many scaled MADs…
const MAD_FACTOR: f64 = 3.0;
/// …and at least this many times worse (twice the latency, half the throughput), so the
/// ordinary spread of a fleet of equal machines is not news.
const RATIO: f64 = 2.0;
/// Scales the MAD to a standard deviation for normally distributed values.
const MAD_SCALE: f64 = 1.4826;
/// Fewer peers than this cannot tell an outlier from a spread.
const MIN_PEERS: usize = 3;

/// Whom a host is compared with.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum Peers {
    /// Every other host.
    #[default]
    All,
    /// The hosts with the same value of this label (those without it are a group too).
    Label(String),
    /// The hosts with the same CPU model and device model.
    Hardware,
}

impl Peers {
    /// `label:KEY` or `hardware`; the error says what it takes.
    pub fn parse(text: &str) -> Result<Peers, String> {
        match text.split_once(':') {
            _ if text == "hardware" => Ok(Peers::Hardware),
            Some(("label", key)) if crate::labels::valid_key(key) => Ok(Peers::Label(key.into())),
            _ => Err(format!(
                "--peers-by takes label:KEY (e.g. label:role) or hardware, not '{}'",
                crate::text::Escaped(text)
            )),
        }
    }

    /// How it is written on the command line (`label:role`, `hardware`), `None` for all.
    pub fn shown(&self) -> Option<String> {
        match self {
            Peers::All => None,
            Peers::Label(key) => Some(format!("label:{key}")),
            Peers::Hardware => Some("hardware".into()),
        }
    }
}

/// Hosts side by side.
#[derive(Debug, Clone)]
pub struct Fleet {
    /// One run per host (each labelled with its host name), in host order.
    pub comparison: Comparison,
    /// The comparison's rows (its tests are bounded: [`super::tests_per_run`]).
    pub rows: Vec<Row>,
    /// The host of each run, in [`Comparison::runs`] order.
    pub hosts: Vec<String>,
    /// The median over all hosts of each row of the comparison; `None` where no host has it.
    pub medians: Vec<Option<f64>>,
    /// Hosts standing out from their peers, worst first.
    pub outliers: Vec<Outlier>,
    /// How peers were chosen.
    pub peers_by: Peers,
    /// The peer group of each host (`role=db`, `CPU …, device model …`), in host order;
    /// `None` when every host is every other's peer.
    pub groups: Vec<Option<String>>,
}

/// A host whose figure stands out from its peers.
#[derive(Debug, Clone)]
pub struct Outlier {
    /// Index into [`Fleet::hosts`].
    pub host: usize,
    /// Index into the comparison's rows: its worst figure.
    pub row: usize,
    /// Its value.
    pub value: f64,
    /// The median of its peers (the other hosts with the figure).
    pub peer_median: f64,
    /// How many peers had the figure.
    pub peers: usize,
    /// How many times worse than the peers' median.
    pub times_worse: f64,
    /// Its other headline figures that also stand out.
    pub more_rows: Vec<usize>,
    /// Fingerprint entries where it differs from most of its peers.
    pub differences: Vec<Difference>,
}

/// A fingerprint entry where a host differs from most peers.
#[derive(Debug, Clone, PartialEq)]
pub struct Difference {
    /// The entry (`THP`, `cache mode`, `scheduler`).
    pub key: &'static str,
    /// The host's value.
    pub value: String,
    /// The value most peers have.
    pub peers_value: String,
    /// How many peers have it.
    pub peers_with: usize,
    /// How many peers recorded the entry.
    pub peers: usize,
}

/// Lines up `runs` (the latest of each host, with the host the store files it under; each
/// run's label is set to its host) and finds the outliers, each host against the others of
/// its group (`peers`).
pub fn by_host(mut runs: Vec<(String, StoredRun)>, peers: &Peers) -> Fleet {
    runs.sort_by_cached_key(|(host, _)| crate::text::natural_key(host));
    let (hosts, runs): (Vec<String>, Vec<StoredRun>) = runs
        .into_iter()
        .map(|(host, mut run)| {
            run.label = Some(host.clone());
            (host, run)
        })
        .unzip();
    let comparison = super::compare_within(&runs, super::fleet_cells());
    let groups = groups(&runs, &comparison.fingerprint, peers);
    let all_rows: Vec<Row> = comparison.rows().collect();
    let medians = all_rows
        .iter()
        .map(|row| median(&values(row).map(|(_, v)| v).collect::<Vec<_>>()))
        .collect();
    let mut flagged: HashMap<usize, Vec<(usize, f64, f64, usize)>> = HashMap::new();
    for (r, row) in all_rows.iter().enumerate() {
        if !row.headline {
            continue;
        }
        for (host, value, peer_median, peers) in stand_out(row, &groups) {
            flagged
                .entry(host)
                .or_default()
                .push((r, value, peer_median, peers));
        }
    }
    let mut outliers: Vec<Outlier> = flagged
        .into_iter()
        .map(|(host, rows)| {
            let ratio = |&(r, v, m, _): &(usize, f64, f64, usize)| {
                times_worse(all_rows[r].metric.higher_is_better(), v, m)
            };
            let worst = rows
                .iter()
                .copied()
                .max_by(|a, b| ratio(a).total_cmp(&ratio(b)))
                .expect("a flagged host has a row");
            Outlier {
                host,
                row: worst.0,
                value: worst.1,
                peer_median: worst.2,
                peers: worst.3,
                times_worse: ratio(&worst),
                more_rows: rows.iter().map(|r| r.0).filter(|&r| r != worst.0).collect(),
                differences: differences(&comparison.fingerprint, host, &groups),
            }
        })
        .collect();
    outliers.sort_by(|a, b| {
        b.times_worse
            .total_cmp(&a.times_worse)
            .then(a.host.cmp(&b.host))
    });
    Fleet {
        comparison,
        rows: all_rows,
        hosts,
        medians,
        outliers,
        peers_by: peers.clone(),
        groups,
    }
}

/// Each run's peer group: the value of the label, or its CPU and device models (as the
/// fingerprint shows them, `?` where the run did not record one); `None` for all hosts.
fn groups(
    runs: &[StoredRun],
    fingerprint: &[FingerprintRow],
    peers: &Peers,
) -> Vec<Option<String>> {
    let entry = |key: &str, i: usize| {
        fingerprint
            .iter()
            .find(|row| row.key == key)
            .and_then(|row| row.values.get(i).cloned().flatten())
            .unwrap_or_else(|| "?".into())
    };
    runs.iter()
        .enumerate()
        .map(|(i, run)| match peers {
            Peers::All => None,
            Peers::Label(key) => Some(
                match run
                    .host
                    .get("labels")
                    .and_then(|l| l.get(key))
                    .and_then(|v| v.as_str())
                {
                    Some(value) => format!("{key}={value}"),
                    None => format!("no {key} label"),
                },
            ),
            Peers::Hardware => Some(format!(
                "CPU {}, device model {}",
                entry("CPU", i),
                entry("device model", i)
            )),
        })
        .collect()
}

/// The host a run was made on, as recorded (`?` when the document had none).
pub fn host_of(run: &StoredRun) -> String {
    run.host
        .get("hostname")
        .and_then(|h| h.as_str())
        .unwrap_or("?")
        .to_owned()
}

/// (host index, value) of each host with the figure.
fn values(row: &Row) -> impl Iterator<Item = (usize, f64)> + '_ {
    row.cells
        .iter()
        .enumerate()
        .filter_map(|(i, c)| Some((i, c.as_ref()?.value)))
}

/// How many times worse `v` is than `m`: ≥ 1 when worse.
fn times_worse(higher_is_better: bool, v: f64, m: f64) -> f64 {
    let ratio = if higher_is_better { m / v } else { v / m };
    if ratio.is_finite() { ratio } else { f64::MAX }
}

/// The hosts of `row` whose value is worse than their peers' median by [`RATIO`] times and
/// by [`MAD_FACTOR`] scaled MADs of their group's values: (host, value, peer median, peers).
fn stand_out(row: &Row, groups: &[Option<String>]) -> Vec<(usize, f64, f64, usize)> {
    let mut seen: Vec<&Option<String>> = Vec::new();
    let mut out = Vec::new();
    for g in groups {
        if seen.contains(&g) {
            continue;
        }
        seen.push(g);
        let members: Vec<(usize, f64)> = values(row)
            .filter(|(host, _)| groups.get(*host) == Some(g))
            .collect();
        out.extend(stand_out_among(row, members));
    }
    out.sort_by_key(|o| o.0);
    out
}

/// [`stand_out`] within one group of (host, value).
fn stand_out_among(row: &Row, all: Vec<(usize, f64)>) -> Vec<(usize, f64, f64, usize)> {
    if all.len() < MIN_PEERS + 1 {
        return Vec::new();
    }
    let xs: Vec<f64> = all.iter().map(|(_, v)| *v).collect();
    let Some(spread) = mad(&xs) else {
        return Vec::new();
    };
    let better_high = row.metric.higher_is_better();
    all.iter()
        .filter_map(|&(host, v)| {
            let peers: Vec<f64> = all
                .iter()
                .filter(|(h, _)| *h != host)
                .map(|(_, x)| *x)
                .collect();
            let m = median(&peers)?;
            let gap = if better_high { m - v } else { v - m };
            let ratio = times_worse(better_high, v, m);
            (gap > MAD_FACTOR * MAD_SCALE * spread && ratio >= RATIO).then_some((
                host,
                v,
                m,
                peers.len(),
            ))
        })
        .collect()
}

/// The fingerprint entries where `host` has a value most of its peers (the hosts of its
/// group) do not share, with the value most peers have. The host name itself is left out
/// (every host has its own).
fn differences(
    fingerprint: &[FingerprintRow],
    host: usize,
    groups: &[Option<String>],
) -> Vec<Difference> {
    let group = groups.get(host);
    fingerprint
        .iter()
        .filter(|row| row.key != "host")
        .filter_map(|row| {
            let value = row.values.get(host)?.clone()?;
            let mut counts: Vec<(&String, usize)> = Vec::new();
            for v in row
                .values
                .iter()
                .enumerate()
                .filter(|(i, _)| *i != host && groups.get(*i) == group)
                .filter_map(|(_, v)| v.as_ref())
            {
                match counts.iter_mut().find(|(c, _)| *c == v) {
                    Some((_, n)) => *n += 1,
                    None => counts.push((v, 1)),
                }
            }
            let peers: usize = counts.iter().map(|(_, n)| n).sum();
            let (common, with) = counts.into_iter().max_by_key(|(_, n)| *n)?;
            (*common != value && with * 2 > peers).then(|| Difference {
                key: row.key,
                value,
                peers_value: common.clone(),
                peers_with: with,
                peers,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::{RunKind, RunSource, RunStatus, StoredTest};
    use serde_json::json;

    fn host_run(id: i64, host: &str, p99_ns: f64, cache: &str) -> StoredRun {
        let test = json!({
            "name": "RND4K Q1T1", "rw": "randread", "bs_bytes": 4096, "iodepth": 1,
            "numjobs": 1,
            "read": {"iops": 1e9 / p99_ns, "lat_ns": {"p99": p99_ns, "mean": p99_ns / 2.0}},
        });
        StoredRun {
            id,
            created_at: "2026-11-23T00:00:00Z".into(),
            label: None,
            kind: RunKind::Disk,
            status: RunStatus::Finished,
            source: RunSource::Bench,
            tool_version: None,
            suite: Some(("quick".into(), 1)),
            host: json!({"hostname": host, "kernel": "6.18"}),
            target: json!({"path": "/data", "cache_mode": cache}),
            extra: serde_json::Map::new(),
            tests: vec![StoredTest {
                name: "RND4K Q1T1".into(),
                figures: crate::store::figures::of_test(&test),
                json: test,
            }],
            uuid: None,
        }
    }

    #[test]
    fn a_slow_host_among_twelve_is_named_with_its_peers_median() {
        let mut runs: Vec<StoredRun> = (0..11)
            .map(|i| host_run(i, &format!("db-{i}"), 300_000.0 + 1000.0 * i as f64, "none"))
            .collect();
        runs.push(host_run(11, "db-17", 4_100_000.0, "writeback"));
        let fleet = by_host(
            runs.into_iter().map(|r| (host_of(&r), r)).collect(),
            &Peers::All,
        );
        assert_eq!(fleet.outliers.len(), 1, "{:?}", fleet.outliers);
        let o = &fleet.outliers[0];
        assert_eq!(fleet.hosts[o.host], "db-17");
        assert_eq!(o.peers, 11);
        assert_eq!(o.peer_median, 305_000.0);
        assert!(o.times_worse > 13.0, "{}", o.times_worse);
    }

    #[test]
    fn an_ordinary_spread_has_no_outlier() {
        let runs: Vec<StoredRun> = (0..12)
            .map(|i| {
                host_run(
                    i,
                    &format!("h{i}"),
                    300_000.0 * (1.0 + 0.08 * i as f64),
                    "none",
                )
            })
            .collect();
        assert!(
            by_host(
                runs.into_iter().map(|r| (host_of(&r), r)).collect(),
                &Peers::All
            )
            .outliers
            .is_empty()
        );
    }

    #[test]
    fn the_differing_fingerprint_entry_is_named_against_the_majority() {
        let rows = vec![
            FingerprintRow {
                key: "host",
                values: vec![Some("a".into()), Some("b".into()), Some("c".into())],
            },
            FingerprintRow {
                key: "THP",
                values: vec![
                    Some("never".into()),
                    Some("never".into()),
                    Some("always".into()),
                ],
            },
            FingerprintRow {
                key: "kernel",
                values: vec![Some("6.1".into()), Some("6.18".into()), Some("6.18".into())],
            },
        ];
        let d = differences(&rows, 2, &[None, None, None]);
        assert_eq!(
            d,
            [Difference {
                key: "THP",
                value: "always".into(),
                peers_value: "never".into(),
                peers_with: 2,
                peers: 2,
            }]
        );
    }
}
