//! Export files in hyperfine's formats: JSON (`{"results": [...]}`, the same keys), CSV (the
//! same columns) and a Markdown table. Each writes to any `impl Write`.

use super::sheet::spreadsheet_text;
use crate::text::Escaped;
use crate::timing::result::{CommandResult, HyperfineExport, Relative};
use std::io::{self, Write};

/// Writes the results as hyperfine's JSON export (`{"results": [...]}`), key for key.
pub fn json(results: &[CommandResult], out: &mut impl Write) -> io::Result<()> {
    let doc = HyperfineExport {
        results: results.to_vec(),
    };
    serde_json::to_writer_pretty(&mut *out, &doc)?;
    writeln!(out)
}

/// hyperfine's CSV columns. A standard deviation that does not exist (one run) is an empty
/// cell, as hyperfine writes it, not 0.
pub fn csv(results: &[CommandResult], out: &mut impl Write) -> io::Result<()> {
    let mut w = csv::Writer::from_writer(out);
    w.write_record([
        "command", "mean", "stddev", "median", "user", "system", "min", "max",
    ])?;
    for r in results {
        let number = |x: f64| x.to_string();
        w.write_record([
            spreadsheet_text(&r.command),
            number(r.mean),
            r.stddev.map(number).unwrap_or_default(),
            number(r.median),
            number(r.user),
            number(r.system),
            number(r.min),
            number(r.max),
        ])?;
    }
    w.flush()
}

/// A table in milliseconds, or seconds when the fastest command takes a second or more. The
/// relative column gives the ratio to the fastest and its 95% confidence interval.
pub fn markdown(
    results: &[CommandResult],
    relative: &[Relative],
    out: &mut impl Write,
) -> io::Result<()> {
    let fastest = results.iter().map(|r| r.mean).fold(f64::INFINITY, f64::min);
    let (unit, scale) = if fastest >= 1.0 {
        ("s", 1.0)
    } else {
        ("ms", 1e3)
    };
    writeln!(
        out,
        "| Command | Mean [{unit}] | Min [{unit}] | Max [{unit}] | Relative |"
    )?;
    writeln!(out, "|:---|---:|---:|---:|---:|")?;
    for (i, r) in results.iter().enumerate() {
        let mean = match r.stddev {
            Some(sd) => format!("{:.1} ± {:.1}", r.mean * scale, sd * scale),
            None => format!("{:.1}", r.mean * scale),
        };
        let rel = match relative.get(i) {
            Some(q) if q.ci95_high > q.ci95_low => {
                format!("{:.2} ({:.2}–{:.2})", q.ratio, q.ci95_low, q.ci95_high)
            }
            Some(q) => format!("{:.2}", q.ratio),
            None => "1.00".into(),
        };
        writeln!(
            out,
            "| `{}` | {mean} | {:.1} | {:.1} | {rel} |",
            // As hyperfine writes it, with control characters escaped for the terminal that
            // will `cat` the file.
            Escaped(&r.command).to_string().replace('|', "\\|"),
            r.min * scale,
            r.max * scale
        )?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn result(command: &str, times: &[f64]) -> CommandResult {
        CommandResult {
            command: command.into(),
            mean: times.iter().sum::<f64>() / times.len() as f64,
            stddev: Some(0.001),
            median: times[0],
            user: 0.0005,
            system: 0.00025,
            min: times[0],
            max: times[times.len() - 1],
            times: times.to_vec(),
            memory_usage_byte: vec![1024; times.len()],
            exit_codes: vec![Some(0); times.len()],
        }
    }

    #[test]
    fn csv_has_hyperfines_columns_and_quotes() {
        let mut out = Vec::new();
        csv(&[result("echo \"a,b\"", &[0.01, 0.02])], &mut out).unwrap();
        let text = String::from_utf8(out).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines[0], "command,mean,stddev,median,user,system,min,max");
        assert_eq!(
            lines[1],
            "\"echo \"\"a,b\"\"\",0.015,0.001,0.01,0.0005,0.00025,0.01,0.02"
        );
    }

    #[test]
    fn csv_leaves_a_missing_stddev_empty_and_formulas_as_text() {
        let mut one = result("=cmd|calc", &[0.5]);
        one.stddev = None;
        let mut out = Vec::new();
        csv(&[one], &mut out).unwrap();
        let text = String::from_utf8(out).unwrap();
        assert_eq!(
            text.lines().nth(1).unwrap(),
            "'=cmd|calc,0.5,,0.5,0.0005,0.00025,0.5,0.5"
        );
    }

    #[test]
    fn markdown_table() {
        let rel = vec![
            Relative {
                command: "a".into(),
                ratio: 1.0,
                ci95_low: 1.0,
                ci95_high: 1.0,
                significant: false,
            },
            Relative {
                command: "b|c".into(),
                ratio: 2.0,
                ci95_low: 1.9,
                ci95_high: 2.1,
                significant: true,
            },
        ];
        let mut out = Vec::new();
        markdown(
            &[result("a", &[0.01, 0.01]), result("b|c", &[0.02, 0.02])],
            &rel,
            &mut out,
        )
        .unwrap();
        let text = String::from_utf8(out).unwrap();
        assert_eq!(
            text,
            "| Command | Mean [ms] | Min [ms] | Max [ms] | Relative |\n\
             |:---|---:|---:|---:|---:|\n\
             | `a` | 10.0 ± 1.0 | 10.0 | 10.0 | 1.00 |\n\
             | `b\\|c` | 20.0 ± 1.0 | 20.0 | 20.0 | 2.00 (1.90–2.10) |\n"
        );
    }
}
