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
        for path in watched(dir) {
            println!("cargo:rerun-if-changed={path}");
        }
    }
    let commit = commit.map_or_else(|| "unknown commit".to_string(), |c| format!("commit {c}"));
    println!("cargo:rustc-env=TACHO_COMMIT={commit}");
}

/// The files that change when HEAD moves: HEAD itself (a checkout, or a commit on a detached
/// HEAD) and the current branch's ref (a commit): its loose file, or while the ref is packed
/// (no loose file yet, which Cargo would take as changed at every build) the directory its
/// file will be made in, and packed-refs. Only this branch's: other worktrees of the same
/// repository commit to theirs without rebuilding this one.
fn watched(dir: &Path) -> Vec<String> {
    let git_path = |name: &str| {
        git(
            dir,
            &["rev-parse", "--path-format=absolute", "--git-path", name],
        )
    };
    let mut paths: Vec<String> = ["HEAD", "packed-refs"]
        .iter()
        .filter_map(|n| git_path(n))
        .collect();
    if let Some(branch) = git(dir, &["symbolic-ref", "-q", "HEAD"])
        && let Some(loose) = git_path(&branch)
    {
        let loose = Path::new(&loose);
        if loose.exists() {
            paths.push(loose.display().to_string());
        } else if let Some(parent) = loose.parent() {
            paths.push(parent.display().to_string());
        }
    }
    paths.retain(|p| Path::new(p).exists());
    paths
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
