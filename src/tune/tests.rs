use super::*;
use crate::kernel::fixture::write;

fn tree() -> (tempfile::TempDir, SysRoot) {
    let dir = tempfile::tempdir().unwrap();
    let t = dir.path();
    write(
        t,
        "sys/kernel/mm/transparent_hugepage/enabled",
        "always [madvise] never\n",
    );
    write(
        t,
        "sys/block/vdb/queue/scheduler",
        "[none] mq-deadline kyber\n",
    );
    write(t, "sys/block/vdb/queue/read_ahead_kb", "128\n");
    write(t, "proc/sys/vm/swappiness", "60\n");
    write(t, "proc/sys/vm/dirty_ratio", "0\n");
    write(t, "proc/sys/vm/dirty_bytes", "1073741824\n");
    for cpu in 0..2 {
        write(
            t,
            &format!("sys/devices/system/cpu/cpu{cpu}/cpufreq/scaling_governor"),
            "schedutil\n",
        );
    }
    let root = SysRoot::under(t);
    (dir, root)
}

#[test]
fn names_and_values_are_checked() {
    let c = Change::parse("thp.enabled=never").unwrap();
    assert_eq!(c.setting, Setting::ThpEnabled);
    assert_eq!(c.describe(), "thp.enabled=never");
    assert_eq!(
        Change::parse("block.loop0.scheduler = none")
            .unwrap()
            .setting,
        Setting::Scheduler("loop0".into())
    );
    assert_eq!(Change::parse("vm.swappiness=010").unwrap().value, "10");
    for (bad, says) in [
        ("thp.enabled", "is not SETTING=VALUE"),
        ("thp.enable=never", "unknown setting"),
        ("kernel.core_pattern=|/tmp/x", "unknown setting"),
        ("block.../x.scheduler=none", "unknown setting"),
        ("block.sda.nr_requests=4", "unknown setting"),
        ("thp.enabled=sometimes", "one of always, madvise, never"),
        ("vm.swappiness=201", "from 0 to 200"),
        ("vm.swappiness=-1", "from 0 to 200"),
        ("block.sda.scheduler=cfq", "one of none"),
        ("cpu.governor=../../x", "governor name"),
    ] {
        let e = Change::parse(bad).unwrap_err().to_string();
        assert!(e.contains(says), "{bad}: {e}");
        assert_eq!(e.lines().count(), 1, "{e}");
    }
}

#[test]
fn apply_reads_back_and_restore_puts_the_value_back() {
    let (_dir, root) = tree();
    for (setting, value) in [
        (Setting::ThpEnabled, "never"),
        (Setting::Scheduler("vdb".into()), "kyber"),
        (Setting::ReadAhead("vdb".into()), "4096"),
        (Setting::Sysctl("vm.swappiness"), "10"),
        (Setting::Governor, "performance"),
    ] {
        let saved = setting.read(&root).unwrap();
        setting.apply(&root, value, &saved).unwrap();
        assert_eq!(setting.current(&setting.read(&root).unwrap()), value);
        setting.restore(&root, &saved).unwrap();
        assert_eq!(setting.read(&root).unwrap(), saved, "{setting:?}");
    }
    assert_eq!(
        Setting::Governor.read(&root).unwrap().0.len(),
        2,
        "one part per CPU"
    );
}

#[test]
fn a_ratio_whose_bytes_twin_was_in_use_is_restored_through_the_twin() {
    let (_dir, root) = tree();
    let s = Setting::Sysctl("vm.dirty_ratio");
    let saved = s.read(&root).unwrap();
    assert_eq!(saved.0["vm.dirty_bytes"], "1073741824");
    s.apply(&root, "10", &saved).unwrap();
    // The fake tree does not reset the twin as the kernel does; the restore writes the twin.
    std::fs::write(root.proc.join("sys/vm/dirty_ratio"), "0").unwrap();
    std::fs::write(root.proc.join("sys/vm/dirty_bytes"), "0").unwrap();
    s.restore(&root, &saved).unwrap();
    assert_eq!(s.read(&root).unwrap(), saved);
}

#[test]
fn a_change_that_does_not_take_is_named() {
    let (dir, root) = tree();
    // A file that keeps its own value whatever is written: a directory in its place refuses.
    let path = dir.path().join("sys/block/vdb/queue/read_ahead_kb");
    std::fs::remove_file(&path).unwrap();
    std::fs::create_dir(&path).unwrap();
    let e = Setting::ReadAhead("vdb".into())
        .apply(&root, "64", &Saved(BTreeMap::new()))
        .unwrap_err()
        .to_string();
    assert!(e.contains("read_ahead_kb"), "{e}");
    let absent = Setting::Scheduler("sdz".into()).read(&root).unwrap_err();
    assert!(matches!(absent, TuneError::Absent(..)), "{absent}");
}

#[test]
fn a_forged_saved_state_is_refused_before_anything_is_written() {
    let saved = |pairs: &[(&str, &str)]| {
        Saved(
            pairs
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        )
    };
    assert!(
        Setting::ThpEnabled
            .check_saved(&saved(&[("", "never")]))
            .is_ok()
    );
    for (setting, state) in [
        (Setting::ThpEnabled, saved(&[("", "never\nalways")])),
        (Setting::ThpEnabled, saved(&[("../../x", "never")])),
        (Setting::ThpEnabled, saved(&[])),
        (
            Setting::Sysctl("vm.swappiness"),
            saved(&[("kernel.core_pattern", "1")]),
        ),
        (
            Setting::Sysctl("vm.swappiness"),
            saved(&[("vm.swappiness", "|sh")]),
        ),
        (Setting::Governor, saved(&[("cpu0/../../x", "performance")])),
    ] {
        assert!(
            setting.check_saved(&state).is_err(),
            "{setting:?} {state:?}"
        );
    }
}

proptest::proptest! {
    /// Whatever the text, parsing never panics and a parsed change names a catalogued
    /// setting with a value without control characters or path separators.
    #[test]
    fn parsing_never_panics(text in "\\PC{0,40}") {
        if let Ok(c) = Change::parse(&text) {
            proptest::prop_assert!(!c.value.contains(['/', '\n']));
            proptest::prop_assert!(Setting::parse(&c.setting.name()).is_ok());
        }
    }
}
