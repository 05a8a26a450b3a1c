//! A tracer's object loaded for this run, or taken from the set an earlier run kept loaded
//! (see [`super::pin`]): either way the caller gets the same maps and iterator programs, with
//! its programs attached.

use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::path::Path;

use aya::maps::{Map, MapData};

use super::Refusal;
use super::pin::{self, KeptSet, PinDir, Slot};

/// What to load: the object, its settings, and what user space uses of it.
pub(crate) struct Object<'a> {
    /// Names the object's kept set (`/sys/fs/bpf/tacho/LABEL-DIGEST`).
    pub(crate) label: &'static str,
    pub(crate) bytes: &'a [u8],
    /// `const volatile` globals set at load (name, value).
    pub(crate) globals: &'a [(&'a str, u32)],
    /// (program, BTF-typed tracepoint) pairs, all attached.
    pub(crate) programs: &'a [(&'a str, &'a str)],
    /// (program, iterator) pairs, loaded where the kernel takes them, not attached.
    pub(crate) iterators: &'a [(&'static str, &'a str)],
    /// The maps user space reads or clears.
    pub(crate) maps: &'a [&'static str],
}

/// The object's programs attached, and what user space uses of it.
pub(crate) struct Loaded {
    maps: Vec<(&'static str, MapData)>,
    iterators: Vec<(&'static str, OwnedFd)>,
    /// Held until the tracer stops: dropped in this order (programs detach, then the set's
    /// lock goes, so no other run clears the maps under attached programs).
    _links: Vec<OwnedFd>,
    _ebpf: Option<aya::Ebpf>,
    _dir: Option<PinDir>,
}

impl Loaded {
    /// The map `name`, one of [`Object::maps`].
    pub(crate) fn map(&self, name: &str) -> Result<&MapData, Refusal> {
        self.maps
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, m)| m)
            .ok_or_else(|| Refusal::Missing(format!("map {name}")))
    }

    /// The iterator program `name`, where the kernel took it.
    pub(crate) fn iterator(&self, name: &str) -> Result<BorrowedFd<'_>, Refusal> {
        self.iterators
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, fd)| fd.as_fd())
            .ok_or_else(|| Refusal::Missing(format!("program {name}")))
    }

    /// Deletes every entry of the hash map `name`.
    pub(crate) fn empty_hash(&self, name: &str) -> Result<(), Refusal> {
        let map = self.map(name)?;
        let info = map.info().map_err(|e| super::refusal(name, &e))?;
        super::sys::empty_hash(
            map.fd().as_fd(),
            info.key_size() as usize,
            info.value_size() as usize,
            info.max_entries() as usize,
        )
        .map_err(|e| super::refusal(name, &e))
    }
}

/// Loads `object` and attaches its programs, from the set an earlier run kept in the bpffs at
/// `root` where there is one (no `root`: for this run only, nothing kept).
/// `prepare(loaded, reused)` is given the maps before anything is handed back: when `reused`,
/// before the programs are attached, to clear what the last run left. A kept set the kernel
/// or `prepare` refuses is removed and the object loaded afresh.
pub(crate) fn load<T>(
    root: Option<&Path>,
    object: &Object<'_>,
    prepare: impl Fn(&Loaded, bool) -> Result<T, Refusal>,
) -> Result<(Loaded, T), Refusal> {
    if let Some(reason) = super::unavailable_reason() {
        return Err(reason);
    }
    let name = set_name(object);
    let slot = match root.and_then(|root| pin::open(root, &name)) {
        Some(Slot::Kept(set)) => match reuse(object, set, &prepare) {
            Ok(done) => return Ok(done),
            Err(set) => {
                set.discard();
                root.and_then(|root| pin::open(root, &name))
            }
        },
        other => other,
    };
    let mut ebpf = super::load(
        object.bytes,
        object.globals,
        object.programs,
        &[],
        object.iterators,
    )?;
    let mut maps = Vec::new();
    for &name in object.maps {
        // Taken out of aya's object: the programs hold the maps in the kernel either way.
        let data = match ebpf.take_map(name) {
            Some(Map::Array(d) | Map::HashMap(d) | Map::LruHashMap(d)) => d,
            _ => return Err(Refusal::Missing(format!("map {name}"))),
        };
        maps.push((name, data));
    }
    let mut iterators = Vec::new();
    for &(name, _) in object.iterators {
        // One the kernel refused has no descriptor: the caller reads /proc instead.
        if let Some(fd) = ebpf.program(name).and_then(|p| p.fd().ok()) {
            iterators.push((name, dup(fd.as_fd(), name)?));
        }
    }
    let dir = match slot {
        Some(Slot::Unpinned(unpinned)) => {
            let mut objects: Vec<(String, BorrowedFd<'_>)> = Vec::new();
            for &(name, _) in object.programs {
                let program = ebpf.program(name).and_then(|p| p.fd().ok());
                if let Some(fd) = program {
                    objects.push((format!("prog-{name}"), fd.as_fd()));
                }
            }
            objects.extend(
                iterators
                    .iter()
                    .map(|(n, fd)| (format!("prog-{n}"), fd.as_fd())),
            );
            objects.extend(
                maps.iter()
                    .map(|(n, m)| (format!("map-{n}"), m.fd().as_fd())),
            );
            unpinned.publish(&objects)
        }
        _ => None,
    };
    let loaded = Loaded {
        maps,
        iterators,
        _links: Vec::new(),
        _ebpf: Some(ebpf),
        _dir: dir,
    };
    let prepared = prepare(&loaded, false)?;
    Ok((loaded, prepared))
}

/// The kept `set`, cleared by `prepare` and attached; `set` back when it cannot be.
fn reuse<T>(
    object: &Object<'_>,
    set: KeptSet,
    prepare: &impl Fn(&Loaded, bool) -> Result<T, Refusal>,
) -> Result<(Loaded, T), KeptSet> {
    let dir = &set.dir;
    let mut maps = Vec::new();
    for &name in object.maps {
        match dir.get(&format!("map-{name}")).map(MapData::from_fd) {
            Ok(Ok(map)) => maps.push((name, map)),
            _ => return Err(set),
        }
    }
    // An iterator the kernel refused when the set was made was not pinned.
    let iterators = object
        .iterators
        .iter()
        .filter_map(|&(name, _)| Some((name, dir.get(&format!("prog-{name}")).ok()?)))
        .collect();
    let mut programs = Vec::new();
    for &(name, _) in object.programs {
        match dir.get(&format!("prog-{name}")) {
            Ok(fd) => programs.push(fd),
            Err(_) => return Err(set),
        }
    }
    let mut loaded = Loaded {
        maps,
        iterators,
        _links: Vec::new(),
        _ebpf: None,
        _dir: None,
    };
    let Ok(prepared) = prepare(&loaded, true) else {
        return Err(set);
    };
    for prog in &programs {
        match super::sys::raw_tracepoint_open(prog.as_fd()) {
            Ok(link) => loaded._links.push(link),
            Err(_) => {
                // Detach what was attached before giving the set up.
                loaded._links.clear();
                return Err(set);
            }
        }
    }
    loaded._dir = Some(set.dir);
    Ok((loaded, prepared))
}

/// The kept set's name: the object and every setting that changes what is loaded.
fn set_name(object: &Object<'_>) -> String {
    let mut settings = Vec::new();
    for (name, value) in object.globals {
        settings.push(format!("global {name}={value}"));
    }
    for (program, tracepoint) in object.programs {
        settings.push(format!("program {program}@{tracepoint}"));
    }
    for (program, iterator) in object.iterators {
        settings.push(format!("iterator {program}@{iterator}"));
    }
    let refs: Vec<&str> = settings.iter().map(String::as_str).collect();
    pin::set_name(object.label, object.bytes, &refs)
}

fn dup(fd: BorrowedFd<'_>, what: &str) -> Result<OwnedFd, Refusal> {
    fd.try_clone_to_owned()
        .map_err(|e| super::refusal(what, &e))
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::MetadataExt;
    use std::path::{Path, PathBuf};
    use std::sync::atomic::Ordering::Relaxed;

    use aya::maps::{HashMap, Map, MapData};

    use crate::bpf::block::BlockTracer;
    use crate::bpf::shared::SharedArray;

    /// A bpffs of the test's own, unmounted when dropped.
    struct Bpffs(tempfile::TempDir);

    impl Bpffs {
        /// `None` (a skip, but in CI, which runs as root on a kernel with BTF) where BPF
        /// cannot load here.
        fn mount() -> Option<Bpffs> {
            let can = rustix::process::geteuid().is_root()
                && Path::new("/sys/kernel/btf/vmlinux").exists();
            if !can {
                assert!(
                    std::env::var_os("CI").is_none(),
                    "CI runs as root on a kernel with BTF: the tracer must load"
                );
                eprintln!("skipped: loading BPF needs root and kernel BTF");
                return None;
            }
            let dir = tempfile::tempdir().unwrap();
            rustix::mount::mount(
                "bpf",
                dir.path(),
                "bpf",
                rustix::mount::MountFlags::empty(),
                None,
            )
            .expect("mount a bpffs");
            Some(Bpffs(dir))
        }

        fn tacho(&self) -> PathBuf {
            self.0.path().join("tacho")
        }

        /// The names in ROOT/tacho.
        fn sets(&self) -> Vec<String> {
            let mut names: Vec<String> = std::fs::read_dir(self.tacho())
                .map(|d| {
                    d.map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                        .collect()
                })
                .unwrap_or_default();
            names.sort();
            names
        }
    }

    impl Drop for Bpffs {
        fn drop(&mut self) {
            let _ = rustix::mount::unmount(self.0.path(), rustix::mount::UnmountFlags::DETACH);
        }
    }

    fn array(pin: &Path) -> SharedArray {
        let data = MapData::from_pin(pin).unwrap();
        let words = data.info().unwrap().value_size() as usize / 8;
        SharedArray::map(&data, "test", words).unwrap()
    }

    fn hash(pin: &Path) -> HashMap<MapData, u64, [u64; 4]> {
        let data = MapData::from_pin(pin).unwrap();
        let lru = data.info().unwrap().map_type().unwrap() == aya::maps::MapType::LruHash;
        let map = if lru {
            Map::LruHashMap(data)
        } else {
            Map::HashMap(data)
        };
        HashMap::try_from(map).unwrap()
    }

    #[test]
    fn a_kept_set_is_reused_cleared_and_never_shared_by_two_runs() {
        let Some(fs) = Bpffs::mount() else { return };
        // Left by other builds, and by a run that died while pinning: pruned by the first load.
        std::fs::create_dir_all(fs.tacho().join("block-0000000000000000")).unwrap();
        std::fs::create_dir(fs.tacho().join("new-1-block-0000000000000000")).unwrap();

        let first = BlockTracer::start_in(Some(fs.0.path())).expect("the block tracer loads");
        let sets = fs.sets();
        assert_eq!(sets.len(), 1, "one set, the others pruned: {sets:?}");
        assert!(sets[0].starts_with("block-"), "{sets:?}");
        let set = fs.tacho().join(&sets[0]);
        let inode = std::fs::metadata(&set).unwrap().ino();
        for pin in [
            "prog-io_start",
            "prog-rq_complete",
            "prog-task_counters",
            "map-procs",
        ] {
            assert!(set.join(pin).exists(), "{pin} pinned in {}", set.display());
        }

        // What a run leaves behind: totals, a claimed slot, a request in flight, owners.
        let procs = array(&set.join("map-procs"));
        let inflight = array(&set.join("map-inflight"));
        let dropped = array(&set.join("map-dropped"));
        procs.value(7)[0].store(1 << 63 | 42, Relaxed);
        procs.value(7)[10].store(4096, Relaxed);
        inflight.value(3)[0].store(0x1234, Relaxed);
        dropped.value(0)[0].store(5, Relaxed);
        let (mut dirtier, mut spill) = (
            hash(&set.join("map-dirtier")),
            hash(&set.join("map-inflight_spill")),
        );
        dirtier.insert(0xdead, [1, 2, 3, 4], 0).unwrap();
        spill.insert(0xbeef, [5, 6, 7, 8], 0).unwrap();

        // A second run while the first holds the set loads its own and leaves the set alone.
        let beside = BlockTracer::start_in(Some(fs.0.path())).expect("a second tracer loads");
        assert_eq!(
            procs.value(7)[10].load(Relaxed),
            4096,
            "the held set was cleared"
        );
        assert_eq!(
            fs.sets(),
            sets,
            "a second set was pinned beside the held one"
        );
        drop(beside);
        drop(first);

        let again = BlockTracer::start_in(Some(fs.0.path())).expect("the kept set is reused");
        assert_eq!(fs.sets(), sets);
        assert_eq!(
            std::fs::metadata(&set).unwrap().ino(),
            inode,
            "the set was pinned anew, not reused"
        );
        // The programs run again by now, and the machine's own I/O may claim slots and
        // record owners: what must be gone is what was planted.
        assert_ne!(
            procs.value(7)[0].load(Relaxed),
            1 << 63 | 42,
            "a slot's key survived into the next run"
        );
        assert_ne!(
            inflight.value(3)[0].load(Relaxed),
            0x1234,
            "a request in flight survived"
        );
        assert_ne!(
            dropped.value(0)[0].load(Relaxed),
            5,
            "a drop count survived"
        );
        assert!(
            dirtier.get(&0xdead, 0).is_err(),
            "an owner of dirty pages survived"
        );
        assert!(spill.get(&0xbeef, 0).is_err(), "a spilled request survived");
        drop(again);
    }

    #[test]
    fn a_tacho_directory_someone_else_could_write_to_is_left_alone() {
        let Some(fs) = Bpffs::mount() else { return };
        let tacho = fs.tacho();
        std::fs::create_dir(&tacho).unwrap();
        use std::os::unix::fs::PermissionsExt;
        for (uid, mode) in [(65534, 0o700), (0, 0o777), (0, 0o720)] {
            std::os::unix::fs::chown(&tacho, Some(uid), Some(0)).unwrap();
            std::fs::set_permissions(&tacho, std::fs::Permissions::from_mode(mode)).unwrap();
            let tracer = BlockTracer::start_in(Some(fs.0.path())).expect("the tracer loads anyway");
            assert_eq!(
                fs.sets(),
                Vec::<String>::new(),
                "pinned in a directory of uid {uid}, mode {mode:o}"
            );
            drop(tracer);
        }
    }
}
