//! The catalogue of kernel settings tacho can change, one entry per kind: its name on the
//! command line, the values it takes, the file(s) it lives in, how to read it, apply it, read it
//! back (to see that it took) and restore what was read. `check` takes the files and shell
//! commands of its fixes from here; `experiment` applies and reverts through it.
//!
//! Mount options that can be changed on a mounted filesystem are applied without touching the
//! others: the atime mode, a flag of the mount itself, with a bind remount (`mount(2)` with
//! `MS_REMOUNT | MS_BIND`, keeping the mount's other flags as /proc/self/mountinfo lists them);
//! lazytime, a flag of the filesystem (every mount of it sees it), by reconfiguring that one
//! flag of the superblock (`fspick` + `fsconfig`), since a classic remount would need the
//! filesystem's whole option string. Both are read back from mountinfo.
//!
//! This is the only module that writes to /proc or /sys. It writes only what a [`Change`]
//! (parsed and checked here) or a [`Saved`] state (re-checked here value by value) holds, so
//! whatever asks it to write (a command line, a journal read back after a crash) can only set
//! a listed setting to a value of the kind that setting takes.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use rustix::mount::MountFlags;

use crate::kernel::{self, SysRoot, mounts, sysctl, tunables};

/// `thp.enabled` values, as the kernel offers them.
const THP_ENABLED: &[&str] = &["always", "madvise", "never"];
/// `thp.defrag` values.
const THP_DEFRAG: &[&str] = &["always", "defer", "defer+madvise", "madvise", "never"];
/// The multi-queue I/O schedulers (kyber and bfq may need their module loaded; writing the
/// name loads it where the kernel can).
const SCHEDULERS: &[&str] = &["none", "mq-deadline", "kyber", "bfq"];
/// A mount's atime mode, the mount option the catalogue changes (remountable, per mount).
const ATIME: &[&str] = &["noatime", "relatime", "strictatime"];
/// Prefix of a mount setting's name: `mount:/data`.
const MOUNT_PREFIX: &str = "mount:";
/// Prefix of a lazytime setting's name: `lazytime:/data`.
const LAZYTIME_PREFIX: &str = "lazytime:";
/// A filesystem's lazytime flag.
const ON_OFF: &[&str] = &["on", "off"];
/// Largest read-ahead accepted, in KiB (1 GiB).
const MAX_READ_AHEAD_KB: u64 = 1 << 20;

/// A sysctl the catalogue holds: its name, the largest value accepted, and the sysctl the
/// kernel resets when this one is written (a `_ratio` and its `_bytes`), which a revert must
/// restore instead when it was the one in use.
struct SysctlSpec {
    name: &'static str,
    max: u64,
    twin: Option<&'static str>,
}

const SYSCTLS: &[SysctlSpec] = &[
    SysctlSpec {
        name: "vm.swappiness",
        max: 200,
        twin: None,
    },
    SysctlSpec {
        name: "vm.dirty_ratio",
        max: 100,
        twin: Some("vm.dirty_bytes"),
    },
    SysctlSpec {
        name: "vm.dirty_background_ratio",
        max: 100,
        twin: Some("vm.dirty_background_bytes"),
    },
    SysctlSpec {
        name: "vm.dirty_bytes",
        max: u64::MAX >> 1,
        twin: Some("vm.dirty_ratio"),
    },
    SysctlSpec {
        name: "vm.dirty_background_bytes",
        max: u64::MAX >> 1,
        twin: Some("vm.dirty_background_ratio"),
    },
    SysctlSpec {
        name: "vm.dirty_expire_centisecs",
        max: i32::MAX as u64,
        twin: None,
    },
    SysctlSpec {
        name: "vm.dirty_writeback_centisecs",
        max: i32::MAX as u64,
        twin: None,
    },
    SysctlSpec {
        name: "vm.vfs_cache_pressure",
        max: i32::MAX as u64,
        twin: None,
    },
    SysctlSpec {
        name: "vm.zone_reclaim_mode",
        max: 15,
        twin: None,
    },
    SysctlSpec {
        name: "vm.min_free_kbytes",
        max: i32::MAX as u64,
        twin: None,
    },
    SysctlSpec {
        name: "kernel.numa_balancing",
        max: 3,
        twin: None,
    },
];

/// The sysctls of the catalogue, by name (`vm.swappiness`, …).
pub fn sysctl_names() -> impl Iterator<Item = &'static str> {
    SYSCTLS.iter().map(|s| s.name)
}

/// One setting of the catalogue.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Setting {
    /// `thp.enabled`: /sys/kernel/mm/transparent_hugepage/enabled.
    ThpEnabled,
    /// `thp.defrag`: /sys/kernel/mm/transparent_hugepage/defrag.
    ThpDefrag,
    /// `block.DEV.scheduler`: the device's I/O scheduler.
    Scheduler(String),
    /// `block.DEV.read_ahead_kb`: the device's read-ahead.
    ReadAhead(String),
    /// A listed sysctl (`vm.swappiness`, `vm.dirty_ratio`, …).
    Sysctl(&'static str),
    /// `cpu.governor`: every CPU's cpufreq scaling governor.
    Governor,
    /// `mount:/MOUNTPOINT`: the atime mode of the mount there (`noatime`, `relatime`,
    /// `strictatime`).
    Mount(String),
    /// `lazytime:/MOUNTPOINT`: whether the filesystem mounted there keeps timestamp updates in
    /// memory (`on`, `off`); the filesystem's flag, so every mount of it changes.
    Lazytime(String),
}

/// Why a setting could not be named, read, applied or restored; each message names the
/// setting or file and, for bad input, the fix.
#[derive(Debug, thiserror::Error)]
pub enum TuneError {
    /// Not `SETTING=VALUE`.
    #[error("{0:?} is not SETTING=VALUE; e.g. thp.enabled=never or vm.swappiness=10")]
    NotAssignment(String),
    /// The name is not in the catalogue.
    #[error(
        "unknown setting {0:?}; settings: thp.enabled, thp.defrag, block.DEV.scheduler, \
         block.DEV.read_ahead_kb, cpu.governor, mount:/MOUNTPOINT, lazytime:/MOUNTPOINT, \
         {sysctls}",
        sysctls = SYSCTLS.iter().map(|s| s.name).collect::<Vec<_>>().join(", ")
    )]
    Unknown(String),
    /// The value is not one this setting takes.
    #[error("{setting}={value:?} is not a value it takes; give {expected}")]
    BadValue {
        /// The setting's name.
        setting: String,
        /// The value given.
        value: String,
        /// What it takes.
        expected: String,
    },
    /// A mount setting's mount point is not an absolute, normalized path.
    #[error(
        "{prefix}{} names no mount point: give an absolute path without `.`, `..` or a \
         trailing slash, e.g. {prefix}/data={example}",
        crate::text::Escaped(path)
    )]
    BadMountPoint {
        /// `mount:` or `lazytime:`.
        prefix: &'static str,
        /// What was given after it.
        path: String,
        /// A value the setting takes.
        example: &'static str,
    },
    /// The device or setting does not exist on this machine.
    #[error("{0} does not exist on this machine ({1} is missing)")]
    Absent(String, String),
    /// A file could not be read.
    #[error(transparent)]
    Read(#[from] kernel::KernelError),
    /// The kernel refused a write.
    #[error("the kernel refused {value:?} for {path}: {source}")]
    Refused {
        /// The file written.
        path: String,
        /// The value.
        value: String,
        /// The error the write returned.
        source: std::io::Error,
    },
    /// The value read back is not the one written: the change did not take effect.
    #[error(
        "{setting}: wrote {wanted:?} but {path} reads {found:?}: the change did not take effect"
    )]
    DidNotTake {
        /// The setting's name.
        setting: String,
        /// The file read back.
        path: String,
        /// The value written.
        wanted: String,
        /// The value read.
        found: String,
    },
}

/// A setting and the value to give it, checked against the catalogue.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Change {
    /// The setting.
    pub setting: Setting,
    /// The value, as the kernel's file takes it.
    pub value: String,
}

impl Change {
    /// Parses `SETTING=VALUE` (names as in [`Setting::name`]).
    pub fn parse(text: &str) -> Result<Change, TuneError> {
        // A mount point may hold `=`; no value does.
        let (name, value) = if [MOUNT_PREFIX, LAZYTIME_PREFIX]
            .iter()
            .any(|p| text.trim_start().starts_with(p))
        {
            text.rsplit_once('=')
        } else {
            text.split_once('=')
        }
        .ok_or_else(|| TuneError::NotAssignment(text.to_string()))?;
        let setting = Setting::parse(name.trim())?;
        let value = setting.check_value(value.trim())?;
        Ok(Change { setting, value })
    }

    /// `thp.enabled=never`.
    pub fn describe(&self) -> String {
        format!("{}={}", self.setting.name(), self.value)
    }
}

/// The value(s) of a setting as read, by part: the setting's own file, the twin sysctl a
/// write resets, or each CPU's governor. What a journal records (values, never commands).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Saved(pub BTreeMap<String, String>);

/// A mount point as a setting names it: absolute, normalized (no `.`, `..`, empty component or
/// trailing slash), no control character, at most 4096 bytes.
fn plain_mount_point(path: &str) -> bool {
    path.starts_with('/')
        && path.len() <= 4096
        && !path.chars().any(crate::text::needs_escape)
        && (path == "/"
            || path[1..]
                .split('/')
                .all(|c| !c.is_empty() && c != "." && c != ".."))
}

/// A device name as the kernel gives it: no path separator, no dot first, nothing but
/// letters, digits, `-`, `_` and `.`.
fn plain_device(dev: &str) -> bool {
    !dev.is_empty()
        && dev.len() <= 64
        && !dev.starts_with('.')
        && dev
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
}

impl Setting {
    /// The setting named `name` on the command line or in a journal.
    pub fn parse(name: &str) -> Result<Setting, TuneError> {
        let unknown = || TuneError::Unknown(name.to_string());
        Ok(match name {
            "thp.enabled" => Setting::ThpEnabled,
            "thp.defrag" => Setting::ThpDefrag,
            "cpu.governor" => Setting::Governor,
            _ => {
                if let Some(path) = name.strip_prefix(MOUNT_PREFIX) {
                    if !plain_mount_point(path) {
                        return Err(TuneError::BadMountPoint {
                            prefix: MOUNT_PREFIX,
                            path: path.to_string(),
                            example: "noatime",
                        });
                    }
                    Setting::Mount(path.to_string())
                } else if let Some(path) = name.strip_prefix(LAZYTIME_PREFIX) {
                    if !plain_mount_point(path) {
                        return Err(TuneError::BadMountPoint {
                            prefix: LAZYTIME_PREFIX,
                            path: path.to_string(),
                            example: "on",
                        });
                    }
                    Setting::Lazytime(path.to_string())
                } else if let Some(rest) = name.strip_prefix("block.") {
                    let (dev, attr) = rest.rsplit_once('.').ok_or_else(unknown)?;
                    if !plain_device(dev) {
                        return Err(unknown());
                    }
                    match attr {
                        "scheduler" => Setting::Scheduler(dev.to_string()),
                        "read_ahead_kb" => Setting::ReadAhead(dev.to_string()),
                        _ => return Err(unknown()),
                    }
                } else {
                    let spec = SYSCTLS
                        .iter()
                        .find(|s| s.name == name)
                        .ok_or_else(unknown)?;
                    Setting::Sysctl(spec.name)
                }
            }
        })
    }

    /// The name on the command line: `thp.enabled`, `block.sda.scheduler`, `vm.swappiness`.
    pub fn name(&self) -> String {
        match self {
            Setting::ThpEnabled => "thp.enabled".into(),
            Setting::ThpDefrag => "thp.defrag".into(),
            Setting::Scheduler(dev) => format!("block.{dev}.scheduler"),
            Setting::ReadAhead(dev) => format!("block.{dev}.read_ahead_kb"),
            Setting::Sysctl(name) => (*name).into(),
            Setting::Governor => "cpu.governor".into(),
            Setting::Mount(path) => format!("{MOUNT_PREFIX}{path}"),
            Setting::Lazytime(path) => format!("{LAZYTIME_PREFIX}{path}"),
        }
    }

    /// The file of the setting as an admin writes it (`/sys/...`, `/proc/sys/...`); the
    /// governor's is a glob over the CPUs.
    pub fn shell_path(&self) -> String {
        match self {
            Setting::ThpEnabled => "/sys/kernel/mm/transparent_hugepage/enabled".into(),
            Setting::ThpDefrag => "/sys/kernel/mm/transparent_hugepage/defrag".into(),
            Setting::Scheduler(dev) => format!("/sys/block/{dev}/queue/scheduler"),
            Setting::ReadAhead(dev) => format!("/sys/block/{dev}/queue/read_ahead_kb"),
            Setting::Sysctl(name) => format!("/proc/sys/{}", name.replace('.', "/")),
            Setting::Governor => "/sys/devices/system/cpu/cpu*/cpufreq/scaling_governor".into(),
            Setting::Mount(_) | Setting::Lazytime(_) => "/proc/self/mountinfo".into(),
        }
    }

    /// The value checked and normalized (`010` → `10`).
    pub fn check_value(&self, value: &str) -> Result<String, TuneError> {
        let bad = |expected: String| TuneError::BadValue {
            setting: self.name(),
            value: value.to_string(),
            expected,
        };
        let word = |words: &[&str]| {
            words
                .contains(&value)
                .then(|| value.to_string())
                .ok_or_else(|| bad(format!("one of {}", words.join(", "))))
        };
        let number = |max: u64| {
            value
                .parse::<u64>()
                .ok()
                .filter(|n| *n <= max)
                .map(|n| n.to_string())
                .ok_or_else(|| bad(format!("a whole number from 0 to {max}")))
        };
        match self {
            Setting::ThpEnabled => word(THP_ENABLED),
            Setting::ThpDefrag => word(THP_DEFRAG),
            Setting::Mount(_) => word(ATIME),
            Setting::Lazytime(_) => word(ON_OFF),
            Setting::Scheduler(_) => word(SCHEDULERS),
            Setting::ReadAhead(_) => number(MAX_READ_AHEAD_KB),
            Setting::Sysctl(name) => number(spec(name).map_or(0, |s| s.max)),
            Setting::Governor => {
                let ok = !value.is_empty()
                    && value.len() <= 32
                    && value.chars().all(|c| c.is_ascii_lowercase() || c == '_');
                if ok {
                    Ok(value.to_string())
                } else {
                    Err(bad(
                        "a governor name such as performance or schedutil".into()
                    ))
                }
            }
        }
    }

    /// The file of a part (`""`: the setting's own file) under `root`.
    fn file(&self, root: &SysRoot, part: &str) -> PathBuf {
        match self {
            Setting::ThpEnabled => root.sys.join("kernel/mm/transparent_hugepage/enabled"),
            Setting::ThpDefrag => root.sys.join("kernel/mm/transparent_hugepage/defrag"),
            Setting::Scheduler(dev) => root.sys.join("block").join(dev).join("queue/scheduler"),
            Setting::ReadAhead(dev) => root.sys.join("block").join(dev).join("queue/read_ahead_kb"),
            Setting::Sysctl(name) => {
                sysctl::path_of(root, if part.is_empty() { name } else { part })
            }
            Setting::Governor => root
                .sys
                .join("devices/system/cpu")
                .join(part)
                .join("cpufreq/scaling_governor"),
            Setting::Mount(_) | Setting::Lazytime(_) => root.proc.join("self/mountinfo"),
        }
    }

    /// The current value(s). A setting this machine lacks is [`TuneError::Absent`].
    pub fn read(&self, root: &SysRoot) -> Result<Saved, TuneError> {
        let mut parts = BTreeMap::new();
        let absent = |path: PathBuf| TuneError::Absent(self.name(), path.display().to_string());
        match self {
            Setting::Governor => {
                for (cpu, governor) in tunables::cpu_governors(root)? {
                    parts.insert(format!("cpu{cpu}"), governor);
                }
                if parts.is_empty() {
                    return Err(absent(
                        root.sys
                            .join("devices/system/cpu/cpu0/cpufreq/scaling_governor"),
                    ));
                }
            }
            Setting::Mount(path) => {
                let mount = mount_at(root, path, self.name())?;
                parts.insert(String::new(), atime_mode(&mount.options).to_string());
            }
            Setting::Lazytime(path) => {
                let mount = mount_at(root, path, self.name())?;
                let on = mount.options.split(',').any(|o| o == "lazytime");
                parts.insert(String::new(), if on { "on" } else { "off" }.to_string());
            }
            Setting::Sysctl(name) => {
                for n in std::iter::once(*name).chain(spec(name).and_then(|s| s.twin)) {
                    let value =
                        sysctl::read(root, n)?.ok_or_else(|| absent(sysctl::path_of(root, n)))?;
                    parts.insert(n.to_string(), value);
                }
            }
            _ => {
                let path = self.file(root, "");
                let text = kernel::read_optional(&path)?.ok_or_else(|| absent(path.clone()))?;
                let value = match self {
                    Setting::ReadAhead(_) => Some(text.trim().to_string()),
                    _ => kernel::bracketed_choice(&text),
                }
                .ok_or_else(|| {
                    kernel::KernelError::parse(&path, None, format!("unexpected {:?}", text.trim()))
                })?;
                parts.insert(String::new(), value);
            }
        }
        Ok(Saved(parts))
    }

    /// The setting's own value in a read state (a summary for the governor).
    pub fn current(&self, saved: &Saved) -> String {
        match self {
            Setting::Governor => {
                let per_cpu = saved
                    .0
                    .iter()
                    .filter_map(|(k, v)| Some((k.strip_prefix("cpu")?.parse().ok()?, v.clone())))
                    .collect();
                tunables::summarize_governors(&per_cpu).unwrap_or_default()
            }
            Setting::Sysctl(name) => saved.0.get(*name).cloned().unwrap_or_default(),
            _ => saved.0.get("").cloned().unwrap_or_default(),
        }
    }

    /// The parts a value is written to: the setting's own file, or every CPU read in `state`.
    fn parts_to_write(&self, state: &Saved) -> Vec<String> {
        match self {
            Setting::Governor => state.0.keys().cloned().collect(),
            Setting::Sysctl(name) => vec![(*name).to_string()],
            _ => vec![String::new()],
        }
    }

    /// Writes `value` (checked by [`Setting::check_value`]) and reads it back; `state` is what
    /// was read before (which CPUs the governor has).
    pub fn apply(&self, root: &SysRoot, value: &str, state: &Saved) -> Result<(), TuneError> {
        let value = self.check_value(value)?;
        for part in self.parts_to_write(state) {
            self.write(root, &part, &value)?;
        }
        let now = self.read(root)?;
        for part in self.parts_to_write(state) {
            let found = now.0.get(&part).cloned().unwrap_or_default();
            if found != value {
                return Err(TuneError::DidNotTake {
                    setting: self.name(),
                    path: self.file(root, &part).display().to_string(),
                    wanted: value,
                    found,
                });
            }
        }
        Ok(())
    }

    /// Restores `saved` (each value checked again, whoever recorded it) and reads it back.
    /// A sysctl whose twin was the one in use (a `_bytes` set, its `_ratio` reading 0) is
    /// restored through the twin, since writing either resets the other.
    pub fn restore(&self, root: &SysRoot, saved: &Saved) -> Result<(), TuneError> {
        let writes: Vec<(String, String)> = match self {
            Setting::Sysctl(name) => {
                let own = saved.0.get(*name).cloned().unwrap_or_default();
                let twin = spec(name)
                    .and_then(|s| s.twin)
                    .and_then(|t| Some((t, saved.0.get(t)?.clone())));
                match twin {
                    Some((t, v)) if v != "0" => vec![(t.to_string(), v)],
                    _ => vec![((*name).to_string(), own)],
                }
            }
            _ => saved.0.clone().into_iter().collect(),
        };
        for (part, value) in &writes {
            let checked = match self {
                // The twin of a sysctl is a listed sysctl too; check it as itself.
                Setting::Sysctl(_) => Setting::parse(part)?.check_value(value)?,
                _ => self.check_value(value)?,
            };
            self.write(root, part, &checked)?;
        }
        let now = self.read(root)?;
        for (part, wanted) in &saved.0 {
            let found = now.0.get(part).cloned().unwrap_or_default();
            if &found != wanted {
                return Err(TuneError::DidNotTake {
                    setting: self.name(),
                    path: self.file(root, part).display().to_string(),
                    wanted: wanted.clone(),
                    found,
                });
            }
        }
        Ok(())
    }

    /// Checks a state read back from a journal: the parts this setting has, each holding a
    /// value it takes. A forged or damaged journal fails here, before anything is written.
    pub fn check_saved(&self, saved: &Saved) -> Result<(), TuneError> {
        if saved.0.is_empty() {
            return Err(TuneError::Unknown(format!("{} with no value", self.name())));
        }
        for (part, value) in &saved.0 {
            let part_ok = match self {
                Setting::Governor => part
                    .strip_prefix("cpu")
                    .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit())),
                Setting::Sysctl(name) => {
                    *part == **name || spec(name).and_then(|s| s.twin) == Some(part.as_str())
                }
                _ => part.is_empty(),
            };
            if !part_ok {
                return Err(TuneError::Unknown(format!("{} part {part:?}", self.name())));
            }
            match self {
                Setting::Sysctl(_) => Setting::parse(part)?.check_value(value)?,
                _ => self.check_value(value)?,
            };
        }
        Ok(())
    }

    /// Writes one value to one part's file, in one write (sysfs takes a value per write); a
    /// mount's atime mode by a bind remount.
    fn write(&self, root: &SysRoot, part: &str, value: &str) -> Result<(), TuneError> {
        match self {
            Setting::Mount(path) => return remount(root, path, value),
            Setting::Lazytime(path) => return set_lazytime(root, path, value == "on"),
            _ => {}
        }
        let path = self.file(root, part);
        let refused = |source| TuneError::Refused {
            path: path.display().to_string(),
            value: value.to_string(),
            source,
        };
        // No O_CREAT: only a file the kernel (or a test's tree) already has is written. O_TRUNC
        // as a shell's `>` (procfs and sysfs ignore it; a test's regular file needs it).
        let mut file = std::fs::OpenOptions::new()
            .write(true)
            .truncate(true)
            .open(&path)
            .map_err(refused)?;
        file.write_all(value.as_bytes()).map_err(refused)
    }
}

/// The mount whose mount point is `path` (the last one mounted there, which is the one seen).
/// `setting` names it in an error.
fn mount_at(root: &SysRoot, path: &str, setting: String) -> Result<mounts::Mount, TuneError> {
    mounts::read_mounts(root)?
        .into_iter()
        .rev()
        .find(|m| m.mount_point.as_os_str() == path)
        .ok_or_else(|| {
            TuneError::Absent(
                setting,
                format!("a mount at {path} in /proc/self/mountinfo"),
            )
        })
}

/// The atime mode in a mount's options: `noatime`, `relatime`, or neither (`strictatime`).
fn atime_mode(options: &str) -> &'static str {
    let has = |w: &str| options.split(',').any(|o| o == w);
    if has("noatime") {
        "noatime"
    } else if has("relatime") {
        "relatime"
    } else {
        "strictatime"
    }
}

/// The mount flags a bind remount of a mount with `options` must pass to keep them, with the
/// atime mode `atime` (one of [`ATIME`]).
fn remount_flags(options: &str, atime: &str) -> MountFlags {
    let mut flags = MountFlags::BIND;
    for o in options.split(',') {
        flags |= match o {
            "ro" => MountFlags::RDONLY,
            "nosuid" => MountFlags::NOSUID,
            "nodev" => MountFlags::NODEV,
            "noexec" => MountFlags::NOEXEC,
            "nodiratime" => MountFlags::NODIRATIME,
            "nosymfollow" => MountFlags::NOSYMFOLLOW,
            _ => MountFlags::empty(),
        };
    }
    flags
        | match atime {
            "noatime" => MountFlags::NOATIME,
            "relatime" => MountFlags::RELATIME,
            _ => MountFlags::STRICTATIME,
        }
}

/// Gives the mount at `path` the atime mode `atime`, keeping its other flags.
fn remount(root: &SysRoot, path: &str, atime: &str) -> Result<(), TuneError> {
    let mount = mount_at(root, path, format!("{MOUNT_PREFIX}{path}"))?;
    let flags = remount_flags(&mount.options, atime);
    rustix::mount::mount_remount(path, flags, "").map_err(|e| TuneError::Refused {
        path: format!("the mount at {path} (remount)"),
        value: atime.to_string(),
        source: e.into(),
    })
}

/// Sets or clears the lazytime flag of the filesystem mounted at `path`, and nothing else:
/// `fspick` takes the superblock of the mount whose root `path` is (it refuses a path inside
/// one), `fsconfig` changes the one flag.
fn set_lazytime(root: &SysRoot, path: &str, on: bool) -> Result<(), TuneError> {
    use rustix::mount::{FsPickFlags, fsconfig_reconfigure, fsconfig_set_flag, fspick};
    mount_at(root, path, format!("{LAZYTIME_PREFIX}{path}"))?;
    let flag = if on { "lazytime" } else { "nolazytime" };
    let refused = |e: rustix::io::Errno| TuneError::Refused {
        path: format!("the filesystem mounted at {path} (fsconfig)"),
        value: flag.to_string(),
        source: e.into(),
    };
    let fs = fspick(
        rustix::fs::CWD,
        path,
        FsPickFlags::FSPICK_CLOEXEC
            | FsPickFlags::FSPICK_NO_AUTOMOUNT
            | FsPickFlags::FSPICK_SYMLINK_NOFOLLOW,
    )
    .map_err(refused)?;
    fsconfig_set_flag(&fs, flag).map_err(refused)?;
    fsconfig_reconfigure(&fs).map_err(refused)
}

fn spec(name: &str) -> Option<&'static SysctlSpec> {
    SYSCTLS.iter().find(|s| s.name == name)
}

#[cfg(test)]
mod tests;
