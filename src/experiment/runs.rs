//! An experiment's two sides as stored runs (kind `experiment`), so `runs list`, `compare`
//! and the fleet store see them like any measurement: the baseline and the changed run, each
//! labelled with its settings, each holding one test, the judged figure, whose repeats are the
//! side's rounds. `compare BASELINE CHANGED` then runs the same Welch test over the same rounds
//! as the verdict, and lists the settings under the table as a change of method.

use serde_json::{Map, Value, json};

use super::Outcome;
use super::measure::Stored;
use crate::compare::Metric;
use crate::store::figures::LATENCY_KEYS;
use crate::store::{NewRun, RunKind, RunSource, RunStatus};

/// The baseline's run and the changed run of `outcome`; `None` when no round finished or the
/// store has no column for the figure (the machine's system CPU share, a percentage).
/// `label` is the user's `--label`, put before each side's own.
pub fn sides(outcome: &Outcome, host: &Value, label: Option<&str>) -> Option<[NewRun; 2]> {
    let stored = outcome.stored?;
    let figure = outcome.figure.as_deref()?;
    if outcome.baseline.is_empty() || outcome.changed.is_empty() {
        return None;
    }
    let side = |changed: bool, rounds: &[f64]| {
        let setting = outcome
            .changes
            .iter()
            .map(|c| c.side(changed))
            .collect::<Vec<_>>()
            .join(" + ");
        let word = if changed { "changed" } else { "baseline" };
        let mut extra = Map::new();
        extra.insert("side".into(), json!(word));
        extra.insert("setting".into(), json!(setting));
        extra.insert("measure".into(), json!(outcome.measure));
        extra.insert("effect".into(), json!(outcome.effect));
        NewRun {
            uuid: None,
            kind: RunKind::Experiment,
            source: RunSource::Bench,
            label: Some(match label {
                Some(l) => format!("{l}: {word} {setting}"),
                None => format!("experiment {word}: {setting}"),
            }),
            created_at: None,
            created_unix: None,
            status: if outcome.interrupted {
                RunStatus::Interrupted
            } else {
                RunStatus::Finished
            },
            tool_version: Some(env!("CARGO_PKG_VERSION").into()),
            suite: None,
            host: host.clone(),
            target: json!({}),
            extra,
            tests: vec![(&test(figure, stored, rounds)).into()],
        }
    };
    Some([side(false, &outcome.baseline), side(true, &outcome.changed)])
}

/// The figure's test: the rounds' mean as the reported figure (rounds are equal in length,
/// so for a mean latency this is the mean over every round's operations) and each round as a
/// repeat, in the store's unit.
fn test(name: &str, stored: Stored, rounds: &[f64]) -> Value {
    let mean = rounds.iter().sum::<f64>() / rounds.len() as f64;
    let sample = |v: f64| json!({ stored.direction: figure_json(stored.metric, v * stored.scale) });
    let mut t = sample(mean);
    t["name"] = json!(name);
    t["repeats"] = Value::Array(rounds.iter().map(|v| sample(*v)).collect());
    t
}

/// One direction's object holding `v` as `metric`, as the store's figures read it.
fn figure_json(metric: Metric, v: f64) -> Value {
    let latency = |i: usize| json!({ "lat_ns": { LATENCY_KEYS[i].0: v } });
    match metric {
        Metric::Iops => json!({ "iops": v }),
        Metric::Bandwidth => json!({ "bw_bytes_per_s": v }),
        Metric::OpsPerS => json!({ "ops_per_s": v }),
        Metric::LatMean => latency(0),
        Metric::LatP50 => latency(1),
        Metric::LatP90 => latency(2),
        Metric::LatP99 => latency(3),
        Metric::LatP99_9 => latency(4),
        Metric::LatP99_99 => latency(5),
        Metric::LatMax => latency(6),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::figures::of_test;

    /// Every metric written here is read back by the store as the same metric and value, for
    /// the reported figure and each repeat.
    #[test]
    fn every_metric_reads_back_as_itself() {
        for metric in Metric::ALL {
            let stored = Stored {
                direction: "run",
                metric,
                scale: 2.0,
            };
            let t = test("x", stored, &[1.0, 2.0, 6.0]);
            let figures = of_test(&t);
            let got: Vec<(u32, Option<f64>)> =
                figures.iter().map(|f| (f.sample, metric.of(f))).collect();
            assert_eq!(
                got,
                [
                    (0, Some(6.0)),
                    (1, Some(2.0)),
                    (2, Some(4.0)),
                    (3, Some(12.0))
                ],
                "{metric:?}"
            );
            assert!(figures.iter().all(|f| f.direction == "run"));
        }
    }
}
