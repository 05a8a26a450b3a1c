//! The runs of one start of a group (`bench disk --group NAME --hosts N`) as one result: per
//! test and direction the hosts' IOPS and bandwidth added up, and the percentiles of every
//! request of every host, from the union of their latency histograms (never an average of
//! their percentiles, which has no meaning), with each host's share and the slowest named.

use crate::store::StoredRun;
use crate::store::stored::{Field, view};
use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};

/// The histograms' bounds, as `io::stats` records them.
const MAX_NS: u64 = 3_600 * 1_000_000_000;

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct TestView {
    name: Field<String>,
    read: Field<DirView>,
    write: Field<DirView>,
    histograms: Field<HistogramsView>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct DirView {
    iops: Field<f64>,
    bw_bytes_per_s: Field<f64>,
    ios: Field<u64>,
    lat_ns: Field<LatView>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct LatView {
    max: Field<u64>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct HistogramsView {
    read: Field<Vec<[u64; 2]>>,
    write: Field<Vec<[u64; 2]>>,
}

/// One start of a group, merged.
#[derive(Debug, Serialize)]
pub struct GroupResult {
    /// The group's name.
    pub group: String,
    /// Its runs: id and host name.
    pub runs: Vec<Member>,
    /// Each test the runs share, in the first run's order.
    pub tests: Vec<GroupTest>,
}

/// One run of the group.
#[derive(Debug, Clone, Serialize)]
pub struct Member {
    /// The run's id in the store.
    pub run: i64,
    /// The host it ran on (escape before printing).
    pub host: String,
}

/// One test over every host.
#[derive(Debug, Serialize)]
pub struct GroupTest {
    /// The test's name.
    pub name: String,
    /// Its reads, then its writes, when it had them.
    pub directions: Vec<GroupDirection>,
}

/// One direction of a test over every host.
#[derive(Debug, Serialize)]
pub struct GroupDirection {
    /// `read` or `write`.
    pub direction: &'static str,
    /// The hosts' IOPS added up.
    pub iops: f64,
    /// The hosts' bandwidth added up, bytes per second.
    pub bw_bytes_per_s: f64,
    /// Requests of every host.
    pub ios: u64,
    /// Percentiles of every request of every host, in ns; `None` when a host kept no
    /// histogram (a run without `--group`).
    pub lat_ns: Option<Percentiles>,
    /// Each host's IOPS and share of the total.
    pub hosts: Vec<HostShare>,
    /// The host with the fewest IOPS.
    pub slowest: Option<Member>,
}

/// Percentiles of a merged histogram, in ns.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Percentiles {
    pub p50: u64,
    pub p90: u64,
    pub p99: u64,
    pub p99_9: u64,
    /// The slowest request of any host.
    pub max: u64,
}

/// One host's part of a direction.
#[derive(Debug, Serialize)]
pub struct HostShare {
    /// The run.
    pub run: i64,
    /// Its IOPS.
    pub iops: f64,
    /// Its share of the group's IOPS, in percent.
    pub share_pct: f64,
}

/// Merges the runs of one group start (all of them, in any order).
pub fn merge(group: &str, runs: &[StoredRun]) -> GroupResult {
    let members: Vec<Member> = runs
        .iter()
        .map(|r| Member {
            run: r.id,
            host: crate::compare::fleet::host_of(r),
        })
        .collect();
    let per_run: Vec<Vec<TestView>> = runs
        .iter()
        .map(|r| r.tests.iter().map(|t| view(&t.json)).collect())
        .collect();
    let names: Vec<String> = per_run
        .first()
        .map(|tests| tests.iter().filter_map(|t| t.name.get().cloned()).collect())
        .unwrap_or_default();
    let tests = names
        .into_iter()
        .map(|name| {
            let of_each: Vec<Option<&TestView>> = per_run
                .iter()
                .map(|tests| tests.iter().find(|t| t.name.get() == Some(&name)))
                .collect();
            let directions = ["read", "write"]
                .into_iter()
                .filter_map(|d| direction(d, &of_each, &members))
                .collect();
            GroupTest { name, directions }
        })
        .collect();
    GroupResult {
        group: group.to_owned(),
        runs: members,
        tests,
    }
}

fn direction(
    which: &'static str,
    of_each: &[Option<&TestView>],
    members: &[Member],
) -> Option<GroupDirection> {
    let dirs: Vec<Option<&DirView>> = of_each
        .iter()
        .map(|t| {
            t.and_then(|t| match which {
                "read" => t.read.get(),
                _ => t.write.get(),
            })
        })
        .collect();
    if dirs.iter().all(Option::is_none) {
        return None;
    }
    let iops_of = |d: &Option<&DirView>| d.and_then(|d| d.iops.get().copied()).unwrap_or(0.0);
    let iops: f64 = dirs.iter().map(iops_of).sum();
    let hosts: Vec<HostShare> = dirs
        .iter()
        .zip(members)
        .map(|(d, m)| HostShare {
            run: m.run,
            iops: iops_of(d),
            share_pct: if iops > 0.0 {
                100.0 * iops_of(d) / iops
            } else {
                0.0
            },
        })
        .collect();
    let slowest = hosts
        .iter()
        .zip(members)
        .min_by(|a, b| a.0.iops.total_cmp(&b.0.iops))
        .map(|(_, m)| m.clone());
    let histograms: Option<Vec<&Vec<[u64; 2]>>> = of_each
        .iter()
        .map(|t| {
            let h = (*t)?.histograms.get()?;
            match which {
                "read" => h.read.get(),
                _ => h.write.get(),
            }
        })
        .collect();
    let max = dirs
        .iter()
        .filter_map(|d| d.and_then(|d| d.lat_ns.get()?.max.get().copied()))
        .max();
    Some(GroupDirection {
        direction: which,
        iops,
        bw_bytes_per_s: dirs
            .iter()
            .map(|d| {
                d.and_then(|d| d.bw_bytes_per_s.get().copied())
                    .unwrap_or(0.0)
            })
            .sum(),
        ios: dirs
            .iter()
            .map(|d| d.and_then(|d| d.ios.get().copied()).unwrap_or(0))
            .sum(),
        lat_ns: histograms.and_then(|h| percentiles(&h, max)),
        hosts,
        slowest,
    })
}

/// Percentiles of the union of `histograms` (`[highest value of a bucket, count]`), each at
/// most `max` (the slowest request, which the buckets round up); `None` when they are empty.
pub fn percentiles(histograms: &[&Vec<[u64; 2]>], max: Option<u64>) -> Option<Percentiles> {
    let mut all = Histogram::<u64>::new_with_bounds(1, MAX_NS, 3).ok()?;
    for h in histograms {
        for &[value, count] in h.iter() {
            all.saturating_record_n(value.clamp(1, MAX_NS), count);
        }
    }
    if all.is_empty() {
        return None;
    }
    let max = max.unwrap_or(u64::MAX);
    let q = |quantile: f64| all.value_at_quantile(quantile).min(max);
    Some(Percentiles {
        p50: q(0.5),
        p90: q(0.9),
        p99: q(0.99),
        p99_9: q(0.999),
        max: max.min(all.max()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// The value at rank ceil(q·n) of the requests, counted bucket by bucket.
    fn by_rank(buckets: &[[u64; 2]], q: f64) -> u64 {
        let mut all = buckets.to_vec();
        all.sort();
        let n: u64 = all.iter().map(|b| b[1]).sum();
        let rank = ((q * n as f64).ceil() as u64).max(1);
        let mut seen = 0;
        for [value, count] in all {
            seen += count;
            if seen >= rank {
                return value;
            }
        }
        unreachable!()
    }

    fn buckets(latencies: &[u64]) -> Vec<[u64; 2]> {
        let mut s = crate::io::OpStats::default();
        latencies.iter().for_each(|&l| s.record(0, l));
        s.buckets()
    }

    proptest! {
        #[test]
        fn merged_percentiles_are_those_of_the_union(
            hosts in prop::collection::vec(prop::collection::vec(1u64..10_000_000_000, 1..200), 1..4)) {
            let each: Vec<Vec<[u64; 2]>> = hosts.iter().map(|h| buckets(h)).collect();
            let refs: Vec<&Vec<[u64; 2]>> = each.iter().collect();
            let p = percentiles(&refs, None).unwrap();
            let union: Vec<[u64; 2]> = each.concat();
            prop_assert_eq!(p.p99, by_rank(&union, 0.99));
            prop_assert_eq!(p.p50, by_rank(&union, 0.5));
        }
    }

    #[test]
    fn nothing_recorded_has_no_percentiles() {
        assert_eq!(percentiles(&[], None), None);
        assert_eq!(percentiles(&[&vec![]], Some(5)), None);
    }
}
