//! The host's performance settings in the history: `tacho record` reads them every interval
//! through the catalogue `tacho experiment` changes them with (`tune`: THP, the CPU governor,
//! swappiness, the dirty ratios and the other sysctls it lists, each disk's scheduler and
//! read-ahead; about 20 small files and 2 per disk) and stores them in a row only when they
//! changed, in the first row, and every [`STORE_EVERY`] rows so a window finds them near its
//! start. The incident report lists what changed inside its window.

use std::collections::BTreeMap;

use crate::diagnose::sample::devices::Devices;
use crate::kernel::SysRoot;
use crate::tune::Setting;

/// Setting name (`thp.enabled`, `vm.swappiness`, `block.sda.scheduler`, as `tacho experiment`
/// names them) → value (the governor's summed up over the CPUs: `performance`, `mixed: …`).
pub type Settings = BTreeMap<String, String>;

/// Rows between two that store the settings although they did not change.
pub const STORE_EVERY: u32 = 60;
/// Disks whose queues are read, the first by name (a host with thousands of loop devices
/// does not read thousands of queues every interval).
const DISKS: usize = 64;
/// The most settings a row may hold (more are refused as not a recorder's).
pub const MAX_SETTINGS: usize = 1024;

/// The settings now: the system's, and the queue of each whole disk in `devices`; one this
/// machine lacks (no cpufreq in a VM) is left out.
pub fn read(root: &SysRoot, devices: &Devices) -> Settings {
    let mut disks: Vec<&str> = devices
        .values()
        .filter(|d| d.parent.is_none())
        .map(|d| d.name.as_str())
        .collect();
    disks.sort_unstable();
    disks.dedup();
    disks.truncate(DISKS);
    let all = [Setting::ThpEnabled, Setting::ThpDefrag, Setting::Governor]
        .into_iter()
        .chain(crate::tune::sysctl_names().map(Setting::Sysctl))
        .chain(disks.into_iter().flat_map(|d| {
            [
                Setting::Scheduler(d.to_string()),
                Setting::ReadAhead(d.to_string()),
            ]
        }));
    all.filter_map(|s| {
        let saved = s.read(root).ok()?;
        Some((s.name(), s.current(&saved)))
    })
    .collect()
}

/// What the recorder stored last, to store only changes.
#[derive(Default)]
pub struct Recorder {
    last: Option<Settings>,
    rows: u32,
}

impl Recorder {
    /// `now` when a row should store it: the first, a change, or every [`STORE_EVERY`] rows.
    pub fn store(&mut self, now: Settings) -> Option<Settings> {
        self.rows += 1;
        if self.last.as_ref() == Some(&now) && self.rows < STORE_EVERY {
            return None;
        }
        self.rows = 0;
        self.last = Some(now.clone());
        Some(now)
    }
}

/// One setting's change.
#[derive(Debug, Clone, PartialEq)]
pub struct Change {
    /// When it was seen changed (the time of the row that stored it), seconds since the Unix
    /// epoch.
    pub unix_s: f64,
    /// Its name.
    pub key: String,
    /// Its value before, `None` where it did not exist (a disk added).
    pub old: Option<String>,
    /// After, `None` where it is gone.
    pub new: Option<String>,
}

/// The settings of a window as its rows stored them, fed oldest first.
#[derive(Debug, Default)]
pub struct Window {
    /// The settings in force at the window's start and when they were stored; `None` when no
    /// row at or before the start stored any.
    pub at_start: Option<(f64, Settings)>,
    /// When settings were first known inside the window, if not at its start.
    pub first_known: Option<f64>,
    /// What changed inside the window, in time order.
    pub changes: Vec<Change>,
    current: Option<Settings>,
}

impl Window {
    /// Takes the settings a row stored at `unix_s`, the window starting at `from`.
    pub fn push(&mut self, unix_s: f64, settings: &Settings, from: f64) {
        if unix_s <= from {
            self.at_start = Some((unix_s, settings.clone()));
            self.current = Some(settings.clone());
            return;
        }
        let Some(before) = self.current.replace(settings.clone()) else {
            self.first_known = Some(unix_s);
            return;
        };
        let keys: std::collections::BTreeSet<&String> =
            before.keys().chain(settings.keys()).collect();
        for key in keys {
            let (old, new) = (before.get(key), settings.get(key));
            if old != new {
                self.changes.push(Change {
                    unix_s,
                    key: key.clone(),
                    old: old.cloned(),
                    new: new.cloned(),
                });
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings(pairs: &[(&str, &str)]) -> Settings {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn the_recorder_stores_the_first_a_change_and_every_so_often() {
        let mut r = Recorder::default();
        let a = settings(&[("vm.swappiness", "60")]);
        let b = settings(&[("vm.swappiness", "10")]);
        assert_eq!(r.store(a.clone()), Some(a.clone()));
        assert_eq!(r.store(a.clone()), None);
        assert_eq!(r.store(b.clone()), Some(b.clone()));
        let stored = (0..2 * STORE_EVERY)
            .filter(|_| r.store(b.clone()).is_some())
            .count();
        assert_eq!(stored, 2);
    }

    #[test]
    fn a_window_lists_each_change_with_its_old_and_new_value() {
        let mut w = Window::default();
        let a = settings(&[
            ("block.loop0.read_ahead_kb", "128"),
            ("thp.enabled", "never"),
        ]);
        let b = settings(&[
            ("block.loop0.read_ahead_kb", "512"),
            ("thp.enabled", "never"),
        ]);
        let c = settings(&[("thp.enabled", "never")]);
        w.push(5.0, &a, 10.0);
        w.push(11.0, &a, 10.0);
        w.push(12.0, &b, 10.0);
        w.push(13.0, &c, 10.0);
        assert_eq!(w.at_start.as_ref().map(|s| s.0), Some(5.0));
        assert_eq!(w.first_known, None);
        let key = "block.loop0.read_ahead_kb".to_string();
        assert_eq!(
            w.changes,
            [
                Change {
                    unix_s: 12.0,
                    key: key.clone(),
                    old: Some("128".into()),
                    new: Some("512".into())
                },
                Change {
                    unix_s: 13.0,
                    key,
                    old: Some("512".into()),
                    new: None
                }
            ]
        );
        // Without a row at the start, the first inside is where they become known.
        let mut w = Window::default();
        w.push(11.0, &a, 10.0);
        w.push(12.0, &a, 10.0);
        assert!(w.at_start.is_none() && w.changes.is_empty());
        assert_eq!(w.first_known, Some(11.0));
    }
}
