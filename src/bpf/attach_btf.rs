//! The kernel BTF ids of the tracepoints the programs attach to, found without parsing the
//! whole of `/sys/kernel/btf/vmlinux`.
//!
//! Attaching a BTF-typed tracepoint program needs the id of the kernel's `btf_trace_NAME`
//! typedef (an iterator program, that of the function `bpf_iter_NAME`), and aya looks it up in
//! a parsed [`aya::Btf`]: 5.5 MB read and ~130,000 types decoded, about a sixth of a short
//! `tacho top`'s CPU (docs/benchmarks.md, issue 38). Here the type section is only walked
//! ([`super::btf_blob`]) up to the last id wanted, and the ids found are handed to aya as a
//! stand-in BTF holding just those types at their kernel ids, every other id a placeholder.
//! The file is mapped where the kernel allows it (recent kernels), read otherwise. Anything
//! unexpected gives `None`, and the caller parses the whole file as before.

use std::collections::HashMap;

use super::btf_blob::{Blob, TYPE, assemble, kind};
pub(crate) use kind::{FUNC, TYPEDEF};

/// The type ids of those (kind, name) pairs of `names` (each wanted once) that a whole BTF
/// blob in this machine's byte order holds; `None` when the blob is malformed or uses a kind
/// not known here before all were found.
pub(crate) fn type_ids(data: &[u8], names: &[(u32, &str)]) -> Option<HashMap<String, (u32, u32)>> {
    let blob = Blob::parse(data)?;
    let mut found = HashMap::new();
    for record in blob.records() {
        if found.len() == names.len() {
            break;
        }
        let record = record?;
        if (record.kind == TYPEDEF || record.kind == FUNC)
            && let Some(name) = blob.name(record.name_off)
            && let Some(&(_, wanted)) = names
                .iter()
                .find(|&&(k, n)| k == record.kind && n.as_bytes() == name)
        {
            found.insert(wanted.to_string(), (record.kind, record.id));
        }
    }
    Some(found)
}

/// A BTF blob in which each (name, (kind, id)) of `ids` is a type of that kind (typedef or
/// function, of no type) at that id, and every other id up to the largest a pointer with no
/// name: what aya's attach looks up, nothing more.
pub(crate) fn stand_in(ids: &HashMap<String, (u32, u32)>) -> Vec<u8> {
    let last = ids.values().map(|&(_, id)| id).max().unwrap_or(0);
    let mut strings = vec![0u8];
    let mut at_id = HashMap::new();
    for (name, &(k, id)) in ids {
        at_id.insert(id, (strings.len() as u32, k));
        strings.extend_from_slice(name.as_bytes());
        strings.push(0);
    }
    let mut types = Vec::with_capacity(last as usize * TYPE);
    for id in 1..=last {
        let (name, k) = at_id.get(&id).copied().unwrap_or((0, kind::PTR));
        for word in [name, k << 24, 0] {
            types.extend_from_slice(&word.to_ne_bytes());
        }
    }
    assemble(&types, &strings)
}

/// The BTF aya attaches `tracepoints` and the iterators of `iterators` (`task` for
/// `bpf_iter_task`) with: the stand-in when the kernel's BTF (`kernel`, the whole blob, as
/// [`kernel_btf`] gives it) could be walked (a tracepoint this kernel lacks is then missing
/// from it as from the whole), else the whole kernel BTF parsed.
#[cfg(feature = "bpf")]
pub(crate) fn for_attach(
    kernel: Option<&[u8]>,
    tracepoints: &[&str],
    iterators: &[&str],
) -> Result<aya::Btf, aya::BtfError> {
    let names: Vec<(u32, String)> = tracepoints
        .iter()
        .map(|t| (TYPEDEF, format!("btf_trace_{t}")))
        .chain(iterators.iter().map(|i| (FUNC, format!("bpf_iter_{i}"))))
        .collect();
    let names: Vec<(u32, &str)> = names.iter().map(|(k, n)| (*k, n.as_str())).collect();
    let ids = kernel.and_then(|data| type_ids(data, &names));
    match ids {
        Some(ids) => aya::Btf::parse(&stand_in(&ids), aya::Endianness::default()),
        None => aya::Btf::from_sys_fs(),
    }
}

/// `f` of the kernel's BTF, mapped (no copy) or else read; `None` when it is unreadable.
#[cfg(feature = "bpf")]
pub(crate) fn kernel_btf<T>(f: impl FnOnce(&[u8]) -> Option<T>) -> Option<T> {
    use std::os::fd::AsFd;
    let path = "/sys/kernel/btf/vmlinux";
    let file = std::fs::File::open(path).ok()?;
    let len = usize::try_from(file.metadata().ok()?.len()).ok()?;
    if len > 0
        && let Ok(map) = crate::mapping::Mapping::read_only(file.as_fd(), len)
    {
        return f(map.bytes());
    }
    f(&std::fs::read(path).ok()?)
}

#[cfg(test)]
mod tests {
    use super::super::btf_blob::{HEADER, MAGIC, behind_a_header};
    use super::*;
    use proptest::prelude::*;

    fn ids(pairs: &[(&str, u32, u32)]) -> HashMap<String, (u32, u32)> {
        pairs
            .iter()
            .map(|&(n, k, i)| (n.to_string(), (k, i)))
            .collect()
    }

    #[test]
    fn the_stand_in_holds_each_type_at_its_id() {
        let want = ids(&[
            ("btf_trace_a", TYPEDEF, 3),
            ("btf_trace_bb", TYPEDEF, 7),
            ("bpf_iter_t", FUNC, 9),
        ]);
        let blob = stand_in(&want);
        assert_eq!(
            type_ids(
                &blob,
                &[
                    (TYPEDEF, "btf_trace_bb"),
                    (FUNC, "bpf_iter_t"),
                    (TYPEDEF, "btf_trace_a")
                ]
            ),
            Some(want)
        );
        // A name it lacks, or has as another kind, is not guessed at, and a truncated blob is
        // not walked.
        assert_eq!(
            type_ids(
                &blob,
                &[
                    (TYPEDEF, "btf_trace_c"),
                    (TYPEDEF, "bpf_iter_t"),
                    (TYPEDEF, "btf_trace_a")
                ]
            ),
            Some(ids(&[("btf_trace_a", TYPEDEF, 3)]))
        );
        assert_eq!(
            type_ids(&blob[..blob.len() / 2], &[(TYPEDEF, "btf_trace_a")]),
            None
        );
    }

    #[test]
    fn records_with_entries_are_stepped_over() {
        // A struct of two members, then a typedef: the typedef is id 2.
        let mut strings = b"\0s\0btf_trace_x\0".to_vec();
        let mut types = Vec::new();
        for word in [1u32, (4 << 24) | 2, 16, 0, 0, 0, 0, 0, 64, 3, 8 << 24, 1] {
            types.extend_from_slice(&word.to_ne_bytes());
        }
        let mut blob = MAGIC.to_ne_bytes().to_vec();
        blob.extend_from_slice(&[1, 0]);
        for word in [HEADER, 0, types.len(), types.len(), strings.len()] {
            blob.extend_from_slice(&(word as u32).to_ne_bytes());
        }
        blob.append(&mut types);
        blob.append(&mut strings);
        assert_eq!(
            type_ids(&blob, &[(TYPEDEF, "btf_trace_x")]),
            Some(ids(&[("btf_trace_x", TYPEDEF, 2)]))
        );
    }

    /// The stand-in's ids are those of aya's whole parse, for every tracepoint tacho attaches.
    #[cfg(feature = "bpf")]
    #[test]
    fn agrees_with_the_whole_parse_of_this_kernel() {
        let Ok(whole) = aya::Btf::from_sys_fs() else {
            assert!(
                std::env::var_os("CI").is_none(),
                "CI's kernel has BTF: /sys/kernel/btf/vmlinux must parse"
            );
            eprintln!("skipped: this kernel has no readable BTF");
            return;
        };
        let tracepoints = [
            "block_io_start",
            "block_rq_complete",
            "block_rq_issue",
            "writeback_dirty_folio",
            "sched_switch",
            "sys_enter",
            "sys_exit",
        ];
        let kernel = std::fs::read("/sys/kernel/btf/vmlinux").unwrap();
        let part = for_attach(Some(&kernel), &tracepoints, &["task"]).unwrap();
        // aya takes aya-obj's `BtfKind` without re-exporting it: made from its number, so the
        // test needs no dependency of its own on aya-obj.
        let typedef = || TYPEDEF.try_into().expect("BTF_KIND_TYPEDEF is a kind");
        for t in tracepoints {
            let name = format!("btf_trace_{t}");
            assert_eq!(
                part.id_by_type_name_kind(&name, typedef()).unwrap(),
                whole.id_by_type_name_kind(&name, typedef()).unwrap(),
                "{name}"
            );
        }
        let func = FUNC.try_into().expect("BTF_KIND_FUNC is a kind");
        assert_eq!(
            part.id_by_type_name_kind("bpf_iter_task", func).unwrap(),
            whole.id_by_type_name_kind("bpf_iter_task", func).unwrap(),
        );
    }

    proptest! {
        #[test]
        fn never_panics(data in proptest::collection::vec(any::<u8>(), 0..512)) {
            let _ = type_ids(&data, &[(TYPEDEF, "btf_trace_x")]);
        }

        #[test]
        fn never_panics_behind_a_good_header(
            body in proptest::collection::vec(any::<u8>(), 0..512),
            lens in proptest::collection::vec(0u32..600, 4),
        ) {
            let blob = behind_a_header(&lens, &body);
            let _ = type_ids(&blob, &[(TYPEDEF, "btf_trace_x")]);
        }
    }
}
