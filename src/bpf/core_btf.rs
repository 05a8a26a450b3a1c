//! The kernel types an object's CO-RE relocations are matched against, as a small BTF that
//! aya's loader relocates with instead of the whole kernel BTF.
//!
//! aya relocates an object's field accesses against a whole parse of the kernel's BTF
//! (~130,000 types decoded), and for each struct the object declares it reads the name of
//! every kernel type: with the block tracer's eleven structs that was ~18 ms of a short
//! `tacho top`'s ~85 ms of CPU, and the parse ~15 ms more (docs/benchmarks.md, issue 38).
//!
//! Matching a field access starts from the kernel types that have the struct's name, then
//! goes member by member through what the members hold in place (nested structs and unions,
//! arrays, typedefs, qualifiers), never through a pointer: a pointer member matches any
//! pointer, and a field behind it is another relocation, matched from its own struct's name.
//! So the kernel's structs, unions and enums that bear a name the object's own BTF declares,
//! with everything they hold in place, are all that matching reads: a few thousand types.
//! They are copied here in their kernel order, renumbered, each pointer's target made `void`.
//!
//! Not carried: the kernel's type ids. A relocation that asks for a kernel type's id,
//! existence or size (`bpf_core_type_id_kernel` and kin) would get this blob's; tacho's
//! objects use none, and a test relocates each object against both BTFs and compares every
//! instruction.

use std::collections::{HashMap, HashSet};

use super::btf_blob::{Blob, TYPE, assemble, kind, u32_at};

/// A name without its CO-RE flavour (`task_struct___tasks` is matched as `task_struct`), as
/// aya drops it on both sides.
fn flavourless(name: &[u8]) -> &[u8] {
    name.windows(3)
        .position(|w| w == b"___")
        .map_or(name, |at| &name[..at])
}

/// The kinds a relocation's struct is matched by name against (the kind must agree too).
fn named_root(k: u32) -> bool {
    matches!(k, kind::STRUCT | kind::UNION | kind::ENUM | kind::ENUM64)
}

/// The object's `.BTF` section; `None` when the object is not an ELF file that has one.
fn object_btf(object: &[u8]) -> Option<&[u8]> {
    use object::{Object, ObjectSection};
    object::File::parse(object)
        .ok()?
        .section_by_name(".BTF")?
        .data()
        .ok()
}

/// The flavourless names of the structs, unions and enums a BTF blob declares.
fn declared_names(btf: &[u8]) -> Option<HashSet<&[u8]>> {
    let blob = Blob::parse(btf)?;
    let mut names = HashSet::new();
    for record in blob.records() {
        let record = record?;
        if named_root(record.kind)
            && let Some(name) = blob.name(record.name_off)
            && !name.is_empty()
        {
            names.insert(flavourless(name));
        }
    }
    Some(names)
}

/// Calls `f` with each (byte position of, type id) reference a record of `k` makes to a type
/// it holds in place; `None` for a kind that no struct holds in place (functions, variables,
/// sections), which the walk from structs never reaches in a well-formed BTF.
fn held(k: u32, vlen: usize, mut f: impl FnMut(usize)) -> Option<()> {
    match k {
        kind::INT | kind::FWD | kind::FLOAT | kind::ENUM | kind::ENUM64 | kind::PTR => {}
        // TYPEDEF, VOLATILE, CONST, RESTRICT, TYPE_TAG: the type they qualify.
        8..=11 | kind::TYPE_TAG => f(8),
        // struct btf_array: element type, index type.
        kind::ARRAY => {
            f(TYPE);
            f(TYPE + 4);
        }
        // struct btf_member: name, type, offset.
        kind::STRUCT | kind::UNION => (0..vlen).for_each(|i| f(TYPE + 12 * i + 4)),
        _ => return None,
    }
    Some(())
}

/// The byte positions of the names in a record of `k` besides its own: members' and
/// enumerators'.
fn inner_names(k: u32, vlen: usize) -> impl Iterator<Item = usize> {
    let step = match k {
        kind::STRUCT | kind::UNION | kind::ENUM64 => 12,
        kind::ENUM => 8,
        _ => 0,
    };
    (0..if step == 0 { 0 } else { vlen }).map(move |i| TYPE + step * i)
}

/// The stand-in BTF for relocating `object` against `kernel` (a whole BTF blob); `None` when
/// either cannot be walked, and the caller lets aya parse the whole kernel BTF.
pub(crate) fn stand_in(kernel: &[u8], object: &[u8]) -> Option<Vec<u8>> {
    for_names(kernel, &declared_names(object_btf(object)?)?)
}

/// The kernel's (`kernel`, a whole BTF blob) structs, unions and enums named in `wanted`, with
/// what they hold in place, renumbered into a blob of their own.
fn for_names(kernel: &[u8], wanted: &HashSet<&[u8]>) -> Option<Vec<u8>> {
    // Hashing every kernel struct's name would cost more than the rest; most fail at the
    // first byte.
    let mut first = [false; 256];
    for name in wanted.iter().filter_map(|n| n.first()) {
        first[usize::from(*name)] = true;
    }
    let blob = Blob::parse(kernel)?;
    let mut records: Vec<&[u8]> = Vec::new();
    let mut stack = Vec::new();
    for record in blob.records() {
        let record = record?;
        if named_root(record.kind)
            && let Some(name) = blob.name(record.name_off)
            && name.first().is_some_and(|&b| first[usize::from(b)])
            && wanted.contains(flavourless(name))
        {
            stack.push(record.id);
        }
        records.push(record.bytes);
    }
    // What the roots hold in place, by id (index 0 is `void`).
    let mut keep = vec![false; records.len() + 1];
    while let Some(id) = stack.pop() {
        let Some(slot) = keep.get_mut(id as usize) else {
            return None; // a reference past the last type
        };
        if id == 0 || *slot {
            continue;
        }
        *slot = true;
        let bytes = records[id as usize - 1];
        let info = u32_at(bytes, 4)?;
        held((info >> 24) & 0x1f, (info & 0xffff) as usize, |at| {
            stack.extend(u32_at(bytes, at));
        })?;
    }
    let mut new_id = vec![0u32; keep.len()];
    let mut next = 0u32;
    for (id, _) in keep.iter().enumerate().filter(|&(_, &k)| k) {
        next += 1;
        new_id[id] = next;
    }
    let mut strings = vec![0u8];
    let mut interned: HashMap<&[u8], u32> = HashMap::new();
    let mut types = Vec::new();
    for (id, _) in keep.iter().enumerate().filter(|&(_, &k)| k) {
        let mut bytes = records[id - 1].to_vec();
        let info = u32_at(&bytes, 4)?;
        let (k, vlen) = ((info >> 24) & 0x1f, (info & 0xffff) as usize);
        for at in std::iter::once(0).chain(inner_names(k, vlen)) {
            let name = blob.name(u32_at(&bytes, at)?)?;
            let off = *interned.entry(name).or_insert_with(|| {
                let off = strings.len() as u32;
                strings.extend_from_slice(name);
                strings.push(0);
                off
            });
            bytes[at..at + 4].copy_from_slice(&off.to_ne_bytes());
        }
        if k == kind::PTR {
            bytes[8..12].copy_from_slice(&0u32.to_ne_bytes());
        }
        let mut refs = Vec::new();
        held(k, vlen, |at| refs.push(at))?;
        for at in refs {
            let old = u32_at(&bytes, at)? as usize;
            bytes[at..at + 4].copy_from_slice(&new_id.get(old)?.to_ne_bytes());
        }
        types.extend_from_slice(&bytes);
    }
    Some(assemble(&types, &strings))
}

#[cfg(test)]
mod tests {
    use super::super::btf_blob::behind_a_header;
    use super::*;
    use proptest::prelude::*;

    /// A BTF blob made record by record.
    #[derive(Default)]
    struct Made {
        types: Vec<u8>,
        strings: Vec<u8>,
    }

    impl Made {
        fn name(&mut self, name: &str) -> u32 {
            if self.strings.is_empty() {
                self.strings.push(0);
            }
            if name.is_empty() {
                return 0;
            }
            let off = self.strings.len() as u32;
            self.strings.extend_from_slice(name.as_bytes());
            self.strings.push(0);
            off
        }

        /// A record of `k` named `name` with `vlen` entries, its size or type word, then the
        /// words that follow it.
        fn record(&mut self, name: &str, k: u32, vlen: u32, size_or_type: u32, extra: &[u32]) {
            let name = self.name(name);
            for word in [name, (k << 24) | vlen, size_or_type]
                .into_iter()
                .chain(extra.iter().copied())
            {
                self.types.extend_from_slice(&word.to_ne_bytes());
            }
        }

        fn blob(&mut self) -> Vec<u8> {
            self.name("");
            assemble(&self.types, &self.strings)
        }
    }

    /// A kernel of: 1 int; 2 struct wanted { u32 a; struct other *p; union { int b[1]; } };
    /// 3 typedef u32; 4 struct other; 5 pointer to 4; 6 the anonymous union; 7 int[1];
    /// 8 a function.
    fn kernel() -> Vec<u8> {
        let mut m = Made::default();
        m.record("int", kind::INT, 0, 4, &[32]);
        let (a, p) = (m.name("a"), m.name("p"));
        m.record(
            "wanted",
            kind::STRUCT,
            3,
            16,
            &[a, 3, 0, p, 5, 64, 0, 6, 128],
        );
        m.record("u32", kind::TYPEDEF, 0, 1, &[]);
        let x = m.name("x");
        m.record("other", kind::STRUCT, 1, 4, &[x, 1, 0]);
        m.record("", kind::PTR, 0, 4, &[]);
        let b = m.name("b");
        m.record("", kind::UNION, 1, 4, &[b, 7, 0]);
        m.record("", kind::ARRAY, 0, 0, &[1, 1, 1]);
        m.record("f", kind::FUNC, 0, 0, &[]);
        m.blob()
    }

    /// Each record of a blob: (kind, name, the words after the common part, size or type).
    fn records(blob: &[u8]) -> Vec<(u32, String, Vec<u32>, u32)> {
        let b = Blob::parse(blob).expect("a blob");
        b.records()
            .map(|r| {
                let r = r.expect("a record");
                let words = (TYPE..r.bytes.len())
                    .step_by(4)
                    .map(|at| u32_at(r.bytes, at).unwrap())
                    .collect();
                let name = String::from_utf8(b.name(r.name_off).unwrap().to_vec()).unwrap();
                (r.kind, name, words, u32_at(r.bytes, 8).unwrap())
            })
            .collect()
    }

    #[test]
    fn a_struct_comes_with_what_it_holds_in_place_but_not_what_it_points_to() {
        let wanted = HashSet::from([&b"wanted"[..]]);
        let out = for_names(&kernel(), &wanted).expect("walks");
        let got = records(&out);
        let kinds: Vec<u32> = got.iter().map(|r| r.0).collect();
        // int, wanted, u32, the pointer, the union, the array; not `other`, not the function.
        assert_eq!(
            kinds,
            [
                kind::INT,
                kind::STRUCT,
                kind::TYPEDEF,
                kind::PTR,
                kind::UNION,
                kind::ARRAY
            ]
        );
        let b = Blob::parse(&out).unwrap();
        let name = |off: u32| String::from_utf8(b.name(off).unwrap().to_vec()).unwrap();
        let members = &got[1].2;
        // Members renumbered: u32 is 3, the pointer 4, the union 5; names and offsets kept.
        assert_eq!(
            (name(members[0]), members[1], members[2]),
            ("a".into(), 3, 0)
        );
        assert_eq!(
            (name(members[3]), members[4], members[5]),
            ("p".into(), 4, 64)
        );
        assert_eq!((members[7], members[8]), (5, 128));
        assert_eq!(got[1].1, "wanted");
        assert_eq!(got[1].3, 16, "the struct's size is kept");
        assert_eq!(got[2].3, 1, "the typedef still names int");
        assert_eq!(got[3].3, 0, "the pointer points to void");
        assert_eq!(name(got[4].2[0]), "b");
        assert_eq!(got[5].2, [1, 1, 1], "the array of int, by int, of one");
    }

    #[test]
    fn names_are_matched_without_their_flavour_on_either_side() {
        let mut local = Made::default();
        local.record("wanted___mine", kind::STRUCT, 0, 0, &[]);
        local.record("", kind::STRUCT, 0, 0, &[]);
        local.record("int", kind::INT, 0, 4, &[32]);
        let local = local.blob();
        let names = declared_names(&local).unwrap();
        assert_eq!(names, HashSet::from([&b"wanted"[..]]));
        let mut kernel = Made::default();
        kernel.record("wanted___v2", kind::STRUCT, 0, 8, &[]);
        kernel.record("wanted", kind::UNION, 0, 8, &[]);
        kernel.record("unwanted", kind::STRUCT, 0, 8, &[]);
        let out = for_names(&kernel.blob(), &names).unwrap();
        let got: Vec<(u32, String)> = records(&out).into_iter().map(|r| (r.0, r.1)).collect();
        assert_eq!(
            got,
            [
                (kind::STRUCT, "wanted___v2".to_string()),
                (kind::UNION, "wanted".to_string())
            ]
        );
    }

    #[test]
    fn what_it_cannot_walk_it_leaves_to_aya() {
        let wanted = HashSet::from([&b"wanted"[..]]);
        let whole = kernel();
        assert!(for_names(&whole[..whole.len() - 20], &wanted).is_none());
        assert!(stand_in(&whole, b"not an ELF object").is_none());
        // A struct member that names a type past the last: refused, not followed.
        let mut m = Made::default();
        let a = m.name("a");
        m.record("wanted", kind::STRUCT, 1, 4, &[a, 99, 0]);
        assert!(for_names(&m.blob(), &wanted).is_none());
    }

    /// Each of tacho's eBPF objects relocated against the stand-in gets exactly the
    /// instructions it gets against the whole kernel BTF, as aya's loader relocates them.
    #[cfg(feature = "bpf")]
    #[test]
    fn every_object_relocates_as_against_the_whole_kernel_btf() {
        let Ok(kernel) = std::fs::read("/sys/kernel/btf/vmlinux") else {
            assert!(
                std::env::var_os("CI").is_none(),
                "CI's kernel has BTF: /sys/kernel/btf/vmlinux must be readable"
            );
            eprintln!("skipped: this kernel has no readable BTF");
            return;
        };
        let whole = aya::Btf::parse(&kernel, aya::Endianness::default()).unwrap();
        let objects: [(&str, &[u8]); 3] = [
            ("blockio", include_bytes!("../../bpf/blockio.bpf.o")),
            ("files", include_bytes!("../../bpf/files.bpf.o")),
            ("offcpu", include_bytes!("../../bpf/offcpu.bpf.o")),
        ];
        for (name, object) in objects {
            let blob = stand_in(&kernel, object).expect("this kernel's BTF walks");
            assert!(
                blob.len() * 10 < kernel.len(),
                "{name}: the stand-in ({} bytes) is a small part of the kernel's ({})",
                blob.len(),
                kernel.len()
            );
            let part = aya::Btf::parse(&blob, aya::Endianness::default()).unwrap();
            let relocated = |btf: &aya::Btf| {
                let mut obj = aya_obj::Object::parse(object).unwrap();
                obj.relocate_btf(btf).unwrap();
                obj.functions
                    .values()
                    .flat_map(|f| f.instructions.iter())
                    .map(|i| (i.code, i.dst_reg(), i.src_reg(), i.off, i.imm))
                    .collect::<Vec<_>>()
            };
            let (want, got) = (relocated(&whole), relocated(&part));
            assert!(
                !want.iter().any(|i| i.4 == 0xBAD2310),
                "{name}: a relocation failed against the whole BTF"
            );
            assert_eq!(want, got, "{name}");
        }
    }

    proptest! {
        #[test]
        fn never_panics_behind_a_good_header(
            body in proptest::collection::vec(any::<u8>(), 0..512),
            lens in proptest::collection::vec(0u32..600, 4),
        ) {
            let blob = behind_a_header(&lens, &body);
            let _ = for_names(&blob, &HashSet::from([&b"a"[..], &b"\x04"[..]]));
            let _ = declared_names(&blob);
        }
    }
}
