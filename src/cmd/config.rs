//! The config file for every command (`--config`, `$TACHO_CONFIG`, `/etc/tacho/tacho.toml`),
//! resolved with the command's own flags, and `tacho config show`.

use std::io::Write;
use std::path::Path;

use anyhow::Result;

use crate::cli::{Command, ConfigCommand};
use crate::config::{FileState, FileValues, Flags, Settings, Source};
use crate::text::Escaped;

/// The settings of `command`: its flags, the environment, the config file, the defaults. The
/// file's results store becomes the store's fallback below `--db` and `$TACHO_DB`. Printing
/// the man pages or completions reads no file.
pub fn settings(explicit: Option<&Path>, command: &Command) -> Result<Settings> {
    let env = |k: &str| std::env::var(k).ok();
    let (file, values) = match command {
        Command::Completions { .. } | Command::Man(_) => {
            (FileState::NotRead, FileValues::default())
        }
        _ => crate::config::load(explicit, &env)?,
    };
    if let Some(db) = values.db() {
        crate::store::configure_db(db);
    }
    Ok(Settings::resolve(file, &values, &flags(command), &env))
}

/// The options of `command` a setting can come from.
fn flags(command: &Command) -> Flags {
    match command {
        Command::Top(a) => Flags {
            listen: a.listen.flatten(),
            web_config: a.web_config.clone(),
            ..Flags::default()
        },
        Command::Record(a) => Flags {
            record_interval: a.interval,
            record_keep: a.keep,
            ..Flags::default()
        },
        Command::Config(ConfigCommand::Show(a)) => Flags {
            db: a.db.clone(),
            listen: a.listen,
            web_config: a.web_config.clone(),
            record_interval: a.interval,
            record_keep: a.keep,
        },
        _ => Flags::default(),
    }
}

/// `tacho config show`: one line per setting, `NAME  VALUE  (SOURCE)`; a database URL's
/// password is not shown, and values from the file are escaped.
pub fn show(s: &Settings) -> Result<()> {
    let mut out = std::io::stdout().lock();
    let file = match &s.file {
        FileState::Read(p) => format!("{} (read)", p.display()),
        FileState::Absent(p) => format!("{} (not found: defaults apply)", p.display()),
        FileState::NotRead => "not read".to_owned(),
    };
    writeln!(out, "config file  {}", Escaped(&file))?;
    let from = |src: &Source| match (src, &s.file) {
        (Source::Flag(f), _) => format!("flag {f}"),
        (Source::Env(e), _) => format!("env {e}"),
        (Source::File(line), FileState::Read(p)) => format!("{}:{line}", p.display()),
        (Source::File(line), _) => format!("file:{line}"),
        (Source::Default, _) => "default".to_owned(),
    };
    let mut line = |name: &str, value: String, src: &Source| {
        writeln!(
            out,
            "{name:<16} {}  ({})",
            Escaped(&value),
            Escaped(&from(src))
        )
    };
    // A URL without its password.
    let db = match &s.db.value {
        Some(db) => crate::store::Place::resolve(Some(Path::new(db)))?.shown(),
        None => match crate::store::default_local_path() {
            Ok(p) => p.display().to_string(),
            Err(e) => format!("none ({e})"),
        },
    };
    line("db", db, &s.db.from)?;
    if s.labels.is_empty() {
        line("labels", "none".into(), &Source::Default)?;
    }
    for (name, v) in &s.labels {
        line(&format!("labels.{name}"), v.value.clone(), &v.from)?;
    }
    let listen = s.listen.value.map_or_else(
        || "none (top serves only with --listen ADDR)".to_owned(),
        |a| a.to_string(),
    );
    line("top.listen", listen, &s.listen.from)?;
    let web = s.web_config.value.as_ref().map_or_else(
        || "none (plain HTTP, no passwords)".to_owned(),
        |p| p.display().to_string(),
    );
    line("top.web_config", web, &s.web_config.from)?;
    // Whole days, hours or seconds as the flags take them; milliseconds below a second.
    let secs = |d: std::time::Duration| {
        if d.subsec_millis() != 0 || d.as_secs() == 0 {
            format!("{}ms", d.as_millis())
        } else {
            super::history::age(d)
        }
    };
    line(
        "record.interval",
        secs(s.record_interval.value),
        &s.record_interval.from,
    )?;
    line(
        "record.keep",
        secs(s.record_keep.value),
        &s.record_keep.from,
    )?;
    Ok(())
}
