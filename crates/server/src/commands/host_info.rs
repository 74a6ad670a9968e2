//! `hostInfo`: the machine the server runs on, read from Linux's `/proc`, `/sys` and
//! `/etc/os-release`, in mongod's shape (`system`, `os`, `extra`). A fact that cannot be read
//! is left out (or reported as mongod's neutral value), never an error. Each number has the
//! BSON type mongod 7.0's `hostInfo` gives it (drivers and tools read them typed):
//! `cpuAddrSize`, `numCores` and `extra.maxOpenFiles` int32; `memSizeMB`, `memLimitMB` int64.

use super::CommandResult;
use crate::ConnectionCtx;
use bson::{doc, Document};

pub fn host_info(_ctx: &ConnectionCtx, _db: &str, _body: &Document) -> CommandResult {
    let mem_mb = mem_total_mb().unwrap_or(0);
    let limit_mb = cgroup_limit_mb().map_or(mem_mb, |l| l.min(mem_mb));
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get()) as i32;
    let (os_name, os_version) = os_release();
    let mut extra = doc! {};
    if let Some(v) = read_trimmed("/proc/version") {
        extra.insert("versionString", v);
    }
    if let Some(k) = read_trimmed("/proc/sys/kernel/osrelease") {
        extra.insert("kernelVersion", k);
    }
    if let Some(n) = max_open_files() {
        extra.insert("maxOpenFiles", n);
    }
    Ok(doc! {
        "system": {
            "currentTime": bson::DateTime::now(),
            "hostname": super::server_status::hostname(),
            "cpuAddrSize": (usize::BITS) as i32,
            "memSizeMB": mem_mb,
            "memLimitMB": limit_mb,
            "numCores": cores,
            "cpuArch": std::env::consts::ARCH,
            "numaEnabled": false,
        },
        "os": {
            "type": if cfg!(target_os = "linux") { "Linux" } else { std::env::consts::OS },
            "name": os_name,
            "version": os_version,
        },
        "extra": extra,
    })
}

fn read_trimmed(path: &str) -> Option<String> {
    std::fs::read_to_string(path)
        .ok()
        .map(|s| s.trim().to_owned())
}

/// `MemTotal` from `/proc/meminfo`, in MiB.
fn mem_total_mb() -> Option<i64> {
    let info = std::fs::read_to_string("/proc/meminfo").ok()?;
    parse_meminfo_total_kb(&info).map(|kb| kb / 1024)
}

fn parse_meminfo_total_kb(info: &str) -> Option<i64> {
    let line = info.lines().find(|l| l.starts_with("MemTotal:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

/// The memory limit of our cgroup (v2, then v1), in MiB, when there is one.
fn cgroup_limit_mb() -> Option<i64> {
    let raw = read_trimmed("/sys/fs/cgroup/memory.max")
        .or_else(|| read_trimmed("/sys/fs/cgroup/memory/memory.limit_in_bytes"))?;
    let bytes: u64 = raw.parse().ok()?; // "max" means no limit
    Some((bytes / (1024 * 1024)).min(i64::MAX as u64) as i64)
}

/// `NAME` and `VERSION` from `/etc/os-release`.
fn os_release() -> (String, String) {
    let text = std::fs::read_to_string("/etc/os-release").unwrap_or_default();
    parse_os_release(&text)
}

fn parse_os_release(text: &str) -> (String, String) {
    let field = |key: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(key)?.strip_prefix('='))
            .map(|v| v.trim().trim_matches('"').to_owned())
    };
    (
        field("NAME").unwrap_or_else(|| "unknown".into()),
        field("VERSION")
            .or_else(|| field("VERSION_ID"))
            .unwrap_or_default(),
    )
}

/// The soft limit on open files, from `/proc/self/limits`, as mongod's int32
/// (`sysconf(_SC_OPEN_MAX)` cast to `int`; "unlimited" or past 2^31-1 is left out).
fn max_open_files() -> Option<i32> {
    let limits = std::fs::read_to_string("/proc/self/limits").ok()?;
    parse_max_open_files(&limits)
}

fn parse_max_open_files(limits: &str) -> Option<i32> {
    let line = limits.lines().find(|l| l.starts_with("Max open files"))?;
    line["Max open files".len()..]
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_proc_and_os_release_text() {
        let meminfo = "MemTotal:       24575432 kB\nMemFree:        1000 kB\n";
        assert_eq!(parse_meminfo_total_kb(meminfo), Some(24_575_432));
        let os = "PRETTY_NAME=\"Debian GNU/Linux 12 (bookworm)\"\nNAME=\"Debian GNU/Linux\"\n\
                  VERSION_ID=\"12\"\nVERSION=\"12 (bookworm)\"\n";
        assert_eq!(
            parse_os_release(os),
            ("Debian GNU/Linux".into(), "12 (bookworm)".into())
        );
        assert_eq!(parse_os_release(""), ("unknown".into(), String::new()));
        let limits = "Limit                     Soft Limit           Hard Limit           Units\n\
                      Max open files            1048576              1048576              files\n";
        assert_eq!(parse_max_open_files(limits), Some(1_048_576));
        let unlimited =
            "Max open files            unlimited            unlimited            files\n";
        assert_eq!(parse_max_open_files(unlimited), None);
    }
}
