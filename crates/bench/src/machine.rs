//! Facts about the machine a benchmark ran on, reported with every workload: cores, memory,
//! the block device and filesystem under the data directory, and whether O_DIRECT works
//! there. Everything is read from `/proc` and `/sys`, best effort: a fact that cannot be found
//! is reported as "unknown", never as an error.

use serde::Serialize;
use shale_io::{DataFile, IoStats, OpenMode};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// What every workload's JSON carries under `"machine"`.
#[derive(Debug, Clone, Serialize)]
pub struct Machine {
    /// CPUs this process may run on.
    pub cores: usize,
    /// `MemTotal` from `/proc/meminfo`.
    pub memory_bytes: u64,
    /// Block device (whole disk, e.g. `nvme0n1`, `vda`) holding the data directory, or the
    /// mount source where there is no block device (tmpfs, overlay).
    pub device: String,
    /// The partition or device-mapper node actually mounted, when it differs from `device`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub partition: Option<String>,
    /// `/sys/block/<device>/device/model`, when the driver provides one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub device_model: Option<String>,
    /// `/sys/block/<device>/queue/rotational`: true for spinning disks.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rotational: Option<bool>,
    /// Filesystem type of the mount holding the data directory (ext4, xfs, tmpfs, ...).
    pub filesystem: String,
    /// Mount point of that filesystem.
    pub mount_point: String,
    /// Whether files in the data directory open with O_DIRECT.
    pub direct_io: bool,
    /// `/proc/sys/kernel/osrelease`.
    pub kernel: String,
    /// `model name` of the first CPU in `/proc/cpuinfo`.
    pub cpu_model: String,
}

impl Machine {
    /// Describes the machine as seen from `dir` (which must exist). `direct_io` is probed by
    /// creating and removing a small file in `dir`.
    pub fn describe(dir: &Path) -> Machine {
        let dir = dir.canonicalize().unwrap_or_else(|_| dir.to_owned());
        let mount = read_mounts().and_then(|m| mount_for(&m, &dir).cloned());
        let block = block_device_for(&dir, mount.as_ref());
        let (device, partition) = match (&block, &mount) {
            (Some(b), _) => (b.disk.clone(), (b.node != b.disk).then(|| b.node.clone())),
            (None, Some(m)) => (source_name(&m.source), None),
            (None, None) => ("unknown".to_owned(), None),
        };
        let sys_disk = block
            .as_ref()
            .map(|b| Path::new("/sys/block").join(&b.disk));
        Machine {
            cores: std::thread::available_parallelism().map_or(1, |n| n.get()),
            memory_bytes: memory_bytes().unwrap_or(0),
            device,
            partition,
            device_model: sys_disk
                .as_ref()
                .and_then(|d| read_trimmed(&d.join("device/model")))
                .filter(|s| !s.is_empty()),
            rotational: sys_disk
                .as_ref()
                .and_then(|d| read_trimmed(&d.join("queue/rotational")))
                .map(|s| s == "1"),
            filesystem: mount
                .as_ref()
                .map_or_else(|| "unknown".to_owned(), |m| m.fstype.clone()),
            mount_point: mount.as_ref().map_or_else(
                || "unknown".to_owned(),
                |m| m.mount_point.display().to_string(),
            ),
            direct_io: probe_direct_io(&dir),
            kernel: read_trimmed(Path::new("/proc/sys/kernel/osrelease"))
                .unwrap_or_else(|| "unknown".to_owned()),
            cpu_model: cpu_model().unwrap_or_else(|| "unknown".to_owned()),
        }
    }
}

/// True if a file created in `dir` opens with O_DIRECT (the probe file is removed).
pub fn probe_direct_io(dir: &Path) -> bool {
    let path = dir.join(format!(".shale-bench-direct-probe-{}", std::process::id()));
    let stats = Arc::new(IoStats::default());
    let direct = DataFile::open(&path, OpenMode::CreateNew, true, stats, None)
        .map(|f| f.is_direct())
        .unwrap_or(false);
    let _ = std::fs::remove_file(&path);
    direct
}

/// One line of the mount table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mount {
    /// `major:minor` of the mounted device (mountinfo only).
    pub dev: Option<(u64, u64)>,
    pub mount_point: PathBuf,
    pub fstype: String,
    pub source: String,
}

fn read_mounts() -> Option<Vec<Mount>> {
    if let Ok(text) = std::fs::read_to_string("/proc/self/mountinfo") {
        let m = parse_mountinfo(&text);
        if !m.is_empty() {
            return Some(m);
        }
    }
    let text = std::fs::read_to_string("/proc/mounts").ok()?;
    Some(parse_proc_mounts(&text))
}

/// Parses `/proc/self/mountinfo`:
/// `id parent major:minor root mount_point options [optional...] - fstype source super_options`.
pub fn parse_mountinfo(text: &str) -> Vec<Mount> {
    text.lines()
        .filter_map(|line| {
            let (left, right) = line.split_once(" - ")?;
            let l: Vec<&str> = left.split(' ').collect();
            let r: Vec<&str> = right.split(' ').collect();
            if l.len() < 5 || r.len() < 2 {
                return None;
            }
            let dev = l[2]
                .split_once(':')
                .and_then(|(a, b)| Some((a.parse().ok()?, b.parse().ok()?)));
            Some(Mount {
                dev,
                mount_point: PathBuf::from(unescape(l[4])),
                fstype: r[0].to_owned(),
                source: unescape(r[1]),
            })
        })
        .collect()
}

/// Parses `/proc/mounts`: `source mount_point fstype options dump pass`.
pub fn parse_proc_mounts(text: &str) -> Vec<Mount> {
    text.lines()
        .filter_map(|line| {
            let f: Vec<&str> = line.split(' ').collect();
            if f.len() < 3 {
                return None;
            }
            Some(Mount {
                dev: None,
                mount_point: PathBuf::from(unescape(f[1])),
                fstype: f[2].to_owned(),
                source: unescape(f[0]),
            })
        })
        .collect()
}

/// Undoes the kernel's octal escapes (`\040` for a space) in mount table fields.
fn unescape(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'\\'
            && i + 4 <= b.len()
            && b[i + 1..i + 4].iter().all(|c| (b'0'..=b'7').contains(c))
        {
            let v = b[i + 1..i + 4]
                .iter()
                .fold(0u32, |acc, c| acc * 8 + u32::from(c - b'0'));
            out.push(v as u8);
            i += 4;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The mount whose mount point is the longest prefix of `path`; of equal ones, the last
/// (a later mount on the same point hides the earlier).
pub fn mount_for<'a>(mounts: &'a [Mount], path: &Path) -> Option<&'a Mount> {
    let mut best: Option<&Mount> = None;
    for m in mounts {
        if path.starts_with(&m.mount_point)
            && best
                .is_none_or(|b| m.mount_point.as_os_str().len() >= b.mount_point.as_os_str().len())
        {
            best = Some(m);
        }
    }
    best
}

/// A block device as named in `/sys`: the node holding the filesystem and its whole disk.
#[derive(Debug, Clone)]
struct BlockDevice {
    node: String,
    disk: String,
}

/// Finds the block device of `dir` through its `st_dev`, then through the mount table's
/// `major:minor` (btrfs and overlay report anonymous devices in `st_dev`).
fn block_device_for(dir: &Path, mount: Option<&Mount>) -> Option<BlockDevice> {
    let from_stat = std::fs::metadata(dir)
        .ok()
        .map(|m| split_dev(m.dev()))
        .and_then(|(ma, mi)| sys_block_device(ma, mi));
    from_stat.or_else(|| {
        mount
            .and_then(|m| m.dev)
            .and_then(|(ma, mi)| sys_block_device(ma, mi))
    })
}

/// Splits a Linux `dev_t` into major and minor numbers.
fn split_dev(dev: u64) -> (u64, u64) {
    let major = ((dev >> 8) & 0xfff) | ((dev >> 32) & 0xffff_f000);
    let minor = (dev & 0xff) | ((dev >> 12) & 0xffff_ff00);
    (major, minor)
}

/// Resolves `/sys/dev/block/MAJ:MIN`; a partition's parent directory is its disk.
fn sys_block_device(major: u64, minor: u64) -> Option<BlockDevice> {
    let link = Path::new("/sys/dev/block").join(format!("{major}:{minor}"));
    let real = link.canonicalize().ok()?;
    let node = real.file_name()?.to_string_lossy().into_owned();
    let disk = if real.join("partition").exists() {
        real.parent()?.file_name()?.to_string_lossy().into_owned()
    } else {
        node.clone()
    };
    Some(BlockDevice { node, disk })
}

/// `/dev/sda1` -> `sda1`; other sources (tmpfs, overlay) unchanged.
fn source_name(source: &str) -> String {
    source.strip_prefix("/dev/").unwrap_or(source).to_owned()
}

fn read_trimmed(path: &Path) -> Option<String> {
    std::fs::read_to_string(path)
        .ok()
        .map(|s| s.trim().to_owned())
}

fn memory_bytes() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/meminfo").ok()?;
    parse_meminfo_total(&text)
}

/// `MemTotal:  24684084 kB` -> bytes.
pub fn parse_meminfo_total(text: &str) -> Option<u64> {
    let line = text.lines().find(|l| l.starts_with("MemTotal:"))?;
    let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb * 1024)
}

fn cpu_model() -> Option<String> {
    let text = std::fs::read_to_string("/proc/cpuinfo").ok()?;
    text.lines()
        .find(|l| l.starts_with("model name"))
        .and_then(|l| l.split_once(':'))
        .map(|(_, v)| v.trim().to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    const MOUNTINFO: &str = "\
22 27 0:21 / /proc rw,relatime - proc proc rw
27 1 254:0 / / rw,relatime - ext4 /dev/vda rw,discard
40 27 259:3 / /mnt/fast\\040disk rw,noatime shared:5 - xfs /dev/nvme0n1p2 rw
41 40 0:45 / /mnt/fast\\040disk/scratch rw - tmpfs tmpfs rw,size=4k
";

    #[test]
    fn mountinfo_fields_and_escapes() {
        let m = parse_mountinfo(MOUNTINFO);
        assert_eq!(m.len(), 4);
        assert_eq!(m[1].dev, Some((254, 0)));
        assert_eq!(m[1].fstype, "ext4");
        assert_eq!(m[1].source, "/dev/vda");
        assert_eq!(m[2].mount_point, Path::new("/mnt/fast disk"));
        assert_eq!(m[2].fstype, "xfs");
    }

    #[test]
    fn longest_mount_prefix_wins() {
        let m = parse_mountinfo(MOUNTINFO);
        let at = |p: &str| mount_for(&m, Path::new(p)).map(|m| m.fstype.as_str());
        assert_eq!(at("/work/main"), Some("ext4"));
        assert_eq!(at("/mnt/fast disk/db"), Some("xfs"));
        assert_eq!(at("/mnt/fast disk/scratch/x"), Some("tmpfs"));
        // Component-wise: /procfoo is not under /proc.
        assert_eq!(at("/procfoo"), Some("ext4"));
    }

    #[test]
    fn proc_mounts_fallback() {
        let m = parse_proc_mounts("/dev/sda1 / ext4 rw 0 0\ntmpfs /tmp tmpfs rw 0 0\n");
        assert_eq!(mount_for(&m, Path::new("/tmp/x")).unwrap().source, "tmpfs");
        assert_eq!(source_name("/dev/sda1"), "sda1");
    }

    #[test]
    fn dev_t_split() {
        // makedev(259, 3) and makedev(8, 1) in the Linux encoding.
        assert_eq!(split_dev((259 << 8) | 3), (259, 3));
        assert_eq!(split_dev((8 << 8) | 1), (8, 1));
        let big = ((0x1234u64 & !0xfff) << 32) | ((0x1234 & 0xfff) << 8) | 0x56;
        assert_eq!(split_dev(big), (0x1234, 0x56));
    }

    #[test]
    fn meminfo_total() {
        let t = "MemTotal:       24684084 kB\nMemFree:  1 kB\n";
        assert_eq!(parse_meminfo_total(t), Some(24684084 * 1024));
    }

    #[test]
    fn describes_this_machine() {
        let dir = tempfile::tempdir().expect("tempdir");
        let m = Machine::describe(dir.path());
        assert!(m.cores >= 1);
        assert!(m.memory_bytes > 0);
        assert!(!m.device.is_empty());
        assert!(!m.filesystem.is_empty());
    }
}
