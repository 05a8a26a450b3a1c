//! Against the machine running the tests: whatever it is, no panic.

use super::*;

#[test]
fn device_of_root_resolves_or_fails_cleanly() {
    let root = SysRoot::real();
    match from_path(&root, Path::new("/")) {
        Ok(dev) => {
            eprintln!("/ is on {dev:?}");
            assert!(!dev.name.is_empty());
            assert!(dev.logical_block_size >= 512);
            let stats = devices_for_stats(&root, &dev).expect("leaves of a resolved device");
            assert_eq!(stats[0], dev);
            holders(&root, &dev).expect("holders of a resolved device");
        }
        // Containers and tmpfs roots have no block device; the error must say which link.
        Err(e) => assert!(e.to_string().contains("dev/block/"), "{e}"),
    }
}
