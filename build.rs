//! Names the commit tacho is built from, for `tacho --version`: `git rev-parse HEAD` where the
//! source is a git checkout of its own (a `.git` beside Cargo.toml), else "unknown commit" (a
//! source tarball, a vendored copy inside another repository, no git installed).

use std::path::Path;
use std::process::Command;

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    let dir = std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR");
    let dir = Path::new(&dir);
    // `.git` is a directory in a clone and a file in a worktree.
    let commit = if dir.join(".git").exists() {
        git(dir, &["rev-parse", "--verify", "HEAD"])
    } else {
        None
    };
    if commit.is_some() {
        // Built again when HEAD moves: a checkout rewrites HEAD, a commit a branch's ref (a
        // loose one under refs/heads, or packed-refs after `git pack-refs`).
        for name in ["HEAD", "refs/heads", "packed-refs"] {
            let path = git(
                dir,
                &["rev-parse", "--path-format=absolute", "--git-path", name],
            );
            if let Some(path) = path.filter(|p| Path::new(p).exists()) {
                println!("cargo:rerun-if-changed={path}");
            }
        }
    }
    let commit = commit.map_or_else(|| "unknown commit".to_string(), |c| format!("commit {c}"));
    println!("cargo:rustc-env=TACHO_COMMIT={commit}");
}

/// What `git -C dir ARGS` prints, trimmed; `None` when git is missing or fails.
fn git(dir: &Path, args: &[&str]) -> Option<String> {
    let out = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(args)
        .output()
        .ok()?;
    let text = String::from_utf8(out.stdout).ok()?;
    let text = text.trim();
    (out.status.success() && !text.is_empty()).then(|| text.to_string())
}
