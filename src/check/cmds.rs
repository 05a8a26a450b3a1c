//! The exact shell commands of a [`Remedy`]: a fix for now, a way to persist it, and a revert
//! that restores the value read at check time and removes what was persisted. Files tacho
//! tells the admin to create carry `tacho` in their names so they are easy to find and remove.
//!
//! Values read from the system (mount points, device names, current settings) are quoted for
//! the context they land in: a shell word, an fstab field, a udev rule value, a sed program.
//! A value with a control character (other than a tab) is never written into a command: the
//! remedy becomes a by-hand note naming the value escaped, since a newline or a carriage return
//! would end a comment, split a line of the script or hide part of it when the admin reads it.

use super::Remedy;
use crate::text;
use crate::tune::Setting;

/// Quotes `s` as one POSIX shell word (single quotes, which keep every character literal,
/// newlines included). Plain words stay as they are, `=` included: shell_words quotes it
/// because of assignments, which cannot happen in an argument, and `--args=x` reads better.
pub fn sq(s: &str) -> String {
    let plain = !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_./:=+,@%".contains(c));
    if plain {
        s.to_string()
    } else {
        shell_words::quote(s).into_owned()
    }
}

/// True when `s` can be put into a script line: no control character but the tab, and no
/// bidirectional control (which would make the line read differently from what runs).
fn inert(s: &str) -> bool {
    !s.chars().any(|c| crate::text::needs_escape(c) && c != '\t')
}

/// The remedy when `value` (what it is: `what`) cannot be written into a command safely.
pub fn by_hand(what: &str, value: &str) -> Remedy {
    Remedy {
        fix: Some(format!(
            "# not written: {what} {} holds control characters or bytes that are not UTF-8; \
             act on it by hand",
            text::Escaped(value)
        )),
        persist: None,
        revert: None,
        manual: true,
    }
}

/// The remedy for a mount another user controls (`why`): a script run as root must not
/// change it on their behalf; the admin decides.
pub fn others_mount(mount_point: &str, why: &str) -> Remedy {
    Remedy {
        fix: Some(format!(
            "# not written: {} is another user's mount ({}); change it by hand if it is \
             yours to change",
            text::Escaped(mount_point),
            text::Escaped(why)
        )),
        persist: None,
        revert: None,
        manual: true,
    }
}

/// A file name part from a sysctl or device name (`vm.dirty_ratio` → `vm-dirty_ratio`).
fn slug(s: &str) -> String {
    s.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' {
                c
            } else {
                '-'
            }
        })
        .collect()
}

/// The commands of a setting of the catalogue (`tune`) from `current` to `new`: the same
/// files `tacho experiment` applies and reverts.
pub fn setting(setting: &Setting, new: &str, current: &str) -> Remedy {
    match setting {
        Setting::ThpEnabled => sysfs(&setting.shell_path(), "thp-enabled", new, current),
        Setting::ThpDefrag => sysfs(&setting.shell_path(), "thp-defrag", new, current),
        Setting::Scheduler(dev) => queue_attr(dev, "scheduler", new, current),
        Setting::ReadAhead(dev) => queue_attr(dev, "read_ahead_kb", new, current),
        Setting::Sysctl(name) => sysctl(name, new, current),
        Setting::Governor => all_cpus(&setting.shell_path(), "cpu-governor", new, current),
        Setting::Mount(path) => mount_option(path, new, Some(current)),
        Setting::Lazytime(path) => {
            let word = |v: &str| if v == "on" { "lazytime" } else { "nolazytime" };
            mount_option(path, word(new), Some(word(current)))
        }
    }
}

/// Writes `value` to every CPU's file matching `glob` now, and at every boot through a
/// systemd-tmpfiles `w` line (which accepts globs).
pub fn all_cpus(glob: &str, name: &str, new: &str, current: &str) -> Remedy {
    let file = format!("/etc/tmpfiles.d/tacho-{name}.conf");
    Remedy {
        fix: Some(format!(
            "for f in {glob}; do echo {} > \"$f\"; done",
            sq(new)
        )),
        persist: Some(format!(
            "echo {} > {file}",
            sq(&format!("w {glob} - - - - {new}"))
        )),
        revert: Some(format!(
            "for f in {glob}; do echo {} > \"$f\"; done && rm -f {file}",
            sq(current)
        )),
        manual: false,
    }
}

/// A sysctl: `sysctl -w` now, a file in /etc/sysctl.d (named `99-` so it is applied after
/// the distribution's own files), and back.
pub fn sysctl(name: &str, new: &str, current: &str) -> Remedy {
    if let Some(bad) = [name, new, current].into_iter().find(|v| !inert(v)) {
        return by_hand("the sysctl value", bad);
    }
    let file = format!("/etc/sysctl.d/99-tacho-{}.conf", slug(name));
    Remedy {
        fix: Some(format!("sysctl -w {name}={}", sq(new))),
        persist: Some(format!("echo {} > {file}", sq(&format!("{name} = {new}")))),
        revert: Some(format!("sysctl -w {name}={} && rm -f {file}", sq(current))),
        manual: false,
    }
}

/// Several sysctls changed together (the dirty limits), in one sysctl.d file.
pub fn sysctls(file_part: &str, changes: &[(&str, String, String)]) -> Remedy {
    let values = changes
        .iter()
        .flat_map(|(n, a, b)| [*n, a.as_str(), b.as_str()]);
    if let Some(bad) = values.into_iter().find(|v| !inert(v)) {
        return by_hand("the sysctl value", bad);
    }
    let file = format!("/etc/sysctl.d/99-tacho-{file_part}.conf");
    let fix = changes
        .iter()
        .map(|(name, new, _)| format!("sysctl -w {name}={}", sq(new)))
        .collect::<Vec<_>>()
        .join(" && ");
    let lines = changes
        .iter()
        .map(|(name, new, _)| sq(&format!("{name} = {new}")))
        .collect::<Vec<_>>()
        .join(" ");
    let revert = changes
        .iter()
        .map(|(name, _, old)| format!("sysctl -w {name}={}", sq(old)))
        .collect::<Vec<_>>()
        .join(" && ");
    Remedy {
        fix: Some(fix),
        persist: Some(format!("printf '%s\\n' {lines} > {file}")),
        revert: Some(format!("{revert} && rm -f {file}")),
        manual: false,
    }
}

/// A sysfs file outside block devices (THP): `echo` now, a systemd-tmpfiles `w` line to write
/// it at every boot, and back.
pub fn sysfs(path: &str, name: &str, new: &str, current: &str) -> Remedy {
    if let Some(bad) = [path, new, current].into_iter().find(|v| !inert(v)) {
        return by_hand("the value", bad);
    }
    let file = format!("/etc/tmpfiles.d/tacho-{}.conf", slug(name));
    Remedy {
        fix: Some(format!("echo {} > {}", sq(new), sq(path))),
        persist: Some(format!(
            "echo {} > {file}",
            sq(&format!("w {path} - - - - {new}"))
        )),
        revert: Some(format!(
            "echo {} > {} && rm -f {file}",
            sq(current),
            sq(path)
        )),
        manual: false,
    }
}

/// A block device queue attribute: `echo` now, a udev rule that sets it whenever the device
/// appears, and back. udev matches the kernel name, which is stable for virtio and NVMe
/// disks but not always for sdX: the rule says so.
pub fn queue_attr(dev: &str, attr: &str, new: &str, current: &str) -> Remedy {
    if let Some(bad) = [dev, attr, new, current].into_iter().find(|v| !inert(v)) {
        return by_hand("the device setting", bad);
    }
    // A udev rule value is a double-quoted string: a `"` or `\` in it would end it or change
    // the rule, and a `/` in a device name would leave /sys/block. Kernel names hold none.
    if dev.contains('/') || [dev, attr, new].iter().any(|v| v.contains(['"', '\\'])) {
        return Remedy {
            fix: Some(format!(
                "# not written: {} cannot go into a udev rule; set it by hand",
                sq(&format!("{dev} {attr}={new}"))
            )),
            manual: true,
            ..Remedy::default()
        };
    }
    let path = format!("/sys/block/{dev}/queue/{attr}");
    let rule_file = format!(
        "/etc/udev/rules.d/60-tacho-{}-{}.rules",
        slug(dev),
        slug(attr)
    );
    let rule = format!(
        "ACTION==\"add|change\", SUBSYSTEM==\"block\", KERNEL==\"{dev}\", ATTR{{queue/{attr}}}=\"{new}\""
    );
    let module = match (attr, new) {
        ("scheduler", "kyber") => Some("kyber-iosched"),
        ("scheduler", "bfq") => Some("bfq"),
        ("scheduler", "mq-deadline") => Some("mq-deadline"),
        _ => None,
    };
    let (load, persist_module, unload) = match module {
        Some(m) => (
            format!("modprobe {m} 2>/dev/null; "),
            format!(" && echo {m} > /etc/modules-load.d/tacho-{m}.conf"),
            format!(" && rm -f /etc/modules-load.d/tacho-{m}.conf"),
        ),
        None => Default::default(),
    };
    Remedy {
        fix: Some(format!("{load}echo {} > {}", sq(new), sq(&path))),
        persist: Some(format!(
            "echo {} > {rule_file}{persist_module} && udevadm control --reload",
            sq(&rule)
        )),
        revert: Some(format!(
            "echo {} > {} && rm -f {rule_file}{unload} && udevadm control --reload",
            sq(current),
            sq(&path)
        )),
        manual: false,
    }
}

/// Appends `add` to GRUB_CMDLINE_LINUX (and removes `remove`, an option the current command
/// line has that would contradict it). Takes effect at the next boot; there is no fix for now.
pub fn kernel_cmdline(add: &str, remove: Option<&str>) -> Remedy {
    if let Some(bad) = [Some(add), remove]
        .into_iter()
        .flatten()
        .find(|o| !cmdline_word(o))
    {
        return by_hand_option(bad);
    }
    let persist = cmdline_edit(Some(add), remove);
    let revert = cmdline_edit(remove, Some(add));
    Remedy {
        fix: None,
        persist: Some(format!("{persist}  # takes effect at the next boot")),
        revert: Some(revert),
        manual: false,
    }
}

/// Removes `option` from the kernel command line (next boot); the revert puts it back.
pub fn kernel_cmdline_remove(option: &str) -> Remedy {
    if !cmdline_word(option) {
        return by_hand_option(option);
    }
    Remedy {
        fix: None,
        persist: Some(format!(
            "{}  # takes effect at the next boot",
            cmdline_edit(None, Some(option))
        )),
        revert: Some(cmdline_edit(Some(option), None)),
        manual: false,
    }
}

/// An option that fits in GRUB_CMDLINE_LINUX="…" as one word (quoted values never do here).
fn cmdline_word(option: &str) -> bool {
    inert(option) && !option.is_empty() && !option.contains([' ', '\t', '"', '\'', '\\'])
}

fn by_hand_option(option: &str) -> Remedy {
    Remedy {
        fix: Some(format!(
            "# not written: the kernel option {} cannot be edited safely; edit the boot loader \
             configuration by hand",
            text::Escaped(option)
        )),
        manual: true,
        ..Remedy::default()
    }
}

/// `text` as a literal in a sed basic regular expression (or, with `/` and `&` escaped too,
/// in a replacement).
fn sed_literal(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if "\\.*[]^$/&".contains(c) {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

/// One command that edits the kernel command line on Debian/Ubuntu (/etc/default/grub and
/// update-grub) or RHEL/Fedora (grubby).
fn cmdline_edit(add: Option<&str>, remove: Option<&str>) -> String {
    let mut sed = Vec::new();
    let mut grubby = Vec::new();
    if let Some(r) = remove {
        let program = format!("s/ {}\\([ \"]\\)/\\1/", sed_literal(r));
        sed.push(format!("-e {}", sq(&program)));
        grubby.push(format!("--remove-args={}", sq(r)));
    }
    if let Some(a) = add {
        let program = format!(
            "s/^\\(GRUB_CMDLINE_LINUX=\"[^\"]*\\)\"/\\1 {}\"/",
            sed_literal(a)
        );
        sed.push(format!("-e {}", sq(&program)));
        grubby.push(format!("--args={}", sq(a)));
    }
    format!(
        "if command -v update-grub >/dev/null; then sed -i {} /etc/default/grub && update-grub; \
         else grubby --update-kernel=ALL {}; fi",
        sed.join(" "),
        grubby.join(" ")
    )
}

/// Adds `add` (and drops `remove`) in the options of the /etc/fstab line of `mount_point`,
/// keeping a backup; `mount -o remount` applies it now.
pub fn mount_option(mount_point: &str, add: &str, remove: Option<&str>) -> Remedy {
    if !inert(mount_point) {
        return by_hand("the mount point", mount_point);
    }
    let remount = format!("mount -o remount,{add} {}", sq(mount_point));
    Remedy {
        fix: Some(remount),
        persist: Some(fstab_edit(mount_point, add, remove)),
        revert: Some(match remove {
            Some(r) => format!(
                "{} && mount -o remount,{r} {}",
                fstab_edit(mount_point, r, Some(add)),
                sq(mount_point)
            ),
            None => format!(
                "{}  # then remount or reboot to drop {add}",
                fstab_edit(mount_point, "", Some(add))
            ),
        }),
        manual: false,
    }
}

/// Trims one filesystem now and weekly from its own cron file (where systemd's fstrim.timer
/// cannot run): only the mount that needs it, not every filesystem (`fstrim -a`) once per
/// finding.
pub fn fstrim(mount_point: &str) -> Remedy {
    if !inert(mount_point) {
        return by_hand("the mount point", mount_point);
    }
    let name = match slug(mount_point.trim_matches('/')) {
        s if s.is_empty() => "root".to_string(),
        s => s,
    };
    let cron = format!("/etc/cron.weekly/tacho-fstrim-{name}");
    Remedy {
        fix: Some(format!("fstrim -v {}", sq(mount_point))),
        persist: Some(format!(
            "printf '%s\\n' '#!/bin/sh' {} > {cron} && chmod 755 {cron}",
            sq(&format!("exec fstrim {}", sq(mount_point)))
        )),
        revert: Some(format!("rm -f {cron}")),
        manual: false,
    }
}

/// A mount point as fstab(5) writes it: space, tab, newline and backslash as octal escapes.
fn fstab_field(mount_point: &str) -> String {
    let mut out = String::with_capacity(mount_point.len());
    for c in mount_point.chars() {
        match c {
            ' ' => out.push_str("\\040"),
            '\t' => out.push_str("\\011"),
            '\n' => out.push_str("\\012"),
            '\\' => out.push_str("\\134"),
            c => out.push(c),
        }
    }
    out
}

/// An awk program that rewrites the options field (4th) of the fstab line whose mount point
/// (2nd) is `mount_point`, leaving every other line byte for byte. The values reach awk
/// through its environment: `-v` would interpret their backslashes (`\040` in a mount point).
fn fstab_edit(mount_point: &str, add: &str, remove: Option<&str>) -> String {
    format!(
        "cp /etc/fstab /etc/fstab.tacho-bak && MP={} ADD={} DEL={} awk \
         '$1 !~ /^#/ && $2 == ENVIRON[\"MP\"] {{ add = ENVIRON[\"ADD\"]; del = ENVIRON[\"DEL\"]; \
         n = split($4, o, \",\"); s = \"\"; \
         for (i = 1; i <= n; i++) if (o[i] != del && o[i] != add) s = s (s == \"\" ? \"\" : \",\") o[i]; \
         if (add != \"\") s = s (s == \"\" ? \"\" : \",\") add; $4 = s }} {{ print }}' \
         /etc/fstab.tacho-bak > /etc/fstab",
        sq(&fstab_field(mount_point)),
        sq(add),
        sq(remove.unwrap_or(""))
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::Command;

    #[test]
    fn quoting() {
        assert_eq!(sq("never"), "never");
        assert_eq!(sq("write back"), "'write back'");
        assert_eq!(sq("it's"), r"'it'\''s'");
        assert_eq!(sq(""), "''");
    }

    #[test]
    fn sysctl_commands() {
        let r = sysctl("vm.swappiness", "10", "60");
        assert_eq!(r.fix.unwrap(), "sysctl -w vm.swappiness=10");
        assert_eq!(
            r.persist.unwrap(),
            "echo 'vm.swappiness = 10' > /etc/sysctl.d/99-tacho-vm-swappiness.conf"
        );
        assert_eq!(
            r.revert.unwrap(),
            "sysctl -w vm.swappiness=60 && rm -f /etc/sysctl.d/99-tacho-vm-swappiness.conf"
        );
    }

    #[test]
    fn udev_rule_text() {
        let r = queue_attr("vda", "scheduler", "none", "mq-deadline");
        assert_eq!(r.fix.unwrap(), "echo none > /sys/block/vda/queue/scheduler");
        assert_eq!(
            r.persist.unwrap(),
            "echo 'ACTION==\"add|change\", SUBSYSTEM==\"block\", KERNEL==\"vda\", \
             ATTR{queue/scheduler}=\"none\"' > /etc/udev/rules.d/60-tacho-vda-scheduler.rules \
             && udevadm control --reload"
        );
        let r = queue_attr("sda", "scheduler", "kyber", "none");
        assert!(r.fix.unwrap().starts_with("modprobe kyber-iosched"));
        assert!(
            r.persist
                .unwrap()
                .contains("/etc/modules-load.d/tacho-kyber-iosched.conf")
        );
    }

    /// Runs a generated shell command in a scratch directory with /etc/... paths rewritten
    /// into it, so the sed and awk programs are tested on real files.
    fn run_in(dir: &std::path::Path, cmd: &str) {
        let cmd = cmd.replace("/etc/", &format!("{}/", dir.display()));
        let status = Command::new("sh")
            .arg("-c")
            .arg(cmd)
            .env("PATH", format!("{}:/usr/bin:/bin", dir.display()))
            .status()
            .unwrap();
        assert!(status.success());
    }

    #[test]
    fn fstab_edit_changes_only_the_mount_point_and_reverts() {
        let dir = tempfile::tempdir().unwrap();
        let fstab = "# /etc/fstab\nUUID=1 / ext4 defaults,relatime 0 1\n\
                     UUID=2 /data xfs defaults 0 2\n#UUID=3 / ext4 x 0 0\n";
        std::fs::write(dir.path().join("fstab"), fstab).unwrap();
        let r = mount_option("/", "noatime", Some("relatime"));
        run_in(dir.path(), &r.persist.unwrap());
        let after = std::fs::read_to_string(dir.path().join("fstab")).unwrap();
        assert_eq!(
            after,
            "# /etc/fstab\nUUID=1 / ext4 defaults,noatime 0 1\n\
             UUID=2 /data xfs defaults 0 2\n#UUID=3 / ext4 x 0 0\n"
        );
        let revert = r.revert.unwrap();
        let file_part = revert.split(" && mount -o").next().unwrap();
        run_in(dir.path(), file_part);
        let back = std::fs::read_to_string(dir.path().join("fstab")).unwrap();
        assert_eq!(back, fstab);
    }

    #[test]
    fn fstab_edit_finds_a_mount_point_with_fstab_escapes() {
        let dir = tempfile::tempdir().unwrap();
        let fstab =
            "UUID=1 /mnt/my\\040disk\\134x ext4 defaults 0 2\nUUID=2 /mnt/my ext4 defaults 0 2\n";
        std::fs::write(dir.path().join("fstab"), fstab).unwrap();
        let r = mount_option("/mnt/my disk\\x", "noatime", None);
        run_in(dir.path(), &r.persist.unwrap());
        let after = std::fs::read_to_string(dir.path().join("fstab")).unwrap();
        assert_eq!(
            after,
            "UUID=1 /mnt/my\\040disk\\134x ext4 defaults,noatime 0 2\n\
             UUID=2 /mnt/my ext4 defaults 0 2\n"
        );
    }

    #[test]
    fn values_with_control_characters_are_never_written_as_commands() {
        let hostile = "/mnt/x\ntouch /tmp/PWNED #";
        let r = mount_option(hostile, "noatime", Some("strictatime"));
        assert!(r.manual && r.persist.is_none() && r.revert.is_none());
        let note = r.fix.unwrap();
        assert_eq!(note.lines().count(), 1, "{note}");
        assert!(
            note.starts_with("# ") && note.contains(r"x\ntouch"),
            "{note}"
        );
        for r in [
            sysctl("vm.swappiness", "10", "60\rx"),
            sysfs("/sys/x", "x", "1", "\u{1b}[2J"),
            queue_attr("vda\n", "scheduler", "none", "mq-deadline"),
            queue_attr("vda\"", "scheduler", "none", "mq-deadline"),
            kernel_cmdline("iommu.strict=0", Some("x'y")),
        ] {
            assert!(r.manual, "{r:?}");
            assert!(r.fix.unwrap().starts_with("# not written"));
        }
    }

    proptest::proptest! {
        /// Whatever the mount point, the remount command is one shell word after the options
        /// and no line of any command can run something else.
        #[test]
        fn mount_points_stay_one_word(mp in "\\PC{0,12}") {
            let r = mount_option(&mp, "noatime", None);
            if let Some(fix) = r.fix.filter(|_| !r.manual) {
                let words = shell_words::split(&fix).unwrap();
                proptest::prop_assert_eq!(&words[3], &mp);
                proptest::prop_assert_eq!(words.len(), 4);
            }
        }
    }

    #[test]
    fn grub_edit_appends_and_reverts() {
        let dir = tempfile::tempdir().unwrap();
        let grub = "GRUB_DEFAULT=0\nGRUB_CMDLINE_LINUX=\"quiet iommu.strict=1\"\n";
        std::fs::write(dir.path().join("default-grub"), grub).unwrap();
        // A stand-in update-grub so the Debian branch runs.
        let fake = dir.path().join("update-grub");
        std::fs::write(&fake, "#!/bin/sh\nexit 0\n").unwrap();
        std::fs::set_permissions(&fake, std::os::unix::fs::PermissionsExt::from_mode(0o755))
            .unwrap();
        let r = kernel_cmdline("iommu.strict=0", Some("iommu.strict=1"));
        let fix = |c: String| c.replace("/etc/default/grub", "/etc/default-grub");
        run_in(dir.path(), &fix(r.persist.unwrap()));
        let after = std::fs::read_to_string(dir.path().join("default-grub")).unwrap();
        assert_eq!(
            after,
            "GRUB_DEFAULT=0\nGRUB_CMDLINE_LINUX=\"quiet iommu.strict=0\"\n"
        );
        run_in(dir.path(), &fix(r.revert.unwrap()));
        let back = std::fs::read_to_string(dir.path().join("default-grub")).unwrap();
        assert_eq!(back, grub);
    }
}
