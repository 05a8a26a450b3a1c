//! A tracer's object loaded for this run, or taken from the set an earlier run kept loaded
//! (see [`super::pin`]): either way the caller gets the same maps and iterator programs, with
//! its programs attached.

use std::os::fd::{AsFd, BorrowedFd, OwnedFd};

use aya::maps::MapData;

use super::Refusal;
use super::pin::{self, PinDir, Slot};

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

/// Loads `object` and attaches its programs, from the set an earlier run kept where there is
/// one; `prepare(loaded, reused)` is given the maps before anything is handed back: when
/// `reused`, before the programs are attached, to clear what the last run left. A kept set
/// the kernel or `prepare` refuses is removed and the object loaded afresh.
pub(crate) fn load<T>(
    object: &Object<'_>,
    prepare: impl Fn(&Loaded, bool) -> Result<T, Refusal>,
) -> Result<(Loaded, T), Refusal> {
    if let Some(reason) = super::unavailable_reason() {
        return Err(reason);
    }
    let name = set_name(object);
    let slot = match pin::open(&name) {
        Some(Slot::Kept(dir)) => match reuse(object, dir, &prepare) {
            Ok(done) => return Ok(done),
            Err(dir) => {
                Slot::Kept(dir).discard();
                pin::open(&name)
            }
        },
        other => other,
    };
    let ebpf = super::load(
        object.bytes,
        object.globals,
        object.programs,
        &[],
        object.iterators,
    )?;
    let mut maps = Vec::new();
    for &name in object.maps {
        let map = ebpf
            .map(name)
            .ok_or_else(|| Refusal::Missing(format!("map {name}")))?;
        let data = match map {
            aya::maps::Map::Array(d) | aya::maps::Map::HashMap(d) | aya::maps::Map::LruHashMap(d) => d,
            _ => return Err(Refusal::Missing(format!("map {name} of a known kind"))),
        };
        let fd = dup(data.fd().as_fd(), name)?;
        maps.push((name, MapData::from_fd(fd).map_err(|e| super::refusal(name, &e))?));
    }
    let mut iterators = Vec::new();
    for &(name, _) in object.iterators {
        // One the kernel refused has no descriptor: the caller reads /proc instead.
        if let Some(fd) = ebpf.program(name).and_then(|p| p.fd().ok()) {
            iterators.push((name, dup(fd.as_fd(), name)?));
        }
    }
    let mut programs = Vec::new();
    for &(name, _) in object.programs {
        if let Some(fd) = ebpf.program(name).and_then(|p| p.fd().ok()) {
            programs.push((name, dup(fd.as_fd(), name)?));
        }
    }
    let dir = match slot {
        Some(Slot::Unpinned(unpinned)) => {
            let objects: Vec<(String, BorrowedFd<'_>)> = programs
                .iter()
                .chain(&iterators)
                .map(|(n, fd)| (format!("prog-{n}"), fd.as_fd()))
                .chain(maps.iter().map(|(n, m)| (format!("map-{n}"), m.fd().as_fd())))
                .collect();
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

/// The set kept in `dir`, cleared by `prepare` and attached; `dir` back when it cannot be.
fn reuse<T>(
    object: &Object<'_>,
    dir: PinDir,
    prepare: &impl Fn(&Loaded, bool) -> Result<T, Refusal>,
) -> Result<(Loaded, T), PinDir> {
    let mut maps = Vec::new();
    for &name in object.maps {
        match dir.get(&format!("map-{name}")).map(MapData::from_fd) {
            Ok(Ok(map)) => maps.push((name, map)),
            _ => return Err(dir),
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
            Err(_) => return Err(dir),
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
        return Err(dir);
    };
    for prog in &programs {
        match super::sys::raw_tracepoint_open(prog.as_fd()) {
            Ok(link) => loaded._links.push(link),
            Err(_) => {
                // Detach what was attached before giving the set up.
                loaded._links.clear();
                return Err(dir);
            }
        }
    }
    loaded._dir = Some(dir);
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
