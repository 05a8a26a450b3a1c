//! One command's processes as one culprit. A shell loop's short-lived `dd`s, a build's `rustc`s
//! or a pool of workers each hold a small share; named one by one they look like strangers
//! ("27% from dd (pid 31797, exited), 27% from dd (pid 31785, exited), …") and the rest falls
//! off the list. Folded, the verdict says what the admin needs: "81% of writes from dd: 9
//! processes, 8 exited, in session-3.scope", with the largest ones under it. The JSON keeps
//! each process's own row under the group (`members`).

use super::blame::{Attribution, Culprit};

/// Process rows kept under a folded culprit: a fork storm (a build, a shell loop) makes tens
/// of thousands of processes a second, each a row in every finding naming the group. Past
/// this many the smallest are counted in `members_left_out` instead.
pub(super) const MAX_MEMBERS: usize = 256;

/// Folds the culprits that share a command, a unit and a kind of attribution into one, when
/// there are at least two of them; then the `keep` largest, most share first.
pub(super) fn fold(list: Vec<Culprit>, keep: usize) -> Vec<Culprit> {
    let mut groups: Vec<Vec<Culprit>> = Vec::new();
    for c in list {
        let same = |g: &&mut Vec<Culprit>| {
            let first = &g[0];
            c.pid.is_some()
                && first.pid.is_some()
                && first.comm == c.comm
                && first.comm_hex == c.comm_hex
                && first.unit == c.unit
                && exact(first) == exact(&c)
        };
        match groups.iter_mut().find(|g| same(g)) {
            Some(g) => g.push(c),
            None => groups.push(vec![c]),
        }
    }
    let mut out: Vec<Culprit> = groups
        .into_iter()
        .map(|mut g| if g.len() == 1 { g.remove(0) } else { folded(g) })
        .collect();
    out.sort_by(|x, y| y.share_pct.total_cmp(&x.share_pct));
    out.truncate(keep);
    out
}

fn exact(c: &Culprit) -> bool {
    matches!(c.attribution, Attribution::Exact { .. })
}

/// The group as one culprit: summed shares and rates, its largest processes as members.
fn folded(mut members: Vec<Culprit>) -> Culprit {
    members.sort_by(|x, y| y.share_pct.total_cmp(&x.share_pct));
    let sum = |f: fn(&Culprit) -> Option<f64>| -> Option<f64> {
        let values: Vec<f64> = members.iter().filter_map(f).collect();
        (!values.is_empty()).then(|| values.iter().sum())
    };
    let exited = members.iter().filter(|m| m.exited).count();
    let first = &members[0];
    let group = Culprit {
        pid: None,
        comm: first.comm.clone(),
        comm_hex: first.comm_hex.clone(),
        unit: first.unit.clone(),
        share_pct: members.iter().map(|m| m.share_pct).sum(),
        exited: exited == members.len(),
        attribution: first.attribution.clone(),
        bytes_per_s: sum(|m| m.bytes_per_s),
        user_pct: sum(|m| m.user_pct),
        system_pct: sum(|m| m.system_pct),
        rss_growth_bytes: None,
        major_faults_per_s: None,
        swap_bytes: None,
        iops: None,
        lat_p99_ms: None,
        queued_pct: None,
        processes: Some(members.len()),
        exited_processes: Some(exited),
        members: Vec::new(),
        members_left_out: members.len().checked_sub(MAX_MEMBERS).filter(|&n| n > 0),
    };
    members.truncate(MAX_MEMBERS);
    Culprit { members, ..group }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dd(pid: u32, share: f64, exited: bool) -> Culprit {
        Culprit {
            exited,
            bytes_per_s: Some(share * 1e6),
            ..Culprit::named(
                Some(pid),
                "dd".into(),
                Some("session-3.scope".into()),
                share,
                Attribution::Exact {
                    source: "eBPF".into(),
                },
            )
        }
    }

    #[test]
    fn one_commands_processes_become_one_culprit_with_its_largest_under_it() {
        let mut list: Vec<Culprit> = (0..9)
            .map(|i| dd(100 + i, 9.0 + i as f64 * 0.1, i < 8))
            .collect();
        list.push(Culprit::named(
            Some(7),
            "postgres".into(),
            None,
            10.0,
            Attribution::Exact {
                source: "eBPF".into(),
            },
        ));
        let out = fold(list, 3);
        assert_eq!(out.len(), 2);
        let g = &out[0];
        assert_eq!(
            (g.pid, g.processes, g.exited_processes),
            (None, Some(9), Some(8))
        );
        assert!((g.share_pct - 84.6).abs() < 1e-9, "{}", g.share_pct);
        assert_eq!(g.members.len(), 9, "every process's own row");
        assert_eq!(g.members_left_out, None);
        assert_eq!(g.members[0].pid, Some(108), "the largest first");
        assert_eq!(
            g.who(),
            "dd: 9 processes, 8 exited, in session-3.scope (largest: pid 108 10%, pid 107 10%, \
             pid 106 10%)"
        );
        assert_eq!(out[1].comm, "postgres");
    }

    #[test]
    fn a_fork_storms_rows_are_bounded_and_the_rest_counted() {
        let n = MAX_MEMBERS as u32 + 5;
        let list: Vec<Culprit> = (0..n)
            .map(|i| dd(1000 + i, 0.1 + f64::from(i) * 1e-6, true))
            .collect();
        let out = fold(list, 3);
        let g = &out[0];
        assert_eq!(g.processes, Some(n as usize));
        assert_eq!(g.members.len(), MAX_MEMBERS);
        assert_eq!(g.members_left_out, Some(5));
        // The largest are kept: the five smallest (the first five pids) are left out.
        assert!(g.members.iter().all(|m| m.pid >= Some(1005)));
    }

    #[test]
    fn a_lone_process_and_processes_known_differently_stay_apart() {
        let likely = Culprit {
            attribution: Attribution::Likely {
                reason: "open files".into(),
            },
            ..dd(3, 5.0, false)
        };
        let out = fold(vec![dd(1, 50.0, false), likely], 3);
        assert_eq!(out.len(), 2);
        assert!(out.iter().all(|c| c.processes.is_none() && c.pid.is_some()));
    }
}
