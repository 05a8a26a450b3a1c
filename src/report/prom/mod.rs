//! Prometheus text exposition format (0.0.4), written one way for every document: a
//! benchmark's figures and a timed command's for node_exporter's textfile collector
//! ([`bench`], [`time`]), and a `tacho top` sample for `/metrics` ([`top`]).

pub mod bench;
pub mod host;
pub mod time;
pub mod top;

pub use bench::RunInfo;

use std::fmt::Write as _;

/// The families that have samples, as one exposition text.
pub fn exposition(families: &[Family]) -> String {
    families
        .iter()
        .filter(|f| !f.lines.is_empty())
        .map(Family::text)
        .collect()
}

/// One metric: its HELP and TYPE lines and its samples.
pub struct Family {
    name: String,
    help: String,
    kind: &'static str,
    lines: Vec<String>,
}

impl Family {
    /// A gauge.
    pub fn new(name: impl Into<String>, help: impl Into<String>) -> Family {
        Family {
            name: name.into(),
            help: help.into(),
            kind: "gauge",
            lines: Vec::new(),
        }
    }

    /// A counter: a total since the exporter started (`_total`).
    pub fn counter(name: impl Into<String>, help: impl Into<String>) -> Family {
        Family {
            kind: "counter",
            ..Family::new(name, help)
        }
    }

    /// A summary: quantiles plus `_sum` and `_count`, the shape Prometheus expects for
    /// precomputed latency quantiles.
    pub fn summary(name: impl Into<String>, help: impl Into<String>) -> Family {
        Family {
            kind: "summary",
            ..Family::new(name, help)
        }
    }

    /// A histogram: `_bucket` series with an `le` label, `_sum` and `_count`.
    pub fn histogram(name: impl Into<String>, help: impl Into<String>) -> Family {
        Family {
            kind: "histogram",
            ..Family::new(name, help)
        }
    }

    /// The metric's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Adds one sample with these labels, and `quantile` for a summary's quantile line.
    pub fn sample(&mut self, labels: &[(&str, &str)], quantile: Option<&str>, value: f64) {
        self.sample_named("", labels, quantile, value);
    }

    /// Adds one sample to the series `<name><suffix>` (`_sum`, `_count` of a summary).
    pub fn sample_named(
        &mut self,
        suffix: &str,
        labels: &[(&str, &str)],
        quantile: Option<&str>,
        value: f64,
    ) {
        let mut text = String::new();
        for (k, v) in labels
            .iter()
            .chain(quantile.map(|q| ("quantile", q)).iter())
        {
            if !text.is_empty() {
                text.push(',');
            }
            let _ = write!(text, "{k}=\"{}\"", escape_label(v));
        }
        let labels = if text.is_empty() {
            String::new()
        } else {
            format!("{{{text}}}")
        };
        self.lines
            .push(format!("{}{suffix}{labels} {}", self.name, number(value)));
    }

    fn text(&self) -> String {
        format!(
            "# HELP {} {}\n# TYPE {} {}\n{}\n",
            self.name,
            escape_help(&self.help),
            self.name,
            self.kind,
            self.lines.join("\n")
        )
    }
}

/// Names made unique in order, for a label that identifies a series: the first of a name
/// keeps it, a repeat becomes `NAME #2`, `NAME #3`, … (skipping any name already taken). Two
/// tests of one name in a run (two `[same]` sections of a job file, an imported run) would
/// otherwise give two samples of one series, and Prometheus refuses the whole scrape.
pub fn numbered<'a>(names: impl IntoIterator<Item = &'a str> + Clone) -> Vec<String> {
    let mut taken: std::collections::HashSet<String> =
        names.clone().into_iter().map(str::to_owned).collect();
    let mut first = std::collections::HashSet::new();
    let mut next: std::collections::HashMap<&str, usize> = std::collections::HashMap::new();
    names
        .into_iter()
        .map(|name| {
            if first.insert(name) {
                return name.to_owned();
            }
            let k = next.entry(name).or_insert(2);
            loop {
                let candidate = format!("{name} #{k}");
                *k += 1;
                if taken.insert(candidate.clone()) {
                    return candidate;
                }
            }
        })
        .collect()
}

/// Label values escape backslash, double quote and newline, as the format requires.
pub fn escape_label(value: &str) -> String {
    value
        .replace('\\', r"\\")
        .replace('"', "\\\"")
        .replace('\n', r"\n")
}

/// HELP text escapes backslash and newline.
fn escape_help(text: &str) -> String {
    text.replace('\\', r"\\").replace('\n', r"\n")
}

/// Prometheus spells non-finite values `NaN`, `+Inf`, `-Inf`.
fn number(v: f64) -> String {
    if v.is_nan() {
        "NaN".into()
    } else if v.is_infinite() {
        if v > 0.0 { "+Inf" } else { "-Inf" }.into()
    } else {
        format!("{v}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn label_values_are_escaped() {
        assert_eq!(escape_label("a\"b\\c\nd"), "a\\\"b\\\\c\\nd");
        assert_eq!(number(f64::INFINITY), "+Inf");
        assert_eq!(number(0.5), "0.5");
    }

    #[test]
    fn repeated_names_are_numbered_apart() {
        assert_eq!(
            numbered(["a", "b", "a", "a #2", "a"]),
            ["a", "b", "a #3", "a #2", "a #4"]
        );
    }

    #[test]
    fn a_family_is_help_type_and_samples() {
        let mut f = Family::new("tacho_x", "An x.\nTwo lines.");
        f.sample(&[], None, 1.0);
        f.sample(&[("dev", "a\"b")], Some("0.5"), 2.5);
        let empty = Family::new("tacho_empty", "Nothing.");
        assert_eq!(
            exposition(&[f, empty]),
            "# HELP tacho_x An x.\\nTwo lines.\n# TYPE tacho_x gauge\ntacho_x 1\n\
             tacho_x{dev=\"a\\\"b\",quantile=\"0.5\"} 2.5\n"
        );
    }
}
