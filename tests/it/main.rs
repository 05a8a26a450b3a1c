//! Every integration test of tacho, through the built binary, in one test binary: a library
//! edit relinks one executable instead of one per file, and `cargo test` runs them all even
//! when one fails. Tests that change kernel-wide settings live in `tests/serial`.

#[path = "../common/mod.rs"]
mod common;

mod bad_files;
mod bad_input;
mod bench_cpu_mem;
mod bench_disk;
// Tests of an optional part build only with its Cargo feature (all are on by default, as CI
// runs them); the README shows every part.
#[cfg(feature = "bpf")]
mod bpf_block;
#[cfg(feature = "bpf")]
mod bpf_files;
mod bpf_iops;
#[cfg(feature = "bpf")]
mod bpf_svctm;
mod check;
mod compare;
mod config_file;
mod contrib_prometheus;
#[cfg(feature = "bpf")]
mod derive_job;
mod drift;
mod engine_errors;
mod experiment;
mod files;
mod fio_job;
mod fleet;
#[cfg(feature = "pg")]
mod fleet_history;
#[cfg(feature = "pg")]
mod group;
mod history;
mod honesty;
mod host_cache;
mod hostile_history;
mod hostile_history_prop;
mod hostile_outputs;
mod hostile_paths;
mod hostile_text;
mod incident_html;
mod load;
mod messages;
mod metrics_server;
#[cfg(feature = "tls")]
mod metrics_tls;
mod net_conns;
mod net_dns;
mod net_links;
mod partial;
mod ping;
#[cfg(all(feature = "profile", feature = "bpf"))]
mod profile_offcpu;
#[cfg(all(feature = "pg", feature = "bpf", feature = "profile", feature = "tls"))]
mod readme;
mod report_disk;
mod safety;
mod saved_kinds;
mod schema_golden;
mod sector;
mod store;
#[cfg(feature = "pg")]
mod store_postgres;
#[cfg(feature = "pg")]
mod store_roles;
mod stored_truth;
mod stored_versions;
mod stress;
mod suites;
mod sustained;
mod sync_flags;
mod time;
mod top;
mod top_blocked;
mod top_hot_disk;
mod top_waits;
