//! The `schema` a document names, `tacho.KIND.vN`, as a type: the kinds of document the store
//! takes, and for each the newest version this tacho reads, which is the one it writes (the
//! writer's `SCHEMA`), so a bumped writer reads its own documents without a second edit. Every
//! version from 1 up to that one reads; a newer one is refused by name, with the fix (a newer
//! tacho), rather than read as if its fields meant what this tacho's do.

use super::run::RunKind;

/// A kind of document the store takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DocKind {
    /// `tacho bench disk --json`, `runs export` (`tacho.bench.vN`).
    Bench,
    /// `tacho bench cpu --json`.
    Cpu,
    /// `tacho bench mem --json`.
    Mem,
    /// `tacho time --json`.
    Time,
    /// `tacho check --json`.
    Check,
    /// `tacho snapshot`.
    Snapshot,
    /// `tacho load --json`.
    Load,
}

impl DocKind {
    const ALL: [DocKind; 7] = [
        DocKind::Bench,
        DocKind::Cpu,
        DocKind::Mem,
        DocKind::Time,
        DocKind::Check,
        DocKind::Snapshot,
        DocKind::Load,
    ];

    /// The schema this tacho writes for the kind: the newest it reads.
    pub fn written(self) -> &'static str {
        match self {
            DocKind::Bench => crate::bench::result::SCHEMA,
            DocKind::Cpu => crate::cpubench::SCHEMA,
            DocKind::Mem => crate::membench::SCHEMA,
            DocKind::Time => crate::timing::result::SCHEMA,
            // Written by `report::check`, a layer above the store.
            DocKind::Check => "tacho.check.v1",
            DocKind::Snapshot => crate::snapshot::SCHEMA,
            DocKind::Load => crate::load::SCHEMA,
        }
    }

    /// What the store calls a run of this kind (a bench document says its own, in `run.kind`).
    pub fn run_kind(self) -> RunKind {
        match self {
            DocKind::Bench => RunKind::Disk,
            DocKind::Cpu => RunKind::Cpu,
            DocKind::Mem => RunKind::Mem,
            DocKind::Time => RunKind::Time,
            DocKind::Check => RunKind::Check,
            DocKind::Snapshot => RunKind::Snapshot,
            DocKind::Load => RunKind::Load,
        }
    }

    /// The newest version this tacho reads.
    fn newest(self) -> u64 {
        split(self.written()).map_or(1, |(_, v)| v)
    }
}

/// A schema this tacho reads: its kind and version.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Schema {
    /// What the document holds.
    pub kind: DocKind,
    /// Its version, from 1 to the newest this tacho reads.
    pub version: u64,
}

/// Why a schema is not read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SchemaError {
    /// A kind this tacho reads, in a version it does not know yet.
    #[error(
        "schema {schema:?} is newer than this tacho reads (up to {newest}); upgrade tacho \
         (to the version that wrote it, or later) to import it"
    )]
    Newer {
        /// The schema as the document names it.
        schema: String,
        /// The newest of its kind this tacho reads.
        newest: &'static str,
    },
    /// Not a kind of document the store takes (or not `tacho.KIND.vN` at all).
    #[error("schema {0:?} is not one tacho stores")]
    Unknown(String),
}

impl Schema {
    /// Reads a document's `schema`.
    pub fn parse(schema: &str) -> Result<Schema, SchemaError> {
        let unknown = || SchemaError::Unknown(schema.to_string());
        let (name, version) = split(schema).ok_or_else(unknown)?;
        let kind = DocKind::ALL
            .into_iter()
            .find(|k| split(k.written()).is_some_and(|(n, _)| n == name))
            .ok_or_else(unknown)?;
        if version > kind.newest() {
            return Err(SchemaError::Newer {
                schema: schema.to_string(),
                newest: kind.written(),
            });
        }
        Ok(Schema { kind, version })
    }
}

/// `tacho.NAME.vN` as (NAME, N), N written without leading zeros and at least 1 (a version
/// too large for a u64 is still a version: the largest).
fn split(schema: &str) -> Option<(&str, u64)> {
    let (name, digits) = schema.strip_prefix("tacho.")?.rsplit_once(".v")?;
    let canonical = !digits.is_empty()
        && digits.bytes().all(|b| b.is_ascii_digit())
        && !digits.starts_with('0');
    canonical.then(|| (name, digits.parse().unwrap_or(u64::MAX)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_kind_reads_what_this_tacho_writes() {
        for kind in DocKind::ALL {
            assert_eq!(
                Schema::parse(kind.written()),
                Ok(Schema {
                    kind,
                    version: kind.newest()
                })
            );
        }
        assert_eq!(DocKind::Bench.written(), "tacho.bench.v1");
        assert_eq!(DocKind::Check.newest(), 1);
    }

    #[test]
    fn newer_versions_are_refused_and_others_are_not_schemas_it_stores() {
        let newer = Schema::parse("tacho.cpu.v2").unwrap_err();
        assert_eq!(
            newer,
            SchemaError::Newer {
                schema: "tacho.cpu.v2".into(),
                newest: "tacho.cpu.v1"
            }
        );
        assert!(newer.to_string().contains("upgrade tacho"), "{newer}");
        assert!(matches!(
            Schema::parse("tacho.bench.v99999999999999999999999"),
            Err(SchemaError::Newer { .. })
        ));
        for other in [
            "tacho.bench.v0",
            "tacho.bench.v01",
            "tacho.bench.v",
            "tacho.bench.v+1",
            "tacho.bench",
            "tacho.stress.v1",
            "tacho.top.v2",
            "bench.v1",
            "",
        ] {
            assert_eq!(
                Schema::parse(other),
                Err(SchemaError::Unknown(other.into())),
                "{other}"
            );
        }
    }
}
