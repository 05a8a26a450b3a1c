use super::*;
use proptest::prelude::*;
use serde_json::Value;

fn fixture(name: &str) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/smart")
        .join(name);
    std::fs::read_to_string(&path).unwrap()
}

fn parsed(name: &str) -> DriveHealth {
    parse_smartctl_json(&fixture(name)).unwrap()
}

#[test]
fn sata_ssd_capture_gives_lba_counters_in_bytes() {
    let h = parsed("sata-ssd.json");
    assert_eq!(h.kind, Some(DriveKind::AtaSsd));
    assert_eq!(h.model.as_deref(), Some("SAMSUNG MZ7LH480HAHQ-00005"));
    // Attributes 241/242 count 512-byte logical blocks on this drive.
    assert_eq!(h.bytes_written, Some(1_375_952_821 * 512));
    assert_eq!(h.bytes_read, Some(45_092_229_071 * 512));
    assert_eq!(h.power_on_hours, Some(7753));
    assert_eq!(h.reallocated_sectors, Some(0));
    assert_eq!(h.pending_sectors, Some(0));
    assert_eq!(h.media_errors, Some(0));
    assert_eq!(
        h.percentage_used, None,
        "-a without devstat has no wear figure"
    );
    assert_eq!(h.smart_passed, Some(true));
}

#[test]
fn nvme_capture_gives_data_units_in_bytes_and_wear() {
    let h = parsed("nvme.json");
    assert_eq!(h.kind, Some(DriveKind::Nvme));
    assert_eq!(h.bytes_written, Some(1_969_459 * 512_000));
    assert_eq!(h.bytes_read, Some(2_025_034 * 512_000));
    assert_eq!(h.percentage_used, Some(0));
    assert_eq!(h.power_on_hours, Some(3149));
    assert_eq!(h.media_errors, Some(0));
    assert_eq!(h.reallocated_sectors, None);
}

#[test]
fn hdd_capture_is_a_spinning_disk_with_its_counters() {
    let h = parsed("hdd.json");
    assert_eq!(h.kind, Some(DriveKind::AtaHdd));
    assert_eq!(h.bytes_written, Some(385_165_652_077 * 512));
    assert_eq!(h.bytes_read, Some(150_964_211_289 * 512));
    assert_eq!(h.power_on_hours, Some(13114));
    assert_eq!(h.pending_sectors, Some(0));
}

#[test]
fn packed_raw_values_are_not_counts() {
    let raw = |value, string: &str| Raw {
        value: Some(value),
        string: Some(string.into()),
    };
    assert_eq!(
        plain_count(&raw(141_735_231_514, "26 (Min/Max 20/33)")),
        None
    );
    assert_eq!(plain_count(&raw(8, "8")), Some(8));
}

#[test]
fn device_statistics_give_wear_and_standard_counters() {
    let text = r#"{"device":{"protocol":"ATA"},"rotation_rate":0,"logical_block_size":4096,
        "ata_device_statistics":{"pages":[{"number":1,"table":[
            {"name":"Logical Sectors Written","value":10},{"name":"Logical Sectors Read","value":3}]},
            {"number":7,"table":[{"name":"Percentage Used Endurance Indicator","value":13}]}]}}"#;
    let h = parse_smartctl_json(text).unwrap();
    assert_eq!(h.bytes_written, Some(40960));
    assert_eq!(h.bytes_read, Some(12288));
    assert_eq!(h.percentage_used, Some(13));
}

#[test]
fn smartctl_errors_become_notes_and_nothing_is_invented() {
    let text = r#"{"smartctl":{"exit_status":2,"messages":[{"string":"/dev/vda: Unable to detect device type","severity":"error"}]}}"#;
    let h = parse_smartctl_json(text).unwrap();
    assert_eq!(h.bytes_written, None);
    assert_eq!(h.power_on_hours, None);
    assert_eq!(
        h.notes,
        ["smartctl: /dev/vda: Unable to detect device type"]
    );
}

#[test]
fn not_json_is_an_error() {
    assert!(matches!(
        parse_smartctl_json("smartctl 7.3"),
        Err(HealthError::Json(_))
    ));
}

/// Every leaf of a JSON document, by JSON pointer.
fn leaves(value: &Value, at: String, out: &mut Vec<String>) {
    match value {
        Value::Object(map) => map
            .iter()
            .for_each(|(k, v)| leaves(v, format!("{at}/{k}"), out)),
        Value::Array(items) => items
            .iter()
            .enumerate()
            .for_each(|(i, v)| leaves(v, format!("{at}/{i}"), out)),
        _ => out.push(at),
    }
}

fn any_leaf() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<u64>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        any::<f64>().prop_map(Value::from),
        ".{0,12}".prop_map(Value::from),
        Just(Value::Array(vec![])),
        Just(Value::Object(Default::default())),
    ]
}

proptest! {
    #[test]
    fn arbitrary_text_never_panics(text in ".{0,400}") {
        let _ = parse_smartctl_json(&text);
    }

    #[test]
    fn captures_with_one_field_changed_never_panic(
        file in prop::sample::select(vec!["sata-ssd.json", "nvme.json", "hdd.json"]),
        pick in any::<prop::sample::Index>(),
        replacement in any_leaf(),
    ) {
        let mut doc: Value = serde_json::from_str(&fixture(file)).unwrap();
        let mut all = Vec::new();
        leaves(&doc, String::new(), &mut all);
        let pointer = pick.get(&all).clone();
        *doc.pointer_mut(&pointer).unwrap() = replacement;
        let _ = parse_smartctl_json(&doc.to_string());
    }

    #[test]
    fn captures_with_bytes_changed_never_panic(
        file in prop::sample::select(vec!["sata-ssd.json", "nvme.json", "hdd.json"]),
        edits in prop::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..8),
    ) {
        let mut bytes = fixture(file).into_bytes();
        for (at, byte) in edits {
            let i = at.index(bytes.len());
            bytes[i] = byte;
        }
        let _ = parse_smartctl_json(&String::from_utf8_lossy(&bytes));
    }
}

#[test]
fn runner_passes_the_json_options_and_device_and_returns_the_output() {
    // echo stands in for smartctl: it prints the arguments it was given.
    let out = run_smartctl(
        Path::new("/bin/echo"),
        Path::new("/dev/sdq"),
        Duration::from_secs(30),
    );
    assert_eq!(out.unwrap(), "-j -a -l devstat /dev/sdq\n");
}

#[test]
fn runner_kills_a_smartctl_that_does_not_finish() {
    // A drive that hangs keeps smartctl from exiting; sleep stands in for it.
    let mut hung = Command::new("/bin/sleep");
    hung.arg("600");
    let e = output_within(hung, Duration::from_millis(300)).unwrap_err();
    assert!(matches!(e, RunError::Timeout(_)), "{e}");
    assert!(e.to_string().contains("no answer within"), "{e}");
}

#[test]
fn runner_reports_a_program_that_cannot_start() {
    let e = run_smartctl(
        Path::new("/nonexistent/smartctl"),
        Path::new("/dev/sdq"),
        Duration::from_secs(5),
    )
    .unwrap_err()
    .to_string();
    assert!(e.starts_with("/nonexistent/smartctl: cannot run it"), "{e}");
}

#[test]
fn a_virtio_disk_capture_has_no_figures_only_smartctls_reason() {
    let h = parsed("virtio-vda.json");
    assert_eq!(h.bytes_written, None);
    assert_eq!(h.power_on_hours, None);
    assert_eq!(h.kind, Some(DriveKind::Other));
    assert_eq!(
        h.notes,
        ["smartctl: /dev/vda: Unable to detect device type"]
    );
}
