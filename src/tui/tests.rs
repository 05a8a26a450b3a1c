use super::*;
use crate::diagnose::findings::tests::fixture_top_sample;
use crate::diagnose::model::Disk;
use crate::diagnose::model::accumulate::{Accumulated, AccumulatedProcess};
use crate::diagnose::model::finding::{Code, Finding, Severity};
use crate::diagnose::sample::devices::DeviceInfo;
use crate::kernel::blockdev::DeviceKind;
use ratatui::Terminal;
use ratatui::backend::TestBackend;

/// The screen as text, and what the scrolling panels showed.
fn draw_at(sample: Option<&TopSample>, ui: &UiState, w: u16, h: u16) -> (String, Shown) {
    let mut terminal = Terminal::new(TestBackend::new(w, h)).unwrap();
    let mut shown = Shown::default();
    terminal.draw(|f| shown = draw(f, sample, ui)).unwrap();
    let buf = terminal.backend().buffer().clone();
    let text = (0..h)
        .map(|y| {
            (0..w)
                .map(|x| buf[(x, y)].symbol().to_string())
                .collect::<String>()
        })
        .collect::<Vec<_>>()
        .join("\n");
    (text, shown)
}

fn screen(sample: Option<&TopSample>, ui: &UiState, w: u16, h: u16) -> String {
    draw_at(sample, ui, w, h).0
}

/// Every column name the tables can show, from the tables themselves.
fn column_names() -> Vec<&'static str> {
    [
        &panels::CPU_COLUMNS[..],
        &tables::DISK_COLUMNS,
        &tables::PROCESS_COLUMNS,
        &tables::ACCUMULATED_COLUMNS,
        &tables::NET_COLUMNS,
    ]
    .concat()
    .iter()
    .map(|c| c.name)
    .collect()
}

/// The header lines of the tables: the words of each panel's line (between borders) whose
/// first word names a table's first column.
fn header_words(text: &str) -> Vec<Vec<String>> {
    text.lines()
        .flat_map(|l| l.split('│'))
        .map(|panel| panel.split(' ').filter(|w| !w.is_empty()).map(String::from))
        .map(Iterator::collect::<Vec<_>>)
        .filter(|words| {
            words
                .first()
                .is_some_and(|w| ["Device", "PID", "CPU", "IFACE"].contains(&w.as_str()))
        })
        .collect()
}

/// The captured sample plus ten idle loop devices named before vda, as on the machine where
/// the screen once showed only loop devices.
fn with_idle_loops() -> TopSample {
    let mut s = fixture_top_sample();
    let vda = s
        .disks
        .iter()
        .find(|d| d.device.name == "vda")
        .unwrap()
        .clone();
    let idle = |name: String| Disk {
        device: DeviceInfo {
            name: name.clone(),
            display_name: name,
            kind: DeviceKind::Loop,
            ..vda.device.clone()
        },
        r_per_s: Some(0.0),
        w_per_s: Some(0.0),
        d_per_s: Some(0.0),
        f_per_s: Some(0.0),
        util_pct: Some(0.0),
        ..vda.clone()
    };
    let mut disks: Vec<Disk> = (0..10).map(|i| idle(format!("loop{i}"))).collect();
    disks.push(idle("zram0".into()));
    let mut ram = idle("ram0".into());
    ram.device.kind = DeviceKind::Disk;
    disks.push(ram);
    disks.append(&mut s.disks);
    s.disks = disks;
    s
}

#[test]
fn renders_every_panel_with_the_verdict_first() {
    let s = fixture_top_sample();
    let ui = UiState::new(SortKey::Io);
    let text = screen(Some(&s), &ui, 150, 45);
    let first = text.lines().next().unwrap();
    let headline = s
        .findings
        .first()
        .map_or(s.verdict.as_str(), |f| f.message.as_str());
    assert!(
        first.starts_with(&headline[..40.min(headline.len())]),
        "{first}"
    );
    for needle in [
        " CPU ",
        "%soft",
        "Memory (as free computes it)",
        "Disks, busiest first",
        "w_await",
        "vda",
        "Processes by io",
        "dd",
        "Network",
        "eth0",
        "q quit",
        "? help",
        "[sorted by io]",
    ] {
        assert!(text.contains(needle), "missing {needle:?} in\n{text}");
    }
    // Partitions and per-CPU rows appear only when asked.
    assert!(!text.contains("│1 "), "{text}");
    let mut ui = ui;
    ui.key(KeyCode::Char('c'));
    let text = screen(Some(&s), &ui, 150, 45);
    assert!(text.contains("│1 "), "per-CPU row for cpu1:\n{text}");
}

#[test]
fn idle_virtual_devices_are_hidden_and_the_busiest_disk_comes_first() {
    let s = with_idle_loops();
    let mut ui = UiState::new(SortKey::Io);
    for (w, h) in [(80, 24), (120, 30), (200, 50)] {
        let text = screen(Some(&s), &ui, w, h);
        let first_row = text
            .lines()
            .skip_while(|l| !l.starts_with("│Device"))
            .nth(1)
            .unwrap_or_default();
        assert!(first_row.starts_with("│vda "), "{w}x{h}:\n{text}");
        assert!(!text.contains("loop3"), "{w}x{h}:\n{text}");
        assert!(!text.contains("zram0"), "{w}x{h}:\n{text}");
        let hidden = text
            .split(" idle loop/ram/zram hidden: d shows")
            .next()
            .and_then(|t| t.rsplit(' ').next())
            .and_then(|n| n.parse::<usize>().ok());
        assert!(hidden >= Some(12), "{w}x{h}:\n{text}");
    }
    // `d` shows them, after the busy ones; the panel then scrolls.
    assert!(ui.key(KeyCode::Char('d')));
    let (text, shown) = draw_at(Some(&s), &ui, 80, 24);
    assert!(text.contains("d hides idle loop/ram/zram"), "{text}");
    assert!(shown.disks.total > shown.disks.visible, "{shown:?}\n{text}");
    assert!(
        text.contains(&format!("rows 1-{} of", shown.disks.visible)),
        "{text}"
    );
    ui.drawn(shown);
    assert!(text.contains("▸ Processes"), "{text}");
    ui.key(KeyCode::Tab);
    assert_eq!(ui.focus, Focus::Disks);
    let text = screen(Some(&s), &ui, 80, 24);
    assert!(
        text.contains("▸ Disks") && !text.contains("▸ Processes"),
        "{text}"
    );
    ui.key(KeyCode::PageDown);
    assert_eq!(
        ui.disk_scroll, shown.disks.visible,
        "a page is what was shown"
    );
    ui.key(KeyCode::End);
    for _ in 0..100 {
        ui.key(KeyCode::Down);
    }
    ui.drawn(shown);
    assert_eq!(ui.disk_scroll, shown.disks.total - shown.disks.visible);
    assert_eq!(ui.scroll, 0, "only the focused panel scrolls");
    let text = screen(Some(&s), &ui, 80, 24);
    assert!(text.contains("zram0"), "the last rows:\n{text}");
    assert!(!text.contains("│vda "), "scrolled past vda:\n{text}");
    ui.key(KeyCode::Home);
    assert_eq!(ui.disk_scroll, 0);
}

#[test]
fn only_idle_loop_ram_and_zram_devices_and_their_partitions_are_hidden() {
    let mut s = with_idle_loops();
    let template = s
        .disks
        .iter()
        .find(|d| d.device.name == "loop0")
        .unwrap()
        .clone();
    let mut part = template.clone();
    part.device.name = "loop0p1".into();
    part.device.kind = DeviceKind::Partition;
    part.device.parent = Some("loop0".into());
    let mut disk = template.clone();
    disk.device.name = "ramdisk".into();
    disk.device.kind = DeviceKind::Disk;
    let mut busy_loop = template.clone();
    busy_loop.device.name = "loop42".into();
    busy_loop.w_per_s = Some(1.0);
    s.disks.extend([part, disk, busy_loop]);
    let mut ui = UiState::new(SortKey::Io);
    ui.partitions = true;
    let names = |ui: &UiState| -> Vec<String> {
        tables::disk_list(&s, ui)
            .rows
            .iter()
            .map(|d| d.device.name.clone())
            .collect()
    };
    let shown = names(&ui);
    for gone in ["loop0p1", "loop3", "ram0", "zram0"] {
        assert!(!shown.iter().any(|n| n == gone), "{gone} in {shown:?}");
    }
    // A disk merely named like ram, and a loop device at work, stay.
    for kept in ["ramdisk", "loop42", "vda"] {
        assert!(shown.iter().any(|n| n == kept), "{kept} not in {shown:?}");
    }
    ui.key(KeyCode::Char('d'));
    assert!(names(&ui).iter().any(|n| n == "loop0p1"));
}

#[test]
fn column_names_are_whole_and_a_wide_screen_shows_more() {
    let s = with_idle_loops();
    let mut ui = UiState::new(SortKey::Io);
    ui.per_cpu = true;
    let names = column_names();
    let mut counts = Vec::new();
    for (w, h) in [(80, 24), (100, 30), (120, 30), (150, 45), (200, 50)] {
        let text = screen(Some(&s), &ui, w, h);
        let headers = header_words(&text);
        assert!(headers.len() >= 3, "{w}x{h}: tables missing\n{text}");
        for words in &headers {
            for word in words {
                assert!(
                    names.contains(&word.as_str()),
                    "{w}x{h}: header word {word:?} is not a column name\n{text}"
                );
            }
        }
        counts.push(headers.iter().map(Vec::len).sum::<usize>());
    }
    assert!(
        counts.windows(2).all(|c| c[0] <= c[1]) && counts[0] < counts[4],
        "columns shown by width: {counts:?}"
    );
}

#[test]
fn a_long_verdict_wraps_whole_at_80_columns() {
    let mut s = fixture_top_sample();
    // Only this verdict: the fixture's own findings would add a "+N more" line under it.
    s.findings.clear();
    let message = "vda saturated (aqu-sz 31.2, await 4.1 ms vs 0.3 ms usual): 81% of writes \
        from dd (pid 4242, session-3.scope), 12% from postgres (pid 1234, postgresql.service), \
        the rest from 14 other processes";
    s.findings.insert(
        0,
        Finding {
            code: Code::DiskSaturated,
            severity: Severity::Critical,
            subject: "vda".into(),
            message: message.into(),
            culprits: Vec::new(),
        },
    );
    let ui = UiState::new(SortKey::Io);
    for (w, h) in [(80, 24), (120, 30)] {
        let text = screen(Some(&s), &ui, w, h);
        let mut lines = text.lines();
        let mut shown = lines.next().unwrap().trim_end().to_string();
        for l in lines.take_while(|l| l.starts_with("  ")) {
            shown.push(' ');
            shown.push_str(l.trim());
        }
        assert_eq!(shown, message, "{w}x{h}:\n{text}");
    }
    // Many findings on a short screen: the first whole, the rest counted, the disks still shown.
    for i in 0..6 {
        s.findings.push(Finding {
            code: Code::HotDisk,
            severity: Severity::Warning,
            subject: format!("sd{i}"),
            message: format!("sd{i} is hot: {message}"),
            culprits: Vec::new(),
        });
    }
    let text = screen(Some(&s), &ui, 80, 24);
    assert!(text.contains("more findings (f shows them)"), "{text}");
    assert!(text.contains("│vda "), "{text}");
    // `f` shows them: each hot disk is named, the first one's message still whole.
    let mut ui = ui;
    assert!(ui.key(KeyCode::Char('f')));
    let text = screen(Some(&s), &ui, 80, 40);
    for i in 0..6 {
        assert!(text.contains(&format!("sd{i} is hot")), "sd{i}:\n{text}");
    }
    assert!(ui.key(KeyCode::Char('f')));
    let text = screen(Some(&s), &ui, 80, 40);
    assert!(text.contains("more findings (f shows them)"), "{text}");
}

#[test]
fn keys_change_sort_and_quit() {
    let mut ui = UiState::new(SortKey::Io);
    assert!(ui.key(KeyCode::Char('s')));
    assert_eq!(ui.sort, SortKey::Cpu);
    let s = fixture_top_sample();
    assert!(screen(Some(&s), &ui, 150, 45).contains("[sorted by cpu]"));
    assert!(screen(Some(&s), &ui, 80, 24).contains("Processes by cpu"));
    ui.key(KeyCode::Down);
    assert_eq!(ui.scroll, 1);
    ui.key(KeyCode::Up);
    ui.key(KeyCode::Up);
    assert_eq!(ui.scroll, 0);
    assert!(!ui.key(KeyCode::Char('q')));
}

#[test]
fn help_lists_every_key_and_any_key_closes_it() {
    let s = fixture_top_sample();
    let mut ui = UiState::new(SortKey::Io);
    assert!(ui.key(KeyCode::Char('?')));
    let text = screen(Some(&s), &ui, 80, 24);
    for k in keys::KEYS {
        assert!(text.contains(k.help), "help misses {:?}:\n{text}", k.keys);
    }
    // The key that closes the help does nothing else, even q.
    assert!(ui.key(KeyCode::Char('q')));
    assert!(!ui.help);
    assert!(!screen(Some(&s), &ui, 80, 24).contains(keys::KEYS[0].help));
}

#[test]
fn a_toggles_accumulated_mode_and_the_header_says_since_when() {
    let mut s = fixture_top_sample();
    let mut ui = UiState::new(SortKey::Io);
    ui.key(KeyCode::Char('a'));
    let since = ui.accumulated_since.expect("a turns accumulated mode on");
    let clock = crate::report::files::local_time_of_day(since);
    // Before an interval has been added under the mode: rates, and the title says so.
    let text = screen(Some(&s), &ui, 80, 24);
    assert!(
        text.contains(&format!("accumulating since {}", &clock[..8])),
        "{text}"
    );
    // Once the totals are on the sample, the rows are theirs, under iotop -a's columns.
    s.accumulated = Some(Accumulated {
        since_unix_s: 0.0,
        processes: vec![AccumulatedProcess {
            pid: 4242,
            comm: "backupd".into(),
            comm_hex: None,
            unit: Some("backup.service".into()),
            read_bytes: 0,
            write_bytes: 283 << 20,
            user_s: 1.5,
            system_s: 12.25,
            io_delay_s: 0.0,
            exited: true,
        }],
        services: Vec::new(),
    });
    for (w, h) in [(80, 24), (200, 50)] {
        let text = screen(Some(&s), &ui, w, h);
        assert!(
            text.contains(&format!("accumulated since {}", &clock[..8])),
            "{text}"
        );
        let row = text
            .lines()
            .find(|l| l.contains("4242"))
            .unwrap_or_else(|| panic!("{w}x{h}: no row for pid 4242\n{text}"));
        assert!(row.contains("backupd (exited)"), "{row}");
        assert!(row.contains("289792"), "283 MiB in kB: {row}");
        assert!(row.contains("13.75"), "CPU seconds: {row}");
    }
    assert!(
        screen(Some(&s), &ui, 200, 50).contains("backup.service"),
        "the unit shows on a wide screen"
    );
    ui.key(KeyCode::Char('a'));
    assert_eq!(ui.accumulated_since, None);
    let text = screen(Some(&s), &ui, 80, 24);
    assert!(!text.contains("accumulat"), "{text}");
    assert!(!text.contains("backupd"), "{text}");
}

#[test]
fn before_the_first_interval_and_on_a_tiny_terminal() {
    let ui = UiState::new(SortKey::Io);
    let text = screen(None, &ui, 80, 10);
    assert!(text.contains("measuring the first interval"));
    assert!(text.contains("q quit"));
    // Too small for the panels: drawn clipped, never a panic.
    let s = with_idle_loops();
    for (w, h) in [(20, 5), (1, 1), (80, 3), (300, 8)] {
        let _ = screen(Some(&s), &ui, w, h);
    }
}

#[test]
fn control_characters_in_names_are_drawn_escaped() {
    let mut s = fixture_top_sample();
    let hostile = "\u{1b}]0;pwned\u{7}\u{1b}[2J";
    s.processes[0].comm = hostile.to_string();
    s.disks[0].device.display_name = format!("vg-{hostile}");
    s.findings.clear();
    s.verdict = format!("busy: {hostile}");
    let ui = UiState::new(SortKey::Io);
    let text = screen(Some(&s), &ui, 150, 45);
    assert!(
        !text.contains('\u{1b}') && !text.contains('\u{7}'),
        "{text:?}"
    );
    assert!(text.contains(r"\e]0;pwned\a\e[2J"), "{text}");
    assert!(text.contains(r"vg-\e]0;pw"), "{text}");
    assert!(text.starts_with(r"busy: \e]0;pwned"), "{text}");
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(24))]
    #[test]
    fn any_size_and_any_keys_draw_without_panic(
        w in 1u16..260,
        h in 1u16..80,
        keys in proptest::collection::vec(
            proptest::sample::select(vec!['?', 's', 'a', 'c', 'p', 'd', '\t', 'j', 'k', 'n', 'u']),
            0..12,
        ),
    ) {
        let s = with_idle_loops();
        let mut ui = UiState::new(SortKey::Io);
        for k in keys {
            let code = match k {
                '\t' => KeyCode::Tab,
                'j' => KeyCode::Down,
                'k' => KeyCode::Up,
                'n' => KeyCode::PageDown,
                'u' => KeyCode::End,
                c => KeyCode::Char(c),
            };
            ui.key(code);
            let (text, shown) = draw_at(Some(&s), &ui, w, h);
            ui.drawn(shown);
            proptest::prop_assert_eq!(text.lines().count(), usize::from(h));
        }
    }
}

#[test]
fn the_network_panel_names_the_top_sender_and_dns() {
    use crate::diagnose::model::conns::{ConnGroup, Conns};
    let mut s = fixture_top_sample();
    s.connections = Some(Conns {
        established: 2,
        tx_bytes_per_s: 1.5e6,
        rx_bytes_per_s: 0.0,
        top: Vec::new(),
        by_remote: Vec::new(),
        by_service: Vec::new(),
        by_process: vec![ConnGroup {
            key: "evil\u{1b}[2J (pid 7)".into(),
            key_hex: None,
            pid: Some(7),
            unit: None,
            connections: 1,
            tx_bytes_per_s: 1.5e6,
            rx_bytes_per_s: 0.0,
            tx_share_pct: 100.0,
            segs_out: 10,
            retrans: 0,
        }],
        owners_unknown: 0,
    });
    let mut c = crate::net::dns::DnsCounts {
        queries: 20,
        answers: 20,
        response_ms: vec![2.0; 20],
        ..Default::default()
    };
    c.rcodes.insert("NOERROR".into(), 15);
    c.rcodes.insert("SERVFAIL".into(), 5);
    s.dns = Some(crate::diagnose::model::dns::between(&c, 1.0));
    let text = screen(Some(&s), &UiState::new(SortKey::Io), 200, 50);
    assert!(
        text.contains("Network  · TCP 1.5 MB/s out, 100% evil\\e[2J (pid 7)"),
        "{text}"
    );
    assert!(
        text.contains("· DNS 20 q/s, 25% not NOERROR, p99 2.0 ms"),
        "{text}"
    );
}
