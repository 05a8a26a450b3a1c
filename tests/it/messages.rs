//! What tacho says matches what it does: usage errors a person would write, help and manual
//! pages taken from the code, warnings that carry weight, in the order of their weight.

use crate::common::*;
use std::os::unix::fs::MetadataExt;
use std::path::Path;

fn json_lines(text: &str) -> Vec<serde_json::Value> {
    text.lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect()
}

// --- usage errors ---------------------------------------------------------------------------

#[test]
fn a_path_after_bench_suggests_bench_disk() {
    let line = assert_error(&run(&["bench", "/data"]));
    assert!(line.contains("tacho bench disk /data"), "{line}");
    let line = assert_error(&run(&["bench", "fio"]));
    assert!(line.contains("disk, cpu or mem"), "{line}");
}

#[test]
fn a_label_for_a_run_that_is_not_saved_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let target = dir.path().to_str().unwrap();
    // Short runs, should one be accepted by mistake.
    let mut disk = tiny_disk(target, &["--rw", "read"]);
    disk.extend(["--no-save", "--label", "x"]);
    for args in [
        disk,
        vec![
            "bench",
            "cpu",
            "--runtime",
            "100ms",
            "--repeat",
            "1",
            "--no-save",
            "--label",
            "x",
        ],
        vec!["time", "-r", "1", "--no-save", "--label", "x", "true"],
    ] {
        let line = assert_error(&run(&args));
        assert!(
            line.contains("--no-save") && line.contains("--label"),
            "{args:?}: {line}"
        );
    }
    assert_empty(dir.path());
}

#[test]
fn numbers_out_of_range_name_the_limits_not_the_type() {
    for (args, want) in [
        (vec!["top", "--batch", "--count", "0"], "at least 1"),
        (vec!["time", "-r", "0", "true"], "at least 1"),
        (vec!["bench", "disk", "--iodepth", "5000"], "from 1 to 4096"),
        (vec!["bench", "disk", "--repeat", "x"], "whole number"),
    ] {
        let line = assert_error(&run(&args));
        assert!(line.contains(want), "{args:?}: {line}");
        for type_talk in ["18446744073709551615", "..", "invalid digit"] {
            assert!(!line.contains(type_talk), "{args:?}: {line}");
        }
    }
}

#[test]
fn missing_arguments_are_named_in_a_sentence() {
    for (args, want) in [
        (vec!["runs", "rm"], "runs rm needs one or more ID"),
        (vec!["compare"], "compare needs one or more ID"),
        (vec!["diff", "a.json"], "diff needs B"),
    ] {
        let line = assert_error(&run(&args));
        assert!(line.contains(want), "{args:?}: {line}");
        assert!(!line.contains(":;"), "{args:?}: {line}");
    }
}

#[test]
fn an_over_long_value_is_not_echoed_back_whole() {
    let label = "x".repeat(5000);
    let dir = tempfile::tempdir().unwrap();
    let mut args = tiny_disk(dir.path().to_str().unwrap(), &["--rw", "read", "--no-save"]);
    args.extend(["--label", label.as_str()]);
    let line = assert_error(&run(&args));
    assert!(line.len() < 300, "{} characters: {line}", line.len());
    let line = assert_error(&run(&[
        "bench",
        "cpu",
        "--runtime",
        "100ms",
        "--repeat",
        "1",
        "--label",
        &label,
    ]));
    assert!(line.len() < 300 && line.contains('…'), "{line}");
    assert!(line.contains("200 characters"), "{line}");
    // Values the parsers quote themselves are cut the same way.
    let long = "9x".repeat(2000);
    for option in ["--threshold", "--size", "--bs"] {
        let line = assert_error(&run(&["bench", "disk", option, &long]));
        assert!(line.len() < 300 && line.contains('…'), "{option}: {line}");
    }
    // What is typed never reaches the terminal as an escape sequence.
    let line = assert_error(&run(&["files", "--pid", "\u{1b}[2J7"]));
    assert!(!line.contains('\u{1b}'), "{line:?}");
}

// --- help and manual ------------------------------------------------------------------------

/// `2s`, `500ms`, `5m`: as `--help` writes a suite's durations.
fn written(secs: f64) -> String {
    let ms = (secs * 1000.0).round() as u64;
    if ms > 0 && ms.is_multiple_of(60_000) {
        format!("{}m", ms / 60_000)
    } else if ms.is_multiple_of(1000) {
        format!("{}s", ms / 1000)
    } else {
        format!("{ms}ms")
    }
}

#[test]
fn disk_help_gives_the_suites_own_runtime_and_ramp() {
    let suites = json_ok(&run(&["bench", "disk", "--list-suites", "--json"]));
    let quick = suites["suites"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["name"] == "quick")
        .unwrap();
    let o = run(&["bench", "disk", "--help"]);
    assert_eq!(o.status.code(), Some(0));
    // Help wraps lines: compare with whitespace collapsed.
    let help = stdout(&o).split_whitespace().collect::<Vec<_>>().join(" ");
    for (option, key) in [("--runtime", "runtime_s"), ("--ramp", "ramp_s")] {
        let want = format!("quick {}", written(quick[key].as_f64().unwrap()));
        let section = help.split(option).nth(1).unwrap();
        let section = section.split(" --").next().unwrap();
        assert!(section.contains(&want), "{option}: {section}");
    }
}

/// Pages a roff page points to, as `tacho-bench(1)` (roff writes the hyphens as `\-`).
fn referenced_pages(roff: &str) -> Vec<String> {
    let text = roff.replace("\\-", "-");
    let mut found = Vec::new();
    for (i, _) in text.match_indices("(1)") {
        let start = text[..i]
            .rfind(|c: char| !(c.is_ascii_alphanumeric() || c == '-'))
            .map_or(0, |p| p + 1);
        let name = &text[start..i];
        if name.starts_with("tacho") {
            found.push(format!("{name}.1"));
        }
    }
    found
}

#[test]
fn man_writes_every_commands_page_and_names_only_those() {
    let dir = tempfile::tempdir().unwrap();
    let o = run(&["man", "--dir", dir.path().to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let pages = entries(dir.path());
    for page in [
        "tacho.1",
        "tacho-bench.1",
        "tacho-bench-disk.1",
        "tacho-runs-show.1",
        "tacho-time.1",
    ] {
        assert!(pages.contains(&page.to_string()), "no {page} in {pages:?}");
    }
    let mut references = 0;
    for page in &pages {
        let roff = std::fs::read_to_string(dir.path().join(page)).unwrap();
        assert!(roff.contains(".TH"), "{page} is not roff");
        for named in referenced_pages(&roff) {
            references += 1;
            assert!(pages.contains(&named), "{page} names {named}, not written");
        }
    }
    assert!(references >= 10, "the pages name their subcommands' pages");
    let mode = std::fs::metadata(dir.path().join("tacho.1"))
        .unwrap()
        .mode();
    assert_eq!(mode & 0o777, 0o644, "pages are readable by all");

    let missing = dir.path().join("nope");
    let line = assert_error(&run(&["man", "--dir", missing.to_str().unwrap()]));
    assert!(line.contains("not a directory"), "{line}");
    assert!(!missing.exists());
}

/// `--version` names the commit built from and lists the Cargo features built in, `+` for each
/// one there and `-` for each left out; `-V` stays the bare version scripts read, and the man
/// pages show that alone (they are the same whatever the build).
#[test]
fn version_names_the_commit_and_lists_the_features_built_in() {
    let long = stdout(&run(&["--version"]));
    for (name, built) in [
        ("pg", cfg!(feature = "pg")),
        ("bpf", cfg!(feature = "bpf")),
        ("profile", cfg!(feature = "profile")),
        ("tls", cfg!(feature = "tls")),
    ] {
        let word = format!("{}{name}", if built { '+' } else { '-' });
        assert!(
            long.split_whitespace().any(|w| w == word),
            "no {word}: {long}"
        );
    }
    let bare = format!("tacho {}\n", env!("CARGO_PKG_VERSION"));
    assert_eq!(stdout(&run(&["-V"])), bare);
    assert_eq!(long.lines().next(), bare.lines().next());
    // This is a checkout: the commit is HEAD's (build.rs builds again when HEAD moves).
    let head = sh(
        "git",
        &["-C", env!("CARGO_MANIFEST_DIR"), "rev-parse", "HEAD"],
    );
    let commit = format!("commit {}", head.trim());
    assert_eq!(long.lines().nth(1), Some(commit.as_str()), "{long}");
    let page = stdout(&run(&["man"]));
    assert!(!page.contains("features:"), "{page}");
    assert!(!page.contains(head.trim()), "{page}");
}

#[test]
fn man_refuses_a_link_at_a_page_name_before_writing_any_page() {
    let dir = tempfile::tempdir().unwrap();
    let victim = dir.path().join("victim");
    std::fs::write(&victim, "keep").unwrap();
    std::os::unix::fs::symlink(&victim, dir.path().join("tacho-time.1")).unwrap();
    let line = assert_error(&run(&["man", "--dir", dir.path().to_str().unwrap()]));
    assert!(line.contains("symbolic link"), "{line}");
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "keep");
    assert_eq!(entries(dir.path()), vec!["tacho-time.1", "victim"]);
}

// --- habits of the tools tacho replaces ------------------------------------------------------

#[test]
fn tacho_alone_lists_the_commands_and_exits_2_as_hyperfine_and_ripgrep_do() {
    let o = run::<&str>(&[]);
    // No command is a usage error (exit 2, as hyperfine and rg without arguments), but the
    // answer is the command list a newcomer needs, not a one-line riddle.
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(o.stdout.is_empty(), "help goes to stderr: {}", stdout(&o));
    let err = stderr(&o);
    for command in [
        "bench", "top", "check", "files", "compare", "profile", "man",
    ] {
        assert!(
            err.lines().any(|l| l.trim_start().starts_with(command)),
            "no {command} in: {err}"
        );
    }
    assert!(err.contains("Usage: tacho"), "{err}");
}

/// A page's section, fonts and roff's `\-` undone: `--suite NAME`.
fn man_section(roff: &str, title: &str) -> String {
    let start = roff
        .find(&format!(".SH {title}\n"))
        .unwrap_or_else(|| panic!("no {title} in {roff}"));
    let body = &roff[start + title.len() + 5..];
    let body = &body[..body.find("\n.SH ").unwrap_or(body.len())];
    body.replace("\\-", "-")
        .replace("\\fB", "")
        .replace("\\fI", "")
        .replace("\\fR", "")
}

#[test]
fn man_pages_give_option_values_in_the_synopsis_and_the_readmes_examples() {
    let dir = tempfile::tempdir().unwrap();
    let o = run(&["man", "--dir", dir.path().to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let page = |name: &str| std::fs::read_to_string(dir.path().join(name)).unwrap();
    let disk = page("tacho-bench-disk.1");
    let synopsis = man_section(&disk, "SYNOPSIS");
    for option in [
        "[--suite NAME]",
        "[--size SIZE]",
        "[--fio-job FILE]",
        "[TARGET]",
    ] {
        assert!(synopsis.contains(option), "no {option} in {synopsis}");
    }
    let examples = man_section(&disk, "EXAMPLES");
    assert!(
        examples.contains("tacho bench disk /var/lib/etcd --suite etcd"),
        "{examples}"
    );
    assert!(examples.contains("pass/fail for etcd"), "{examples}");
    let top = man_section(&page("tacho-top.1"), "EXAMPLES");
    assert!(
        top.contains("tacho top --batch --interval 1s --count 5"),
        "{top}"
    );
    // The page's own notes stay (what the letters of `files` mean).
    assert!(man_section(&page("tacho-files.1"), "NOTES").contains("Letters"));
    let synopsis = man_section(&page("tacho-check.1"), "SYNOPSIS");
    assert!(synopsis.contains("[--emit-script WHICH]"), "{synopsis}");
}

#[test]
fn completions_offer_the_suite_names_for_suite() {
    let bash = stdout(&run(&["completions", "bash"]));
    let mut cases = bash.split("--suite)").skip(1).peekable();
    assert!(cases.peek().is_some(), "no --suite in the bash script");
    for case in cases {
        let reply = case.lines().nth(1).unwrap();
        for suite in ["quick", "cdm-nvme", "etcd", "k8s", "dd"] {
            assert!(reply.contains(suite), "--suite offers: {reply}");
        }
    }
    let fish = stdout(&run(&["completions", "fish"]));
    // fish lists the words with their help, one per line, in one quoted argument.
    let suite = fish.split("-l suite").nth(1).unwrap();
    let suite = suite.split("\ncomplete ").next().unwrap();
    assert!(suite.contains("\netcd\\t"), "{suite}");
}

/// `report disk DISK` completes the disks of the machine where Tab is pressed (bash run on the
/// script as a shell would; zsh and fish are not installed here, so their lines are read).
#[test]
fn completions_offer_this_machine_s_disks_for_report_disk() {
    let disk = std::fs::read_dir("/sys/block")
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .min()
        .expect("a block device in /sys/block");
    let script = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(script.path(), stdout(&run(&["completions", "bash"]))).unwrap();
    let prefix = &disk[..disk.len().min(2)];
    let o = std::process::Command::new("bash")
        .arg("-c")
        .arg(format!(
            "source {}; COMP_WORDS=(tacho report disk {prefix}); COMP_CWORD=3; \
             _tacho tacho {prefix} disk; printf '%s\\n' \"${{COMPREPLY[@]}}\"",
            script.path().display()
        ))
        .output()
        .unwrap();
    let offered = stdout(&o);
    assert!(
        offered.lines().any(|l| l == disk),
        "{offered}{}",
        stderr(&o)
    );
    let zsh = stdout(&run(&["completions", "zsh"]));
    assert!(
        zsh.contains("every disk with a device\\]:( $(command ls /sys/block"),
        "zsh"
    );
    let fish = stdout(&run(&["completions", "fish"]));
    assert!(
        fish.contains("__fish_seen_subcommand_from disk\" -f -a \"(command ls /sys/block"),
        "fish"
    );
}

#[test]
fn help_and_listings_describe_this_command_in_words_for_users() {
    let collapse =
        |o: &std::process::Output| stdout(o).split_whitespace().collect::<Vec<_>>().join(" ");
    // drift shares its formats with compare, but its CSV holds settings, not tests.
    let drift = collapse(&run(&["drift", "--help"]));
    let csv = drift.split("--csv").nth(1).unwrap();
    let csv = csv.split(" --").next().unwrap();
    assert!(
        csv.contains("setting") && !csv.contains("per test"),
        "{csv}"
    );
    let html = drift.split("--html").nth(1).unwrap();
    assert!(
        !html.split(" --").next().unwrap().contains("charts"),
        "{html}"
    );
    // bench mem's working sets as plan_levels makes them: an eighth of L3, not half.
    let mem = collapse(&run(&["bench", "mem", "--help"]));
    assert!(mem.contains("an eighth of L3"), "{mem}");
    // Written for the admin reading it, not about how the project began.
    let suites = stdout(&run(&["bench", "disk", "--list-suites"]));
    assert!(!suites.contains("seed"), "{suites}");
}

// --- agreeing options -----------------------------------------------------------------------

#[test]
fn top_batch_json_is_json() {
    let o = run(&[
        "top",
        "--batch",
        "--json",
        "--count",
        "1",
        "--interval",
        "100ms",
    ]);
    // 1 means a finding of warn or worse on this (busy) machine; both are answers, not errors.
    assert!(matches!(o.status.code(), Some(0 | 1)), "{}", stderr(&o));
    assert!(stderr(&o).is_empty(), "{}", stderr(&o));
    let lines = json_lines(&stdout(&o));
    assert_eq!(lines.len(), 1);
    assert_eq!(lines[0]["schema"], "tacho.top.v3");
}

// --- time's textfile when a command fails ---------------------------------------------------

#[test]
fn a_failing_command_still_writes_the_textfile() {
    let dir = tempfile::tempdir().unwrap();
    let prom = dir.path().join("time.prom");
    let o = run(&[
        "time",
        "--no-save",
        "-N",
        "-r",
        "3",
        "--prom-textfile",
        prom.to_str().unwrap(),
        "--command-name",
        "status page",
        "false",
    ]);
    let line = assert_error(&o);
    assert!(line.contains("false"), "{line}");
    let text = std::fs::read_to_string(&prom).expect("no textfile after the failure");
    for want in [
        r#"tacho_time_failed_runs{command="status page"} 1"#,
        r#"tacho_time_last_exit_code{command="status page"} 1"#,
        "tacho_time_run_failed 1",
        "tacho_time_run_timestamp_seconds",
    ] {
        assert!(text.contains(want), "no {want} in\n{text}");
    }
    assert_promtool_accepts(&prom);
    assert_eq!(
        entries(dir.path()),
        vec!["time.prom"],
        "no temporary file left"
    );

    // A run that succeeds says it did not fail.
    let o = run(&[
        "time",
        "--no-save",
        "-N",
        "-r",
        "2",
        "--prom-textfile",
        prom.to_str().unwrap(),
        "true",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let text = std::fs::read_to_string(&prom).unwrap();
    assert!(text.contains("tacho_time_run_failed 0"), "{text}");
}

// --- check's citations ----------------------------------------------------------------------

#[test]
fn check_cites_only_what_a_reader_can_open() {
    for profile in ["default", "web", "postgres"] {
        let v = json_ok(&run(&["check", "--profile", profile, "--json"]));
        let findings = v["findings"].as_array().expect("findings");
        assert!(!findings.is_empty());
        for f in findings {
            let reference = f["reference"].as_str().unwrap();
            assert!(
                !reference.contains("SEEDS") && !reference.contains(".md"),
                "{}: {reference}",
                f["id"]
            );
        }
    }
}

// --- warnings that carry weight -------------------------------------------------------------

/// The whole disk under `path`'s filesystem and whether a hypervisor provides it, read from
/// sysfs here independently of tacho: the disk's own driver or a SCSI adapter's above it.
fn virtual_disk_under(path: &Path) -> Option<String> {
    let dev = std::fs::metadata(path).ok()?.dev();
    let sys = format!("/sys/dev/block/{}:{}", libc::major(dev), libc::minor(dev));
    let mut dir = std::fs::canonicalize(sys).ok()?;
    if dir.join("partition").exists() {
        dir.pop();
    }
    let mut device = std::fs::canonicalize(dir.join("device")).ok()?;
    loop {
        if let Ok(driver) = std::fs::read_link(device.join("driver")) {
            let name = driver.file_name()?.to_string_lossy().into_owned();
            if [
                "virtio_blk",
                "virtio_scsi",
                "xen_blkfront",
                "vmw_pvscsi",
                "hv_storvsc",
            ]
            .contains(&name.as_str())
            {
                return Some(name);
            }
        }
        if !device.pop() || !device.starts_with("/sys/devices") {
            return None;
        }
    }
}

fn codes_of(v: &serde_json::Value) -> Vec<String> {
    warning_codes(v)
}

#[test]
fn no_vm_warning_for_storage_in_ram() {
    let shm = Path::new("/dev/shm");
    if !shm.is_dir() {
        skip("no_vm_warning_for_storage_in_ram: no /dev/shm");
        return;
    }
    let dir = tempfile::tempdir_in(shm).unwrap();
    let args = tiny_disk(
        dir.path().to_str().unwrap(),
        &["--json", "--no-save", "--buffered", "--rw", "randread"],
    );
    let v = json_ok(&run(&args));
    let codes = codes_of(&v);
    assert!(codes.contains(&"memory-backed".to_string()), "{codes:?}");
    assert!(
        !codes.contains(&"vm-detected".to_string()),
        "tmpfs: {codes:?}"
    );

    let Some(dev) = LoopDev::new("no_vm_warning_on_a_loop_over_ram", 64 << 20) else {
        return;
    };
    let args = tiny_disk(dev.path(), &["--json", "--no-save", "--rw", "randread"]);
    let v = json_ok(&run(&args));
    let codes = codes_of(&v);
    assert!(
        !codes.contains(&"vm-detected".to_string()),
        "loop over RAM: {codes:?}"
    );
}

#[test]
fn vm_warning_for_a_loop_over_a_file_on_a_virtual_disk() {
    let dir = tempfile::tempdir_in(std::env::temp_dir()).unwrap();
    let Some(driver) = virtual_disk_under(dir.path()) else {
        skip(
            "vm_warning_for_a_loop_over_a_file_on_a_virtual_disk: the temporary directory is not on a virtual disk",
        );
        return;
    };
    let Some(dev) = LoopDev::new_in(
        "vm_warning_on_a_loop_over_a_virtual_disk",
        64 << 20,
        dir.path(),
    ) else {
        return;
    };
    let args = tiny_disk(dev.path(), &["--json", "--no-save", "--rw", "randread"]);
    let v = json_ok(&run(&args));
    let vm = v["warnings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|w| w["code"] == "vm-detected")
        .unwrap_or_else(|| panic!("no vm-detected in {}", v["warnings"]));
    assert!(vm["message"].as_str().unwrap().contains(&driver), "{vm}");
}

#[test]
fn warnings_about_the_result_come_before_context_and_sizes_are_readable() {
    let shm = Path::new("/dev/shm");
    if !shm.is_dir() {
        skip("warnings order: no /dev/shm");
        return;
    }
    let dir = tempfile::tempdir_in(shm).unwrap();
    let target = dir.path().to_str().unwrap();
    // Buffered on tmpfs: fits-in-ram (about the figures) and no-device (context).
    let args = tiny_disk(target, &["--no-save", "--buffered", "--rw", "randread"]);
    let o = run(&args);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let out = stdout(&o);
    let order: Vec<&str> = out
        .lines()
        .filter_map(|l| l.strip_prefix("warning ["))
        .filter_map(|l| l.split(']').next())
        .collect();
    let at = |code: &str| {
        order
            .iter()
            .position(|c| *c == code)
            .unwrap_or_else(|| panic!("no {code} in {order:?}"))
    };
    assert!(at("fits-in-ram") < at("no-device"), "{order:?}");
    assert!(at("memory-backed") < at("fits-in-ram"), "{order:?}");

    let fits = out
        .lines()
        .find(|l| l.starts_with("warning [fits-in-ram]"))
        .unwrap();
    let ram = fits.split(" of RAM").next().unwrap();
    let unit = ram.rsplit(' ').next().unwrap();
    assert!(
        ["KiB", "MiB", "GiB", "TiB"].contains(&unit),
        "RAM as a readable size (\"23.5 GiB\"): {fits}"
    );

    let v = json_ok(&run(&tiny_disk(
        target,
        &["--json", "--no-save", "--buffered", "--rw", "randread"],
    )));
    let run_codes: Vec<&str> = v["warnings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| w["code"].as_str().unwrap())
        .collect();
    let pos = |c: &str| run_codes.iter().position(|x| *x == c).unwrap();
    assert!(pos("memory-backed") < pos("no-device"), "{run_codes:?}");
}

#[test]
fn reading_a_sparse_file_names_its_holes() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("sparse.img");
    {
        use std::io::Write;
        let mut f = std::fs::File::create(&file).unwrap();
        f.write_all(&vec![7u8; 4 << 20]).unwrap();
        f.set_len(64 << 20).unwrap();
        f.sync_all().unwrap();
    }
    // The whole file is the region: 60 of its 64 MiB are a hole.
    let args = [
        "bench",
        "disk",
        file.to_str().unwrap(),
        "--json",
        "--no-save",
        "--rw",
        "randread",
        "--runtime",
        "300ms",
    ];
    let v = json_ok(&run(&args));
    let t = &tests_of(&v)[0];
    let sparse = t["warnings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|w| w["code"] == "sparse-file")
        .unwrap_or_else(|| panic!("no sparse-file warning: {}", t["warnings"]));
    let message = sparse["message"].as_str().unwrap();
    assert!(
        message.contains("94% of") && message.contains("sparse.img"),
        "{message}"
    );
    let codes = codes_of(&v);
    assert!(!codes.contains(&"cache-suspected".to_string()), "{codes:?}");

    // Filled, the same file raises nothing about holes.
    std::fs::write(&file, vec![7u8; 64 << 20]).unwrap();
    let v = json_ok(&run(&args));
    assert!(!codes_of(&v).contains(&"sparse-file".to_string()));
}
