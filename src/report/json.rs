//! One JSON document on stdout, nothing else there.

use crate::bench::result::BenchReport;
use std::io::{self, Write};

/// Writes the report as one pretty-printed `tacho.bench.v1` JSON document and a newline,
/// with `verdict`: the words the text report leads with.
pub fn write(report: &BenchReport, out: &mut impl Write) -> io::Result<()> {
    let mut doc = serde_json::to_value(report)?;
    if let Some(fields) = doc.as_object_mut() {
        fields.insert(
            "verdict".into(),
            crate::bench::verdict::verdict(report).into(),
        );
    }
    serde_json::to_writer_pretty(&mut *out, &doc)?;
    writeln!(out)
}

/// A JSON document written with one of its fields streamed: `doc`'s fields in order, except
/// that `key`'s value is the items of `items`, each made (by `item`) only while it is
/// written. A list of every figure of a large comparison, built as one tree first, took
/// gigabytes; this way one item is in memory at a time.
pub fn write_streaming<T, I>(
    doc: &serde_json::Map<String, serde_json::Value>,
    key: &str,
    items: I,
    item: impl Fn(T) -> serde_json::Value,
    out: &mut impl Write,
) -> io::Result<()>
where
    I: IntoIterator<Item = T> + Clone,
{
    struct List<I, F>(I, F);
    impl<T, I, F> serde::Serialize for List<I, F>
    where
        I: IntoIterator<Item = T> + Clone,
        F: Fn(T) -> serde_json::Value,
    {
        fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
            s.collect_seq(self.0.clone().into_iter().map(&self.1))
        }
    }
    struct Doc<'a, L> {
        doc: &'a serde_json::Map<String, serde_json::Value>,
        key: &'a str,
        list: L,
    }
    impl<L: serde::Serialize> serde::Serialize for Doc<'_, L> {
        fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
            use serde::ser::SerializeMap;
            let mut map = s.serialize_map(Some(self.doc.len()))?;
            for (k, v) in self.doc {
                if k == self.key {
                    map.serialize_entry(k, &self.list)?;
                } else {
                    map.serialize_entry(k, v)?;
                }
            }
            map.end()
        }
    }
    let doc = Doc {
        doc,
        key,
        list: List(items, item),
    };
    serde_json::to_writer_pretty(&mut *out, &doc)?;
    writeln!(out)
}
