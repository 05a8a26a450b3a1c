//! Headless Chromium driven over the DevTools protocol on a pipe (`--remote-debugging-pipe`:
//! commands in on descriptor 3, answers and events out on 4, each JSON message ended by a NUL):
//! a page at an exact viewport width (a headless window is never narrower than 500 px), the
//! JavaScript dialogs it opened, every request it made, and a screenshot.

use std::io::{Read, Write};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::Stdio;
use std::sync::mpsc::{Receiver, channel};
use std::time::{Duration, Instant};

use base64::Engine as _;
use serde_json::{Value, json};

use super::{Killed, chromium_command};

/// How long one command may take to answer.
const ANSWER: Duration = Duration::from_secs(30);

/// One page in its own headless Chromium.
pub struct Browser {
    _child: Killed,
    to: std::fs::File,
    from: Receiver<Value>,
    next: u64,
    session: String,
    /// Every event seen so far.
    events: Vec<Value>,
    _profile: tempfile::TempDir,
}

fn pipe() -> (OwnedFd, OwnedFd) {
    let mut fds = [0; 2];
    // SAFETY: fds is two ints, as pipe2 needs.
    assert_eq!(unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) }, 0);
    // SAFETY: both descriptors were just made and are owned by nothing else.
    unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) }
}

impl Browser {
    /// A blank page `width` × `height` CSS pixels, logging requests and dialogs.
    pub fn open(chromium: &str, width: u32, height: u32) -> Browser {
        let profile = tempfile::tempdir().unwrap();
        let (commands_r, commands_w) = pipe();
        let (answers_r, answers_w) = pipe();
        let (cr, aw) = (commands_r.as_raw_fd(), answers_w.as_raw_fd());
        let mut cmd = chromium_command(chromium, profile.path());
        cmd.arg("--remote-debugging-pipe")
            .arg("about:blank")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        // SAFETY: only async-signal-safe calls (fcntl, dup2) between fork and exec.
        unsafe {
            cmd.pre_exec(move || {
                // Above 4 first, so that putting one on 3 cannot close the other.
                let c = libc::fcntl(cr, libc::F_DUPFD, 10);
                let a = libc::fcntl(aw, libc::F_DUPFD, 10);
                if c < 0 || a < 0 || libc::dup2(c, 3) < 0 || libc::dup2(a, 4) < 0 {
                    return Err(std::io::Error::last_os_error());
                }
                libc::close(c);
                libc::close(a);
                Ok(())
            });
        }
        let child = Killed(cmd.spawn().expect("cannot start chromium"));
        drop((commands_r, answers_w));
        let (tx, rx) = channel();
        let mut answers = std::fs::File::from(answers_r);
        std::thread::spawn(move || {
            let mut buf = Vec::new();
            let mut chunk = [0u8; 65536];
            while let Ok(n) = answers.read(&mut chunk) {
                if n == 0 {
                    break;
                }
                buf.extend_from_slice(&chunk[..n]);
                while let Some(end) = buf.iter().position(|&b| b == 0) {
                    let message: Vec<u8> = buf.drain(..=end).collect();
                    if let Ok(v) = serde_json::from_slice(&message[..end])
                        && tx.send(v).is_err()
                    {
                        return;
                    }
                }
            }
        });
        let mut b = Browser {
            _child: child,
            to: std::fs::File::from(commands_w),
            from: rx,
            next: 0,
            session: String::new(),
            events: Vec::new(),
            _profile: profile,
        };
        let target = b.send("Target.createTarget", json!({"url": "about:blank"}));
        let target = target["targetId"].as_str().unwrap().to_string();
        let attached = b.send(
            "Target.attachToTarget",
            json!({"targetId": target, "flatten": true}),
        );
        b.session = attached["sessionId"].as_str().unwrap().to_string();
        b.send("Page.enable", json!({}));
        b.send("Network.enable", json!({}));
        b.resize(width, height);
        b
    }

    /// Makes the viewport `width` × `height` CSS pixels (a page opened next is laid out so).
    pub fn resize(&mut self, width: u32, height: u32) {
        self.send(
            "Emulation.setDeviceMetricsOverride",
            json!({"width": width, "height": height, "deviceScaleFactor": 1, "mobile": false}),
        );
    }

    /// Sends `method` (to the page once attached) and returns its result.
    fn send(&mut self, method: &str, params: Value) -> Value {
        self.next += 1;
        let id = self.next;
        let mut message = json!({"id": id, "method": method, "params": params});
        if !self.session.is_empty() {
            message["sessionId"] = json!(self.session);
        }
        let mut bytes = serde_json::to_vec(&message).unwrap();
        bytes.push(0);
        self.to.write_all(&bytes).expect("chromium closed its pipe");
        let deadline = Instant::now() + ANSWER;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let v = self
                .from
                .recv_timeout(left)
                .unwrap_or_else(|_| panic!("chromium did not answer {method}"));
            if v["id"].as_u64() == Some(id) {
                assert!(v["error"].is_null(), "{method}: {}", v["error"]);
                return v["result"].clone();
            }
            if v["method"] == "Page.javascriptDialogOpening" {
                panic!("the page opened a dialog: {}", v["params"]);
            }
            self.events.push(v);
        }
    }

    /// Opens `url`.
    pub fn navigate(&mut self, url: &str) {
        let r = self.send("Page.navigate", json!({"url": url}));
        assert!(r["errorText"].is_null(), "{url}: {}", r["errorText"]);
    }

    /// The value of the JavaScript expression `expr` in the page.
    pub fn eval(&mut self, expr: &str) -> Value {
        let r = self.send(
            "Runtime.evaluate",
            json!({"expression": expr, "returnByValue": true, "awaitPromise": true}),
        );
        assert!(
            r["exceptionDetails"].is_null(),
            "{expr}: {}",
            r["exceptionDetails"]
        );
        r["result"]["value"].clone()
    }

    /// Waits (at most `limit`) until `expr` is true in the page.
    pub fn wait_for(&mut self, expr: &str, limit: Duration) {
        let deadline = Instant::now() + limit;
        while self.eval(expr) != json!(true) {
            assert!(Instant::now() < deadline, "never true in the page: {expr}");
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Every URL requested since the last call.
    pub fn requests(&mut self) -> Vec<String> {
        std::mem::take(&mut self.events)
            .iter()
            .filter(|e| e["method"] == "Network.requestWillBeSent")
            .map(|e| {
                e["params"]["request"]["url"]
                    .as_str()
                    .unwrap_or("")
                    .to_string()
            })
            .collect()
    }

    /// The page from its top, at most `height` px of it, as a PNG at `path`.
    pub fn screenshot(&mut self, path: &Path, height: f64) {
        let m = self.send("Page.getLayoutMetrics", json!({}));
        let (w, h) = (
            m["cssContentSize"]["width"].as_f64().unwrap(),
            m["cssContentSize"]["height"].as_f64().unwrap().min(height),
        );
        let shot = self.send(
            "Page.captureScreenshot",
            json!({"format": "png", "captureBeyondViewport": true,
                   "clip": {"x": 0, "y": 0, "width": w, "height": h, "scale": 1}}),
        );
        let png = base64::engine::general_purpose::STANDARD
            .decode(shot["data"].as_str().unwrap())
            .unwrap();
        std::fs::write(path, png).unwrap();
    }
}
