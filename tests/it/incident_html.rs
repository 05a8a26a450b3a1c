//! The incident report (`top --from --to --html`) and the live page of `top --listen` in
//! headless Chromium (issue 39): a writer on a loop device, named like markup, inside a
//! recorded window. Both pages at 1400 and 390 CSS pixels: no horizontal overflow, every chart
//! drawn, the writer's finding in the verdicts and marked on its disk's charts at the right
//! time, the name shown as text (no dialog, no element made from it), and no request but the
//! page's own.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde_json::Value;

use crate::common::browser::Browser;
use crate::common::*;

/// What the writer calls itself; the kernel keeps the first 15 bytes as its command name.
const HOSTILE: &str = "</script><img src=x onerror=alert(1)>";

fn comm() -> &'static str {
    &HOSTILE[..15]
}

fn now_unix() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs_f64()
}

fn rfc3339(unix_s: f64) -> String {
    chrono::DateTime::from_timestamp(unix_s as i64, 0)
        .unwrap()
        .to_rfc3339()
}

/// [`DIRECT_WRITER`] under the name [`HOSTILE`] (prctl), until dropped.
fn hostile_writer(dev: &str) -> Killed {
    let script = format!(
        "import ctypes, sys\nctypes.CDLL(None).prctl(15, sys.argv[2].encode(), 0, 0, 0)\n{}",
        DIRECT_WRITER
    );
    Killed(
        Command::new("python3")
            .args(["-c", &script, dev, HOSTILE])
            .stdout(Stdio::null())
            .spawn()
            .expect("cannot start python3"),
    )
}

/// What the page shows, measured in it: widths, charts and those without a drawn line, the
/// marks on `dev`'s charts (time, pixels and the plot's width), elements a name could have
/// made, and the page's text.
fn measure(b: &mut Browser, dev: &str) -> Value {
    b.eval(&format!(
        "(() => {{
          const charts = [...document.querySelectorAll('.chart')];
          const disk = charts.filter(c => c.dataset.subject === {dev:?});
          const marks = disk.flatMap(c => [...c.querySelectorAll('.mark')].map(m => ({{
            chart: c.dataset.id, code: m.dataset.code, from: +m.dataset.from, to: +m.dataset.to,
            left: parseFloat(m.style.left), over: c.querySelector('.u-over').clientWidth,
            axis: c.dataset.x.split(' ').map(Number) }})));
          return {{
            scroll: document.documentElement.scrollWidth, inner: window.innerWidth,
            charts: charts.length, empty: charts.filter(c => !(+c.dataset.drawn > 0)).length,
            disk_charts: disk.length, marks: marks,
            imgs: document.querySelectorAll('img').length,
            handlers: document.querySelectorAll('[onerror],[onload]').length,
            text: document.body.innerText,
          }};
        }})()"
    ))
}

/// The checks both pages pass at `width`; `span` is the first and last time of the data,
/// `writing` when the writer ran (its end unknown on the live page while it writes).
fn check_page(page: &str, m: &Value, dev: &str, width: u32, span: (f64, f64), writing: (f64, f64)) {
    let at = format!("{page} at {width} px");
    assert_eq!(m["inner"], width, "{at}: viewport");
    assert!(
        m["scroll"].as_u64().unwrap() <= u64::from(width),
        "{at} overflows: {} px wide",
        m["scroll"]
    );
    assert!(
        m["charts"].as_u64().unwrap() >= 4,
        "{at}: charts {}",
        m["charts"]
    );
    assert_eq!(m["empty"], 0, "{at}: charts without a drawn line");
    assert_eq!(m["disk_charts"], 3, "{at}: {dev}'s charts");
    assert_eq!(m["imgs"], 0, "{at}: an element was made from a name");
    assert_eq!(
        m["handlers"], 0,
        "{at}: an event handler was made from a name"
    );
    let text = m["text"].as_str().unwrap();
    assert!(
        text.contains(comm()),
        "{at}: the writer's name is not shown: {text}"
    );
    // A mark on the disk's charts starts when the writer started (the interval it started in,
    // or the next) and reaches its end; drawn where its time falls on the axis.
    let marks = m["marks"].as_array().unwrap();
    let first = marks
        .iter()
        .map(|k| k["from"].as_f64().unwrap())
        .fold(f64::INFINITY, f64::min);
    let last = marks
        .iter()
        .map(|k| k["to"].as_f64().unwrap())
        .fold(0.0, f64::max);
    assert!(
        first >= writing.0 - 2.0 && first <= writing.0 + 4.0,
        "{at}: the first mark on {dev} starts at {first}, the writer at {}: {marks:?}",
        writing.0
    );
    assert!(
        last >= writing.1 - 3.0 && last <= writing.1 + 3.0,
        "{at}: the last mark on {dev} ends at {last}, the writer at {}: {marks:?}",
        writing.1
    );
    for k in marks {
        // The axis the mark was drawn on: the data's (the live page's may have moved on by an
        // interval or two since it drew).
        let axis = (
            k["axis"][0].as_f64().unwrap(),
            k["axis"][1].as_f64().unwrap(),
        );
        assert!(
            (axis.0 - span.0).abs() <= 3.0 && (axis.1 - span.1).abs() <= 3.0,
            "{at}: the time axis {axis:?} is not the data's {span:?}"
        );
        let over = k["over"].as_f64().unwrap();
        let from = k["from"].as_f64().unwrap().max(axis.0);
        let expected = (from - axis.0) / (axis.1 - axis.0) * over;
        let left = k["left"].as_f64().unwrap();
        assert!(
            (left - expected).abs() <= 0.05 * over + 3.0,
            "{at}: a mark at {from} is drawn at {left} px, its time is at {expected:.0} px \
             of {over}"
        );
    }
}

#[test]
fn the_incident_report_and_the_live_page_show_a_planted_writer() {
    let Some(chromium) = chromium() else {
        return;
    };
    let Some(dev) = LoopDev::direct_on_disk("incident html") else {
        return;
    };
    let name = dev.name();
    let dir = tempfile::tempdir().unwrap();
    let history = dir.path().join("history.db");
    let shots = std::path::Path::new(env!("CARGO_TARGET_TMPDIR"));
    let mut rec = tacho();
    rec.args(["record", "--interval", "1s", "--history"])
        .arg(&history)
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    let recorder = Killed(rec.spawn().unwrap());
    let port = free_port();
    let mut top = tacho();
    top.args(["top", "--interval", "1s", "--listen"])
        .arg(format!("127.0.0.1:{port}"))
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    let _server = Killed(top.spawn().unwrap());
    let start = Instant::now();
    while !std::panic::catch_unwind(|| http_get(port, "/live.json"))
        .is_ok_and(|a| a.starts_with("HTTP/1.1 200"))
    {
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "/live.json never answered"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    // Two recorded intervals before the writer.
    std::thread::sleep(Duration::from_secs(2).saturating_sub(start.elapsed()));

    let t0 = now_unix();
    let writer = hostile_writer(dev.path());
    std::thread::sleep(Duration::from_secs(3));
    // The live page while the writer writes.
    let origin = format!("http://127.0.0.1:{port}/");
    let mut b = Browser::open(chromium, 1400, 900);
    for width in [1400, 390] {
        b.resize(width, 900);
        // What the page before asked for is not this page's.
        b.navigate("about:blank");
        b.requests();
        b.navigate(&origin);
        // Once it has the window, the page asks only for what came after its last interval,
        // and draws the charts with it appended (what is measured below).
        b.wait_for(
            "performance.getEntriesByType('resource').some(e => \
             e.name.includes('live.json?after='))",
            Duration::from_secs(10),
        );
        b.wait_for(
            &format!(
                "[...document.querySelectorAll('#findings li')].some(li => \
                 li.textContent.includes({name:?}) && li.textContent.includes({:?})) && \
                 document.querySelectorAll('.chart[data-subject={name:?}] .mark').length > 0",
                comm()
            ),
            Duration::from_secs(20),
        );
        let m = measure(&mut b, &name);
        let t = b.eval("fetch('live.json').then(r => r.json()).then(d => d.t)");
        let t = t.as_array().unwrap();
        let span = (t[0].as_f64().unwrap(), t.last().unwrap().as_f64().unwrap());
        check_page("the live page", &m, &name, width, span, (t0, span.1));
        // What a person sees first, and the whole page.
        b.screenshot(&shots.join(format!("live-{width}-first.png")), 900.0);
        b.screenshot(&shots.join(format!("live-{width}.png")), 8000.0);
        for url in b.requests() {
            assert!(url.starts_with(&origin), "the live page requested {url}");
        }
    }
    // A setting changed while recording (the test's own loop device's read-ahead), restored
    // once the recorder stopped.
    let read_ahead = format!("/sys/class/block/{name}/queue/read_ahead_kb");
    let before = std::fs::read_to_string(&read_ahead)
        .unwrap()
        .trim()
        .to_string();
    let after = if before == "1024" { "2048" } else { "1024" };
    let changed = now_unix();
    std::fs::write(&read_ahead, after).unwrap();
    drop(writer);
    let t1 = now_unix();
    std::thread::sleep(Duration::from_secs(2));
    drop(recorder);
    std::fs::write(&read_ahead, &before).unwrap();

    let page = dir.path().join("incident.html");
    let o = run(&[
        "top",
        "--from",
        &rfc3339(t0 - 4.0),
        "--to",
        &rfc3339(t1 + 2.0),
        "--history",
        history.to_str().unwrap(),
        "--html",
        page.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let html = std::fs::read_to_string(&page).unwrap();
    // The name inside the embedded JSON cannot end its script.
    let data = html
        .split("<script type=\"application/json\" id=\"tacho-data\">")
        .nth(1)
        .and_then(|s| s.split("</script>").next())
        .unwrap();
    let doc: Value = serde_json::from_str(data).expect("the embedded JSON is whole");
    // The change is listed with its time (the end of the interval it happened in), its old
    // and new value, and marked for the charts.
    let key = format!("block.{name}.read_ahead_kb");
    let row = html
        .split("<tr data-t=\"")
        .skip(1)
        .find(|r| r.contains(&format!("<td>{key}</td>")))
        .unwrap_or_else(|| panic!("{key} is not listed as changed"));
    assert!(
        row.contains(&format!("<td>{before}</td><td>{after}</td>")),
        "{row}"
    );
    let seen: f64 = row.split('"').next().unwrap().parse().unwrap();
    // Read just after its row's sample was taken, a change is stored with the first sample
    // taken after it, or with the one before if it fell while that was being stored.
    assert!(
        seen >= changed - 1.0 && seen <= changed + 2.5,
        "changed at {changed}, listed at {seen}"
    );
    assert!(
        doc["settings"]
            .as_array()
            .unwrap()
            .iter()
            .any(|m| m["t"].as_f64() == Some(seen) && m["text"].as_str().unwrap().contains(&key)),
        "not marked for the charts: {}",
        doc["settings"]
    );
    // Each top process's row has its small timeline, the writer's drawn.
    let writer_row = html
        .split("<tr>")
        .find(|r| {
            r.contains(&format!(
                "<td>{}</td>",
                comm().replace('<', "&lt;").replace('>', "&gt;")
            )) && r.contains("<svg class=\"spark\"")
        })
        .expect("the writer's row with its small timeline");
    assert!(
        !writer_row.contains("data-known=\"0\"") && writer_row.contains("<path d=\"M"),
        "{writer_row}"
    );
    let t = doc["t"].as_array().unwrap();
    let span = (t[0].as_f64().unwrap(), t.last().unwrap().as_f64().unwrap());
    let url = format!("file://{}", page.display());
    for width in [1400, 390] {
        b.resize(width, 900);
        // What the page before asked for is not this page's.
        b.navigate("about:blank");
        b.requests();
        b.navigate(&url);
        b.wait_for(
            "document.querySelectorAll('.chart').length > 0 && \
             document.querySelectorAll('.chart:not([data-drawn])').length === 0",
            Duration::from_secs(20),
        );
        let m = measure(&mut b, &name);
        check_page("the incident report", &m, &name, width, span, (t0, t1));
        // The setting's change is a line on every chart.
        let lines = b.eval(&format!(
            "[...document.querySelectorAll('.chart')].filter(c => [...c.querySelectorAll(\
             '.setting')].some(l => +l.dataset.t === {seen})).length"
        ));
        assert_eq!(
            lines, m["charts"],
            "{width} px: charts with the setting's line"
        );
        // The writer's finding is in the verdict list, with the writer among its culprits.
        let verdict = b.eval(&format!(
            "[...document.querySelectorAll('#verdicts li')].filter(li => \
             li.dataset.subject === {name:?}).map(li => li.textContent)"
        ));
        assert!(
            verdict
                .as_array()
                .unwrap()
                .iter()
                .any(|v| v.as_str().unwrap().contains(comm())),
            "{width} px: no verdict on {name} naming the writer: {verdict}"
        );
        // What a person sees first, and the whole page.
        b.screenshot(&shots.join(format!("incident-{width}-first.png")), 900.0);
        b.screenshot(&shots.join(format!("incident-{width}.png")), 8000.0);
        for r in b.requests() {
            assert_eq!(r, url, "the report requested {r}");
        }
    }
}
