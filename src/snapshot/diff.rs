//! `tacho diff`: flatten two snapshots into `key → value` maps, drop noise, compare, and put
//! the differences known to matter for performance first.
//!
//! Snapshots are read as plain JSON so a snapshot from another tacho version still compares:
//! what one side lacks is simply absent there.

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::{Context, Result, bail};
use serde::Serialize;
use serde_json::Value;

use super::{SCHEMA, Snapshot, explain, noise};
use crate::kernel::SysRoot;

/// One side of a comparison.
#[derive(Debug, Clone)]
pub struct Side {
    /// The file name, or `live`.
    pub label: String,
    /// Hostname recorded in the snapshot (`/host/hostname`); `None` when it has none.
    pub hostname: Option<String>,
    /// Kernel release recorded in the snapshot (`/kernel/release`); `None` when it has none.
    pub kernel: Option<String>,
    /// Every setting of the snapshot, flattened to dotted keys (`sysctl.vm.swappiness`) → value as
    /// text.
    pub values: BTreeMap<String, String>,
}

impl Side {
    /// `live` captures the machine under `root`; anything else is a snapshot file.
    pub fn load(arg: &str, root: &SysRoot) -> Result<Side> {
        let doc = if arg == "live" {
            serde_json::to_value(Snapshot::capture(root))?
        } else {
            read_file(Path::new(arg))?
        };
        Ok(Side::from_value(arg, &doc))
    }

    /// Reads one side out of a parsed snapshot document, labelled `label`.
    pub fn from_value(label: &str, doc: &Value) -> Side {
        let text = |ptr: &str| doc.pointer(ptr).and_then(Value::as_str).map(str::to_string);
        Side {
            label: label.to_string(),
            hostname: text("/host/hostname"),
            kernel: text("/kernel/release"),
            values: flatten(doc),
        }
    }
}

/// The largest snapshot `diff` reads: a real one (every sysctl and kernel option of a large
/// machine) is under 2 MiB.
const SNAPSHOT_LIMIT: u64 = 64 << 20;

fn read_file(path: &Path) -> Result<Value> {
    use std::io::Read;
    let size = std::fs::metadata(path).map(|m| m.len()).unwrap_or(0);
    if size > SNAPSHOT_LIMIT {
        bail!(
            "{} is {}; a tacho snapshot is at most {}: give a file written by `tacho snapshot -o \
             FILE`",
            path.display(),
            crate::units::format_bytes_approx(size),
            crate::units::format_bytes_approx(SNAPSHOT_LIMIT)
        );
    }
    let mut text = String::new();
    std::fs::File::open(path)
        .and_then(|f| f.take(SNAPSHOT_LIMIT + 1).read_to_string(&mut text))
        .with_context(|| {
            format!(
                "cannot read snapshot {}; give a file written by `tacho snapshot -o FILE`, or live",
                path.display()
            )
        })?;
    let doc: Value = serde_json::from_str(&text).with_context(|| {
        format!(
            "{} is not JSON; give a file written by `tacho snapshot -o FILE`",
            path.display()
        )
    })?;
    match doc.get("schema").and_then(Value::as_str) {
        Some(SCHEMA) => match super::shape::check(&doc) {
            Ok(()) => Ok(doc),
            Err(why) => bail!(
                "{} is not a valid tacho snapshot: {why}; give a file written by `tacho snapshot \
                 -o FILE`",
                path.display()
            ),
        },
        other => bail!(
            "{} is not a tacho snapshot (schema {}); make one with `tacho snapshot -o FILE`",
            path.display(),
            other.map_or("missing".to_string(), |s| format!("{s:?}"))
        ),
    }
}

/// The snapshot as `key → value`: `config.CONFIG_HZ`, `sysctl.vm.swappiness`,
/// `cmdline.iommu.strict`, `devices.vda.scheduler`, `mounts./.options`. A kernel option
/// "is not set" (`n`) counts as absent, as the kernel's own diffconfig treats it.
pub fn flatten(doc: &Value) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    let Some(obj) = doc.as_object() else {
        return out;
    };
    for (key, value) in obj {
        match key.as_str() {
            "kernel" => kernel(value, &mut out),
            "devices" => keyed_list(value, "devices", "name", &mut out),
            "mounts" => keyed_list(value, "mounts", "mount_point", &mut out),
            "swaps" => keyed_list(value, "swap", "path", &mut out),
            _ => leaves(key, value, &mut out),
        }
    }
    out.retain(|k, _| !noise::is_noise(k));
    out
}

fn kernel(value: &Value, out: &mut BTreeMap<String, String>) {
    let Some(obj) = value.as_object() else { return };
    for (key, v) in obj {
        match key.as_str() {
            "config" => {
                for (name, val) in v.as_object().into_iter().flatten() {
                    if let Some(s) = val.as_str().filter(|s| *s != "n") {
                        out.insert(format!("config.{name}"), s.to_string());
                    }
                }
            }
            "cmdline" => {
                for (name, val) in cmdline_options(v.as_str().unwrap_or("")) {
                    out.insert(format!("cmdline.{name}"), val);
                }
            }
            "config_source" => {}
            _ => leaves(&format!("kernel.{key}"), v, out),
        }
    }
}

/// Kernel options of a command line (`name` → value, `present` for bare flags), up to `--`.
fn cmdline_options(cmdline: &str) -> BTreeMap<String, String> {
    cmdline
        .split_whitespace()
        .take_while(|w| *w != "--")
        .map(|w| match w.split_once('=') {
            Some((k, v)) => (k.to_string(), v.to_string()),
            None => (w.to_string(), "present".to_string()),
        })
        .collect()
}

/// A list of objects keyed by one of their fields: `devices.vda.scheduler`.
fn keyed_list(value: &Value, prefix: &str, id: &str, out: &mut BTreeMap<String, String>) {
    for item in value.as_array().into_iter().flatten() {
        let Some(name) = item.get(id).and_then(Value::as_str) else {
            continue;
        };
        for (k, v) in item.as_object().into_iter().flatten() {
            if k != id && k != "device" {
                leaves(&format!("{prefix}.{name}.{k}"), v, out);
            }
        }
    }
}

fn leaves(key: &str, value: &Value, out: &mut BTreeMap<String, String>) {
    match value {
        Value::Null => {}
        Value::Object(map) => {
            for (k, v) in map {
                leaves(&format!("{key}.{k}"), v, out);
            }
        }
        Value::Array(items) => {
            let parts: Vec<String> = items
                .iter()
                .map(|i| match i {
                    Value::String(s) => s.clone(),
                    other => other.to_string(),
                })
                .collect();
            out.insert(key.to_string(), parts.join(", "));
        }
        Value::String(s) => {
            out.insert(key.to_string(), s.clone());
        }
        other => {
            out.insert(key.to_string(), other.to_string());
        }
    }
}

/// One setting that differs.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Difference {
    /// Dotted key of the setting (`sysctl.vm.swappiness`, `devices.sda.scheduler`).
    pub key: String,
    /// The value in A; `None` where A does not have the setting.
    pub a: Option<String>,
    /// The value in B; `None` where B does not have the setting.
    pub b: Option<String>,
    /// Known to matter for performance.
    pub relevant: bool,
    /// Why it matters, in one line (relevant ones only).
    pub explanation: Option<String>,
    #[serde(skip)]
    rank: (usize, usize),
}

/// The differences between two flattened snapshots, performance-relevant ones first (in
/// the order of [`explain`]), then the rest by key.
pub fn compare(a: &BTreeMap<String, String>, b: &BTreeMap<String, String>) -> Vec<Difference> {
    let mut keys: Vec<&String> = a.keys().chain(b.keys()).collect();
    keys.sort();
    keys.dedup();
    let mut out: Vec<Difference> = keys
        .into_iter()
        .filter(|k| a.get(*k) != b.get(*k))
        .map(|k| {
            let explained = explain::explain(k);
            Difference {
                key: k.clone(),
                a: a.get(k).cloned(),
                b: b.get(k).cloned(),
                relevant: explained.is_some(),
                explanation: explained.map(|(_, why)| why.to_string()),
                rank: explained.map_or((usize::MAX, 0), |(rank, _)| rank),
            }
        })
        .collect();
    out.sort_by(|x, y| x.rank.cmp(&y.rank).then_with(|| x.key.cmp(&y.key)));
    out
}
