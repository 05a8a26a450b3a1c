//! Two network namespaces joined by a veth pair, made by a test and removed on drop, so test
//! traffic never leaves them. Addresses are 10.99.0.1 and 10.99.0.2/24: each pair has its
//! own namespaces, so they conflict with nothing, not even another test's pair.

use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use super::{have_tool, is_root, skip};

static NEXT: AtomicU32 = AtomicU32::new(0);

/// Namespaces `a` and `b`; `a`'s interface is `veth_a` at `addr_a`, `b`'s `veth_b` at `addr_b`.
pub struct NetnsPair {
    pub a: String,
    pub b: String,
    pub veth_a: String,
    pub veth_b: String,
    pub addr_a: String,
    pub addr_b: String,
    children: Vec<Child>,
}

fn ip(args: &[&str]) -> Result<(), String> {
    let o = Command::new("ip")
        .args(args)
        .output()
        .map_err(|e| e.to_string())?;
    if o.status.success() {
        Ok(())
    } else {
        Err(format!(
            "ip {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&o.stderr).trim()
        ))
    }
}

impl NetnsPair {
    /// Returns None (after saying why) without root or `ip`.
    pub fn new(test: &str) -> Option<NetnsPair> {
        if !is_root() {
            skip(&format!("{test}: needs root for network namespaces"));
            return None;
        }
        if !have_tool("ip") {
            skip(&format!("{test}: iproute2 is not installed"));
            return None;
        }
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let tag = format!("t{}x{n}", std::process::id());
        let pair = NetnsPair {
            a: format!("tacho-{tag}a"),
            b: format!("tacho-{tag}b"),
            veth_a: format!("tv{n}a{}", std::process::id() % 100_000),
            veth_b: format!("tv{n}b{}", std::process::id() % 100_000),
            addr_a: "10.99.0.1".into(),
            addr_b: "10.99.0.2".into(),
            children: Vec::new(),
        };
        let made = (|| {
            ip(&["netns", "add", &pair.a])?;
            ip(&["netns", "add", &pair.b])?;
            ip(&[
                "link",
                "add",
                &pair.veth_a,
                "netns",
                &pair.a,
                "type",
                "veth",
                "peer",
                "name",
                &pair.veth_b,
                "netns",
                &pair.b,
            ])?;
            for (ns, dev, addr) in [
                (&pair.a, &pair.veth_a, &pair.addr_a),
                (&pair.b, &pair.veth_b, &pair.addr_b),
            ] {
                let cidr = format!("{addr}/24");
                ip(&["-n", ns, "addr", "add", &cidr, "dev", dev])?;
                ip(&["-n", ns, "link", "set", dev, "up"])?;
                ip(&["-n", ns, "link", "set", "lo", "up"])?;
            }
            Ok::<(), String>(())
        })();
        if let Err(e) = made {
            panic!("{test}: cannot make the namespaces: {e}");
        }
        Some(pair)
    }

    /// A command run inside namespace `ns`.
    pub fn exec(ns: &str, program: &str) -> Command {
        let mut c = Command::new("ip");
        c.args(["netns", "exec", ns, program]);
        c
    }

    /// Starts a command inside `ns` that the pair kills on drop (a server, a load).
    pub fn spawn(&mut self, ns: &str, program: &str, args: &[&str]) {
        let child = Self::exec(ns, program)
            .args(args)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {program}: {e}"));
        self.children.push(child);
    }
}

impl NetnsPair {
    /// Starts `iperf3 -s` on `port` in namespace `b` and waits until a client in `a` gets an
    /// answer (a one-second probe at 1 kbit/s).
    pub fn iperf3_server(&mut self, port: u16) {
        let (b, addr, port) = (self.b.clone(), self.addr_b.clone(), port.to_string());
        self.spawn(&b, "iperf3", &["-s", "-B", &addr, "-p", &port]);
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let probe = Self::exec(&self.a, "iperf3")
                .args(["-c", &addr, "-p", &port, "-t", "1", "-b", "1K"])
                .output()
                .expect("iperf3");
            if probe.status.success() {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "iperf3 server on {port} never answered: {}",
                String::from_utf8_lossy(&probe.stdout)
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Waits until clients in `a` hold an iperf3 control and data connection to each of
    /// `ports` in `b`: a sampler started before a late client connects would find its
    /// connection after its first pass over every process, and tacho makes the next such
    /// pass only seconds later.
    pub fn wait_connected(&self, ports: &[u16]) {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let out = Self::exec(&self.a, "ss")
                .args(["-Htn", "state", "established"])
                .output()
                .expect("ss");
            let text = String::from_utf8_lossy(&out.stdout);
            let to = |port: &u16| {
                let peer = format!("{}:{port}", self.addr_b);
                text.lines()
                    .filter(|l| l.split_whitespace().any(|w| w == peer))
                    .count()
            };
            if ports.iter().all(|p| to(p) >= 2) {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "iperf3 clients to {ports:?} never connected: {text}"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Kills `child` on drop with the pair's other processes.
    pub fn adopt(&mut self, child: Child) {
        self.children.push(child);
    }
}

impl Drop for NetnsPair {
    fn drop(&mut self) {
        for c in &mut self.children {
            let _ = c.kill();
            let _ = c.wait();
        }
        // Deleting a namespace deletes the veth end inside it, and with it the peer.
        let _ = ip(&["netns", "del", &self.a]);
        let _ = ip(&["netns", "del", &self.b]);
    }
}
