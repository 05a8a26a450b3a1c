//! `tacho check`: settings that silently cost performance ("the handbrake"), each judged into
//! a [`Finding`] with the evidence read, why it matters (with its source), and the exact
//! commands to fix it now, make the fix survive a reboot, and undo both.
//!
//! Strictly read-only: [`Facts::read`] only reads files (and one FS_IOC_GETFLAGS ioctl);
//! rules are pure functions of the facts; fixes are text for an admin, never run.

pub mod cmds;
mod cpu;
mod devices;
mod facts;
mod filesystems;
mod kernel;
mod memory;
mod proxmox;
mod vm;

#[cfg(test)]
mod tests;

use serde::Serialize;

pub use facts::Facts;

use crate::choice::Choice;
use crate::kernel::SysRoot;

/// How much a finding matters, least first (`--only` and `--strict` compare with `>=`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    /// The setting is as recommended.
    Ok,
    /// Worth knowing; no change recommended without a reason specific to the workload.
    Info,
    /// Likely costs performance (or safety) here; the fix is recommended.
    Warn,
    /// Costs a lot, or risks data; fix first.
    Crit,
}

impl Choice for Severity {
    const ALL: &'static [Self] = &[Severity::Ok, Severity::Info, Severity::Warn, Severity::Crit];

    fn word(self) -> &'static str {
        self.label()
    }

    fn help(self) -> Option<&'static str> {
        Some(match self {
            Severity::Ok => "The setting is as recommended",
            Severity::Info => "Worth knowing; no change recommended without a workload reason",
            Severity::Warn => "Likely costs performance (or safety) here; the fix is recommended",
            Severity::Crit => "Costs a lot, or risks data; fix first",
        })
    }
}

impl Severity {
    /// The severity's word in the table, JSON and `--only` (`ok`, `info`, `warn`, `crit`).
    pub fn label(self) -> &'static str {
        match self {
            Severity::Ok => "ok",
            Severity::Info => "info",
            Severity::Warn => "warn",
            Severity::Crit => "crit",
        }
    }
}

/// Which part of the table a finding belongs to, in display order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Group {
    /// Transparent huge pages.
    Memory,
    /// Block devices: schedulers, read-ahead, queue depth, write cache.
    Storage,
    /// Mount options and filesystem features.
    Filesystems,
    /// vm sysctls and swap.
    Vm,
    /// CPU frequency governor, boost and idle states.
    Cpu,
    /// Kernel build options and command line (mitigations, IOMMU, preemption).
    Kernel,
    /// Settings that matter inside a VM.
    Virtualization,
}

impl Group {
    /// The heading of the group's part of the table.
    pub fn title(self) -> &'static str {
        match self {
            Group::Memory => "Memory (transparent huge pages)",
            Group::Storage => "Block devices",
            Group::Filesystems => "Filesystems",
            Group::Vm => "Virtual memory (vm sysctls, swap)",
            Group::Cpu => "CPU power management",
            Group::Kernel => "Kernel",
            Group::Virtualization => "Virtualization",
        }
    }
}

/// The workload the machine serves; changes what some rules recommend.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Profile {
    /// No specific workload: the kernel's defaults are judged as kernel documentation
    /// recommends.
    #[default]
    Default,
    /// Redis: THP copy-on-write after its forks (BGSAVE, AOF rewrite) costs latency, so THP should
    /// be never.
    Redis,
    /// PostgreSQL: THP should be never (it uses explicit huge pages).
    Postgres,
    /// MongoDB: THP always from 8.0 on, and a small read-ahead on its data disk.
    Mongodb,
    /// etcd: judged as a database (low swappiness), with THP `always` warned about.
    Etcd,
    /// Web stacks: nginx, php-fpm, application servers.
    Web,
}

impl Choice for Profile {
    const ALL: &'static [Self] = &[
        Profile::Default,
        Profile::Redis,
        Profile::Postgres,
        Profile::Mongodb,
        Profile::Etcd,
        Profile::Web,
    ];

    fn word(self) -> &'static str {
        self.name()
    }

    fn help(self) -> Option<&'static str> {
        match self {
            Profile::Default => Some(
                "No specific workload: the kernel's defaults are judged as kernel documentation \
                 recommends",
            ),
            Profile::Web => Some("Web stacks: nginx, php-fpm, application servers"),
            _ => None,
        }
    }
}

impl Profile {
    /// The profile's word in `--profile` and JSON.
    pub fn name(self) -> &'static str {
        match self {
            Profile::Default => "default",
            Profile::Redis => "redis",
            Profile::Postgres => "postgres",
            Profile::Mongodb => "mongodb",
            Profile::Etcd => "etcd",
            Profile::Web => "web",
        }
    }

    /// Databases that keep their data in files and read them randomly.
    fn is_database(self) -> bool {
        matches!(
            self,
            Profile::Redis | Profile::Postgres | Profile::Mongodb | Profile::Etcd
        )
    }
}

/// One value read, and where from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Evidence {
    /// The file (or command-line option) the value came from.
    pub source: String,
    /// The value as read, trimmed.
    pub value: String,
}

impl Evidence {
    /// Evidence that `source` held `value`.
    pub fn new(source: impl Into<String>, value: impl Into<String>) -> Evidence {
        Evidence {
            source: source.into(),
            value: value.into(),
        }
    }
}

/// Shell commands for an admin; tacho prints them and never runs them.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Remedy {
    /// Changes the setting now (lost at reboot).
    pub fix: Option<String>,
    /// Makes it survive a reboot (sysctl.d, udev rule, tmpfiles.d, fstab, kernel command line).
    pub persist: Option<String>,
    /// Undoes both: restores the value read now and removes what `persist` added.
    pub revert: Option<String>,
    /// True when the commands need care a script cannot take (moving a database's files,
    /// stopping a service): `--emit-script` prints them as comments only.
    pub manual: bool,
}

/// One rule's judgement of one thing: what was read, how bad it is, and the commands that fix it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Finding {
    /// Stable rule identifier for scripts (`thp_enabled`, `io_scheduler`).
    pub id: &'static str,
    /// Which part of the table it belongs to.
    pub group: Group,
    /// What it is about when the rule applies to several things: a device, a mount point.
    pub subject: Option<String>,
    /// How much it matters here.
    pub severity: Severity,
    /// One line: the state and what it means.
    pub title: String,
    /// The values the judgement rests on, with where each was read.
    pub evidence: Vec<Evidence>,
    /// Why it matters, in one or two sentences.
    pub why: String,
    /// Where that comes from (kernel documentation, vendor guidance).
    pub reference: String,
    /// Commands to fix, persist and revert it, flattened into this object.
    #[serde(flatten)]
    pub remedy: Remedy,
}

/// Options that change judgements.
#[derive(Debug, Clone, Copy, Default)]
pub struct Options {
    /// The workload to judge for (`--profile`).
    pub profile: Profile,
}

/// Reads the system under `root` and judges every rule.
pub fn check(root: &SysRoot, options: Options) -> (Facts, Vec<Finding>) {
    let facts = Facts::read(root);
    let findings = judge(&facts, options);
    (facts, findings)
}

/// Every rule over already read facts, grouped in display order (stable within a group).
pub fn judge(facts: &Facts, options: Options) -> Vec<Finding> {
    let mut out = Vec::new();
    memory::rules(facts, options, &mut out);
    devices::rules(facts, options, &mut out);
    filesystems::rules(facts, options, &mut out);
    vm::rules(facts, options, &mut out);
    cpu::rules(facts, options, &mut out);
    kernel::rules(facts, options, &mut out);
    kernel::virtualization(facts, &mut out);
    if let Some(pve) = &facts.pve {
        proxmox::rules(pve, &mut out);
    }
    out.sort_by_key(|f| f.group);
    out
}

/// The one-line answer first: the worst findings, or that nothing was found.
pub fn verdict(findings: &[Finding]) -> String {
    let count = |s: Severity| findings.iter().filter(|f| f.severity == s).count();
    let (crit, warn) = (count(Severity::Crit), count(Severity::Warn));
    let worst = findings
        .iter()
        .filter(|f| f.severity >= Severity::Warn)
        // The first of the most severe, in display order.
        .min_by_key(|f| std::cmp::Reverse(f.severity));
    match worst {
        None => format!(
            "no handbrake found: {} ok, {} worth knowing",
            crate::units::plural(count(Severity::Ok) as u64, "setting"),
            count(Severity::Info)
        ),
        Some(f) => {
            let mut parts = Vec::new();
            if crit > 0 {
                parts.push(format!("{crit} critical"));
            }
            if warn > 0 {
                parts.push(format!(
                    "{warn} warning{}",
                    if warn == 1 { "" } else { "s" }
                ));
            }
            let subject = f
                .subject
                .as_deref()
                .map(|s| format!("{s}: "))
                .unwrap_or_default();
            format!("{}; worst: {subject}{}", parts.join(", "), f.title)
        }
    }
}
