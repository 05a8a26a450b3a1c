//! Configuration drift across hosts: every setting of the hosts' latest saved snapshots (and
//! the verdicts of their latest saved checks) that is not the same everywhere, grouped by
//! value with the hosts holding each, the settings known to matter for performance first (in
//! `tacho diff`'s order).

use crate::snapshot::diff::flatten;
use crate::snapshot::explain::explain;
use crate::store::StoredRun;
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};

/// Why a differing `tacho check` verdict matters.
const CHECK_VERDICT: &str = "tacho check judges this setting differently on these hosts";

/// One setting that differs across hosts.
#[derive(Debug, Clone, PartialEq)]
pub struct Drift {
    /// Dotted key (`thp.enabled`, `sysctl.vm.swappiness`, `check.thp_enabled`).
    pub key: String,
    /// Each value with the hosts that have it, the smallest group first (the drift); `None`:
    /// hosts without the setting.
    pub groups: Vec<(Option<String>, Vec<String>)>,
    /// Why it matters, when it is known to matter for performance.
    pub explanation: Option<&'static str>,
    rank: (usize, usize),
}

/// The settings of one host: its snapshot's, and `check.ID[.SUBJECT]` → severity.
pub fn settings(
    snapshot: Option<StoredRun>,
    check: Option<&StoredRun>,
) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    if let Some(run) = snapshot {
        // Taken, not cloned: a snapshot holds thousands of settings.
        let mut doc = run.extra;
        doc.insert("host".into(), run.host);
        out = flatten(&Value::Object(doc));
    }
    let findings = check
        .and_then(|r| r.extra.get("findings"))
        .and_then(Value::as_array);
    for f in findings.into_iter().flatten() {
        let (Some(id), Some(severity)) = (
            f.get("id").and_then(Value::as_str),
            f.get("severity").and_then(Value::as_str),
        ) else {
            continue;
        };
        let key = match f.get("subject").and_then(Value::as_str) {
            Some(subject) => format!("check.{id}.{subject}"),
            None => format!("check.{id}"),
        };
        out.insert(key, severity.to_owned());
    }
    out
}

/// The settings that differ among `hosts` (name → settings), relevant ones first. A check
/// verdict is compared among the hosts with a saved check, a snapshot setting among those
/// with a saved snapshot: a host without one has no value to differ in.
pub fn drift(hosts: &[(String, BTreeMap<String, String>)]) -> Vec<Drift> {
    let has = |settings: &BTreeMap<String, String>, check: bool| {
        settings.keys().any(|k| k.starts_with("check.") == check)
    };
    // (has a snapshot, has a check) per host, worked out once.
    let kinds: Vec<(bool, bool)> = hosts
        .iter()
        .map(|(_, s)| (has(s, false), has(s, true)))
        .collect();
    let mut out: Vec<Drift> = differing(hosts, &kinds)
        .into_iter()
        .filter_map(|key| {
            let check = key.starts_with("check.");
            let mut groups: BTreeMap<Option<&String>, Vec<String>> = BTreeMap::new();
            let holders = hosts
                .iter()
                .zip(&kinds)
                .filter(|(_, k)| if check { k.1 } else { k.0 })
                .map(|(h, _)| h);
            for (host, settings) in holders {
                groups
                    .entry(settings.get(key))
                    .or_default()
                    .push(host.clone());
            }
            if groups.len() < 2 {
                return None;
            }
            let mut groups: Vec<(Option<String>, Vec<String>)> =
                groups.into_iter().map(|(v, h)| (v.cloned(), h)).collect();
            groups.sort_by(|a, b| a.1.len().cmp(&b.1.len()).then_with(|| a.0.cmp(&b.0)));
            // A check verdict is about performance by definition: after the explained
            // settings, before the rest.
            let explained = explain(key).or_else(|| {
                key.starts_with("check.")
                    .then_some(((usize::MAX - 1, 0), CHECK_VERDICT))
            });
            Some(Drift {
                key: key.clone(),
                groups,
                explanation: explained.map(|(_, why)| why),
                rank: explained.map_or((usize::MAX, 0), |(rank, _)| rank),
            })
        })
        .collect();
    out.sort_by(|a, b| a.rank.cmp(&b.rank).then_with(|| a.key.cmp(&b.key)));
    out
}

/// The keys whose value is not the same on every host that could have it: each host's
/// settings are walked beside the first such host's in key order (most settings are the
/// same everywhere, so this is one pass per host instead of a lookup per key and host).
fn differing<'a>(
    hosts: &'a [(String, BTreeMap<String, String>)],
    kinds: &[(bool, bool)],
) -> BTreeSet<&'a String> {
    let mut out = BTreeSet::new();
    for check in [false, true] {
        let mut holders = hosts
            .iter()
            .zip(kinds)
            .filter(|(_, k)| if check { k.1 } else { k.0 })
            .map(|((_, s), _)| s);
        let Some(first) = holders.next() else {
            continue;
        };
        let part = |m: &'a BTreeMap<String, String>| {
            m.iter()
                .filter(move |(k, _)| k.starts_with("check.") == check)
        };
        for other in holders {
            let (mut a, mut b) = (part(first).peekable(), part(other).peekable());
            loop {
                match (a.peek(), b.peek()) {
                    (None, None) => break,
                    (Some((ka, _)), None) => {
                        out.insert(*ka);
                        a.next();
                    }
                    (None, Some((kb, _))) => {
                        out.insert(*kb);
                        b.next();
                    }
                    (Some((ka, va)), Some((kb, vb))) => match ka.cmp(kb) {
                        std::cmp::Ordering::Less => {
                            out.insert(*ka);
                            a.next();
                        }
                        std::cmp::Ordering::Greater => {
                            out.insert(*kb);
                            b.next();
                        }
                        std::cmp::Ordering::Equal => {
                            if va != vb {
                                out.insert(*ka);
                            }
                            a.next();
                            b.next();
                        }
                    },
                }
            }
        }
    }
    out
}

impl Drift {
    /// True when the setting is known to matter for performance.
    pub fn relevant(&self) -> bool {
        self.explanation.is_some()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn host(name: &str, pairs: &[(&str, &str)]) -> (String, BTreeMap<String, String>) {
        (
            name.into(),
            pairs
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        )
    }

    #[test]
    fn the_minority_comes_first_and_relevant_settings_lead() {
        let hosts = vec![
            host("a", &[("thp.enabled", "never"), ("sysctl.fs.x", "1")]),
            host("b", &[("thp.enabled", "always"), ("sysctl.fs.x", "1")]),
            host("c", &[("thp.enabled", "never"), ("sysctl.fs.x", "2")]),
            host(
                "d",
                &[
                    ("thp.enabled", "never"),
                    ("sysctl.fs.x", "1"),
                    ("extra", "y"),
                ],
            ),
        ];
        let d = drift(&hosts);
        let keys: Vec<&str> = d.iter().map(|x| x.key.as_str()).collect();
        assert_eq!(keys, ["thp.enabled", "extra", "sysctl.fs.x"]);
        assert_eq!(
            d[0].groups,
            [
                (Some("always".into()), vec!["b".to_string()]),
                (
                    Some("never".into()),
                    vec!["a".into(), "c".into(), "d".into()]
                ),
            ]
        );
        assert!(d[0].relevant());
        assert_eq!(d[1].groups[0], (Some("y".into()), vec!["d".to_string()]));
        assert_eq!(d[1].groups[1].0, None);
    }

    #[test]
    fn a_host_without_a_saved_check_does_not_differ_in_its_verdicts() {
        let hosts = vec![
            host(
                "a",
                &[("check.thp_enabled", "warn"), ("thp.enabled", "always")],
            ),
            host(
                "b",
                &[("check.thp_enabled", "ok"), ("thp.enabled", "never")],
            ),
            host("c", &[("check.thp_enabled", "ok")]),
            host("d", &[("thp.enabled", "never")]),
        ];
        let d = drift(&hosts);
        assert_eq!(d.len(), 2, "{d:?}");
        let check = d.iter().find(|x| x.key == "check.thp_enabled").unwrap();
        assert_eq!(
            check.groups,
            [
                (Some("warn".into()), vec!["a".to_string()]),
                (Some("ok".into()), vec!["b".into(), "c".into()]),
            ]
        );
        let thp = d.iter().find(|x| x.key == "thp.enabled").unwrap();
        assert_eq!(thp.groups[1].1, ["b", "d"]);
    }

    #[test]
    fn the_same_everywhere_is_no_drift() {
        let hosts = vec![host("a", &[("k", "1")]), host("b", &[("k", "1")])];
        assert!(drift(&hosts).is_empty());
    }

    proptest::proptest! {
        /// The one-pass walk finds exactly the keys a lookup per key and host finds.
        #[test]
        fn reports_exactly_the_keys_that_differ(
            maps in proptest::collection::vec(
                proptest::collection::btree_map("(check\\.)?[a-c]", "[xy]", 0..5), 2..6),
        ) {
            let hosts: Vec<(String, BTreeMap<String, String>)> = maps
                .into_iter()
                .enumerate()
                .map(|(i, m)| (format!("h{i}"), m))
                .collect();
            let found: BTreeSet<String> = drift(&hosts).into_iter().map(|d| d.key).collect();
            let keys: BTreeSet<&String> = hosts.iter().flat_map(|(_, s)| s.keys()).collect();
            for key in keys {
                let check = key.starts_with("check.");
                let values: BTreeSet<Option<&String>> = hosts
                    .iter()
                    .filter(|(_, s)| s.keys().any(|k| k.starts_with("check.") == check))
                    .map(|(_, s)| s.get(key))
                    .collect();
                proptest::prop_assert_eq!(values.len() > 1, found.contains(key), "{}", key);
            }
        }
    }
}
