//! Helpers for tests that build fake /proc and /sys trees in a tempdir.

use std::fs;
use std::path::Path;

/// Writes `content` to `dir/rel`, creating parent directories.
pub fn write(dir: &Path, rel: &str, content: &str) {
    let path = dir.join(rel);
    fs::create_dir_all(path.parent().expect("fixture path has a parent")).expect("mkdir");
    fs::write(path, content).expect("write fixture");
}

/// Creates the symlink `dir/rel -> target` (target relative, as sysfs does).
pub fn symlink(dir: &Path, rel: &str, target: &str) {
    let path = dir.join(rel);
    fs::create_dir_all(path.parent().expect("fixture path has a parent")).expect("mkdir");
    std::os::unix::fs::symlink(target, path).expect("symlink fixture");
}

/// Creates an empty directory `dir/rel`.
pub fn mkdir(dir: &Path, rel: &str) {
    fs::create_dir_all(dir.join(rel)).expect("mkdir fixture");
}
