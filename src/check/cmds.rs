//! The exact shell commands of a [`Remedy`]: a fix for now, a way to persist it, and a revert
//! that restores the value read at check time and removes what was persisted. Files tacho
//! tells the admin to create carry `tacho` in their names so they are easy to find and remove.

use super::Remedy;

/// Quotes `s` for a POSIX shell when it is not a plain word.
pub fn sq(s: &str) -> String {
    let plain = !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_./:=+,@%".contains(c));
    if plain {
        s.to_string()
    } else {
        format!("'{}'", s.replace('\'', r"'\''"))
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

/// A sysctl: `sysctl -w` now, a file in /etc/sysctl.d (named `99-` so it is applied after
/// the distribution's own files), and back.
pub fn sysctl(name: &str, new: &str, current: &str) -> Remedy {
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
    let file = format!("/etc/sysctl.d/99-tacho-{file_part}.conf");
    let fix = changes
        .iter()
        .map(|(name, new, _)| format!("sysctl -w {name}={}", sq(new)))
        .collect::<Vec<_>>()
        .join(" && ");
    let lines = changes
        .iter()
        .map(|(name, new, _)| format!("{name} = {new}"))
        .collect::<Vec<_>>()
        .join("\\n");
    let revert = changes
        .iter()
        .map(|(name, _, old)| format!("sysctl -w {name}={}", sq(old)))
        .collect::<Vec<_>>()
        .join(" && ");
    Remedy {
        fix: Some(fix),
        persist: Some(format!("printf {} > {file}", sq(&format!("{lines}\\n")))),
        revert: Some(format!("{revert} && rm -f {file}")),
        manual: false,
    }
}

/// A sysfs file outside block devices (THP): `echo` now, a systemd-tmpfiles `w` line to write
/// it at every boot, and back.
pub fn sysfs(path: &str, name: &str, new: &str, current: &str) -> Remedy {
    let file = format!("/etc/tmpfiles.d/tacho-{}.conf", slug(name));
    Remedy {
        fix: Some(format!("echo {} > {path}", sq(new))),
        persist: Some(format!(
            "echo {} > {file}",
            sq(&format!("w {path} - - - - {new}"))
        )),
        revert: Some(format!("echo {} > {path} && rm -f {file}", sq(current))),
        manual: false,
    }
}

/// A block device queue attribute: `echo` now, a udev rule that sets it whenever the device
/// appears, and back. udev matches the kernel name, which is stable for virtio and NVMe
/// disks but not always for sdX: the rule says so.
pub fn queue_attr(dev: &str, attr: &str, new: &str, current: &str) -> Remedy {
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
        fix: Some(format!("{load}echo {} > {path}", sq(new))),
        persist: Some(format!(
            "echo {} > {rule_file}{persist_module} && udevadm control --reload",
            sq(&rule)
        )),
        revert: Some(format!(
            "echo {} > {path} && rm -f {rule_file}{unload} && udevadm control --reload",
            sq(current)
        )),
        manual: false,
    }
}

/// Appends `add` to GRUB_CMDLINE_LINUX (and removes `remove`, an option the current command
/// line has that would contradict it). Takes effect at the next boot; there is no fix for now.
pub fn kernel_cmdline(add: &str, remove: Option<&str>) -> Remedy {
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

/// One command that edits the kernel command line on Debian/Ubuntu (/etc/default/grub and
/// update-grub) or RHEL/Fedora (grubby).
fn cmdline_edit(add: Option<&str>, remove: Option<&str>) -> String {
    let mut sed = Vec::new();
    let mut grubby = Vec::new();
    if let Some(r) = remove {
        let re = r.replace('.', r"\.");
        sed.push(format!("-e 's/ {re}\\([ \"]\\)/\\1/'"));
        grubby.push(format!("--remove-args={}", sq(r)));
    }
    if let Some(a) = add {
        sed.push(format!(
            "-e 's/^\\(GRUB_CMDLINE_LINUX=\"[^\"]*\\)\"/\\1 {a}\"/'"
        ));
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

/// An awk program that rewrites the options field (4th) of the fstab line whose mount point
/// (2nd) is `mount_point`, leaving every other line byte for byte.
fn fstab_edit(mount_point: &str, add: &str, remove: Option<&str>) -> String {
    format!(
        "cp /etc/fstab /etc/fstab.tacho-bak && awk -v mp={} -v add={} -v del={} \
         '$1 !~ /^#/ && $2 == mp {{ n = split($4, o, \",\"); s = \"\"; \
         for (i = 1; i <= n; i++) if (o[i] != del && o[i] != add) s = s (s == \"\" ? \"\" : \",\") o[i]; \
         if (add != \"\") s = s (s == \"\" ? \"\" : \",\") add; $4 = s }} {{ print }}' \
         /etc/fstab.tacho-bak > /etc/fstab",
        sq(mount_point),
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
