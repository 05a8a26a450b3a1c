//! The running kernel's build configuration (`CONFIG_IOMMU_DEFAULT_DMA_STRICT`, `CONFIG_HZ`,
//! the preemption model) and the IOMMU domain types actually in force.
//!
//! The configuration comes from /proc/config.gz when the kernel embeds it (`CONFIG_IKCONFIG_PROC`),
//! else from `<fs>/boot/config-<release>` as distributions install it.

use std::collections::BTreeMap;
use std::io::Read;
use std::path::{Path, PathBuf};

use serde::Serialize;

use super::{KernelError, Result, SysRoot, read_optional};

/// Largest decompressed config accepted (real ones are ~300 KiB): a guard against a corrupt file.
const MAX_CONFIG_BYTES: u64 = 16 << 20;

/// A kernel configuration: option name → value (`y`, `m`, `250`, `"string"`); options the file
/// marks `# CONFIG_X is not set` have the value `n`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct KernelConfig {
    /// Where it was read from.
    pub source: PathBuf,
    /// Option name (with the `CONFIG_` prefix) → value as written in the file.
    pub options: BTreeMap<String, String>,
}

impl KernelConfig {
    /// The value of `name` (with the `CONFIG_` prefix); `None` when the option is absent.
    pub fn get(&self, name: &str) -> Option<&str> {
        self.options.get(name).map(String::as_str)
    }
}

/// The configuration of the running kernel (`release` as `uname -r` prints it, used for the
/// /boot file); `Ok(None)` when neither source exists.
pub fn read(root: &SysRoot, release: Option<&str>) -> Result<Option<KernelConfig>> {
    let gz = root.proc.join("config.gz");
    match std::fs::File::open(&gz) {
        Ok(file) => {
            let mut text = String::new();
            flate2::read::GzDecoder::new(file)
                .take(MAX_CONFIG_BYTES)
                .read_to_string(&mut text)
                .map_err(|e| KernelError::parse(&gz, None, format!("not a gzip text: {e}")))?;
            return Ok(Some(KernelConfig {
                options: parse(&text, &gz)?,
                source: gz,
            }));
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(source) => return Err(KernelError::Read { path: gz, source }),
    }
    let Some(release) = release.filter(|r| !r.contains('/')) else {
        return Ok(None);
    };
    let file = root.fs.join("boot").join(format!("config-{release}"));
    Ok(match read_optional(&file)? {
        Some(text) => Some(KernelConfig {
            options: parse(&text, &file)?,
            source: file,
        }),
        None => None,
    })
}

/// Parses a .config; comments other than `# CONFIG_X is not set` are ignored.
pub fn parse(text: &str, path: &Path) -> Result<BTreeMap<String, String>> {
    let mut options = BTreeMap::new();
    for (i, line) in text.lines().enumerate() {
        let line = line.trim();
        if let Some(rest) = line.strip_prefix("# ") {
            if let Some(name) = rest.strip_suffix(" is not set")
                && name.starts_with("CONFIG_")
            {
                options.insert(name.to_string(), "n".to_string());
            }
            continue;
        }
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        match line.split_once('=') {
            Some((name, value)) if name.starts_with("CONFIG_") => {
                options.insert(name.to_string(), value.to_string());
            }
            _ => {
                return Err(KernelError::parse(
                    path,
                    Some(i + 1),
                    format!("expected CONFIG_NAME=value: {line:?}"),
                ));
            }
        }
    }
    if options.is_empty() {
        return Err(KernelError::parse(path, None, "no CONFIG_ options"));
    }
    Ok(options)
}

/// The preemption model the configuration selects: `none`, `voluntary`, `full`, `lazy` or `rt`,
/// and whether it can be switched at boot (`CONFIG_PREEMPT_DYNAMIC`, with `preempt=`).
pub fn preempt_model(config: &KernelConfig) -> (Option<&'static str>, bool) {
    let model = [
        ("CONFIG_PREEMPT_RT", "rt"),
        ("CONFIG_PREEMPT_LAZY", "lazy"),
        ("CONFIG_PREEMPT", "full"),
        ("CONFIG_PREEMPT_VOLUNTARY", "voluntary"),
        ("CONFIG_PREEMPT_NONE", "none"),
    ]
    .iter()
    .find(|(name, _)| config.get(name) == Some("y"))
    .map(|(_, model)| *model);
    (model, config.get("CONFIG_PREEMPT_DYNAMIC") == Some("y"))
}

/// The default DMA mode of the IOMMU the configuration selects: `strict`, `lazy` or
/// `passthrough`.
pub fn iommu_default(config: &KernelConfig) -> Option<&'static str> {
    [
        ("CONFIG_IOMMU_DEFAULT_PASSTHROUGH", "passthrough"),
        ("CONFIG_IOMMU_DEFAULT_DMA_STRICT", "strict"),
        ("CONFIG_IOMMU_DEFAULT_DMA_LAZY", "lazy"),
    ]
    .iter()
    .find(|(name, _)| config.get(name) == Some("y"))
    .map(|(_, mode)| *mode)
}

/// How many IOMMU groups have each domain type (`DMA` is strict, `DMA-FQ` lazy, `identity`
/// passthrough), from `<sys>/kernel/iommu_groups/*/type`; empty when no IOMMU translates.
pub fn iommu_group_types(root: &SysRoot) -> Result<BTreeMap<String, u64>> {
    let dir = root.sys.join("kernel/iommu_groups");
    let Some(entries) = super::read_dir_optional(&dir)? else {
        return Ok(BTreeMap::new());
    };
    let mut out = BTreeMap::new();
    for entry in entries.flatten() {
        if let Some(kind) = read_optional(&entry.path().join("type"))? {
            *out.entry(kind.trim().to_string()).or_insert(0) += 1;
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernel::fixture::write;
    use proptest::prelude::*;
    use std::io::Write;

    const TEXT: &str = "#\n# Automatically generated file; DO NOT EDIT.\n\
        CONFIG_HZ_250=y\nCONFIG_HZ=250\n# CONFIG_IOMMU_DEFAULT_DMA_STRICT is not set\n\
        CONFIG_IOMMU_DEFAULT_DMA_LAZY=y\nCONFIG_PREEMPT_NONE=y\nCONFIG_PREEMPT_DYNAMIC=y\n\
        CONFIG_CMDLINE=\"quiet\"\nCONFIG_EXT4_FS=m\n";

    #[test]
    fn parses_values_and_not_set() {
        let c = parse(TEXT, Path::new("/x")).unwrap();
        assert_eq!(c["CONFIG_HZ"], "250");
        assert_eq!(c["CONFIG_IOMMU_DEFAULT_DMA_STRICT"], "n");
        assert_eq!(c["CONFIG_CMDLINE"], "\"quiet\"");
        let config = KernelConfig {
            source: "/x".into(),
            options: c,
        };
        assert_eq!(iommu_default(&config), Some("lazy"));
        assert_eq!(preempt_model(&config), (Some("none"), true));
    }

    #[test]
    fn bad_lines_name_the_line() {
        let err = parse("CONFIG_A=y\ngarbage\n", Path::new("/boot/config-x")).unwrap_err();
        assert!(err.to_string().contains("/boot/config-x line 2"), "{err}");
        assert!(parse("# nothing\n", Path::new("/x")).is_err());
    }

    #[test]
    fn reads_config_gz_then_boot() {
        let dir = tempfile::tempdir().unwrap();
        let t = dir.path();
        let root = SysRoot::under(t);
        assert_eq!(read(&root, Some("6.1.0")).unwrap(), None);
        write(t, "boot/config-6.1.0", "CONFIG_HZ=1000\n");
        let c = read(&root, Some("6.1.0")).unwrap().unwrap();
        assert_eq!(c.get("CONFIG_HZ"), Some("1000"));
        assert!(c.source.ends_with("boot/config-6.1.0"));
        // /proc/config.gz wins over /boot.
        std::fs::create_dir_all(t.join("proc")).unwrap();
        let mut gz = flate2::write::GzEncoder::new(
            std::fs::File::create(t.join("proc/config.gz")).unwrap(),
            flate2::Compression::default(),
        );
        gz.write_all(TEXT.as_bytes()).unwrap();
        gz.finish().unwrap();
        let c = read(&root, Some("6.1.0")).unwrap().unwrap();
        assert_eq!(c.get("CONFIG_HZ"), Some("250"));
        // A corrupt gzip is an error naming the file, not an empty config.
        std::fs::write(t.join("proc/config.gz"), b"not gzip").unwrap();
        let err = read(&root, None).unwrap_err();
        assert!(err.to_string().contains("config.gz"), "{err}");
    }

    #[test]
    fn iommu_groups_are_counted_by_type() {
        let dir = tempfile::tempdir().unwrap();
        let t = dir.path();
        let root = SysRoot::under(t);
        assert!(iommu_group_types(&root).unwrap().is_empty());
        write(t, "sys/kernel/iommu_groups/0/type", "DMA-FQ\n");
        write(t, "sys/kernel/iommu_groups/1/type", "DMA-FQ\n");
        write(t, "sys/kernel/iommu_groups/2/type", "identity\n");
        let types = iommu_group_types(&root).unwrap();
        assert_eq!(types["DMA-FQ"], 2);
        assert_eq!(types["identity"], 1);
    }

    proptest! {
        #[test]
        fn never_panics(s in "\\PC{0,300}") {
            let _ = parse(&s, Path::new("/x"));
        }
    }
}
