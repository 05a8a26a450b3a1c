//! A minimal HTTP endpoint for `--listen`: `GET /metrics` answers the latest sample's
//! Prometheus text; anything else is 404. It runs on its own thread and never blocks sampling.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

/// The text served; replaced after every sample.
#[derive(Clone, Default)]
pub struct Latest(Arc<Mutex<String>>);

impl Latest {
    pub fn set(&self, text: String) {
        if let Ok(mut guard) = self.0.lock() {
            *guard = text;
        }
    }

    fn get(&self) -> String {
        self.0.lock().map(|g| g.clone()).unwrap_or_default()
    }
}

/// Binds `addr` (an error names it, e.g. when the port is taken) and serves from a thread.
/// Until the first interval completes, /metrics answers 503 with a reason.
pub fn serve(addr: SocketAddr) -> anyhow::Result<Latest> {
    let server = tiny_http::Server::http(addr).map_err(|e| {
        anyhow::anyhow!("cannot listen on {addr}: {e}; pick a free port with --listen")
    })?;
    let latest = Latest::default();
    let shared = latest.clone();
    std::thread::spawn(move || {
        for request in server.incoming_requests() {
            let body = shared.get();
            let response = if request.url() != "/metrics" {
                tiny_http::Response::from_string("tacho serves /metrics\n").with_status_code(404)
            } else if body.is_empty() {
                tiny_http::Response::from_string(
                    "no sample yet: the first interval is still running\n",
                )
                .with_status_code(503)
            } else {
                let header = tiny_http::Header::from_bytes(
                    &b"Content-Type"[..],
                    &b"text/plain; version=0.0.4; charset=utf-8"[..],
                )
                .expect("static header is valid");
                tiny_http::Response::from_string(body).with_header(header)
            };
            // A client that hung up is its own problem, not the sampler's.
            let _ = request.respond(response);
        }
    });
    Ok(latest)
}
