//! Filesystems: access-time updates, online discard vs a periodic fstrim, the ext4 journal
//! mode, and copy-on-write filesystems under database files.

use std::collections::BTreeSet;

use super::facts::{DISK_FILESYSTEMS, Facts};
use super::{Evidence, Finding, Group, Options, Remedy, Severity, cmds};
use crate::kernel::mounts::Mount;

pub fn rules(facts: &Facts, _options: Options, out: &mut Vec<Finding>) {
    // One judgement per filesystem: bind mounts of the same device repeat its options.
    let mut seen = BTreeSet::new();
    for m in &facts.mounts {
        if !DISK_FILESYSTEMS.contains(&m.fs_type.as_str())
            || !facts.mount_devices.contains_key(&(m.major, m.minor))
            || !seen.insert((m.major, m.minor))
        {
            continue;
        }
        let first = out.len();
        out.push(atime(m));
        if let Some(f) = discard(facts, m) {
            out.push(f);
        }
        if let Some(f) = ext4_journal(facts, m) {
            out.push(f);
        }
        if let Some(why) = facts.others_mounts.get(&m.mount_point) {
            for f in &mut out[first..] {
                if f.remedy.fix.is_some() || f.remedy.persist.is_some() {
                    f.remedy = cmds::others_mount(&mount_point(m), why);
                }
            }
        }
    }
    for d in &facts.db_dirs {
        if let Some(f) = copy_on_write(d) {
            out.push(f);
        }
    }
}

fn mount_point(m: &Mount) -> String {
    m.mount_point.to_string_lossy().into_owned()
}

/// The remedy `make` builds for the mount point, or a by-hand note when its bytes are not
/// UTF-8: a command naming the U+FFFD form would name another path.
fn for_mount_point(m: &Mount, make: impl FnOnce(&str) -> Remedy) -> Remedy {
    match m.mount_point.to_str() {
        Some(mp) => make(mp),
        None => cmds::by_hand("the mount point", &crate::text::path(&m.mount_point)),
    }
}

fn has_option(m: &Mount, name: &str) -> bool {
    m.options.split(',').any(|o| o == name)
}

fn options_evidence(m: &Mount) -> Evidence {
    Evidence::new(
        "/proc/self/mountinfo",
        format!(
            "{} {} on {}: {}",
            m.fs_type,
            m.source.as_deref().unwrap_or("?"),
            mount_point(m),
            m.options
        ),
    )
}

fn atime(m: &Mount) -> Finding {
    let mp = mount_point(m);
    // The kernel prints the mount's atime mode as `noatime` or `relatime` in mountinfo and
    // prints nothing for strictatime (show_mnt_opts in fs/proc_namespace.c): neither of the
    // two means every read updates the access time.
    let (severity, title) = if has_option(m, "noatime") {
        (Severity::Ok, "noatime: reads never write".to_string())
    } else if !has_option(m, "relatime") {
        (
            Severity::Warn,
            "strictatime: every read of a file writes its access time".to_string(),
        )
    } else {
        (
            Severity::Ok,
            "relatime: access time written at most once a day per file (noatime saves those \
             writes too)"
                .to_string(),
        )
    };
    Finding {
        id: "atime",
        group: Group::Filesystems,
        subject: Some(mp.clone()),
        severity,
        title,
        evidence: vec![options_evidence(m)],
        why: "With strictatime each read becomes a metadata write (and a journal commit); \
              relatime, the kernel default, limits that, noatime removes it. Few programs \
              need atime (mutt, tmpwatch-style cleaners)."
            .to_string(),
        reference: "mount(8), FILESYSTEM-INDEPENDENT MOUNT OPTIONS (atime, relatime, noatime)"
            .to_string(),
        remedy: if severity == Severity::Ok {
            Remedy::default()
        } else {
            for_mount_point(m, |mp| {
                cmds::mount_option(mp, "noatime", Some("strictatime"))
            })
        },
    }
}

fn discard(facts: &Facts, m: &Mount) -> Option<Finding> {
    let hw = facts.mount_hardware.get(&(m.major, m.minor))?;
    let max = hw.discard_max_bytes?;
    if max == 0 {
        return None; // the device takes no discards (HDDs, most RAID controllers)
    }
    let mp = mount_point(m);
    let trim = &facts.trim;
    let online = m
        .options
        .split(',')
        .find(|o| *o == "discard" || o.starts_with("discard="));
    let mut evidence = vec![
        options_evidence(m),
        Evidence::new("queue/discard_max_bytes of the device", max.to_string()),
        Evidence::new(
            "/etc/systemd/system/timers.target.wants/fstrim.timer",
            format!(
                "{}{}{}",
                if trim.timer_enabled {
                    "enabled"
                } else {
                    "not enabled"
                },
                if trim.timer_masked { ", masked" } else { "" },
                if trim.systemd_running {
                    ""
                } else {
                    "; systemd is not running (/run/systemd/system absent)"
                }
            ),
        ),
    ];
    if let Some(cron) = &trim.cron_job {
        evidence.push(Evidence::new(cron.to_string_lossy(), "cron job present"));
    }
    let (severity, title, remedy) = match (online, trim.active()) {
        (Some("discard=async"), _) => (
            Severity::Ok,
            "discard=async: freed blocks are trimmed in the background".to_string(),
            Remedy::default(),
        ),
        (Some(_), true) => (
            Severity::Info,
            "online discard and a periodic fstrim both run; one is enough".to_string(),
            Remedy::default(),
        ),
        (Some(_), false) => (
            Severity::Info,
            "online discard: every delete sends a TRIM right away".to_string(),
            Remedy::default(),
        ),
        (None, true) => (
            Severity::Ok,
            "periodic fstrim tells the device which blocks are free".to_string(),
            Remedy::default(),
        ),
        (None, false) => (
            Severity::Warn,
            "no discard and no periodic fstrim: the device is never told which blocks are free"
                .to_string(),
            if trim.systemd_running {
                fstrim_timer()
            } else {
                for_mount_point(m, cmds::fstrim)
            },
        ),
    };
    Some(Finding {
        id: "discard",
        group: Group::Filesystems,
        subject: Some(mp),
        severity,
        title,
        evidence,
        why: "An SSD (or a thin-provisioned virtual disk) that is never told which blocks are \
              free keeps copying stale data during garbage collection, and writes slow down as \
              it fills. Synchronous online discard adds latency to deletes on many drives; a \
              weekly fstrim does the same work in one batch."
            .to_string(),
        reference: "fstrim(8) and its weekly fstrim.timer; ext4(5) and xfs(5) on discard; kernel \
                    Documentation/admin-guide/ext4.rst (discard)"
            .to_string(),
        remedy,
    })
}

/// The timer trims every filesystem that needs it, so several findings share this one remedy
/// (the script writes it once).
fn fstrim_timer() -> Remedy {
    Remedy {
        fix: Some("systemctl enable --now fstrim.timer".to_string()),
        persist: Some("# systemctl enable already persists the timer".to_string()),
        revert: Some("systemctl disable --now fstrim.timer".to_string()),
        manual: false,
    }
}

fn ext4_journal(facts: &Facts, m: &Mount) -> Option<Finding> {
    if m.fs_type != "ext4" {
        return None;
    }
    let dev = facts.mount_devices.get(&(m.major, m.minor))?;
    let info = facts.ext4.get(&dev.name)?;
    let mp = mount_point(m);
    let mode = info.data_mode();
    let (severity, title, why) = match mode.as_deref() {
        None => (
            Severity::Info,
            "no journal: metadata writes are cheaper, a crash needs a full fsck".to_string(),
            "Without a journal ext4 writes less, but after a crash or power loss the \
             filesystem must be checked in full and recent metadata changes can be lost.",
        ),
        Some("journal") => (
            Severity::Warn,
            "data=journal: every data block is written twice".to_string(),
            "data=journal writes file data to the journal and then in place, halving write \
             bandwidth; ordered (the default) journals only metadata and still never \
             exposes stale data.",
        ),
        Some("writeback") => (
            Severity::Info,
            "data=writeback: after a crash files may contain stale blocks".to_string(),
            "writeback journals metadata without ordering data writes before it: faster for \
             some workloads, but a crash can leave old data inside recently written files.",
        ),
        Some(other) => (
            Severity::Ok,
            format!("data={other} with a journal"),
            "ordered journals metadata after the data it points to: the default balance.",
        ),
    };
    let evidence = vec![
        Evidence::new(
            format!("/proc/fs/ext4/{}/options", dev.name),
            info.options.join(","),
        ),
        Evidence::new(
            format!("/proc/fs/jbd2/{}-*", dev.name),
            if info.journal {
                "journal running"
            } else {
                "no journal"
            },
        ),
    ];
    let remedy = if severity >= Severity::Warn {
        // ext4 refuses to change the data mode on remount: edit fstab, then remount offline.
        let edit = for_mount_point(m, |mp| {
            cmds::mount_option(mp, "data=ordered", Some("data=journal"))
        });
        let persist = edit.persist.clone();
        let revert = cmds::mount_option(&mp, "data=journal", Some("data=ordered")).persist;
        if persist.is_none() {
            edit // a mount point that cannot be written into a command: the by-hand note
        } else {
            Remedy {
                fix: None,
                persist: persist
                    .map(|p| format!("{p}  # then unmount and mount {mp} again (or reboot)")),
                revert: revert.map(|r| format!("{r}  # then unmount and mount {mp} again")),
                manual: true,
            }
        }
    } else {
        Remedy::default()
    };
    Some(Finding {
        id: "ext4_journal",
        group: Group::Filesystems,
        subject: Some(mp),
        severity,
        title,
        evidence,
        why: why.to_string(),
        reference: "kernel docs, admin-guide/ext4.rst (data= modes); ext4(5)".to_string(),
        remedy,
    })
}

fn copy_on_write(d: &super::facts::DbDir) -> Option<Finding> {
    let m = d.mount.as_ref()?;
    let path = d.path.to_string_lossy().into_owned();
    let nodatacow = has_option(m, "nodatacow");
    let mut evidence = vec![options_evidence(m)];
    if let Some(flag) = d.nocow {
        evidence.push(Evidence::new(
            format!("lsattr -d {path}"),
            if flag {
                "C (no copy-on-write)"
            } else {
                "no C attribute"
            },
        ));
    }
    let (severity, title) = match m.fs_type.as_str() {
        "btrfs" | "bcachefs" if nodatacow || d.nocow == Some(true) => (
            Severity::Ok,
            format!("{}, copy-on-write off for these files", m.fs_type),
        ),
        "btrfs" | "bcachefs" => (
            Severity::Warn,
            format!("database files on {} with copy-on-write", m.fs_type),
        ),
        "zfs" => (
            Severity::Info,
            "database files on ZFS: match recordsize to the database page size".to_string(),
        ),
        other => (Severity::Ok, format!("{other} overwrites in place")),
    };
    let remedy = if severity == Severity::Warn {
        let cow = format!("{path}.cow");
        Remedy {
            fix: Some(format!(
                "# stop the database first; needs free space for a full copy\n\
                 mv {p} {c} && mkdir {p} && chattr +C {p} && \
                 cp -a --reflink=never {c}/. {p}/ && chown --reference={c} {p} && \
                 chmod --reference={c} {p}  # start the database, check it, then rm -rf {c}",
                p = cmds::sq(&path),
                c = cmds::sq(&cow)
            )),
            persist: Some(
                "# the attribute stays on the directory; new files inherit it".to_string(),
            ),
            revert: Some(format!(
                "chattr -C {}  # affects new files only",
                cmds::sq(&path)
            )),
            manual: true,
        }
    } else {
        Remedy::default()
    };
    Some(Finding {
        id: "cow_database",
        group: Group::Filesystems,
        subject: Some(path),
        severity,
        title,
        evidence,
        why: "Databases overwrite pages in place; on a copy-on-write filesystem each overwrite \
              allocates new blocks, fragmenting the files and multiplying writes (a few bytes \
              cost megabytes on btrfs in one measured case)."
            .to_string(),
        reference: "btrfs(5) (nodatacow); chattr(1) (+C, no copy on write)".to_string(),
        remedy,
    })
}
