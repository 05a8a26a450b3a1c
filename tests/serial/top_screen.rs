//! `tacho top`'s interactive screen in a real terminal (tmux), at 80×24, 120×30 and 200×50,
//! on a machine with ten idle loop devices and a dd writing to an eleventh: the busiest disks
//! come first and the written one is visible, the idle ones are hidden until `d`, every
//! column header is a whole column name, and the first verdict is shown whole (wrapped, not
//! cut). Every check polls `tmux capture-pane` until the screen shows the condition (60 s
//! limit).

use std::collections::HashSet;
use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::common;
use crate::common::{LoopDev, have_tool, kernel_wide, run, skip, tacho};

/// How long the screen may take to show a condition.
const LIMIT: Duration = Duration::from_secs(60);

/// Every column name the screen's tables can show (iostat -x, pidstat, mpstat, sar -n DEV).
const NAMES: &[&str] = &[
    "Device",
    "r/s",
    "rkB/s",
    "rrqm/s",
    "%rrqm",
    "r_await",
    "rareq-sz",
    "w/s",
    "wkB/s",
    "wrqm/s",
    "%wrqm",
    "w_await",
    "wareq-sz",
    "d/s",
    "dkB/s",
    "drqm/s",
    "%drqm",
    "d_await",
    "dareq-sz",
    "f/s",
    "f_await",
    "aqu-sz",
    "%util",
    "group",
    "PID",
    "COMMAND",
    "%usr",
    "%sys",
    "%CPU",
    "kB_rd/s",
    "kB_wr/s",
    "kB_ccwr/s",
    "IO%",
    "state",
    "CPU",
    "%nice",
    "%iowait",
    "%irq",
    "%soft",
    "%steal",
    "%idle",
    "IFACE",
    "rxkB/s",
    "txkB/s",
    "rxpck/s",
    "txpck/s",
    "err/s",
    "drop/s",
];

/// A private tmux server running one command in a window of a fixed size; killed on drop.
struct Tmux {
    _dir: tempfile::TempDir,
    socket: PathBuf,
}

impl Tmux {
    fn start(width: u16, height: u16, script: &str, arg: &str) -> Tmux {
        let dir = tempfile::tempdir().unwrap();
        let socket = dir.path().join("tmux.sock");
        let t = Tmux { _dir: dir, socket };
        let (w, h) = (width.to_string(), height.to_string());
        t.tmux(&[
            "new-session",
            "-d",
            "-s",
            "top",
            "-x",
            &w,
            "-y",
            &h,
            "sh",
            "-c",
            script,
            arg,
        ]);
        t
    }

    fn tmux(&self, args: &[&str]) -> String {
        // UTF-8 whatever the caller's locale: the screen draws its borders with it.
        let o = Command::new("tmux")
            .env("LC_ALL", "C.UTF-8")
            .arg("-u")
            .arg("-f")
            .arg("/dev/null")
            .arg("-S")
            .arg(&self.socket)
            .args(args)
            .stdin(Stdio::null())
            .output()
            .expect("cannot run tmux");
        assert!(
            o.status.success(),
            "tmux {args:?}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        String::from_utf8_lossy(&o.stdout).into_owned()
    }

    fn screen(&self) -> String {
        self.tmux(&["capture-pane", "-p", "-t", "top"])
    }

    fn press(&self, key: &str) {
        self.tmux(&["send-keys", "-t", "top", key]);
    }

    /// Polls the screen until `check` returns Ok; fails with the last screen and reason.
    fn wait(&self, what: &str, check: impl Fn(&str) -> Result<(), String>) -> String {
        let start = Instant::now();
        loop {
            let screen = self.screen();
            match check(&screen) {
                Ok(()) => return screen,
                Err(why) if start.elapsed() > LIMIT => {
                    panic!("the screen never showed {what}: {why}\n{screen}")
                }
                Err(_) => std::thread::sleep(Duration::from_millis(100)),
            }
        }
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = Command::new("tmux")
            .arg("-S")
            .arg(&self.socket)
            .arg("kill-server")
            .stderr(Stdio::null())
            .status();
    }
}

/// A child in its own process group (a shell loop and its dd); the group is killed on drop.
struct Group(Child);

impl Group {
    fn spawn(mut cmd: Command) -> Group {
        use std::os::unix::process::CommandExt;
        Group(cmd.process_group(0).spawn().expect("cannot start"))
    }
}

impl Drop for Group {
    fn drop(&mut self) {
        // SAFETY: kill has no memory preconditions; the group is the child's own.
        unsafe { libc::kill(-(self.0.id() as i32), libc::SIGKILL) };
        let _ = self.0.wait();
    }
}

/// The words of each panel line (between borders) whose first word names a table's first
/// column: the tables' headers.
fn headers(screen: &str) -> Vec<Vec<&str>> {
    screen
        .lines()
        // Inside panels only: a wrapped verdict line may start with "CPU" too.
        .filter(|l| l.starts_with('│'))
        .flat_map(|l| l.split('│'))
        .map(|panel| panel.split_whitespace().collect::<Vec<_>>())
        .filter(|w| {
            w.first()
                .is_some_and(|f| ["Device", "PID", "CPU", "IFACE"].contains(f))
        })
        .collect()
}

/// The disk panel's rows: (device, %util).
fn disk_rows(screen: &str) -> Vec<(String, Option<f64>)> {
    let mut lines = screen.lines().skip_while(|l| !l.starts_with("│Device"));
    let Some(header) = lines.next() else {
        return Vec::new();
    };
    let words: Vec<&str> = header.split_whitespace().collect();
    let util = words.iter().position(|w| *w == "%util");
    lines
        .take_while(|l| l.starts_with('│'))
        .map(|l| {
            let w: Vec<&str> = l.trim_matches('│').split_whitespace().collect();
            let name = w.first().map_or(String::new(), |n| n.to_string());
            let u = util.and_then(|i| w.get(i)).and_then(|u| u.parse().ok());
            (name, u)
        })
        .collect()
}

/// The first finding as drawn: the first line and its indented continuation lines.
fn first_verdict(screen: &str) -> String {
    let mut lines = screen.lines();
    let mut text = lines.next().unwrap_or_default().trim().to_string();
    let continued = |l: &&str| {
        l.starts_with("  ")
            && !l.trim().is_empty()
            && !(l.trim().starts_with('+') && l.contains(" more finding"))
    };
    for l in lines.take_while(continued) {
        text.push(' ');
        text.push_str(l.trim());
    }
    text
}

/// A verdict with its figures replaced by `#`, so two samples of one condition compare equal.
fn shape(text: &str) -> String {
    let mut out = String::new();
    let mut in_number = false;
    for c in text.chars() {
        if c.is_ascii_digit() || (in_number && c == '.') {
            if !in_number {
                out.push('#');
            }
            in_number = true;
        } else {
            in_number = false;
            out.push(c);
        }
    }
    out.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// Every verdict and finding `tacho top --json` states while it runs, by shape.
fn json_verdicts() -> (Group, Arc<Mutex<HashSet<String>>>) {
    let mut cmd = tacho();
    cmd.args(["top", "--json", "--interval", "500ms"])
        .stdout(Stdio::piped());
    let mut child = Group::spawn(cmd);
    let out = child.0.stdout.take().unwrap();
    let seen = Arc::new(Mutex::new(HashSet::new()));
    let keep = seen.clone();
    std::thread::spawn(move || {
        for line in BufReader::new(out).lines().map_while(Result::ok) {
            let Ok(v) = serde_json::from_str::<serde_json::Value>(&line) else {
                continue;
            };
            let mut seen = keep.lock().unwrap();
            seen.insert(shape(v["verdict"].as_str().unwrap_or_default()));
            for f in v["findings"].as_array().into_iter().flatten() {
                seen.insert(shape(f["message"].as_str().unwrap_or_default()));
            }
        }
    });
    (child, seen)
}

fn busiest_disk_visible_and_headers_whole(width: u16, height: u16) {
    let test = format!("top_screen_{width}x{height}");
    if !have_tool("tmux") {
        skip(&format!("{test}: tmux is not installed"));
        return;
    }
    let mut idle = Vec::new();
    for _ in 0..10 {
        let Some(dev) = LoopDev::new(&test, 1 << 20) else {
            return;
        };
        // One read, as udev's probe makes: a device never used since boot is left out
        // before the screen sees it (as iostat does), and these must be hidden by the screen.
        common::sh(
            "dd",
            &[
                &format!("if={}", dev.path()),
                "of=/dev/null",
                "bs=4k",
                "count=1",
                "iflag=direct",
                "status=none",
            ],
        );
        idle.push(dev);
    }
    let Some(busy) = LoopDev::new(&test, 64 << 20) else {
        return;
    };
    let mut dd = Command::new("sh");
    dd.args([
        "-c",
        "while :; do dd if=/dev/zero of=\"$0\" bs=64k count=1024 oflag=direct status=none; done",
        busy.path(),
    ]);
    let _dd = Group::spawn(dd);
    let (_json, verdicts) = json_verdicts();
    let tmux = Tmux::start(
        width,
        height,
        "\"$0\" top --interval 500ms; echo \"tacho exited $?\"; sleep 600",
        env!("CARGO_BIN_EXE_tacho"),
    );
    let busy_name = busy.name();
    let idle_names: Vec<String> = idle.iter().map(LoopDev::name).collect();

    let screen = tmux.wait("the written loop device, busiest first", |s| {
        let rows = disk_rows(s);
        if !rows.iter().any(|(n, _)| *n == busy_name) {
            return Err(format!("{busy_name} not listed: {rows:?}"));
        }
        if let Some(n) = idle_names
            .iter()
            .find(|n| rows.iter().any(|(r, _)| r == *n))
        {
            return Err(format!("idle {n} listed"));
        }
        let utils: Vec<f64> = rows.iter().filter_map(|r| r.1).collect();
        if utils.windows(2).any(|u| u[0] < u[1]) {
            return Err(format!("not busiest first: {rows:?}"));
        }
        let hidden = s
            .split(" idle loop/ram/zram hidden: d shows")
            .next()
            .and_then(|t| t.rsplit(' ').next())
            .and_then(|n| n.parse::<usize>().ok());
        if hidden < Some(idle_names.len()) {
            return Err(format!("hidden devices not counted: {hidden:?}"));
        }
        // A capture can catch the terminal halfway through drawing a frame (seen in CI with
        // other tests busy): wait for a whole one, with its tables.
        if headers(s).len() < 3 {
            return Err("tables missing".to_owned());
        }
        Ok(())
    });
    assert_eq!(screen.lines().count(), usize::from(height), "{screen}");
    let heads = headers(&screen);
    for word in heads.iter().flatten() {
        assert!(
            NAMES.contains(word),
            "header word {word:?} is not a whole column name:\n{screen}"
        );
    }
    if width >= 200 {
        let disk_header = heads.iter().find(|h| h[0] == "Device").unwrap();
        assert!(
            disk_header.len() >= 20,
            "a wide screen shows more:\n{screen}"
        );
    }

    tmux.wait("the first verdict whole", |s| {
        let drawn = shape(&first_verdict(s));
        let seen = verdicts.lock().unwrap();
        if seen.contains(&drawn) {
            Ok(())
        } else {
            Err(format!("{drawn:?} is none of tacho top --json's {seen:?}"))
        }
    });

    // The verdict names who: the dd writing the busy loop device (as the disk's writer, or
    // among the CPU's consumers when the CPUs are saturated).
    tmux.wait("a verdict naming dd", |s| {
        let verdicts: String = s
            .lines()
            .take_while(|l| !l.starts_with('\u{250c}'))
            .collect::<Vec<_>>()
            .join(" ");
        // One dd at a time, or a shell loop's dd's folded into one culprit (`dd: 8 processes`).
        if verdicts.contains("dd (pid") || verdicts.contains("dd: ") {
            Ok(())
        } else {
            Err(format!("no verdict names dd: {verdicts:?}"))
        }
    });

    tmux.press("d");
    tmux.wait("the idle loop devices after d", |s| {
        let rows = disk_rows(s);
        if !s.contains("d hides idle loop/ram/zram") {
            return Err("no word of d".into());
        }
        // All listed at 200x50; at 80x24 the panel scrolls, and the machine's other idle
        // loop devices (sorted by name) may fill the rows shown before ours.
        let listed = idle_names
            .iter()
            .filter(|n| rows.iter().any(|(r, _)| r == *n))
            .count();
        let idle_shown = rows
            .iter()
            .any(|(r, util)| r.starts_with("loop") && *r != busy_name && *util == Some(0.0));
        let scrolls = s.contains("Disks, busiest first  rows 1-");
        if listed == idle_names.len() || (idle_shown && scrolls) {
            Ok(())
        } else {
            Err(format!("{listed} idle devices listed: {rows:?}"))
        }
    });

    tmux.press("?");
    tmux.wait("the help", |s| {
        [
            "quit (also Esc, Ctrl-C)",
            "show or hide idle loop, ram and zram",
        ]
        .iter()
        .all(|k| s.contains(k))
        .then_some(())
        .ok_or_else(|| "help not drawn".into())
    });
    tmux.press("q");
    tmux.wait("the help closed", |s| {
        (!s.contains("quit (also Esc, Ctrl-C)"))
            .then_some(())
            .ok_or_else(|| "help still open".into())
    });
    tmux.press("q");
    tmux.wait("a clean exit", |s| {
        s.contains("tacho exited 0")
            .then_some(())
            .ok_or_else(|| "still running".into())
    });
}

#[test]
fn at_80x24() {
    let _machine = kernel_wide();
    busiest_disk_visible_and_headers_whole(80, 24);
}

#[test]
fn at_120x30() {
    let _machine = kernel_wide();
    busiest_disk_visible_and_headers_whole(120, 30);
}

#[test]
fn at_200x50() {
    let _machine = kernel_wide();
    busiest_disk_visible_and_headers_whole(200, 50);
}

/// A process naming itself with terminal controls (it could be any local user's) writes to a
/// loop device: the screen draws its name escaped, and the terminal's title is unchanged.
#[test]
fn a_hostile_process_name_reaches_the_terminal_escaped() {
    let _machine = kernel_wide();
    let test = "top_screen_hostile_name";
    if !have_tool("tmux") || !have_tool("python3") {
        skip(&format!("{test}: tmux or python3 is not installed"));
        return;
    }
    let Some(dev) = LoopDev::new(test, 16 << 20) else {
        return;
    };
    // Buffered 64 KiB writes every 2 ms, so it ranks high in the I/O-sorted table; the name
    // is set by the process itself (prctl PR_SET_NAME), as any user can.
    let name = "\u{1b}]0;pwned\u{7}\u{1b}[2J";
    let hex: String = name.bytes().map(|b| format!("{b:02x}")).collect();
    let script = format!(
        "import ctypes, os, sys, time\n\
         ctypes.CDLL(None).prctl(15, bytes.fromhex('{hex}'), 0, 0, 0)\n\
         fd = os.open(sys.argv[1], os.O_WRONLY)\n\
         block = bytes(65536)\n\
         while True:\n\
         \x20   for off in range(0, 16 << 20, 65536):\n\
         \x20       os.pwrite(fd, block, off)\n\
         \x20       time.sleep(0.002)\n\
         \x20   os.fsync(fd)\n"
    );
    let mut writer = Command::new("python3");
    writer
        .args(["-c", &script, dev.path()])
        .stdin(Stdio::null());
    let _writer = Group::spawn(writer);
    let tmux = Tmux::start(
        200,
        50,
        "\"$0\" top --interval 500ms; echo \"tacho exited $?\"; sleep 600",
        env!("CARGO_BIN_EXE_tacho"),
    );
    let title_before = tmux.tmux(&["display-message", "-p", "-t", "top", "#{pane_title}"]);
    tmux.wait("the writer's name escaped", |s| {
        s.contains(r"\e]0;pwned\a\e[2J")
            .then_some(())
            .ok_or_else(|| "name not drawn".into())
    });
    let title = tmux.tmux(&["display-message", "-p", "-t", "top", "#{pane_title}"]);
    assert_eq!(
        title, title_before,
        "the process name set the terminal title"
    );
    assert!(!title.contains("pwned"), "{title}");
}

/// `tacho top --replay` on a terminal: the bottom line says which recorded moment is shown,
/// ← and → step one interval, and q leaves.
#[test]
fn the_replay_screen_says_its_moment_and_steps() {
    let _machine = kernel_wide();
    let dir = tempfile::tempdir().unwrap();
    let history = dir.path().join("history.db");
    let o = run(&[
        "record",
        "--interval",
        "1s",
        "--count",
        "4",
        "--history",
        history.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    // A temporary directory's path: no quote or shell character in it.
    let script = format!(
        "\"$0\" top --replay --history '{}'; echo \"tacho exited $?\"; sleep 600",
        history.display()
    );
    let tmux = Tmux::start(120, 30, &script, env!("CARGO_BIN_EXE_tacho"));
    let at = |n: usize| {
        let want = format!(", {n} of 3");
        move |s: &str| {
            let bottom = s.lines().rfind(|l| !l.trim().is_empty()).unwrap_or("");
            if bottom.contains(" replay ") && bottom.contains(&want) {
                Ok(())
            } else {
                Err(format!("bottom line {bottom:?} lacks {want:?}"))
            }
        }
    };
    tmux.wait("the latest recorded interval", at(3));
    tmux.press("Left");
    tmux.wait("one interval back", at(2));
    tmux.press("Left");
    tmux.press("Left");
    tmux.wait("the first interval, and no further", at(1));
    tmux.press("Right");
    tmux.wait("one interval forward", at(2));
    tmux.press("q");
    tmux.wait("tacho leaving with 0", |s| {
        if s.contains("tacho exited 0") {
            Ok(())
        } else {
            Err("still running".into())
        }
    });
}
