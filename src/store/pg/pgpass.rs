//! The password file libpq reads (`PGPASSFILE`, else `~/.pgpass`), so the URL in a cron job or
//! a shell history need not carry the password. The `postgres` crate does not read it, and no
//! maintained crate parses it alone; the format is five colon-separated fields per line, so it
//! is parsed here (property-tested below).
//!
//! As libpq does, a file that others can read is ignored (with a note saying so): a password
//! file open to the group is no secret.

use std::io::Read;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

/// The connection a password is looked up for.
pub struct Want<'a> {
    /// Host name, or `localhost` for a Unix socket.
    pub host: &'a str,
    /// Port as text, as the file holds it.
    pub port: &'a str,
    /// Database name.
    pub database: &'a str,
    /// User name.
    pub user: &'a str,
}

/// Bigger than any real password file: a larger one is not read.
const LIMIT: u64 = 1 << 20;

/// Where the password file is, when there is one to look at.
pub fn path() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("PGPASSFILE").filter(|p| !p.is_empty()) {
        return Some(PathBuf::from(p));
    }
    std::env::var_os("HOME")
        .filter(|h| !h.is_empty())
        .map(|h| PathBuf::from(h).join(".pgpass"))
}

/// Why a password file that exists is not used, as a one-line note.
#[derive(Debug, thiserror::Error)]
pub enum Ignored {
    /// Its metadata or its text could not be read.
    #[error("cannot read {}: {err}", .path.display())]
    Unreadable {
        /// The password file.
        path: PathBuf,
        /// The system's reason.
        err: std::io::Error,
    },
    /// A directory, a device or a pipe.
    #[error("ignoring {}: it is not a regular file", .0.display())]
    NotAFile(PathBuf),
    /// The group or others may read it.
    #[error("ignoring {}: others can read it; chmod 0600 it to use it", .0.display())]
    OpenToOthers(PathBuf),
}

/// The password for `want` from the file at `path`: `Ok(None)` when the file is missing or
/// has no matching line; `Err` when it exists but is not used.
pub fn lookup(path: &Path, want: &Want) -> Result<Option<String>, Ignored> {
    let Ok(mut file) = std::fs::File::open(path) else {
        return Ok(None);
    };
    let unreadable = |err| Ignored::Unreadable {
        path: path.to_path_buf(),
        err,
    };
    let meta = file.metadata().map_err(unreadable)?;
    if !meta.is_file() {
        return Err(Ignored::NotAFile(path.to_path_buf()));
    }
    if meta.mode() & 0o077 != 0 {
        return Err(Ignored::OpenToOthers(path.to_path_buf()));
    }
    let mut text = String::new();
    file.by_ref()
        .take(LIMIT)
        .read_to_string(&mut text)
        .map_err(unreadable)?;
    Ok(find(&text, want))
}

/// The password of the first line matching `want` (`*` matches any value).
pub fn find(text: &str, want: &Want) -> Option<String> {
    let wanted = [want.host, want.port, want.database, want.user];
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(fields)
        .find(|f| {
            f.iter()
                .zip(wanted)
                .all(|(have, want)| have == "*" || have == want)
        })
        .map(|mut f| f.swap_remove(4))
}

/// The five fields of a line, with `\:` and `\\` unescaped; `None` for a malformed line.
fn fields(line: &str) -> Option<Vec<String>> {
    let mut out = vec![String::new()];
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        match c {
            '\\' => out.last_mut()?.push(chars.next().unwrap_or('\\')),
            ':' if out.len() < 5 => out.push(String::new()),
            c => out.last_mut()?.push(c),
        }
    }
    (out.len() == 5).then_some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn want<'a>(host: &'a str, db: &'a str) -> Want<'a> {
        Want {
            host,
            port: "5432",
            database: db,
            user: "tacho",
        }
    }

    #[test]
    fn first_matching_line_wins_with_wildcards_and_escapes() {
        let text = "# comment\n\
                    db1:5432:results:tacho:first\n\
                    *:5432:*:tacho:p\\:w\\\\d\n\
                    db1:5432:results:tacho:never\n\
                    short:line\n";
        assert_eq!(
            find(text, &want("db1", "results")).as_deref(),
            Some("first")
        );
        assert_eq!(find(text, &want("db9", "x")).as_deref(), Some("p:w\\d"));
        let other = Want {
            user: "someone",
            ..want("db1", "results")
        };
        assert_eq!(find(text, &other), None);
    }

    #[test]
    fn a_file_others_can_read_is_ignored_with_a_note() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("pgpass");
        std::fs::write(&p, "*:*:*:*:secret\n").unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o644)).unwrap();
        let note = lookup(&p, &want("h", "d")).unwrap_err().to_string();
        assert!(note.contains("chmod 0600"), "{note}");
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o600)).unwrap();
        assert_eq!(
            lookup(&p, &want("h", "d")).unwrap().as_deref(),
            Some("secret")
        );
        assert!(matches!(
            lookup(&dir.path().join("none"), &want("h", "d")),
            Ok(None)
        ));
    }

    proptest::proptest! {
        #[test]
        fn any_text_parses_without_panic(text in "\\PC{0,300}") {
            let _ = find(&text, &want("h", "d"));
        }

        #[test]
        fn an_escaped_password_comes_back_whole(pw in "[ -~]{1,30}") {
            let escaped = pw.replace('\\', "\\\\").replace(':', "\\:");
            let text = format!("h:5432:d:tacho:{escaped}\n");
            proptest::prop_assert_eq!(find(&text, &want("h", "d")), Some(pw));
        }
    }
}
