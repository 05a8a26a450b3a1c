//! Blame that reached a disk through a loop device. A loop device's writes reach the disk
//! holding its backing file as the kernel worker serving the loop (or, for a loop through the
//! page cache, the flusher writing the backing file back): "vda saturated: 97% of writes from
//! kworker/u8:2-flush-254:0" names nobody an admin can act on. The share of such workers goes
//! to whoever wrote the loop devices backed on that disk, in proportion to what each loop
//! device wrote in the interval.

use std::collections::HashMap;

use super::Disk;
use super::blame::{Attribution, Culprit, Direction};
use super::fold::fold;
use crate::diagnose::sample::devices::Devices;
use crate::kernel::blockdev::DeviceKind;

/// A loop device backed on a disk, with its writers in the interval.
struct Source<'a> {
    name: &'a str,
    file: &'a str,
    bytes: f64,
    writers: Vec<Culprit>,
}

/// Rewrites the culprits of every disk that loop devices are backed on (see the module).
pub(super) fn through_loops(
    by_disk: &mut HashMap<String, (Direction, Vec<Culprit>)>,
    disks: &[Disk],
    devices: &Devices,
    keep: usize,
) {
    let names: Vec<String> = by_disk.keys().cloned().collect();
    for disk in names {
        let sources: Vec<Source> = devices
            .values()
            .filter(|i| i.kind == DeviceKind::Loop)
            .filter_map(|i| {
                let (file, (major, minor)) = i.backing.as_ref()?;
                let holder = devices.get(&(*major, *minor))?;
                let on = holder.parent.as_deref().unwrap_or(&holder.name);
                let (dir, writers) = by_disk.get(&i.name)?;
                let bytes = disks
                    .iter()
                    .find(|d| d.device.name == i.name)?
                    .write_bytes? as f64;
                (on == disk && *dir == Direction::Writes && bytes > 0.0 && !writers.is_empty())
                    .then(|| Source {
                        name: &i.name,
                        file,
                        bytes,
                        writers: writers.clone(),
                    })
            })
            .collect();
        let total: f64 = sources.iter().map(|s| s.bytes).sum();
        let Some((dir, culprits)) = by_disk.get_mut(&disk) else {
            continue;
        };
        if sources.is_empty() || *dir != Direction::Writes {
            continue;
        }
        let (workers, mut rest): (Vec<Culprit>, Vec<Culprit>) =
            culprits.drain(..).partition(serves_loops);
        let share: f64 = workers.iter().map(|w| w.share_pct).sum();
        if workers.is_empty() {
            *culprits = rest;
            continue;
        }
        let worker = workers[0].who();
        for s in &sources {
            for w in &s.writers {
                let mut c = w.clone();
                c.share_pct = share * (s.bytes / total) * w.share_pct / 100.0;
                c.bytes_per_s = None;
                c.attribution = Attribution::Likely {
                    reason: format!(
                        "{disk}'s writes came from {worker}, which serves {} (its backing file \
                         {} is on {disk}); {} wrote {}",
                        s.name,
                        s.file,
                        w.who(),
                        s.name
                    ),
                };
                rest.push(c);
            }
        }
        *culprits = fold(rest, keep);
    }
}

/// A kernel worker that may be writing a loop device's data: a loop's own worker, a flusher
/// (`flush-M:m`, `writeback`), or a worker whose name does not say what it serves.
fn serves_loops(c: &Culprit) -> bool {
    let comm = c.comm.as_str();
    if comm.starts_with("loop") && comm[4..].bytes().all(|b| b.is_ascii_digit()) {
        return true;
    }
    match comm.strip_prefix("kworker/") {
        Some(rest) => match rest.split_once(['-', '+']) {
            Some((_, what)) => ["loop", "flush", "writeback"]
                .iter()
                .any(|w| what.starts_with(w)),
            None => true,
        },
        None => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn named(comm: &str) -> Culprit {
        Culprit::named(
            Some(1),
            comm.into(),
            None,
            100.0,
            Attribution::Exact {
                source: "eBPF".into(),
            },
        )
    }

    #[test]
    fn loop_workers_and_flushers_are_recognised_and_others_are_not() {
        for w in [
            "kworker/u8:2-loop3",
            "kworker/u8:1+flush-254:0",
            "kworker/u8:3-writeback",
            "kworker/u8:0",
            "loop3",
        ] {
            assert!(serves_loops(&named(w)), "{w}");
        }
        for other in [
            "dd",
            "kworker/1:1H-kblockd",
            "jbd2/vda-8",
            "looper",
            "loop3x",
        ] {
            assert!(!serves_loops(&named(other)), "{other}");
        }
    }
}
