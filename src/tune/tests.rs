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

#[test]
fn a_mounts_atime_mode_is_named_read_and_checked() {
    let c = Change::parse("mount:/srv/a=b=noatime").unwrap();
    assert_eq!(c.setting, Setting::Mount("/srv/a=b".into()));
    assert_eq!(c.describe(), "mount:/srv/a=b=noatime");
    assert_eq!(Setting::parse("mount:/").unwrap().name(), "mount:/");
    for bad in [
        "mount:data",
        "mount:/data/",
        "mount:/a/../b",
        "mount:/a//b",
        "mount:",
    ] {
        let e = Setting::parse(bad).unwrap_err().to_string();
        assert!(e.contains("names no mount point"), "{bad}: {e}");
    }
    let e = Change::parse("mount:/data=lazytime")
        .unwrap_err()
        .to_string();
    assert!(e.contains("noatime, relatime, strictatime"), "{e}");

    let dir = tempfile::tempdir().unwrap();
    write(
        dir.path(),
        "proc/self/mountinfo",
        "22 1 254:0 / / rw,relatime - ext4 /dev/vda rw\n\
         30 22 7:0 / /srv/a\\040b rw,nosuid,noatime - ext4 /dev/loop0 rw\n\
         31 22 7:1 / /srv/c rw,nodiratime - ext4 /dev/loop1 rw\n\
         32 31 7:2 / /srv/c rw,noexec,relatime - ext4 /dev/loop2 rw\n",
    );
    let root = SysRoot::under(dir.path());
    let read = |p: &str| {
        Setting::Mount(p.into())
            .read(&root)
            .map(|s| s.0[""].clone())
    };
    assert_eq!(read("/").unwrap(), "relatime");
    assert_eq!(read("/srv/a b").unwrap(), "noatime");
    // The last mount at a point is the one seen.
    assert_eq!(read("/srv/c").unwrap(), "relatime");
    let e = read("/srv").unwrap_err().to_string();
    assert!(e.contains("mount:/srv does not exist"), "{e}");
}

#[test]
fn a_remount_keeps_the_mounts_other_flags() {
    let f = remount_flags("rw,nosuid,nodev,noexec,nodiratime,relatime", "noatime");
    assert_eq!(
        f,
        MountFlags::BIND
            | MountFlags::NOSUID
            | MountFlags::NODEV
            | MountFlags::NOEXEC
            | MountFlags::NODIRATIME
            | MountFlags::NOATIME
    );
    assert_eq!(
        remount_flags("ro,noatime", "strictatime"),
        MountFlags::BIND | MountFlags::RDONLY | MountFlags::STRICTATIME
    );
    assert_eq!(atime_mode("rw,nosuid"), "strictatime");
}

#[test]
fn a_filesystems_lazytime_is_named_read_from_its_superblock_options_and_checked() {
    let c = Change::parse("lazytime:/srv/a=b=on").unwrap();
    assert_eq!(c.setting, Setting::Lazytime("/srv/a=b".into()));
    assert_eq!(c.describe(), "lazytime:/srv/a=b=on");
    let e = Change::parse("lazytime:/data=yes").unwrap_err().to_string();
    assert!(e.contains("one of on, off"), "{e}");
    let e = Setting::parse("lazytime:data").unwrap_err().to_string();
    assert!(e.contains("lazytime:data names no mount point"), "{e}");
    assert!(e.contains("e.g. lazytime:/data=on"), "{e}");

    let dir = tempfile::tempdir().unwrap();
    write(
        dir.path(),
        "proc/self/mountinfo",
        "22 1 254:0 / / rw,relatime - ext4 /dev/vda rw\n\
         30 22 7:0 / /srv/a rw,noatime - ext4 /dev/loop0 rw,lazytime\n\
         31 22 7:1 / /srv/b rw,relatime - xfs /dev/loop1 rw,attr2,inode64\n",
    );
    let root = SysRoot::under(dir.path());
    let read = |p: &str| {
        Setting::Lazytime(p.into())
            .read(&root)
            .map(|s| s.0[""].clone())
    };
    assert_eq!(read("/srv/a").unwrap(), "on");
    assert_eq!(read("/srv/b").unwrap(), "off");
    let e = read("/srv").unwrap_err().to_string();
    assert!(e.contains("lazytime:/srv does not exist"), "{e}");
    // `check`'s commands for it: the remount and the fstab option, and back.
    let r = crate::check::cmds::setting(&Setting::Lazytime("/srv/a".into()), "off", "on");
    assert_eq!(r.fix.as_deref(), Some("mount -o remount,nolazytime /srv/a"));
    let revert = r.revert.unwrap();
    assert!(
        revert.ends_with("mount -o remount,lazytime /srv/a"),
        "{revert}"
    );
}
