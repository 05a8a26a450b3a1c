//! `tacho profile` output: the verdict, then functions by self share with total share, process
//! and module, then notes (text); one `tacho.profile.v1` document (JSON); folded stacks for
//! flame-graph tools; and a flame graph as SVG (inferno).

use crate::fit::{Col, table};
use crate::profile::Profile;
use crate::text::Escaped;
use std::io::{self, Write};

/// Functions listed in the text table.
const SHOWN: usize = 25;

/// The table's columns; on a narrow terminal the module goes first, then the total share.
const COLUMNS: [Col; 5] = [
    Col::num("SELF%", 0, 7),
    Col::num("TOTAL%", 2, 7),
    Col::text("FUNCTION", 0, 40),
    Col::text("PROCESS", 1, 15),
    Col::text("MODULE", 3, 16),
];

/// Verdict, split, table (in the columns that fit `width`, a terminal's), notes.
pub fn write_text(p: &Profile, out: &mut impl Write, width: Option<usize>) -> io::Result<()> {
    writeln!(out, "{}", Escaped(&p.verdict))?;
    writeln!(
        out,
        "{} over {:.1} s at {} Hz per CPU: {} busy ({:.0}% kernel, {:.0}% user), {} idle",
        crate::units::plural(p.samples, "sample"),
        p.seconds,
        p.frequency_hz,
        p.busy_samples,
        p.kernel_pct,
        p.user_pct,
        p.idle_samples
    )?;
    if !p.subsystems.is_empty() {
        let parts: Vec<String> = p
            .subsystems
            .iter()
            .take(5)
            .map(|s| format!("{:?} {:.0}%", s.subsystem, s.pct).to_lowercase())
            .collect();
        writeln!(out, "kernel: {}", parts.join(", "))?;
    }
    let rows: Vec<Vec<String>> = p
        .functions
        .iter()
        .take(SHOWN)
        .map(|f| {
            vec![
                format!("{:.1}", f.self_pct),
                format!("{:.1}", f.total_pct),
                Escaped(&f.name).to_string(),
                Escaped(&f.process).to_string(),
                Escaped(&f.module).to_string(),
            ]
        })
        .collect();
    writeln!(out)?;
    table(out, &COLUMNS, &rows, width)?;
    for note in &p.notes {
        writeln!(out, "note: {}", Escaped(note))?;
    }
    Ok(())
}

/// The document.
pub fn write_json(p: &Profile, out: &mut impl Write) -> io::Result<()> {
    serde_json::to_writer_pretty(&mut *out, p)?;
    writeln!(out)
}

/// One `stack count` line per distinct stack, as flame-graph tools read (names as text:
/// these lines go to a file or a tool, and a frame with a newline would split its line, so
/// control characters are escaped).
pub fn write_folded(p: &Profile, out: &mut impl Write) -> io::Result<()> {
    for (stack, n) in &p.folded {
        writeln!(out, "{} {n}", Escaped(stack))?;
    }
    Ok(())
}

/// A flame graph of the folded stacks; with too few busy samples for one, a page that says so
/// (the verdict), so `--svg` always leaves a file that opens. The title (which names processes
/// and functions) and the frames are escaped as on a terminal, then as XML: a control
/// character is not allowed in XML even as a character reference.
pub fn write_svg(p: &Profile, title: &str, out: &mut impl Write) -> io::Result<()> {
    if p.busy_samples < crate::profile::MIN_VERDICT_SAMPLES || p.folded.is_empty() {
        return write!(
            out,
            "<?xml version=\"1.0\" standalone=\"no\"?>\n<svg version=\"1.1\" width=\"1200\" \
             height=\"60\" xmlns=\"http://www.w3.org/2000/svg\"><text x=\"10\" y=\"35\" \
             font-family=\"Verdana\" font-size=\"14\">{}</text></svg>\n",
            crate::report::html::esc(&xml_text(title))
        );
    }
    let lines: Vec<String> = p
        .folded
        .iter()
        .map(|(s, n)| format!("{} {n}", xml_text(s)))
        .collect();
    let mut opts = inferno::flamegraph::Options::default();
    // Upside down (an icicle graph): the frames every stack rests on are drawn at the top, so
    // the page opens on them. Upright, a whole-system graph is as tall as its deepest stack,
    // and the window first showed the empty space above that stack's thin tip.
    opts.direction = inferno::flamegraph::Direction::Inverted;
    opts.title = xml_text(title);
    opts.count_name = "samples".into();
    inferno::flamegraph::from_lines(&mut opts, lines.iter().map(String::as_str), out)
        .map_err(|e| io::Error::other(e.to_string()))
}

/// `text` escaped as on a terminal, and without the two characters that are neither controls
/// nor allowed in XML (U+FFFE, U+FFFF).
pub(crate) fn xml_text(text: &str) -> String {
    Escaped(text)
        .to_string()
        .replace('\u{fffe}', "\\u{fffe}")
        .replace('\u{ffff}', "\\u{ffff}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    #[test]
    fn names_from_binaries_are_escaped_in_the_svg_and_the_folded_lines() {
        let mut p = crate::profile::build(
            &HashMap::new(),
            &HashMap::new(),
            &HashMap::new(),
            &crate::profile::Filter { pid: None },
            1.0,
            99,
            0,
        );
        p.folded = vec![("app;<script>alert(1)</script>;x\x1b[2Jy\u{ffff}".into(), 30)];
        p.busy_samples = 30;
        let mut svg = Vec::new();
        write_svg(&p, "t\x07\u{fffe}", &mut svg).unwrap();
        let svg = String::from_utf8(svg).unwrap();
        assert!(!svg.contains(['\x07', '\u{fffe}', '\u{ffff}']), "{svg}");
        assert!(svg.contains("t\\a\\u{fffe}"), "{svg}");
        assert!(!svg.contains("<script>alert"), "{svg}");
        assert!(
            svg.contains("&lt;script&gt;alert(1)&lt;/script&gt;"),
            "{svg}"
        );
        assert!(!svg.contains('\x1b'));
        let mut folded = Vec::new();
        write_folded(&p, &mut folded).unwrap();
        assert!(
            !folded.contains(&0x1b),
            "{}",
            String::from_utf8_lossy(&folded)
        );
    }
}
