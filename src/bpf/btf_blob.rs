//! A walk over a raw BTF blob (the kernel's `/sys/kernel/btf/vmlinux`, or an object's `.BTF`
//! section) without decoding it into types: each record's kind, name and bytes, in id order.
//! aya decodes all ~130,000 kernel types into values before it can look one up, a sixth of a
//! short `tacho top`'s CPU; the stand-ins built from this walk (`attach_btf`, `core_btf`) hand
//! it only the few it needs. Anything unexpected (another byte order, a kind this walk does
//! not know, a length past the end) ends the walk with `None`, and callers fall back to aya's
//! whole parse.

/// Bytes of `struct btf_header`.
pub(crate) const HEADER: usize = 24;
/// Bytes of `struct btf_type`, the part every type record starts with.
pub(crate) const TYPE: usize = 12;
/// The kernel's magic number, read in this machine's byte order.
pub(crate) const MAGIC: u16 = 0xeb9f;

/// The BTF kinds (`BTF_KIND_*`) that the stand-ins treat apart.
pub(crate) mod kind {
    pub(crate) const INT: u32 = 1;
    pub(crate) const PTR: u32 = 2;
    pub(crate) const ARRAY: u32 = 3;
    pub(crate) const STRUCT: u32 = 4;
    pub(crate) const UNION: u32 = 5;
    pub(crate) const ENUM: u32 = 6;
    pub(crate) const FWD: u32 = 7;
    pub(crate) const TYPEDEF: u32 = 8;
    pub(crate) const FUNC: u32 = 12;
    pub(crate) const FLOAT: u32 = 16;
    pub(crate) const TYPE_TAG: u32 = 18;
    pub(crate) const ENUM64: u32 = 19;
}

/// The bytes that follow the common part of a type record of `kind` with `vlen` entries;
/// `None` for a kind this walk does not know (a newer kernel's).
pub(crate) fn extra_len(kind: u32, vlen: usize) -> Option<usize> {
    Some(match kind {
        // PTR, FWD, TYPEDEF, VOLATILE, CONST, RESTRICT, FUNC, FLOAT, TYPE_TAG.
        2 | 7..=12 | 16 | 18 => 0,
        // INT, VAR, DECL_TAG: one 32-bit word.
        1 | 14 | 17 => 4,
        // ARRAY: struct btf_array.
        3 => 12,
        // STRUCT, UNION (btf_member), DATASEC (btf_var_secinfo), ENUM64 (btf_enum64).
        4 | 5 | 15 | 19 => 12usize.checked_mul(vlen)?,
        // ENUM (btf_enum), FUNC_PROTO (btf_param).
        6 | 13 => 8usize.checked_mul(vlen)?,
        _ => return None,
    })
}

pub(crate) fn u32_at(data: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_ne_bytes(
        data.get(at..at.checked_add(4)?)?.try_into().ok()?,
    ))
}

/// A BTF blob's type and string sections.
pub(crate) struct Blob<'a> {
    types: &'a [u8],
    strings: &'a [u8],
}

/// One type record: its id, kind, name and every byte of it.
pub(crate) struct Record<'a> {
    pub(crate) id: u32,
    pub(crate) kind: u32,
    pub(crate) name_off: u32,
    pub(crate) bytes: &'a [u8],
}

impl<'a> Blob<'a> {
    /// The sections of a whole blob in this machine's byte order; `None` when it is not one.
    pub(crate) fn parse(data: &'a [u8]) -> Option<Self> {
        let magic = u16::from_ne_bytes(data.get(0..2)?.try_into().ok()?);
        if magic != MAGIC {
            return None;
        }
        let hdr_len = u32_at(data, 4)? as usize;
        let field = |at| u32_at(data, at).map(|v| v as usize);
        let section = |off: usize, len: usize| {
            let start = hdr_len.checked_add(off)?;
            data.get(start..start.checked_add(len)?)
        };
        Some(Blob {
            types: section(field(8)?, field(12)?)?,
            strings: section(field(16)?, field(20)?)?,
        })
    }

    /// The name at `off` in the string section, without its terminating NUL.
    pub(crate) fn name(&self, off: u32) -> Option<&'a [u8]> {
        let rest = self.strings.get(off as usize..)?;
        Some(&rest[..rest.iter().position(|&b| b == 0)?])
    }

    /// The records in id order (the first is id 1); an item is `None` where the walk cannot go
    /// on (and the iterator ends after it).
    pub(crate) fn records(&self) -> Records<'a> {
        Records {
            types: self.types,
            at: 0,
            id: 1,
        }
    }
}

pub(crate) struct Records<'a> {
    types: &'a [u8],
    at: usize,
    id: u32,
}

impl<'a> Iterator for Records<'a> {
    type Item = Option<Record<'a>>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.at >= self.types.len() {
            return None;
        }
        let record = self.step();
        if record.is_none() {
            self.at = self.types.len();
        }
        Some(record)
    }
}

impl<'a> Records<'a> {
    fn step(&mut self) -> Option<Record<'a>> {
        let name_off = u32_at(self.types, self.at)?;
        let info = u32_at(self.types, self.at + 4)?;
        let kind = (info >> 24) & 0x1f;
        let vlen = (info & 0xffff) as usize;
        let len = TYPE.checked_add(extra_len(kind, vlen)?)?;
        let end = self.at.checked_add(len)?;
        let bytes = self.types.get(self.at..end)?;
        let record = Record {
            id: self.id,
            kind,
            name_off,
            bytes,
        };
        self.at = end;
        self.id = self.id.checked_add(1)?;
        Some(record)
    }
}

/// A blob of `types` (records, in id order from 1) and `strings` (starting with the empty
/// name), in this machine's byte order.
pub(crate) fn assemble(types: &[u8], strings: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(HEADER + types.len() + strings.len());
    out.extend_from_slice(&MAGIC.to_ne_bytes());
    out.extend_from_slice(&[1, 0]); // version, flags
    for word in [HEADER, 0, types.len(), types.len(), strings.len()] {
        out.extend_from_slice(&(word as u32).to_ne_bytes());
    }
    out.extend_from_slice(types);
    out.extend_from_slice(strings);
    out
}

/// A header with the magic and these four section offsets and lengths, then `body`: what the
/// walks' property tests feed them.
#[cfg(test)]
pub(crate) fn behind_a_header(lens: &[u32], body: &[u8]) -> Vec<u8> {
    let mut blob = MAGIC.to_ne_bytes().to_vec();
    blob.extend_from_slice(&[1, 0]);
    for word in std::iter::once(HEADER as u32).chain(lens.iter().copied()) {
        blob.extend_from_slice(&word.to_ne_bytes());
    }
    blob.extend_from_slice(body);
    blob
}
