//! On a Proxmox VE host: every VM disk's cache mode, aio, iothread, bus, discard and ssd
//! flags, from `/etc/pve/qemu-server/*.conf` and `/etc/pve/storage.cfg`, with the `qm set`
//! command that changes them. This is where the cache mode a guest cannot see is set.
//!
//! The formats are Proxmox's own (`key: value` lines; a drive is a volume followed by
//! `,option=value` pairs; storage.cfg is `type: name` blocks of indented `key value` lines),
//! small enough that a hand parser is simpler than any general one; property-tested.

use super::{Evidence, Finding, Group, Remedy, Severity, cmds};
use crate::kernel::SysRoot;
use std::collections::BTreeMap;

const REFERENCE: &str = "Proxmox VE Administration Guide, QEMU/KVM Virtual Machines, Hard Disk \
                         (Bus/Controller, Cache, Discard, IO Thread, SSD emulation); qemu(1) \
                         -drive cache=";

/// One disk of one VM, as its configuration says.
#[derive(Debug, Clone, PartialEq)]
pub struct VmDisk {
    /// The VM's id (the configuration file's name).
    pub vmid: u32,
    /// The VM's `name:`, if set.
    pub vm_name: Option<String>,
    /// `scsi0`, `virtio1`, `sata0`, `ide0`.
    pub slot: String,
    /// The whole drive string, as written.
    pub drive: String,
    /// The VM's SCSI controller (`scsihw:`), which decides whether iothread applies to scsi.
    pub scsihw: Option<String>,
}

impl VmDisk {
    /// The volume (`local-lvm:vm-100-disk-0`, or a device path for a passed-through disk).
    fn volume(&self) -> &str {
        self.drive.split(',').next().unwrap_or_default()
    }

    /// The value of a drive option, if given.
    fn option(&self, key: &str) -> Option<&str> {
        self.drive
            .split(',')
            .skip(1)
            .filter_map(|o| o.split_once('='))
            .filter(|(k, _)| *k == key)
            .map(|(_, v)| v)
            .last()
    }

    fn bus(&self) -> &str {
        self.slot.trim_end_matches(|c: char| c.is_ascii_digit())
    }
}

/// The VM disks and storage types of a Proxmox host.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PveHost {
    /// Every disk of every VM (CD-ROMs and snapshots left out), by VM id.
    pub disks: Vec<VmDisk>,
    /// Storage name → type (`local-lvm` → `lvmthin`).
    pub storage_types: BTreeMap<String, String>,
    /// Files that exist but could not be read.
    pub unreadable: Vec<String>,
}

/// Reads the host's VM configurations; `None` when this is not a Proxmox host.
pub fn read(root: &SysRoot) -> Option<PveHost> {
    let dir = root.fs.join("etc/pve/qemu-server");
    let entries = std::fs::read_dir(&dir).ok()?;
    let mut host = PveHost::default();
    let mut files: Vec<(u32, std::path::PathBuf)> = entries
        .flatten()
        .filter_map(|e| {
            let name = e.file_name().into_string().ok()?;
            let vmid = name.strip_suffix(".conf")?.parse().ok()?;
            Some((vmid, e.path()))
        })
        .collect();
    files.sort();
    for (vmid, path) in files {
        match std::fs::read_to_string(&path) {
            Ok(text) => host.disks.extend(parse_vm(vmid, &text)),
            Err(e) => host.unreadable.push(format!("{}: {e}", path.display())),
        }
    }
    let storage = root.fs.join("etc/pve/storage.cfg");
    match std::fs::read_to_string(&storage) {
        Ok(text) => host.storage_types = parse_storage(&text),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => host.unreadable.push(format!("{}: {e}", storage.display())),
    }
    Some(host)
}

/// Whether a configuration key names a disk slot (`scsi0`, `virtio15`).
fn is_disk_slot(key: &str) -> bool {
    let bus = key.trim_end_matches(|c: char| c.is_ascii_digit());
    bus.len() < key.len() && matches!(bus, "scsi" | "virtio" | "sata" | "ide")
}

/// The disks of one VM configuration: the current state only (snapshots follow in `[name]`
/// sections), CD-ROM drives and empty slots left out.
pub fn parse_vm(vmid: u32, text: &str) -> Vec<VmDisk> {
    let mut keys: Vec<(String, String)> = Vec::new();
    for line in text.lines() {
        let line = line.trim();
        if line.starts_with('[') {
            break;
        }
        if line.starts_with('#') {
            continue;
        }
        if let Some((k, v)) = line.split_once(':') {
            keys.push((k.trim().to_string(), v.trim().to_string()));
        }
    }
    let get = |key: &str| keys.iter().find(|(k, _)| k == key).map(|(_, v)| v.clone());
    let (vm_name, scsihw) = (get("name"), get("scsihw"));
    keys.iter()
        .filter(|(k, v)| is_disk_slot(k) && !v.is_empty() && v != "none")
        .filter(|(_, v)| !v.split(',').any(|o| o == "media=cdrom"))
        .map(|(k, v)| VmDisk {
            vmid,
            vm_name: vm_name.clone(),
            slot: k.clone(),
            drive: v.clone(),
            scsihw: scsihw.clone(),
        })
        .collect()
}

/// storage.cfg: each storage's name and type.
pub fn parse_storage(text: &str) -> BTreeMap<String, String> {
    text.lines()
        .filter(|l| !l.starts_with(char::is_whitespace) && !l.starts_with('#'))
        .filter_map(|l| l.split_once(':'))
        .map(|(kind, name)| (name.trim().to_string(), kind.trim().to_string()))
        .filter(|(name, kind)| !name.is_empty() && !kind.is_empty())
        .collect()
}

/// Storage types whose volumes are thin (space the guest frees can be given back).
const THIN: &[&str] = &["lvmthin", "zfspool", "rbd", "dir", "nfs", "cifs", "btrfs"];

/// One finding per VM disk.
pub fn rules(host: &PveHost, out: &mut Vec<Finding>) {
    for disk in &host.disks {
        out.push(judge(host, disk));
    }
}

fn judge(host: &PveHost, d: &VmDisk) -> Finding {
    let storage = d.volume().split_once(':').map(|(s, _)| s);
    let storage_type = storage
        .and_then(|s| host.storage_types.get(s))
        .map(String::as_str);
    let passthrough = d.volume().starts_with('/');
    let cache = d.option("cache").unwrap_or("none");
    let bus = d.bus();
    let mut problems: Vec<(Severity, String)> = Vec::new();
    let mut set: Vec<(&str, &str)> = Vec::new();
    match cache {
        "unsafe" => {
            problems.push((
                Severity::Crit,
                "cache=unsafe: flushes are ignored, so a host crash or power loss loses data \
                 the guest was told is safe"
                    .into(),
            ));
            set.push(("cache", "none"));
        }
        "writeback" => {
            problems.push((
                Severity::Warn,
                "cache=writeback: writes wait in the host's RAM and are lost on power failure \
                 until the guest flushes; benchmarks in the guest measure that RAM"
                    .into(),
            ));
            set.push(("cache", "none"));
        }
        "writethrough" => problems.push((
            Severity::Info,
            "cache=writethrough: every write waits for the disk, and reads are cached twice \
             (host and guest)"
                .into(),
        )),
        _ => {}
    }
    if matches!(bus, "ide" | "sata") {
        problems.push((
            Severity::Warn,
            format!(
                "{bus} is an emulated controller (one request at a time); VirtIO SCSI or \
                 VirtIO block is paravirtual (the guest needs its driver)"
            ),
        ));
    }
    let iothread_applies =
        bus == "virtio" || bus == "scsi" && d.scsihw.as_deref() == Some("virtio-scsi-single");
    if iothread_applies && d.option("iothread") != Some("1") {
        problems.push((
            Severity::Info,
            "no iothread: the disk's I/O shares QEMU's main loop with everything else".into(),
        ));
        set.push(("iothread", "1"));
    }
    if d.option("aio") == Some("threads") {
        problems.push((
            Severity::Info,
            "aio=threads: a thread pool instead of io_uring (the default) or native".into(),
        ));
    }
    let thin = storage_type.is_some_and(|t| THIN.contains(&t));
    if thin && d.option("discard") != Some("on") {
        problems.push((
            Severity::Info,
            format!(
                "discard off on thin storage ({}): space the guest frees stays allocated",
                storage_type.unwrap_or_default()
            ),
        ));
        set.push(("discard", "on"));
    }
    let severity = problems
        .iter()
        .map(|(s, _)| *s)
        .max()
        .unwrap_or(Severity::Ok);
    let subject = format!(
        "VM {}{} {}",
        d.vmid,
        d.vm_name
            .as_deref()
            .map(|n| format!(" ({n})"))
            .unwrap_or_default(),
        d.slot
    );
    let title = if problems.is_empty() {
        format!("cache={cache}, bus {bus}: as recommended")
    } else {
        problems
            .iter()
            .map(|(_, p)| p.as_str())
            .collect::<Vec<_>>()
            .join("; ")
    };
    let mut evidence = vec![Evidence::new(
        format!("/etc/pve/qemu-server/{}.conf", d.vmid),
        format!("{}: {}", d.slot, d.drive),
    )];
    if let (Some(s), Some(t)) = (storage, storage_type) {
        evidence.push(Evidence::new("/etc/pve/storage.cfg", format!("{t}: {s}")));
    }
    evidence.push(Evidence::new(
        "flags",
        format!(
            "aio={} iothread={} discard={} ssd={}",
            d.option("aio").unwrap_or("io_uring (default)"),
            d.option("iothread").unwrap_or("0"),
            d.option("discard").unwrap_or("ignore"),
            d.option("ssd").unwrap_or("0"),
        ),
    ));
    Finding {
        id: "pve_vm_disk",
        group: Group::Virtualization,
        subject: Some(subject),
        severity,
        title,
        evidence,
        why: format!(
            "The host's cache mode decides whether a guest's flush reaches the disk and what a \
             benchmark inside the guest measures{}. Behind a RAID controller with a \
             battery-backed cache, leave the hypervisor's cache off (none) and let the \
             controller cache. qm set changes the configuration; it applies when the VM is \
             next started (stop and start, not a reboot inside the guest).",
            if passthrough {
                "; on a passed-through raw disk the host's page cache is the only cache between \
                 the guest and the platters"
            } else {
                ""
            }
        ),
        reference: REFERENCE.to_string(),
        remedy: remedy(d, &set),
    }
}

/// `qm set` with the drive string changed, and back to the string read.
fn remedy(d: &VmDisk, set: &[(&str, &str)]) -> Remedy {
    if set.is_empty() {
        return Remedy::default();
    }
    if d.drive.chars().any(char::is_control) {
        return cmds::by_hand("the drive string", &d.drive);
    }
    let mut parts: Vec<String> = d.drive.split(',').map(str::to_string).collect();
    for (key, value) in set {
        let prefix = format!("{key}=");
        parts.retain(|p| !p.starts_with(&prefix));
        parts.push(format!("{key}={value}"));
    }
    let qm = |drive: &str| format!("qm set {} --{} {}", d.vmid, d.slot, cmds::sq(drive));
    Remedy {
        fix: Some(qm(&parts.join(","))),
        persist: None,
        revert: Some(qm(&d.drive)),
        manual: false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const VM: &str = "boot: order=scsi0;net0\ncores: 2\nmemory: 4096\nname: db1\n\
        scsihw: virtio-scsi-single\n\
        scsi0: local-lvm:vm-101-disk-0,cache=writeback,iothread=1,size=32G\n\
        sata1: /dev/disk/by-id/ata-ST4000,cache=unsafe\n\
        ide2: local:iso/debian-12.iso,media=cdrom,size=600M\n\
        virtio2: tank:vm-101-disk-1,discard=on,iothread=1\n\
        net0: virtio=BC:24:11:00:00:01,bridge=vmbr0\n\n\
        [before-upgrade]\nscsi0: local-lvm:vm-101-disk-0,cache=none\nscsi5: local-lvm:x\n";
    const STORAGE: &str = "dir: local\n\tpath /var/lib/vz\n\tcontent iso,backup\n\n\
        lvmthin: local-lvm\n\tthinpool data\n\tvgname pve\n\tcontent rootdir,images\n\n\
        zfspool: tank\n\tpool tank\n";

    fn host() -> PveHost {
        PveHost {
            disks: parse_vm(101, VM),
            storage_types: parse_storage(STORAGE),
            unreadable: Vec::new(),
        }
    }

    #[test]
    fn disks_are_read_without_cdroms_and_snapshots() {
        let h = host();
        let slots: Vec<_> = h.disks.iter().map(|d| d.slot.as_str()).collect();
        assert_eq!(slots, ["scsi0", "sata1", "virtio2"]);
        assert_eq!(h.disks[0].vm_name.as_deref(), Some("db1"));
        assert_eq!(h.storage_types["local-lvm"], "lvmthin");
        assert_eq!(h.storage_types["tank"], "zfspool");
    }

    #[test]
    fn each_disk_is_judged_with_the_qm_set_that_fixes_it() {
        let mut out = Vec::new();
        rules(&host(), &mut out);
        let [scsi, sata, virtio] = &out[..] else {
            panic!("{out:#?}")
        };
        assert_eq!(scsi.severity, Severity::Warn);
        assert!(scsi.title.contains("cache=writeback"), "{}", scsi.title);
        assert!(scsi.title.contains("discard off on thin storage (lvmthin)"));
        assert_eq!(
            scsi.remedy.fix.as_deref(),
            Some(
                "qm set 101 --scsi0 local-lvm:vm-101-disk-0,iothread=1,size=32G,cache=none,discard=on"
            )
        );
        assert_eq!(
            scsi.remedy.revert.as_deref(),
            Some("qm set 101 --scsi0 local-lvm:vm-101-disk-0,cache=writeback,iothread=1,size=32G")
        );
        assert_eq!(sata.severity, Severity::Crit);
        assert!(sata.title.contains("emulated controller"));
        assert!(sata.why.contains("passed-through raw disk"));
        assert_eq!(virtio.severity, Severity::Ok, "{}", virtio.title);
        assert!(virtio.remedy.fix.is_none());
        assert_eq!(virtio.subject.as_deref(), Some("VM 101 (db1) virtio2"));
    }

    #[test]
    fn a_drive_string_is_quoted_for_the_shell() {
        let d = parse_vm(
            7,
            "scsi0: local:7/vm-7-disk-0.qcow2,cache=unsafe,serial=a'b $(x)\n",
        );
        let f = judge(&PveHost::default(), &d[0]);
        let fix = f.remedy.fix.unwrap();
        assert!(fix.starts_with("qm set 7 --scsi0 '"), "{fix}");
        assert_eq!(
            shell_words::split(&fix).unwrap()[4],
            "local:7/vm-7-disk-0.qcow2,serial=a'b $(x),cache=none"
        );
    }

    proptest! {
        #[test]
        fn no_configuration_makes_the_parsers_panic(text in "\\PC{0,300}") {
            let h = PveHost {
                disks: parse_vm(1, &text),
                storage_types: parse_storage(&text),
                unreadable: Vec::new(),
            };
            let mut out = Vec::new();
            rules(&h, &mut out);
        }

        #[test]
        fn a_disk_line_is_found_whatever_its_options(
            slot in "(scsi|virtio|sata|ide)[0-9]{1,2}",
            opts in proptest::collection::vec("[a-z]{1,8}=[a-z0-9]{1,8}", 0..5),
        ) {
            let drive = std::iter::once("local-lvm:vm-1-disk-0".to_string()).chain(opts).collect::<Vec<_>>().join(",");
            let disks = parse_vm(1, &format!("name: x\n{slot}: {drive}\n"));
            prop_assert_eq!(disks.len(), 1);
            prop_assert_eq!(&disks[0].drive, &drive);
        }
    }
}
