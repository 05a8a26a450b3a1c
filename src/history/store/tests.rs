use super::*;
use crate::diagnose::sample::Sampler;
use crate::kernel::SysRoot;
use std::os::unix::fs::MetadataExt;

const FIX: &str = "tests/fixtures/top/firecracker";

/// A record of the captured tree, stamped at `unix_s`.
pub(super) fn record(unix_s: f64) -> Record {
    let root = SysRoot::new(format!("{FIX}/a/proc"), format!("{FIX}/sys"));
    let mut sampler = Sampler::new(root).unwrap();
    let mut sample = sampler.sample().unwrap();
    sample.unix_time_s = unix_s;
    let host = ModelOptions {
        top: 0,
        sort: SortKey::Io,
        ticks_per_s: 100.0,
        page_size: 4096,
        delayacct: Some(false),
    };
    Record::new(sample, sampler.devices(), &host, 1.0)
}

#[test]
fn samples_come_back_as_written() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("h/history.db");
    let h = History::create(&path, Make::Chain).unwrap();
    for t in [100.0, 101.0, 102.0] {
        h.append(&record(t)).unwrap();
    }
    let r = History::open(&path).unwrap();
    let mut back = Vec::new();
    r.scan(100.5, 102.0, |rec| back.push(rec)).unwrap();
    // The sample at or before the start opens the first interval.
    let times: Vec<f64> = back.iter().map(|r| r.sample.unix_time_s).collect();
    assert_eq!(times, [100.0, 101.0, 102.0]);
    let want = record(100.0);
    assert_eq!(back[0].sample.disks, want.sample.disks);
    assert_eq!(
        back[0].sample.processes.processes,
        want.sample.processes.processes
    );
    assert_eq!(
        back[2].sample.taken - back[0].sample.taken,
        Duration::from_secs(2)
    );
    let last_two: Vec<f64> = r
        .recent(101.5, 2)
        .unwrap()
        .iter()
        .map(|r| r.sample.unix_time_s)
        .collect();
    assert_eq!(last_two, [100.0, 101.0]);
    let mode = std::fs::metadata(path.parent().unwrap()).unwrap().mode() & 0o777;
    assert_eq!(mode, 0o700);
}

#[test]
fn retention_drops_the_oldest_and_keeps_the_newest() {
    let dir = tempfile::tempdir().unwrap();
    let h = History::create(&dir.path().join("history.db"), Make::Chain).unwrap();
    let mut rec = record(0.0);
    // Three keys' worth of rows (each key and the deltas after it go together).
    for t in 0..130 {
        rec.sample.unix_time_s = f64::from(t);
        h.append(&rec).unwrap();
    }
    let limit = h.used_bytes().unwrap() / 2;
    let dropped = h.prune(129.0, Duration::from_secs(86_400), limit).unwrap();
    assert!(dropped > 0);
    assert!(h.used_bytes().unwrap() <= limit);
    let (n, first, last) = h.span().unwrap().unwrap();
    assert_eq!(last, 129.0, "the newest is kept");
    assert_eq!(n, 130 - dropped);
    assert_eq!(first, dropped as f64, "the oldest went first");
    assert_eq!(readable(&h, first), n);
    // By age: everything older than 5 s before 129 goes, but for the key of the first kept.
    h.prune(129.0, Duration::from_secs(5), u64::MAX).unwrap();
    let (n, first, _) = h.span().unwrap().unwrap();
    assert!((124.0 - 61.0..=124.0).contains(&first), "{first}");
    assert_eq!(readable(&h, first), n);
}

/// How many rows from `from` on decode.
fn readable(h: &History, from: f64) -> u64 {
    let mut n = 0;
    h.scan(from, f64::MAX, |_| n += 1).unwrap();
    n
}

#[test]
fn a_delta_whose_key_is_gone_is_damaged_not_a_panic() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("history.db");
    let h = History::create(&path, Make::Chain).unwrap();
    for t in [1.0, 2.0] {
        h.append(&record(t)).unwrap();
    }
    let rows: Vec<Vec<u8>> = h
        .conn
        .prepare("SELECT data FROM samples ORDER BY id")
        .unwrap()
        .query_map([], |r| r.get(0))
        .unwrap()
        .collect::<rusqlite::Result<_>>()
        .unwrap();
    // The first is a whole sample, the second a few hundred bytes against it.
    assert_eq!(codec::key_of(&rows[0]), None);
    assert_eq!(codec::key_of(&rows[1]), Some(1));
    assert!(
        rows[1].len() * 4 < rows[0].len(),
        "{} {}",
        rows[1].len(),
        rows[0].len()
    );
    h.conn
        .execute("DELETE FROM samples WHERE id = 1", [])
        .unwrap();
    let e = History::open(&path)
        .unwrap()
        .scan(0.0, 3.0, drop)
        .err()
        .unwrap();
    assert!(e.to_string().contains("its key row is missing"), "{e}");
}

#[test]
fn refuses_foreign_and_damaged_files_and_links() {
    let dir = tempfile::tempdir().unwrap();
    let other = dir.path().join("other.db");
    rusqlite::Connection::open(&other)
        .unwrap()
        .execute_batch("CREATE TABLE t (x)")
        .unwrap();
    let e = History::open(&other).err().unwrap().to_string();
    assert!(e.contains("not a tacho history"), "{e}");
    assert!(History::create(&other, Make::Chain).is_err());
    let junk = dir.path().join("junk.db");
    std::fs::write(&junk, vec![7u8; 8192]).unwrap();
    let e = format!("{:#}", History::open(&junk).err().unwrap());
    assert!(e.contains("not a tacho history"), "{e}");
    let link = dir.path().join("link.db");
    std::os::unix::fs::symlink(&other, &link).unwrap();
    assert!(History::create(&link, Make::Chain).is_err());
    assert!(History::open(&link).is_err());
}

#[test]
fn a_damaged_row_is_one_error_not_a_panic() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("history.db");
    let h = History::create(&path, Make::Chain).unwrap();
    h.append(&record(1.0)).unwrap();
    h.conn
        .execute(
            "INSERT INTO samples (unix_s, data) VALUES (2.0, x'00ff')",
            [],
        )
        .unwrap();
    let e = History::open(&path)
        .unwrap()
        .scan(0.0, 3.0, drop)
        .err()
        .unwrap();
    assert!(e.to_string().contains("damaged sample"), "{e}");
}

#[test]
fn zstd_rows_that_would_inflate_past_their_bound_or_lie_about_their_size_are_refused() {
    let json = serde_json::to_vec(&record(1.0)).unwrap();
    // A key of 8 MiB of spaces: a few hundred bytes that state 8 MiB, far past 100 to 1.
    let bomb = zstd::bulk::compress(&vec![b' '; 8 << 20], 1).unwrap();
    let e = codec::decode(&bomb, 1.0, None).unwrap_err().to_string();
    assert!(e.contains("decompression bomb"), "{e}");
    // A frame that does not state its size (streamed) is not one the recorder writes.
    let mut streamed = Vec::new();
    zstd::stream::copy_encode(&json[..], &mut streamed, 1).unwrap();
    let e = codec::decode(&streamed, 1.0, None).unwrap_err().to_string();
    assert!(e.contains("does not state its size"), "{e}");
    // A delta whose bytes after its key's id are not a zstd frame, and one cut short.
    let mut delta = vec![b'D'];
    delta.extend_from_slice(&1i64.to_le_bytes());
    delta.extend_from_slice(b"not zstd");
    let e = codec::decode(&delta, 1.0, Some(&json))
        .unwrap_err()
        .to_string();
    assert!(e.contains("not a zstd frame"), "{e}");
    let e = codec::decode(&delta[..5], 1.0, Some(&json))
        .unwrap_err()
        .to_string();
    assert!(e.contains("not one tacho writes"), "{e}");
    // A key row's own text decodes as the sample it holds.
    let key = codec::key(&json).unwrap();
    assert_eq!(
        codec::decode(&key, 1.0, None).unwrap().sample.unix_time_s,
        1.0
    );
}
