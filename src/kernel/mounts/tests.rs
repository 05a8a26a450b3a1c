use super::*;
use crate::kernel::fixture;
use proptest::prelude::*;

/// Captured on this project's Firecracker VM (one sandbox-specific line removed).
const REAL: &str = include_str!("../../../tests/fixtures/kernel/mountinfo-firecracker.txt");

const ESCAPED: &str = "\
27 1 254:0 / / rw,relatime shared:1 - ext4 /dev/vda rw,discard
60 27 8:17 / /mnt/my\\040disk rw,noatime shared:30 master:2 - xfs /dev/sdb1 rw,attr2,inode64
61 27 8:33 / /mnt/my\\040disk/tab\\011dir rw - ext4 /dev/sdc1 rw
62 27 0:40 / /data rw - tmpfs none rw,size=1024k
63 27 8:48 / /data rw - ext4 /dev/sdd rw
";

fn path() -> &'static Path {
    Path::new("/proc/self/mountinfo")
}

#[test]
fn parses_real_capture() {
    let mounts = parse_mountinfo(REAL, path()).unwrap();
    let root = mounts
        .iter()
        .find(|m| m.mount_point == Path::new("/"))
        .unwrap();
    assert_eq!((root.major, root.minor), (254, 0));
    assert_eq!(root.fs_type, "ext4");
    assert_eq!(root.source.as_deref(), Some("/dev/vda"));
    assert_eq!(
        root.options,
        "rw,relatime,discard,resv_strict,resuid=65534,resgid=65534"
    );
}

#[test]
fn escaped_mount_points_are_unescaped_and_longest_prefix_wins() {
    let mounts = parse_mountinfo(ESCAPED, path()).unwrap();
    let find = |p: &str| mount_containing(&mounts, Path::new(p)).unwrap();
    let m = find("/mnt/my disk/file");
    assert_eq!(m.mount_point, Path::new("/mnt/my disk"));
    assert_eq!((m.major, m.minor, m.fs_type.as_str()), (8, 17, "xfs"));
    assert_eq!(m.options, "rw,noatime,attr2,inode64");
    assert_eq!(find("/mnt/my disk/tab\tdir/x").minor, 33);
    // Component-wise: /mnt/my diskette is not under /mnt/my disk.
    assert_eq!(find("/mnt/my diskette").mount_point, Path::new("/"));
    // Two mounts on /data: the later one hides the earlier.
    let data = find("/data/x");
    assert_eq!((data.major, data.source.as_deref()), (8, Some("/dev/sdd")));
    assert_eq!(mounts[3].source, None);
}

#[test]
fn mount_points_that_are_not_utf8_keep_their_bytes() {
    use std::os::unix::ffi::OsStrExt;
    let text = b"60 27 8:17 / /mnt/a\xff\\012b rw - ext4 /dev/sdb1 rw\n\
                 61 27 8:18 / /mnt/a\xfe\\012b rw - ext4 /dev/sdb2 rw\n";
    let mounts = parse_mountinfo_bytes(text, path()).unwrap();
    assert_eq!(
        mounts[0].mount_point.as_os_str().as_bytes(),
        b"/mnt/a\xff\nb"
    );
    assert_eq!(
        mounts[1].mount_point.as_os_str().as_bytes(),
        b"/mnt/a\xfe\nb"
    );
}

#[test]
fn mount_of_path_reads_fixture_and_canonicalizes() {
    let dir = tempfile::tempdir().unwrap();
    fixture::write(dir.path(), "proc/self/mountinfo", ESCAPED);
    let root = SysRoot::under(dir.path());
    let m = mount_of_path(&root, dir.path()).unwrap();
    assert_eq!(m.mount_point, Path::new("/"));
    let devnos = mounted_devnos(&root).unwrap();
    assert!(devnos.contains(&(8, 17, "/mnt/my disk".to_string())));
    let err = mount_of_path(&root, &dir.path().join("missing")).unwrap_err();
    assert!(err.is_not_found());
}

#[test]
fn malformed_mountinfo_names_file_and_line() {
    let text = format!("{ESCAPED}64 27 8:x / /y rw - ext4 /dev/y rw\n");
    let err = parse_mountinfo(&text, path()).unwrap_err().to_string();
    assert!(err.contains("/proc/self/mountinfo line 6"), "{err}");
    assert!(parse_mountinfo("1 2 3:4 / /x rw", path()).is_err());
}

#[test]
fn swaps() {
    let text = "Filename\t\t\t\tType\t\tSize\t\tUsed\t\tPriority\n\
                /dev/dm-1                               partition\t8388604\t\t0\t\t-2\n\
                /swap\\040file                           file\t\t1048572\t\t0\t\t-3\n";
    let paths: Vec<String> = parse_swap_areas(text, Path::new("/proc/swaps"))
        .unwrap()
        .into_iter()
        .map(|s| s.path)
        .collect();
    assert_eq!(
        paths,
        vec!["/dev/dm-1".to_string(), "/swap file".to_string()]
    );
    let empty = include_str!("../../../tests/fixtures/kernel/swaps-empty.txt");
    assert!(
        parse_swap_areas(empty, Path::new("/proc/swaps"))
            .unwrap()
            .is_empty()
    );
    assert!(parse_swap_areas("Filename\n/dev/sda2 partition 1", Path::new("/proc/swaps")).is_err());
    let areas = parse_swap_areas(text, Path::new("/proc/swaps")).unwrap();
    assert_eq!(areas[0].kind, "partition");
    assert_eq!(areas[0].size_bytes, 8388604 * 1024);
    assert_eq!((areas[1].used_bytes, areas[1].priority), (0, -3));
    let err = parse_swap_areas(
        "Filename\n/dev/sda2 partition x 0 -2\n",
        Path::new("/proc/swaps"),
    )
    .unwrap_err();
    assert!(err.to_string().contains("line 2"), "{err}");
}

#[test]
fn devno() {
    assert_eq!(parse_devno("259:3"), Some((259, 3)));
    assert_eq!(parse_devno("259:"), None);
    assert_eq!(parse_devno("-1:3"), None);
}

proptest! {
    #[test]
    fn mountinfo_parser_never_panics(s in "\\PC*") {
        let _ = parse_mountinfo(&s, path());
    }

    #[test]
    fn mountinfo_fields_never_panic(fields in proptest::collection::vec("[-a-z0-9:/\\\\,=]{0,8}", 0..14)) {
        let _ = parse_mountinfo(&fields.join(" "), path());
    }

    #[test]
    fn swaps_parser_never_panics(s in "\\PC*") {
        let _ = parse_swap_areas(&s, Path::new("/proc/swaps"));
    }
}
