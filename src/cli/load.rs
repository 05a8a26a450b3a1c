//! Options of `tacho load`.

use super::SaveArgs;
use super::kit::parse_positive_duration;
use crate::load::{MAX_RATE, Ramp};
use clap::Args;
use std::time::Duration;

/// `tacho load`'s options.
#[derive(Debug, Args)]
#[command(
    after_help = "A step bends when fewer than 90% of the offered requests a second \
succeed, when p99 passes --p99-limit, or when more than 1% of the requests fail or cannot be \
sent; a ramp stops at the first step that bends. Latency is counted from the moment each \
request was due (a server's stall shows in every request that waited for it).\n\
Examples:\n  tacho load http://127.0.0.1:8080/ --rate 500 --duration 30s\n  \
tacho load http://127.0.0.1:8080/api --ramp 100..5000 --step 10s --p99-limit 200ms\n  \
tacho load http://10.0.0.5/ --method POST --header 'Content-Type: application/json' \
--body '{\"q\":1}'\n  \
tacho load https://127.0.0.1:8443/ --http2 --insecure --rate 1000\n  \
tacho load --urls mix.txt --ramp 100..2000"
)]
pub struct LoadArgs {
    /// The service: http:// or https://HOST[:PORT][/PATH] (the only places requests are
    /// sent); several are taken in turn, each origin over its own connections
    #[arg(value_name = "URL", required_unless_present_any = ["urls", "knee_from"])]
    pub url: Vec<String>,

    /// Read the URLs from FILE, one a line: [WEIGHT] [METHOD] URL (WEIGHT its share of the
    /// requests, 1 by default; METHOD --method by default; # starts a comment)
    #[arg(long, value_name = "FILE", conflicts_with = "url")]
    pub urls: Option<std::path::PathBuf>,

    /// Requests a second, due on a fixed schedule whatever the server does
    #[arg(long, value_name = "RPS", default_value_t = 100, value_parser = clap::value_parser!(u64).range(1..=MAX_RATE), conflicts_with = "ramp")]
    pub rate: u64,

    /// How long to hold --rate
    #[arg(long, value_name = "DUR", default_value = "10s", value_parser = parse_positive_duration, allow_hyphen_values = true, conflicts_with = "ramp")]
    pub duration: Duration,

    /// Raise the rate from FROM to TO requests a second in --steps steps of --step each, and
    /// stop at the first step that bends (the knee)
    #[arg(long, value_name = "FROM..TO", value_parser = Ramp::parse)]
    pub ramp: Option<Ramp>,

    /// How long each step of --ramp lasts
    #[arg(long, value_name = "DUR", default_value = "10s", value_parser = parse_positive_duration, allow_hyphen_values = true, requires = "ramp")]
    pub step: Duration,

    /// Rates in --ramp, evenly spaced from FROM to TO
    #[arg(long, value_name = "N", default_value_t = 10, value_parser = clap::value_parser!(u32).range(2..=1000), requires = "ramp")]
    pub steps: u32,

    /// A step whose p99 latency passes this bends, e.g. 200ms
    #[arg(long, value_name = "DUR", value_parser = parse_positive_duration, allow_hyphen_values = true)]
    pub p99_limit: Option<Duration>,

    /// Keep-alive connections to each origin, each carrying one request at a time over
    /// HTTP/1.1 (--streams over HTTP/2)
    #[arg(long, short = 'c', value_name = "N", default_value_t = 10, value_parser = clap::value_parser!(u32).range(1..=10_000))]
    pub connections: u32,

    /// Requests at once on each HTTP/2 connection (its streams; fewer when the server allows
    /// fewer)
    #[arg(long, value_name = "N", default_value_t = 10, value_parser = clap::value_parser!(u32).range(1..=1000))]
    pub streams: u32,

    /// HTTP method
    #[arg(long, short = 'X', value_name = "METHOD", default_value = "GET")]
    pub method: String,

    /// A request header (repeatable), e.g. 'Accept: application/json'
    #[arg(long, short = 'H', value_name = "'NAME: VALUE'", value_parser = parse_header)]
    pub header: Vec<(String, String)>,

    /// The request body, as given
    #[arg(long, short = 'd', value_name = "TEXT")]
    pub body: Option<String>,

    /// Longest wait for a connection, and for a whole response from the moment it was sent
    #[arg(long, value_name = "DUR", default_value = "2s", value_parser = parse_positive_duration, allow_hyphen_values = true)]
    pub timeout: Duration,

    /// HTTP/2 only: without asking over http:// (prior knowledge), the only protocol offered
    /// over https:// (which otherwise takes HTTP/2 when the server agrees, else HTTP/1.1)
    #[arg(long)]
    pub http2: bool,

    /// https without checking the server's certificate (a test server's self-signed one):
    /// the output says so
    #[arg(long)]
    pub insecure: bool,

    /// Read the server's findings from a remote `tacho top --listen` at the end of every step
    /// (its --interval shorter than --step), e.g. http://10.0.0.5:9101/metrics
    #[arg(long, value_name = "URL")]
    pub watch: Option<String>,

    /// Also write a self-contained HTML page to FILE: the latency-versus-throughput curve,
    /// the knee marked, and the steps
    #[arg(long, value_name = "FILE")]
    pub html: Option<std::path::PathBuf>,

    /// Headroom instead of load: the knee of stored load run RUN against the service's
    /// recorded peak (--peak); nothing is sent
    #[arg(long, value_name = "RUN", value_parser = clap::value_parser!(i64).range(1..), requires = "peak", conflicts_with_all = ["url", "urls", "ramp", "watch", "html"])]
    pub knee_from: Option<i64>,

    /// The service's peak requests a second (from its access log or monitoring: tacho's
    /// history keeps no request rate), for --knee-from
    #[arg(long, value_name = "RPS", value_parser = parse_peak, allow_hyphen_values = true, requires = "knee_from")]
    pub peak: Option<f64>,

    /// Print one JSON document (schema tacho.load.v1) on stdout
    #[arg(long)]
    pub json: bool,

    #[command(flatten)]
    pub save: SaveArgs,
}

/// `Name: value`, split at the first colon, both sides trimmed; the name must not be empty.
fn parse_header(text: &str) -> Result<(String, String), String> {
    match text.split_once(':') {
        Some((name, value)) if !name.trim().is_empty() => {
            Ok((name.trim().to_string(), value.trim().to_string()))
        }
        _ => Err(format!("{text:?} is not a header; give 'Name: value'")),
    }
}

/// A positive number of requests a second.
fn parse_peak(text: &str) -> Result<f64, String> {
    text.trim()
        .parse::<f64>()
        .ok()
        .filter(|v| v.is_finite() && *v > 0.0)
        .ok_or_else(|| format!("{text:?} is not a rate; give requests a second, e.g. 620"))
}
