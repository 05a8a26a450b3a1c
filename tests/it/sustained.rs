//! `bench disk --suite sustained`: a device that writes fast until its cache is full and slowly
//! after has its cliff found where it is. The device is a loop device over an image on a FUSE
//! filesystem (tests/helpers/passfs.py) that writes at 16 MiB/s for the first 40 MiB it is given
//! and at 4 MiB/s after.

use crate::common::*;

const MIB: u64 = 1 << 20;
const CACHE: u64 = 40 * MIB;

#[test]
fn the_cliff_of_a_device_whose_cache_fills_is_found_where_it_is() {
    if let Some(why) = fuse_missing() {
        skip(&format!("sustained cliff test: {why}"));
        return;
    }
    let backing = tempfile::tempdir_in("/dev/shm").unwrap();
    let fs = FuseMount::start(
        backing.path(),
        &[
            "--write-rate",
            &(16 * MIB).to_string(),
            "--slow-after",
            &CACHE.to_string(),
            "--slow-rate",
            &(4 * MIB).to_string(),
        ],
    );
    let Some(dev) = LoopDev::new_in("sustained cliff test", 64 * MIB, fs.path()) else {
        return;
    };
    let o = run(&[
        "bench",
        "disk",
        dev.path(),
        "--suite",
        "sustained",
        "--size",
        "64M",
        "--flat-for",
        "2s",
        "--destroy-data",
        "--json",
    ]);
    let v = json_ok(&o);
    assert_eq!(v["suite"]["name"], "sustained", "{v}");
    assert_eq!(v["suite"]["standard"], false);
    let seq = &v["tests"][0];
    let cliff = &seq["cliff"];
    let before = cliff["bytes_before"].as_f64().expect("a cliff") as u64;
    assert!(
        before.abs_diff(CACHE) <= CACHE / 10,
        "cliff after {before} bytes, the cache holds {CACHE}: {seq}"
    );
    let pct = cliff["after_pct"].as_f64().unwrap();
    assert!((10.0..=40.0).contains(&pct), "{cliff}");
    assert!(seq["timeline"].as_array().unwrap().len() >= 3, "{seq}");
    // The random test runs after it, on the spent cache, until its rate is flat.
    let rand = &v["tests"][1];
    assert_eq!(rand["rw"], "randwrite", "{rand}");
    assert!(rand["write"]["bytes"].as_u64().unwrap() > 0);
    assert!(!v["interrupted"].as_bool().unwrap());
}
