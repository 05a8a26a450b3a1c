//! When a step bent, where the knee is, and what the server said at the knee that it did not
//! say at the first step.
//!
//! A step bends when the service stopped following the offered rate: it answered fewer than
//! [`FOLLOW_PCT`] percent of the offered requests a second successfully, or its p99 passed
//! `--p99-limit`, or more than [`ERRORS_PCT`] percent of the requests due failed (requests
//! never sent for want of a free connection lower the achieved rate instead). A ramp stops at the first step that bends. The knee is the most the service
//! delivered up to there: the highest achieved rate of the steps, which past saturation is
//! its capacity; the last step that held and the first that bent are reported beside it.

use super::{ServerFinding, Step};
use serde::Serialize;
use std::time::Duration;

/// Achieved below this share of the offered rate (percent) bends a step.
pub const FOLLOW_PCT: f64 = 90.0;

/// Failed requests above this share of those due (percent) bend a step.
pub const ERRORS_PCT: f64 = 1.0;

/// The rule steps are judged by.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Rule {
    /// [`FOLLOW_PCT`].
    pub achieved_below_pct: f64,
    /// [`ERRORS_PCT`].
    pub errors_above_pct: f64,
    /// `--p99-limit`, in nanoseconds; `null` when not given.
    pub p99_limit_ns: Option<f64>,
}

impl Rule {
    /// The rule with `--p99-limit`, when given.
    pub fn new(p99_limit: Option<Duration>) -> Rule {
        Rule {
            achieved_below_pct: FOLLOW_PCT,
            errors_above_pct: ERRORS_PCT,
            p99_limit_ns: p99_limit.map(|d| d.as_nanos() as f64),
        }
    }

    /// Why `step` bent, one short phrase per reason; empty when it held.
    pub fn judge(&self, step: &Step) -> Vec<String> {
        let mut why = Vec::new();
        let followed = if step.offered_rps > 0.0 {
            100.0 * step.achieved_rps / step.offered_rps
        } else {
            100.0
        };
        if followed < self.achieved_below_pct {
            why.push(format!(
                "achieved {followed:.0}% of the offered rate (below {:.0}%)",
                self.achieved_below_pct
            ));
        }
        if let (Some(limit), Some(lat)) = (self.p99_limit_ns, &step.latency_ns)
            && lat.p99 > limit
        {
            why.push(format!(
                "p99 {} over the limit {}",
                crate::units::format_latency_ns(lat.p99),
                crate::units::format_latency_ns(limit)
            ));
        }
        let failed = step.errors.total();
        if step.due > 0 && 100.0 * failed as f64 / step.due as f64 > self.errors_above_pct {
            let kinds: Vec<String> = step
                .errors
                .kinds()
                .iter()
                .map(|(k, n)| format!("{k} {n}"))
                .collect();
            why.push(format!(
                "{:.1}% of the requests failed ({})",
                100.0 * failed as f64 / step.due as f64,
                kinds.join(", ")
            ));
        }
        why
    }
}

/// Where the service bent, by step index into the ramp's steps.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Knee {
    /// The most the service delivered up to the first bent step (successful responses a
    /// second): its capacity when it was driven past saturation.
    pub rps: f64,
    /// The last step that held before the first that bent (`null` when the first step bent).
    pub held: Option<usize>,
    /// The first step that bent (`null` when none did: no knee within the ramp, and `rps` is
    /// only the most it was asked for).
    pub bent: Option<usize>,
    /// The server's findings at the bent step that were not there at the first step
    /// (`null` when the server was not watched).
    pub what_bent: Option<Vec<ServerFinding>>,
}

/// The knee of judged steps (each step's `bent` filled); `None` without steps.
pub fn find(steps: &[Step]) -> Option<Knee> {
    let first = steps.first()?;
    let bent = steps.iter().position(|s| !s.bent.is_empty());
    let upto = bent.map_or(steps.len(), |b| b + 1);
    let rps = steps[..upto]
        .iter()
        .map(|s| s.achieved_rps)
        .fold(0.0, f64::max);
    let what_bent = match (bent, &first.server) {
        (Some(b), Some(before)) => steps[b].server.as_ref().map(|at| appeared(before, at)),
        (None, _) | (_, None) => None,
    };
    Some(Knee {
        rps,
        held: bent.map_or(Some(steps.len() - 1), |b| b.checked_sub(1)),
        bent,
        what_bent,
    })
}

/// The findings in `at` that `before` did not have (by code and subject).
pub fn appeared(before: &[ServerFinding], at: &[ServerFinding]) -> Vec<ServerFinding> {
    at.iter()
        .filter(|f| {
            !before
                .iter()
                .any(|b| b.code == f.code && b.subject == f.subject)
        })
        .cloned()
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::load::{Errors, Latency};

    fn step(offered: f64, achieved: f64, p99_ms: f64) -> Step {
        Step {
            offered_rps: offered,
            duration_s: 1.0,
            due: offered as u64,
            sent: offered as u64,
            unsent: 0,
            ok: achieved as u64,
            errors: Errors::default(),
            achieved_rps: achieved,
            latency_ns: Some(Latency {
                mean: 1e6,
                p50: 1e6,
                p90: 1e6,
                p99: p99_ms * 1e6,
                p99_9: p99_ms * 1e6,
                max: p99_ms * 1e6,
            }),
            schedule_lag_ns: None,
            by_url: Vec::new(),
            bent: Vec::new(),
            server: None,
        }
    }

    fn finding(code: &str) -> ServerFinding {
        ServerFinding {
            code: code.into(),
            subject: "cpu".into(),
            message: code.into(),
        }
    }

    #[test]
    fn a_step_bends_when_achieved_falls_behind_p99_passes_or_errors_appear() {
        let rule = Rule::new(Some(Duration::from_millis(100)));
        assert!(rule.judge(&step(100.0, 99.0, 5.0)).is_empty());
        assert!(rule.judge(&step(100.0, 80.0, 5.0))[0].contains("achieved 80%"));
        assert!(rule.judge(&step(100.0, 100.0, 150.0))[0].contains("p99 150"));
        let mut errs = step(100.0, 97.0, 5.0);
        errs.errors.status_5xx = 2;
        errs.errors.timeout = 1;
        errs.unsent = 1;
        let why = rule.judge(&errs);
        assert_eq!(why.len(), 1, "{why:?}");
        assert!(why[0].contains("3.0%") && why[0].contains("timeout 1, status_5xx 2"));
        // One failure in a thousand is noise, not a knee.
        let mut one = step(1000.0, 999.0, 5.0);
        one.due = 1000;
        one.errors.other = 1;
        assert!(Rule::new(None).judge(&one).is_empty());
    }

    #[test]
    fn the_knee_is_the_most_delivered_up_to_the_first_bent_step() {
        let rule = Rule::new(None);
        let mut steps = vec![
            step(100.0, 100.0, 5.0),
            step(200.0, 196.0, 6.0),
            step(300.0, 205.0, 500.0),
            step(400.0, 300.0, 5.0),
        ];
        steps[0].server = Some(vec![finding("cpu_steal")]);
        steps[2].server = Some(vec![finding("cpu_steal"), finding("cpu_saturated")]);
        for s in &mut steps {
            s.bent = rule.judge(s);
        }
        let k = find(&steps).unwrap();
        assert_eq!((k.held, k.bent, k.rps), (Some(1), Some(2), 205.0));
        let what: Vec<String> = k.what_bent.unwrap().into_iter().map(|f| f.code).collect();
        assert_eq!(what, ["cpu_saturated"]);
    }

    #[test]
    fn a_ramp_that_never_bends_has_no_bent_step() {
        let steps = vec![step(100.0, 100.0, 5.0), step(200.0, 199.0, 5.0)];
        let k = find(&steps).unwrap();
        assert_eq!(
            (k.held, k.bent, k.rps, k.what_bent),
            (Some(1), None, 199.0, None)
        );
        let mut first = step(100.0, 10.0, 5.0);
        first.bent = vec!["x".into()];
        assert_eq!(find(&[first]).unwrap().held, None);
        assert!(find(&[]).is_none());
    }
}
