//! Readers of /proc and /sys. Every reader takes a [`SysRoot`] so tests can point it at fixtures.
//!
//! This module only reads and parses; it never writes to the kernel and never decides what a
//! number means (that is `bench` and `check`). Parsers never panic and never turn a malformed
//! file into zeros: every failure is a [`KernelError`] naming the file (and line when known).

pub mod blockdev;
pub mod blocked;
pub mod btrfs;
pub mod cache;
pub mod cgroup;
// Only `profile --unit` looks a unit up.
#[cfg(feature = "profile")]
pub mod cgunit;
pub mod cpupower;
pub mod cpusplit;
pub mod diskstats;
pub mod fsinfo;
pub mod health;
pub mod host;
pub mod kconfig;
pub mod limits;
pub mod link;
pub mod loadavg;
pub mod mdstat;
pub mod meminfo;
pub mod mounts;
pub mod netdev;
pub(crate) mod netlinkinfo;
pub mod pressure;
pub mod process;
pub(crate) mod procfiles;
pub mod procinfo;
pub(crate) mod sockdiag;
pub(crate) mod sockowner;
pub mod stat;
pub mod sysctl;
pub mod taskstats;
pub(crate) mod tc;
pub mod tunables;
pub mod uptime;

#[cfg(test)]
pub(crate) mod fixture;

use std::io;
use std::path::{Path, PathBuf};

/// Where the kernel's pseudo-filesystems (and the OS files `host` reads) are found.
///
/// Production code uses [`SysRoot::real`]; tests build a tree in a tempdir and use
/// [`SysRoot::under`] so no reader ever hard-codes `/proc` or `/sys`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SysRoot {
    /// Mount point of procfs, normally `/proc`.
    pub proc: PathBuf,
    /// Mount point of sysfs, normally `/sys`.
    pub sys: PathBuf,
    /// Root of the OS file tree, normally `/`; only used for `etc/os-release` and
    /// `usr/lib/os-release`, which live outside /proc and /sys.
    pub fs: PathBuf,
}

impl SysRoot {
    /// The running system: `/proc`, `/sys` and `/`.
    pub fn real() -> Self {
        Self::new("/proc", "/sys")
    }

    /// Explicit procfs and sysfs locations; the OS tree stays `/` (tests change it with `SysRoot::with_fs`).
    pub fn new(proc: impl Into<PathBuf>, sys: impl Into<PathBuf>) -> Self {
        SysRoot {
            proc: proc.into(),
            sys: sys.into(),
            fs: PathBuf::from("/"),
        }
    }

    /// Replaces the OS tree root (where `etc/os-release` is looked up).
    #[cfg(test)]
    pub fn with_fs(mut self, fs: impl Into<PathBuf>) -> Self {
        self.fs = fs.into();
        self
    }

    /// A fake system rooted at `dir`: `dir/proc`, `dir/sys`, and `dir` as the OS tree. Tests
    /// build their fixture trees with it.
    #[cfg(test)]
    pub fn under(dir: &Path) -> Self {
        Self::new(dir.join("proc"), dir.join("sys")).with_fs(dir)
    }
}

/// Why a kernel file could not be read or understood. Every variant names the file.
#[derive(Debug, thiserror::Error)]
pub enum KernelError {
    /// The file (or directory, or symlink) could not be read.
    #[error("cannot read {}: {source}", path.display())]
    Read {
        /// The file that failed.
        path: PathBuf,
        /// The underlying I/O error.
        source: io::Error,
    },
    /// The file was read but its content is not what the kernel writes there.
    #[error("cannot parse {}{}: {reason}", path.display(), line_suffix(*line))]
    Parse {
        /// The file that failed.
        path: PathBuf,
        /// 1-based line number, when the problem is on one line.
        line: Option<usize>,
        /// What was wrong, quoting the offending text.
        reason: String,
    },
}

/// What is wrong with a piece of a kernel file (a line, a value), quoting the offending
/// text; [`KernelError::parse`] adds the file it came from.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct Malformed(pub String);

impl From<Malformed> for String {
    fn from(m: Malformed) -> String {
        m.0
    }
}

impl From<String> for Malformed {
    fn from(reason: String) -> Malformed {
        Malformed(reason)
    }
}

impl From<&str> for Malformed {
    fn from(reason: &str) -> Malformed {
        Malformed(reason.into())
    }
}

fn line_suffix(line: Option<usize>) -> String {
    line.map(|l| format!(" line {l}")).unwrap_or_default()
}

impl KernelError {
    /// A parse error for `path` at an optional 1-based line.
    pub(crate) fn parse(path: &Path, line: Option<usize>, reason: impl Into<String>) -> Self {
        KernelError::Parse {
            path: path.to_path_buf(),
            line,
            reason: reason.into(),
        }
    }

    /// True when the error is "file does not exist" (optional kernel features are absent).
    pub fn is_not_found(&self) -> bool {
        matches!(self, KernelError::Read { source, .. } if source.kind() == io::ErrorKind::NotFound)
    }
}

/// Result of every reader in this module.
pub type Result<T> = std::result::Result<T, KernelError>;

/// Reads a whole pseudo-file. Invalid UTF-8 is replaced rather than rejected: kernel text
/// files are ASCII apart from user-chosen names (mount points, models), which we only display.
pub(crate) fn read_text(path: &Path) -> Result<String> {
    std::fs::read(path)
        .map(|bytes| String::from_utf8_lossy(&bytes).into_owned())
        .map_err(|source| KernelError::Read {
            path: path.to_path_buf(),
            source,
        })
}

/// Like [`read_text`] but a missing file is `Ok(None)`: many sysfs attributes exist only on
/// some kernels or device types. Other errors (permission, I/O) are still errors.
pub(crate) fn read_optional(path: &Path) -> Result<Option<String>> {
    match read_text(path) {
        Ok(text) => Ok(Some(text)),
        Err(e) if e.is_not_found() => Ok(None),
        Err(e) => Err(e),
    }
}

/// The entries of a directory that may not exist (an optional kernel feature, an older kernel,
/// a device type without it): `None` when it is absent, an error naming it otherwise.
pub(crate) fn read_dir_optional(dir: &Path) -> Result<Option<std::fs::ReadDir>> {
    match std::fs::read_dir(dir) {
        Ok(entries) => Ok(Some(entries)),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(source) => Err(KernelError::Read {
            path: dir.to_path_buf(),
            source,
        }),
    }
}

/// Reads a sysfs attribute holding one unsigned decimal number.
pub(crate) fn read_u64(path: &Path) -> Result<u64> {
    parse_u64(read_text(path)?.trim(), path)
}

/// Parses one unsigned decimal number, naming `path` on failure.
pub(crate) fn parse_u64(text: &str, path: &Path) -> Result<u64> {
    text.parse()
        .map_err(|_| KernelError::parse(path, None, format!("expected a number, found {text:?}")))
}

/// The active entry of a kernel multiple-choice file: the bracketed word (`none
/// [mq-deadline] kyber`, `always [madvise] never`), or the only word of a file that offers one.
pub fn bracketed_choice(text: &str) -> Option<String> {
    let words: Vec<&str> = text.split_whitespace().collect();
    if let Some(active) = words
        .iter()
        .find_map(|w| w.strip_prefix('[').and_then(|w| w.strip_suffix(']')))
    {
        return Some(active.to_string());
    }
    match words.as_slice() {
        [only] => Some((*only).to_string()),
        _ => None,
    }
}

/// Resolves symlinks the way the kernel's own tree does, naming the path on failure.
pub(crate) fn canonical(path: &Path) -> Result<PathBuf> {
    std::fs::canonicalize(path).map_err(|source| KernelError::Read {
        path: path.to_path_buf(),
        source,
    })
}

/// Undoes the kernel's octal escaping of whitespace and backslashes (`\040` for a space) used
/// in /proc/self/mountinfo and /proc/swaps. Sequences that are not three octal digits are kept
/// verbatim, so arbitrary input never fails.
pub(crate) fn unescape_octal(text: &str) -> String {
    String::from_utf8_lossy(&unescape_octal_bytes(text.as_bytes())).into_owned()
}

/// [`unescape_octal`] on raw bytes, which keeps a name that is not UTF-8 exact.
pub(crate) fn unescape_octal_bytes(bytes: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'\\'
            && let Some(value) = octal3(&bytes[i + 1..])
        {
            out.push(value);
            i += 4;
            continue;
        }
        out.push(bytes[i]);
        i += 1;
    }
    out
}

/// Value of three leading octal digits if they fit in a byte.
fn octal3(bytes: &[u8]) -> Option<u8> {
    let digits = bytes.get(..3)?;
    let mut value: u32 = 0;
    for &d in digits {
        if !(b'0'..=b'7').contains(&d) {
            return None;
        }
        value = value * 8 + u32::from(d - b'0');
    }
    u8::try_from(value).ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn unescape_handles_kernel_escapes_and_garbage() {
        assert_eq!(unescape_octal(r"/mnt/my\040disk"), "/mnt/my disk");
        assert_eq!(unescape_octal(r"a\011b\012c\134d"), "a\tb\nc\\d");
        assert_eq!(unescape_octal(r"trailing\04"), r"trailing\04");
        assert_eq!(unescape_octal(r"\777"), r"\777");
        assert_eq!(unescape_octal("\\"), "\\");
    }

    #[test]
    fn errors_name_the_file() {
        let err = read_u64(Path::new("/nonexistent/tacho/size")).unwrap_err();
        assert!(err.is_not_found());
        assert!(err.to_string().contains("/nonexistent/tacho/size"));
        let err = parse_u64("12x", Path::new("/sys/x")).unwrap_err();
        assert_eq!(
            err.to_string(),
            "cannot parse /sys/x: expected a number, found \"12x\""
        );
    }

    proptest! {
        #[test]
        fn unescape_never_panics(s in "\\PC*") {
            let _ = unescape_octal(&s);
        }
    }
}
