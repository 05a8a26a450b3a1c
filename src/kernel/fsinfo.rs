//! What a filesystem does beyond its mount options: ext4's full option set and journal
//! (/proc/fs/ext4, /proc/fs/jbd2), a directory's no-copy-on-write attribute, and whether a
//! periodic TRIM is scheduled (systemd's fstrim.timer or a cron job under the `fs` root).

use std::path::{Path, PathBuf};

use serde::Serialize;

use super::{KernelError, Result, SysRoot, read_optional};

/// An ext4 filesystem as the kernel runs it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Ext4Info {
    /// Every option in force (`/proc/fs/ext4/DEV/options`), defaults included.
    pub options: Vec<String>,
    /// True when a jbd2 journal runs for the device (`/proc/fs/jbd2/DEV-*`).
    pub journal: bool,
}

impl Ext4Info {
    /// `journal`, `ordered` or `writeback`; `None` without a journal. The kernel lists
    /// `data=` only for non-default modes on some versions, so a journal without it is
    /// `ordered`.
    pub fn data_mode(&self) -> Option<String> {
        if !self.journal {
            return None;
        }
        Some(
            self.options
                .iter()
                .find_map(|o| o.strip_prefix("data="))
                .unwrap_or("ordered")
                .to_string(),
        )
    }
}

/// The ext4 filesystem on kernel device `dev` (`vda`, `dm-0`); `Ok(None)` when none is mounted.
pub fn ext4(root: &SysRoot, dev: &str) -> Result<Option<Ext4Info>> {
    if dev.contains('/') {
        return Ok(None);
    }
    let Some(text) = read_optional(&root.proc.join("fs/ext4").join(dev).join("options"))? else {
        return Ok(None);
    };
    let jbd2 = root.proc.join("fs/jbd2");
    let journal = match std::fs::read_dir(&jbd2) {
        Ok(entries) => entries.flatten().any(|e| {
            e.file_name()
                .to_string_lossy()
                .strip_prefix(dev)
                .is_some_and(|rest| rest.starts_with('-'))
        }),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => false,
        Err(source) => return Err(KernelError::Read { path: jbd2, source }),
    };
    Ok(Some(Ext4Info {
        options: text
            .split(['\n', ','])
            .map(str::trim)
            .filter(|o| !o.is_empty())
            .map(str::to_string)
            .collect(),
        journal,
    }))
}

/// Whether `path` carries the no-copy-on-write attribute (`chattr +C`, `FS_NOCOW_FL`), read
/// with the FS_IOC_GETFLAGS ioctl; `Ok(None)` where the filesystem has no such flags.
pub fn nocow(path: &Path) -> Result<Option<bool>> {
    const FS_NOCOW_FL: u32 = 0x0080_0000;
    let file = std::fs::File::open(path).map_err(|source| KernelError::Read {
        path: path.to_path_buf(),
        source,
    })?;
    let Ok(flags) = rustix::fs::ioctl_getflags(&file) else {
        return Ok(None);
    };
    Ok(Some(flags.bits() & FS_NOCOW_FL != 0))
}

/// How freed blocks reach an SSD when nothing mounts with `discard`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct TrimSchedule {
    /// The systemd timer is enabled (linked into timers.target.wants).
    pub timer_enabled: bool,
    /// It is masked (linked to /dev/null), which overrides enabling.
    pub timer_masked: bool,
    /// systemd is the running init (`/run/systemd/system` exists); without it no timer fires.
    pub systemd_running: bool,
    /// A cron job that runs fstrim, if one is installed.
    pub cron_job: Option<PathBuf>,
}

impl TrimSchedule {
    /// True when something will run fstrim periodically.
    pub fn active(&self) -> bool {
        (self.timer_enabled && !self.timer_masked && self.systemd_running)
            || self.cron_job.is_some()
    }
}

/// Looks for fstrim.timer and fstrim cron jobs under the `fs` root (links are not followed:
/// they point at absolute paths of the real system).
pub fn trim_schedule(root: &SysRoot) -> TrimSchedule {
    let exists = |rel: &str| root.fs.join(rel).symlink_metadata().is_ok();
    let masked = std::fs::read_link(root.fs.join("etc/systemd/system/fstrim.timer"))
        .is_ok_and(|target| target == Path::new("/dev/null"));
    TrimSchedule {
        timer_enabled: exists("etc/systemd/system/timers.target.wants/fstrim.timer"),
        timer_masked: masked,
        systemd_running: root.fs.join("run/systemd/system").is_dir(),
        cron_job: [
            "etc/cron.weekly/fstrim",
            "etc/cron.daily/fstrim",
            "etc/cron.d/fstrim",
        ]
        .iter()
        .find(|rel| exists(rel))
        .map(|rel| Path::new("/").join(rel)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernel::fixture::{mkdir, symlink, write};

    #[test]
    fn ext4_options_and_journal() {
        let dir = tempfile::tempdir().unwrap();
        let t = dir.path();
        let root = SysRoot::under(t);
        assert_eq!(ext4(&root, "vda").unwrap(), None);
        // This machine's root: ext4 without a journal.
        write(
            t,
            "proc/fs/ext4/vda/options",
            "rw\nbsddf\ndiscard\nbarrier\n",
        );
        mkdir(t, "proc/fs/jbd2");
        let e = ext4(&root, "vda").unwrap().unwrap();
        assert!(e.options.contains(&"discard".to_string()));
        assert_eq!(e.data_mode(), None);
        mkdir(t, "proc/fs/jbd2/vda-8");
        assert_eq!(
            ext4(&root, "vda").unwrap().unwrap().data_mode().unwrap(),
            "ordered"
        );
        write(t, "proc/fs/ext4/vda/options", "rw\ndata=journal\n");
        assert_eq!(
            ext4(&root, "vda").unwrap().unwrap().data_mode().unwrap(),
            "journal"
        );
        // vda1's journal is not vda's.
        write(t, "proc/fs/ext4/vdb/options", "rw\n");
        mkdir(t, "proc/fs/jbd2/vdb1-8");
        assert!(!ext4(&root, "vdb").unwrap().unwrap().journal);
    }

    #[test]
    fn trim_schedule_from_systemd_and_cron() {
        let dir = tempfile::tempdir().unwrap();
        let t = dir.path();
        let root = SysRoot::under(t);
        assert!(!trim_schedule(&root).active());
        symlink(
            t,
            "etc/systemd/system/timers.target.wants/fstrim.timer",
            "/lib/systemd/system/fstrim.timer",
        );
        let s = trim_schedule(&root);
        assert!(s.timer_enabled && !s.systemd_running && !s.active());
        mkdir(t, "run/systemd/system");
        assert!(trim_schedule(&root).active());
        symlink(t, "etc/systemd/system/fstrim.timer", "/dev/null");
        assert!(!trim_schedule(&root).active());
        write(t, "etc/cron.weekly/fstrim", "#!/bin/sh\n");
        let s = trim_schedule(&root);
        assert!(s.active());
        assert_eq!(s.cron_job.unwrap(), Path::new("/etc/cron.weekly/fstrim"));
    }

    #[test]
    fn nocow_reads_flags_or_says_unknown() {
        let dir = tempfile::tempdir().unwrap();
        // tmpfs and ext4 have no NOCOW flag set; filesystems without flags say unknown.
        assert_ne!(nocow(dir.path()).unwrap(), Some(true));
        assert!(nocow(&dir.path().join("missing")).is_err());
    }
}
