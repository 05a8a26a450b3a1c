//! The kernel BTF ids of the tracepoints the programs attach to, found without parsing the
//! whole of `/sys/kernel/btf/vmlinux`.
//!
//! Attaching a BTF-typed tracepoint program needs the id of the kernel's `btf_trace_NAME`
//! typedef (an iterator program, that of the function `bpf_iter_NAME`), and aya looks it up in
//! a parsed [`aya::Btf`]. aya's loader parses the kernel's BTF
//! for its own CO-RE relocations and keeps that parse to itself, so a second full parse was
//! needed for attaching: 5.5 MB read and ~130,000 types decoded, about a sixth of a short
//! `tacho top`'s CPU (docs/benchmarks.md, issue 38). Here the type section is only walked
//! (each record's kind and length, no allocation) up to the last id wanted, and the ids found
//! are handed to aya as a stand-in BTF holding just those types at their kernel ids, every
//! other id a placeholder. The file is mapped where the kernel allows it (recent kernels),
//! read otherwise. Anything unexpected (another byte order, a kind this walk does not know)
//! gives `None`, and the caller parses the whole file as before.

use std::collections::HashMap;

/// Bytes of `struct btf_header`.
const HEADER: usize = 24;
/// Bytes of `struct btf_type`, the part every type record starts with.
const TYPE: usize = 12;
/// The kernel's magic number, read in this machine's byte order.
const MAGIC: u16 = 0xeb9f;
/// `BTF_KIND_TYPEDEF`, `BTF_KIND_FUNC` and `BTF_KIND_PTR`.
pub(crate) const TYPEDEF: u32 = 8;
pub(crate) const FUNC: u32 = 12;
const PTR: u32 = 2;

/// The bytes that follow the common part of a type record of `kind` with `vlen` entries;
/// `None` for a kind this walk does not know (a newer kernel's).
fn extra_len(kind: u32, vlen: usize) -> Option<usize> {
    Some(match kind {
        // PTR, FWD, TYPEDEF, VOLATILE, CONST, RESTRICT, FUNC, FLOAT, TYPE_TAG.
        2 | 7..=12 | 16 | 18 => 0,
        // INT, VAR, DECL_TAG: one 32-bit word.
        1 | 14 | 17 => 4,
        // ARRAY: struct btf_array.
        3 => 12,
        // STRUCT, UNION (btf_member), DATASEC (btf_var_secinfo), ENUM64 (btf_enum64).
        4 | 5 | 15 | 19 => 12 * vlen,
        // ENUM (btf_enum), FUNC_PROTO (btf_param).
        6 | 13 => 8 * vlen,
        _ => return None,
    })
}

fn u32_at(data: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_ne_bytes(data.get(at..at + 4)?.try_into().ok()?))
}

/// The type ids of those (kind, name) pairs of `names` (each wanted once) that a whole BTF
/// blob in this machine's byte order holds; `None` when the blob is malformed or uses a kind
/// not known here before all were found.
pub(crate) fn type_ids(data: &[u8], names: &[(u32, &str)]) -> Option<HashMap<String, (u32, u32)>> {
    let magic = u16::from_ne_bytes(data.get(0..2)?.try_into().ok()?);
    if magic != MAGIC {
        return None;
    }
    let hdr_len = u32_at(data, 4)? as usize;
    let field = |at| u32_at(data, at).map(|v| v as usize);
    let (type_off, type_len) = (field(8)?, field(12)?);
    let (str_off, str_len) = (field(16)?, field(20)?);
    let types = data.get(
        hdr_len.checked_add(type_off)?..hdr_len.checked_add(type_off)?.checked_add(type_len)?,
    )?;
    let strings = data
        .get(hdr_len.checked_add(str_off)?..hdr_len.checked_add(str_off)?.checked_add(str_len)?)?;
    let name_at = |off: usize| -> Option<&[u8]> {
        let rest = strings.get(off..)?;
        Some(&rest[..rest.iter().position(|&b| b == 0)?])
    };
    let mut found = HashMap::new();
    let (mut at, mut id) = (0usize, 1u32);
    while found.len() < names.len() && at < types.len() {
        let name_off = u32_at(types, at)? as usize;
        let info = u32_at(types, at + 4)?;
        let kind = (info >> 24) & 0x1f;
        if (kind == TYPEDEF || kind == FUNC)
            && let Some(name) = name_at(name_off)
            && let Some(&(_, wanted)) = names
                .iter()
                .find(|&&(k, n)| k == kind && n.as_bytes() == name)
        {
            found.insert(wanted.to_string(), (kind, id));
        }
        at = at
            .checked_add(TYPE)?
            .checked_add(extra_len(kind, (info & 0xffff) as usize)?)?;
        id = id.checked_add(1)?;
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
    for (name, &(kind, id)) in ids {
        at_id.insert(id, (strings.len() as u32, kind));
        strings.extend_from_slice(name.as_bytes());
        strings.push(0);
    }
    let type_len = last as usize * TYPE;
    let mut out = Vec::with_capacity(HEADER + type_len + strings.len());
    out.extend_from_slice(&MAGIC.to_ne_bytes());
    out.extend_from_slice(&[1, 0]); // version, flags
    for word in [HEADER, 0, type_len, type_len, strings.len()] {
        out.extend_from_slice(&(word as u32).to_ne_bytes());
    }
    for id in 1..=last {
        let (name, kind) = at_id.get(&id).copied().unwrap_or((0, PTR));
        for word in [name, kind << 24, 0] {
            out.extend_from_slice(&word.to_ne_bytes());
        }
    }
    out.extend_from_slice(&strings);
    out
}

/// The BTF aya attaches `tracepoints` and the iterators of `iterators` (`task` for
/// `bpf_iter_task`) with: the stand-in when the kernel's BTF could be walked (a tracepoint
/// this kernel lacks is then missing from it as from the whole), else the whole kernel BTF
/// parsed.
#[cfg(feature = "bpf")]
pub(crate) fn for_attach(
    tracepoints: &[&str],
    iterators: &[&str],
) -> Result<aya::Btf, aya::BtfError> {
    let names: Vec<(u32, String)> = tracepoints
        .iter()
        .map(|t| (TYPEDEF, format!("btf_trace_{t}")))
        .chain(iterators.iter().map(|i| (FUNC, format!("bpf_iter_{i}"))))
        .collect();
    let names: Vec<(u32, &str)> = names.iter().map(|(k, n)| (*k, n.as_str())).collect();
    let ids = kernel_btf(|data| type_ids(data, &names));
    match ids {
        Some(ids) => aya::Btf::parse(&stand_in(&ids), aya::Endianness::default()),
        None => aya::Btf::from_sys_fs(),
    }
}

/// `f` of the kernel's BTF, mapped (no copy) or else read; `None` when it is unreadable.
#[cfg(feature = "bpf")]
fn kernel_btf<T>(f: impl FnOnce(&[u8]) -> Option<T>) -> Option<T> {
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
        let part = for_attach(&tracepoints, &["task"]).unwrap();
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
            let mut blob = MAGIC.to_ne_bytes().to_vec();
            blob.extend_from_slice(&[1, 0]);
            for word in [HEADER as u32, lens[0], lens[1], lens[2], lens[3]] {
                blob.extend_from_slice(&word.to_ne_bytes());
            }
            blob.extend_from_slice(&body);
            let _ = type_ids(&blob, &[(TYPEDEF, "btf_trace_x")]);
        }
    }
}
