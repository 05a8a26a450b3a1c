//! `tacho snapshot` and `tacho diff` through the binary: two fixture snapshots that differ in
//! CONFIG_IOMMU_DEFAULT_DMA_STRICT (see tests/fixtures/snapshot/README.md), a live snapshot
//! compared with the machine, and bad input.

use crate::common::*;
use std::path::PathBuf;

fn fixture(name: &str) -> String {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/snapshot")
        .join(name)
        .to_string_lossy()
        .into_owned()
}

#[test]
fn iommu_strict_difference_is_first_and_explained() {
    let _kernel_wide = crate::common::kernel_wide();
    let (a, b) = (fixture("a.json"), fixture("b.json"));
    let o = run(&["diff", &a, &b]);
    assert_eq!(
        o.status.code(),
        Some(1),
        "differences exit 1: {}",
        stderr(&o)
    );
    let text = stdout(&o);
    let mut lines = text.lines();
    assert_eq!(
        lines.next().unwrap(),
        "6 differences, 4 performance-relevant; first: config.CONFIG_IOMMU_DEFAULT_DMA_STRICT not set vs y"
    );
    let relevant = text.split("\nPerformance-relevant\n").nth(1).unwrap();
    let mut rel = relevant.lines();
    assert_eq!(
        rel.next().unwrap(),
        "  config.CONFIG_IOMMU_DEFAULT_DMA_STRICT: not set -> y"
    );
    assert!(
        rel.next()
            .unwrap()
            .contains("strict flushes the IOTLB on every DMA unmap")
    );
    // The noise both files carry (boot_id, taken_at, host name) is not listed.
    assert!(
        !text.contains("boot_id") && !text.contains("taken_at"),
        "{text}"
    );
    assert!(text.contains("sysctl.vm.dirty_ratio: 20 -> 40"));
    assert!(text.contains("devices.vda.scheduler: mq-deadline -> none"));
    assert!(text.contains("\nOther differences\n  config.CONFIG_MODULE_SIG_FORCE: not set -> y"));

    let o = run(&["diff", "--json", &a, &b]);
    assert_eq!(o.status.code(), Some(1));
    let v = parse_json(&o);
    assert_eq!(v["schema"], "tacho.diff.v1");
    assert_eq!(v["a"]["hostname"], "debian-a");
    assert_eq!(v["b"]["hostname"], "talos-b");
    let first = &v["differences"][0];
    assert_eq!(first["key"], "config.CONFIG_IOMMU_DEFAULT_DMA_STRICT");
    assert_eq!(first["a"], serde_json::Value::Null);
    assert_eq!(first["b"], "y");
    assert_eq!(first["relevant"], true);
    assert_eq!(v["differences_relevant"], 4);
}

#[test]
fn a_snapshot_equals_the_machine_it_was_taken_on() {
    let _kernel_wide = crate::common::kernel_wide();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("now.json");
    let o = run(&["snapshot", "-o", file.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(stderr(&o).starts_with("wrote "));
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
    assert_eq!(v["schema"], "tacho.snapshot.v1");
    assert!(v["sysctl"].as_object().unwrap().len() > 100);
    assert!(v["kernel"]["release"].is_string());
    let o = run(&["diff", file.to_str().unwrap(), "live"]);
    assert_eq!(
        o.status.code(),
        Some(0),
        "an unchanged machine must show no differences:\n{}",
        stdout(&o)
    );
    // stdout without -o is the same document.
    let o = run(&["snapshot"]);
    assert_eq!(parse_json(&o)["schema"], "tacho.snapshot.v1");
}

#[test]
fn bad_input() {
    let _kernel_wide = crate::common::kernel_wide();
    let dir = tempfile::tempdir().unwrap();
    let existing = dir.path().join("taken.json");
    std::fs::write(&existing, "keep me").unwrap();
    let line = assert_error(&run(&["snapshot", "-o", existing.to_str().unwrap()]));
    assert!(line.contains("taken.json"), "{line}");
    assert_eq!(std::fs::read_to_string(&existing).unwrap(), "keep me");

    let missing = dir.path().join("missing.json");
    let line = assert_error(&run(&["diff", missing.to_str().unwrap(), "live"]));
    assert!(
        line.contains("missing.json") && line.contains("tacho snapshot"),
        "{line}"
    );
    let line = assert_error(&run(&["diff", existing.to_str().unwrap(), "live"]));
    assert!(line.contains("not JSON"), "{line}");
    let other = dir.path().join("bench.json");
    std::fs::write(&other, r#"{"schema": "tacho.bench.v1"}"#).unwrap();
    let line = assert_error(&run(&["diff", other.to_str().unwrap(), "live"]));
    assert!(line.contains("not a tacho snapshot"), "{line}");
    assert_error(&run(&["diff", "live", "live"]));
    assert_error(&run(&["diff", "live"]));
    assert_eq!(entries(dir.path()), ["bench.json", "taken.json"]);
}

/// A count agrees with its noun: "1 difference", not "1 differences".
#[test]
fn one_difference_is_counted_in_the_singular() {
    let _kernel_wide = crate::common::kernel_wide();
    let dir = tempfile::tempdir().unwrap();
    let a = fixture("a.json");
    let mut doc: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&a).unwrap()).unwrap();
    let sysctl = doc["sysctl"].as_object_mut().unwrap();
    let key = sysctl.keys().next().unwrap().clone();
    sysctl.insert(key.clone(), "tacho-test-value".into());
    let b = dir.path().join("b.json");
    std::fs::write(&b, doc.to_string()).unwrap();
    let o = run(&["diff", &a, b.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    let first = stdout(&o).lines().next().unwrap().to_string();
    assert!(first.starts_with("1 difference,"), "{first}");
}
