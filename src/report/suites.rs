//! `--list-suites`: every suite with its version and exact tests.

use crate::bench::suite::Suite;
use crate::units::format_size;
use std::io::{self, Write};

/// Writes every suite with its version, method and tests, for `--list-suites`.
pub fn write(suites: &[Suite], out: &mut impl Write) -> io::Result<()> {
    for s in suites {
        let length = match s.io_limit {
            _ if s.flat_for.is_some() => format!(
                "each until its rate is flat for {:.0}s, at most the region once or {:.0}s",
                s.flat_for.unwrap_or_default().as_secs_f64(),
                s.runtime.as_secs_f64()
            ),
            Some(limit) => format!(
                "{} per test, at most {:.0}s",
                format_size(limit),
                s.runtime.as_secs_f64()
            ),
            None => format!(
                "{:.1}s each after {:.1}s ramp",
                s.runtime.as_secs_f64(),
                s.ramp.as_secs_f64()
            ),
        };
        writeln!(
            out,
            "{} v{} ({} test{}, {length}): {}",
            s.name,
            s.version,
            s.tests.len(),
            if s.tests.len() == 1 { "" } else { "s" },
            s.about
        )?;
        for t in &s.tests {
            let mut line = format!(
                "    {:<28} {} {} QD{}×{}",
                t.name,
                t.rw,
                if t.bssplit.is_empty() {
                    format_size(t.bs)
                } else {
                    let mix: Vec<String> = t
                        .bssplit
                        .iter()
                        .map(|b| format!("{}/{}", format_size(b.size), b.pct))
                        .collect();
                    mix.join(":")
                },
                t.iodepth,
                t.numjobs
            );
            if let Some(pct) = t.rwmixread {
                line.push_str(&format!(" {pct}% reads"));
            }
            if let Some(sync) = t.sync {
                line.push_str(&format!(" +{} every {}", sync.kind, sync.every));
            }
            if let Some(engine) = t.engine {
                line.push_str(&format!(" engine {engine}"));
            }
            if t.direct == Some(false) {
                line.push_str(" buffered");
            }
            if let Some(o) = t.open_sync {
                line.push_str(&format!(" O_{}", o.to_string().to_uppercase()));
            }
            if t.fresh {
                line.push_str(" into a new file");
            }
            writeln!(out, "{line}")?;
            if let Some(about) = t.about {
                writeln!(out, "        {about}")?;
            }
        }
        if let Some(size) = s.size {
            writeln!(out, "    region {}", format_size(size))?;
        }
    }
    Ok(())
}
