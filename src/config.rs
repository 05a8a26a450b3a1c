//! The config file (`/etc/tacho/tacho.toml`, or `--config FILE`, or `$TACHO_CONFIG`) and the
//! settings resolved from flags, environment, file and defaults, in that order, each with where
//! it came from (`tacho config show`).
//!
//! A config file can point tacho, often run as root, at a database and at files, so it is read
//! once through one descriptor and refused unless it is a regular file owned by root or by the
//! caller that no one else may write. Unknown keys and bad values are refused by name and line.

use std::collections::BTreeMap;
use std::io::Read;
use std::net::SocketAddr;
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Result, anyhow, bail};
use serde::Deserialize;
use toml::Spanned;

/// Where the config file is looked for when neither `--config` nor `$TACHO_CONFIG` names one.
pub const DEFAULT_PATH: &str = "/etc/tacho/tacho.toml";

/// The recorder's interval when no flag or file sets it.
pub const DEFAULT_RECORD_INTERVAL: Duration = Duration::from_secs(10);

/// The recorder's retention when no flag or file sets it.
pub const DEFAULT_RECORD_KEEP: Duration = Duration::from_secs(7 * 86_400);

/// A config file (or a file it names) larger than this is refused: a real one is a few lines.
const MAX_BYTES: u64 = 1 << 20;

/// Where a setting's value came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    /// A command-line option, by its name (`--listen`).
    Flag(&'static str),
    /// An environment variable, by its name.
    Env(&'static str),
    /// A line of the config file.
    File(usize),
    /// tacho's own default.
    Default,
}

/// A value and where it came from.
#[derive(Debug, Clone, PartialEq)]
pub struct Setting<T> {
    /// The value used.
    pub value: T,
    /// Where it came from.
    pub from: Source,
}

/// The settings flags, environment, config file and defaults give, in that order.
#[derive(Debug, Clone, PartialEq)]
pub struct Settings {
    /// The config file read, if one was (and why not, for the default path).
    pub file: FileState,
    /// The results store: a `postgres://` URL or an SQLite file; `None`: the store's default
    /// file.
    pub db: Setting<Option<String>>,
    /// Labels of this host (`[labels]`), by name.
    pub labels: BTreeMap<String, Setting<String>>,
    /// Where `top --listen` serves when given without an address.
    pub listen: Setting<Option<SocketAddr>>,
    /// The web config (TLS, basic auth) of `/metrics`.
    pub web_config: Setting<Option<PathBuf>>,
    /// Time between the recorder's samples.
    pub record_interval: Setting<Duration>,
    /// How long the recorder keeps samples.
    pub record_keep: Setting<Duration>,
}

/// What became of the config file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FileState {
    /// Read from this path.
    Read(PathBuf),
    /// The default path does not exist: defaults apply.
    Absent(PathBuf),
    /// Not looked for: the command uses no setting (`man`, `completions`).
    NotRead,
}

/// The options of the command line that a setting can come from.
#[derive(Debug, Clone, Default)]
pub struct Flags {
    /// `--db`.
    pub db: Option<String>,
    /// `top --listen ADDR`.
    pub listen: Option<SocketAddr>,
    /// `top --web-config`.
    pub web_config: Option<PathBuf>,
    /// `record --interval`.
    pub record_interval: Option<Duration>,
    /// `record --keep`.
    pub record_keep: Option<Duration>,
}

/// The file's keys as written. Every value keeps its place, so a setting names its line.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct Doc {
    db_url: Option<Spanned<String>>,
    db_url_file: Option<Spanned<String>>,
    #[serde(default)]
    labels: BTreeMap<Spanned<String>, Spanned<String>>,
    #[serde(default)]
    top: TopSection,
    #[serde(default)]
    record: RecordSection,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct TopSection {
    listen: Option<Spanned<String>>,
    web_config: Option<Spanned<String>>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RecordSection {
    interval: Option<Spanned<String>>,
    keep: Option<Spanned<String>>,
}

/// The config file's values, checked, each with its line.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct FileValues {
    db: Option<(String, usize)>,
    labels: BTreeMap<String, (String, usize)>,
    listen: Option<(SocketAddr, usize)>,
    web_config: Option<(PathBuf, usize)>,
    record_interval: Option<(Duration, usize)>,
    record_keep: Option<(Duration, usize)>,
}

impl FileValues {
    /// The results store the file names (`db_url`, or the content of `db_url_file`).
    pub fn db(&self) -> Option<&str> {
        self.db.as_ref().map(|(db, _)| db.as_str())
    }
}

/// The config file: `explicit` (`--config`), else `$TACHO_CONFIG`, else [`DEFAULT_PATH`],
/// which alone may be missing.
pub fn load(
    explicit: Option<&Path>,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<(FileState, FileValues)> {
    let named = explicit.map(Path::to_path_buf).or_else(|| {
        env("TACHO_CONFIG")
            .filter(|p| !p.is_empty())
            .map(PathBuf::from)
    });
    let path = named.clone().unwrap_or_else(|| PathBuf::from(DEFAULT_PATH));
    let text = match read_trusted(&path, "the config file") {
        Ok(text) => text,
        Err(e) if named.is_none() && e.kind == ReadError::Missing => {
            return Ok((FileState::Absent(path), FileValues::default()));
        }
        Err(e) if e.kind == ReadError::Missing => {
            bail!(
                "{}; give an existing file to --config or TACHO_CONFIG",
                e.message
            )
        }
        Err(e) => bail!("{}", e.message),
    };
    let values = parse(&text, &path.display().to_string(), &|p| {
        read_trusted(p, "the file").map_err(|e| e.message)
    })?;
    Ok((FileState::Read(path), values))
}

impl Settings {
    /// Each setting from `flags`, else the environment, else `file`, else the default.
    pub fn resolve(
        file: FileState,
        values: &FileValues,
        flags: &Flags,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Settings {
        fn pick<T: Clone>(
            flag: (&'static str, Option<T>),
            env: Option<(&'static str, T)>,
            file: &Option<(T, usize)>,
        ) -> Setting<Option<T>> {
            if let Some(v) = flag.1 {
                return Setting {
                    value: Some(v),
                    from: Source::Flag(flag.0),
                };
            }
            if let Some((name, v)) = env {
                return Setting {
                    value: Some(v),
                    from: Source::Env(name),
                };
            }
            match file {
                Some((v, line)) => Setting {
                    value: Some(v.clone()),
                    from: Source::File(*line),
                },
                None => Setting {
                    value: None,
                    from: Source::Default,
                },
            }
        }
        let or = |s: Setting<Option<Duration>>, default| Setting {
            value: s.value.unwrap_or(default),
            from: s.from,
        };
        let env_db = env("TACHO_DB")
            .filter(|v| !v.is_empty())
            .map(|v| ("TACHO_DB", v));
        Settings {
            file,
            db: pick(("--db", flags.db.clone()), env_db, &values.db),
            labels: values
                .labels
                .iter()
                .map(|(k, (v, line))| {
                    let s = Setting {
                        value: v.clone(),
                        from: Source::File(*line),
                    };
                    (k.clone(), s)
                })
                .collect(),
            listen: pick(("--listen", flags.listen), None, &values.listen),
            web_config: pick(
                ("--web-config", flags.web_config.clone()),
                None,
                &values.web_config,
            ),
            record_interval: or(
                pick(
                    ("--interval", flags.record_interval),
                    None,
                    &values.record_interval,
                ),
                DEFAULT_RECORD_INTERVAL,
            ),
            record_keep: or(
                pick(("--keep", flags.record_keep), None, &values.record_keep),
                DEFAULT_RECORD_KEEP,
            ),
        }
    }
}

/// Why a trusted file could not be read.
#[derive(Debug, PartialEq, Eq)]
enum ReadError {
    Missing,
    Refused,
}

struct Refusal {
    kind: ReadError,
    message: String,
}

/// The text of `path`, opened once and judged by its descriptor (so it cannot be swapped
/// between the check and the read): a regular file, owned by root or the caller, that neither
/// its group nor others may write, of at most [`MAX_BYTES`].
fn read_trusted(path: &Path, what: &str) -> std::result::Result<String, Refusal> {
    use rustix::fs::{Mode, OFlags};
    let shown = path.display();
    let refuse = |message: String| Refusal {
        kind: ReadError::Refused,
        message,
    };
    let flags = OFlags::RDONLY | OFlags::CLOEXEC | OFlags::NOCTTY | OFlags::NONBLOCK;
    let fd: OwnedFd = match rustix::fs::open(path, flags, Mode::empty()) {
        Ok(fd) => fd,
        Err(rustix::io::Errno::NOENT) => {
            return Err(Refusal {
                kind: ReadError::Missing,
                message: format!("{what} {shown} does not exist"),
            });
        }
        Err(e) => return Err(refuse(format!("cannot open {what} {shown}: {e}"))),
    };
    let st =
        rustix::fs::fstat(&fd).map_err(|e| refuse(format!("cannot read {what} {shown}: {e}")))?;
    let mode = st.st_mode;
    if rustix::fs::FileType::from_raw_mode(mode) != rustix::fs::FileType::RegularFile {
        return Err(refuse(format!("{what} {shown} is not a regular file")));
    }
    let me = rustix::process::geteuid().as_raw();
    if st.st_uid != 0 && st.st_uid != me {
        return Err(refuse(format!(
            "{what} {shown} is owned by uid {}, neither root nor you: it can point tacho at \
             databases and files, so only they may own it (chown root {shown})",
            st.st_uid
        )));
    }
    if mode & 0o022 != 0 {
        return Err(refuse(format!(
            "{what} {shown} can be written by its group or by others, and it can point tacho \
             at databases and files: chmod go-w {shown}"
        )));
    }
    let mut text = String::new();
    std::fs::File::from(fd)
        .take(MAX_BYTES + 1)
        .read_to_string(&mut text)
        .map_err(|e| refuse(format!("cannot read {what} {shown} as text: {e}")))?;
    if text.len() as u64 > MAX_BYTES {
        return Err(refuse(format!(
            "{what} {shown} is larger than {MAX_BYTES} bytes; it should be a few lines"
        )));
    }
    Ok(text)
}

/// The 1-based line of byte `offset` of `text`.
fn line_of(text: &str, offset: usize) -> usize {
    let end = offset.min(text.len());
    text.as_bytes()[..end]
        .iter()
        .filter(|&&b| b == b'\n')
        .count()
        + 1
}

/// The checked values of a config file's `text` (named `shown` in errors); `read` reads a
/// file the config names (`db_url_file`) under the same rules as the config itself.
fn parse(
    text: &str,
    shown: &str,
    read: &dyn Fn(&Path) -> std::result::Result<String, String>,
) -> Result<FileValues> {
    let doc: Doc = toml::from_str(text).map_err(|e| {
        let line = e.span().map_or(1, |s| line_of(text, s.start));
        // The crate's message without its quoted source lines: one line.
        let message = e.message().lines().next().unwrap_or("not TOML").trim();
        let message = message
            .replace("unknown field", "unknown key")
            .replace("expected one of", "known:");
        anyhow!("{shown} line {line}: {message}; fix or remove it")
    })?;
    let at = |s: &Spanned<String>| line_of(text, s.span().start);
    let bad = |s: &Spanned<String>, key: &str, why: String| {
        anyhow!("{shown} line {}: {key}: {why}", at(s))
    };
    let mut v = FileValues::default();
    match (&doc.db_url, &doc.db_url_file) {
        (Some(_), Some(f)) => {
            return Err(bad(
                f,
                "db_url_file",
                "give db_url or db_url_file, not both".into(),
            ));
        }
        (Some(u), None) => {
            let url = u.get_ref().trim();
            if url.is_empty() {
                return Err(bad(
                    u,
                    "db_url",
                    "is empty; give postgres://USER@HOST/DATABASE or a file path".into(),
                ));
            }
            if !url.contains("://") && !Path::new(url).is_absolute() {
                return Err(bad(
                    u,
                    "db_url",
                    "give postgres://USER@HOST/DATABASE or an absolute file path".into(),
                ));
            }
            v.db = Some((url.to_owned(), at(u)));
        }
        (None, Some(f)) => {
            let path = Path::new(f.get_ref());
            if !path.is_absolute() {
                return Err(bad(f, "db_url_file", "must be an absolute path".into()));
            }
            let content = read(path).map_err(|e| bad(f, "db_url_file", e))?;
            let url = content.trim();
            if url.is_empty() || url.contains('\n') {
                return Err(bad(
                    f,
                    "db_url_file",
                    format!(
                        "{} must hold the database URL alone, on one line",
                        path.display()
                    ),
                ));
            }
            v.db = Some((url.to_owned(), at(f)));
        }
        (None, None) => {}
    }
    for (k, val) in &doc.labels {
        let name = k.get_ref();
        let line = at(k);
        let ok_name = name.len() <= 64
            && name.starts_with(|c: char| c.is_ascii_lowercase() || c == '_')
            && name
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_');
        if !ok_name {
            bail!(
                "{shown} line {line}: label {name:?}: a label name is lower-case letters, digits \
                 and _ (at most 64), starting with a letter or _"
            );
        }
        let value = val.get_ref();
        if value.is_empty() || value.len() > 256 || value.chars().any(char::is_control) {
            return Err(bad(
                val,
                &format!("labels.{name}"),
                "a label's value is 1 to 256 characters, none of them control characters".into(),
            ));
        }
        v.labels.insert(name.clone(), (value.clone(), at(val)));
    }
    if let Some(s) = &doc.top.listen {
        let addr = listen(s.get_ref()).map_err(|e| bad(s, "top.listen", e))?;
        v.listen = Some((addr, at(s)));
    }
    if let Some(s) = &doc.top.web_config {
        let path = PathBuf::from(s.get_ref());
        if !path.is_absolute() {
            return Err(bad(s, "top.web_config", "must be an absolute path".into()));
        }
        v.web_config = Some((path, at(s)));
    }
    if let Some(s) = &doc.record.interval {
        let d = interval(s.get_ref()).map_err(|e| bad(s, "record.interval", e))?;
        v.record_interval = Some((d, at(s)));
    }
    if let Some(s) = &doc.record.keep {
        let d = age(s.get_ref()).map_err(|e| bad(s, "record.keep", e))?;
        v.record_keep = Some((d, at(s)));
    }
    Ok(v)
}

/// An address to serve on: an IP address and port, or node_exporter's `:PORT` and
/// `localhost:PORT`, both read as loopback (the network is asked for by address,
/// `0.0.0.0:PORT`).
pub fn listen(text: &str) -> std::result::Result<SocketAddr, String> {
    let local_port = text
        .strip_prefix(':')
        .or_else(|| text.strip_prefix("localhost:"));
    let addr = match local_port {
        Some(port) => port
            .parse::<u16>()
            .ok()
            .map(|p| SocketAddr::from(([127, 0, 0, 1], p))),
        None => text.parse().ok(),
    };
    addr.ok_or_else(|| {
        format!(
            "{} is not an address to listen on; give 127.0.0.1:9101 or :9101 (this machine \
             only), or 0.0.0.0:9101 (every address)",
            echo(text)
        )
    })
}

/// A value as a message quotes it: quoted, control characters escaped, long ones cut.
fn echo(text: &str) -> String {
    format!("{:?}", crate::text::cut(text, 40))
}

/// A sampling interval, from 100 ms to 1 h.
pub fn interval(text: &str) -> std::result::Result<Duration, String> {
    let d = crate::units::parse_duration(text).map_err(|e| e.to_string())?;
    if d < Duration::from_millis(100) || d > Duration::from_secs(3600) {
        return Err(format!(
            "the interval must be from 100ms to 1h, e.g. 1s or 500ms (got {})",
            echo(text)
        ));
    }
    Ok(d)
}

/// A retention age of at least a minute: days (`7d`) and weeks (`2w`) besides what
/// `parse_duration` reads.
pub fn age(text: &str) -> std::result::Result<Duration, String> {
    let t = text.trim();
    let whole = |n: &str, per: u64| {
        n.parse::<u64>()
            .ok()
            .and_then(|n| n.checked_mul(per))
            .map(Duration::from_secs)
    };
    let d = if let Some(n) = t.strip_suffix('d') {
        whole(n, 86_400)
    } else if let Some(n) = t.strip_suffix('w') {
        whole(n, 604_800)
    } else {
        crate::units::parse_duration(t).ok()
    };
    match d {
        Some(d) if d >= Duration::from_secs(60) => Ok(d),
        _ => Err(format!(
            "the age must be at least a minute, e.g. 7d, 12h or 2w (got {})",
            echo(text)
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn no_file(_: &Path) -> std::result::Result<String, String> {
        Err("no file here".into())
    }

    fn values(text: &str) -> Result<FileValues> {
        parse(text, "tacho.toml", &no_file)
    }

    const FULL: &str = "# tacho\n\
        db_url = \"postgres://tacho@db.example/tacho\"\n\
        [labels]\n\
        role = \"db\"\n\
        dc = \"fra1\"\n\
        [top]\n\
        listen = \":9101\"\n\
        web_config = \"/etc/tacho/web.yml\"\n\
        [record]\n\
        interval = \"30s\"\n\
        keep = \"30d\"\n";

    #[test]
    fn every_key_is_read_with_its_line() {
        let v = values(FULL).unwrap();
        assert_eq!(v.db, Some(("postgres://tacho@db.example/tacho".into(), 2)));
        assert_eq!(v.labels["role"], ("db".into(), 4));
        assert_eq!(v.labels["dc"], ("fra1".into(), 5));
        assert_eq!(
            v.listen,
            Some((SocketAddr::from(([127, 0, 0, 1], 9101)), 7))
        );
        assert_eq!(v.web_config, Some(("/etc/tacho/web.yml".into(), 8)));
        assert_eq!(v.record_interval, Some((Duration::from_secs(30), 10)));
        assert_eq!(v.record_keep, Some((Duration::from_secs(30 * 86_400), 11)));
    }

    #[test]
    fn flags_beat_the_environment_which_beats_the_file() {
        let v = values(FULL).unwrap();
        let file = FileState::Read("tacho.toml".into());
        let none = |_: &str| None;
        let s = Settings::resolve(file.clone(), &v, &Flags::default(), &none);
        assert_eq!(s.db.from, Source::File(2));
        assert_eq!(s.record_interval.value, Duration::from_secs(30));
        let env = |k: &str| (k == "TACHO_DB").then(|| "/tmp/env.db".to_string());
        let s = Settings::resolve(file.clone(), &v, &Flags::default(), &env);
        assert_eq!(
            (s.db.value.as_deref(), s.db.from),
            (Some("/tmp/env.db"), Source::Env("TACHO_DB"))
        );
        let flags = Flags {
            db: Some("/tmp/flag.db".into()),
            record_interval: Some(Duration::from_secs(2)),
            ..Flags::default()
        };
        let s = Settings::resolve(file, &v, &flags, &env);
        assert_eq!(s.db.from, Source::Flag("--db"));
        assert_eq!(
            s.record_interval,
            Setting {
                value: Duration::from_secs(2),
                from: Source::Flag("--interval")
            }
        );
        let s = Settings::resolve(
            FileState::Absent("x".into()),
            &FileValues::default(),
            &Flags::default(),
            &none,
        );
        assert_eq!(
            s.record_keep,
            Setting {
                value: DEFAULT_RECORD_KEEP,
                from: Source::Default
            }
        );
        assert_eq!(s.listen.value, None);
    }

    #[test]
    fn unknown_keys_and_bad_values_are_named_with_their_line() {
        for (text, want) in [
            (
                "db_url = \"x\"\nport = 5\n",
                "tacho.toml line 2: unknown key `port`",
            ),
            (
                "[record]\ninterval = \"30s\"\nretention = \"7d\"\n",
                "line 3: unknown key `retention`",
            ),
            (
                "[top]\nlisten = \"nowhere\"\n",
                "line 2: top.listen: \"nowhere\" is not an address",
            ),
            (
                "[record]\n\nkeep = \"10s\"\n",
                "line 3: record.keep: the age must be at least a minute",
            ),
            ("[record]\ninterval = 5\n", "line 2: invalid type"),
            ("[labels]\nRole = \"db\"\n", "line 2: label \"Role\""),
            (
                "db_url = \"a\"\ndb_url_file = \"/x\"\n",
                "line 2: db_url_file: give db_url or db_url_file, not both",
            ),
            (
                "db_url_file = \"/x\"\n",
                "line 1: db_url_file: no file here",
            ),
            ("[top\n", "line 1:"),
            (
                "db_url = \"results.db\"\n",
                "line 1: db_url: give postgres://",
            ),
        ] {
            let e = format!("{:#}", values(text).unwrap_err());
            assert!(e.contains(want), "{text:?}: {e}");
            assert!(!e.contains('\n'), "one line: {e}");
        }
    }

    #[test]
    fn a_url_file_is_read_and_trimmed() {
        let read = |p: &Path| {
            assert_eq!(p, Path::new("/etc/tacho/db-url"));
            Ok("postgres://h@db/t\n".to_string())
        };
        let v = parse("\n\ndb_url_file = \"/etc/tacho/db-url\"\n", "t", &read).unwrap();
        assert_eq!(v.db, Some(("postgres://h@db/t".into(), 3)));
    }

    #[test]
    fn the_shipped_example_is_all_comments_and_each_key_read_once_uncommented() {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("contrib/tacho.toml");
        let text = std::fs::read_to_string(path).unwrap();
        assert_eq!(values(&text).unwrap(), FileValues::default());
        // Uncommented (but db_url_file, whose file is not here), every example parses.
        let on: String = text
            .lines()
            .map(|l| {
                l.strip_prefix("# ")
                    .filter(|r| r.contains(" = ") || r.starts_with('['))
                    .unwrap_or("")
            })
            .filter(|l| !l.starts_with("db_url_file"))
            .map(|l| format!("{l}\n"))
            .collect();
        let v = values(&on).unwrap();
        assert!(
            v.db.is_some() && !v.labels.is_empty() && v.listen.is_some(),
            "{on}"
        );
        assert!(v.web_config.is_some() && v.record_interval.is_some() && v.record_keep.is_some());
    }

    proptest! {
        /// Any text is read or refused in one line, never a panic.
        #[test]
        fn any_text_is_read_or_refused_in_one_line(text in "\\PC{0,200}") {
            if let Err(e) = values(&text) {
                let message = format!("{e:#}");
                prop_assert!(!message.contains('\n'), "{}", message);
            }
        }

        /// Text shaped like a config file, with keys and values mixed up.
        #[test]
        fn config_shaped_text_never_panics(
            lines in proptest::collection::vec(
                ("(\\[(top|record|labels|x)\\]|db_url|db_url_file|listen|interval|keep|role|web_config|\\PC{0,8})",
                 "( = )?",
                 "(\"\\PC{0,12}\"|[0-9]{1,4}|true|\\[\\]|\\{\\})?"),
                0..12)
        ) {
            let text: String = lines.iter().map(|(k, eq, v)| format!("{k}{eq}{v}\n")).collect();
            let _ = values(&text);
        }
    }
}
