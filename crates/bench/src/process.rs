//! This process's use of the machine, as the kernel reports it: resident set (now and
//! peak, from `/proc/self/status`) and CPU time (`getrusage`). CPU time per operation is
//! the steadier figure on a shared machine whose device speed varies between runs.

/// `VmHWM` (peak resident set) of this process, in bytes.
pub fn rss_peak_bytes() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    parse_status_kib(&status, "VmHWM:")
}

/// `VmRSS` (current resident set) of this process, in bytes.
pub fn rss_now_bytes() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    parse_status_kib(&status, "VmRSS:")
}

/// The memory figures of another process, from one read of `/proc/<pid>/status`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ProcMem {
    /// `VmRSS`: resident bytes, anonymous and file-backed.
    pub rss: u64,
    /// `RssAnon`: resident anonymous bytes (heap, thread stacks, other private mappings).
    pub rss_anon: u64,
    /// `RssFile`: resident file-backed bytes (the binary's text, shared libraries).
    pub rss_file: u64,
    /// `Threads`.
    pub threads: u64,
}

/// `/proc/<pid>/status`'s memory figures; `None` when the process is gone.
pub fn mem_of(pid: u32) -> Option<ProcMem> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    parse_mem(&status)
}

fn parse_mem(status: &str) -> Option<ProcMem> {
    let threads = status
        .lines()
        .find_map(|l| l.strip_prefix("Threads:"))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0);
    Some(ProcMem {
        rss: parse_status_kib(status, "VmRSS:")?,
        rss_anon: parse_status_kib(status, "RssAnon:").unwrap_or(0),
        rss_file: parse_status_kib(status, "RssFile:").unwrap_or(0),
        threads,
    })
}

/// A `kB` field of `/proc/<pid>/status` (`field` includes the colon), in bytes.
fn parse_status_kib(status: &str, field: &str) -> Option<u64> {
    let line = status.lines().find(|l| l.starts_with(field))?;
    let kib: u64 = line[field.len()..]
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse()
        .ok()?;
    Some(kib * 1024)
}

/// User plus system CPU seconds process `pid` has used (every thread), from
/// `/proc/<pid>/stat` (clock-tick resolution, 10 ms on Linux).
pub fn cpu_seconds_of(pid: u32) -> Option<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    parse_stat_cpu_ticks(&stat).map(|ticks| ticks as f64 / clock_ticks_per_second())
}

/// User-mode CPU seconds process `pid` has used (every thread), from `/proc/<pid>/stat`.
pub fn user_cpu_seconds_of(pid: u32) -> Option<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    parse_stat_ticks(&stat).map(|(utime, _)| utime as f64 / clock_ticks_per_second())
}

/// utime + stime, in clock ticks, from a `/proc/<pid>/stat` line.
fn parse_stat_cpu_ticks(stat: &str) -> Option<u64> {
    parse_stat_ticks(stat).map(|(utime, stime)| utime + stime)
}

/// (utime, stime), in clock ticks, from a `/proc/<pid>/stat` line (fields 14 and 15; the
/// command name in parentheses may itself hold spaces and parentheses).
fn parse_stat_ticks(stat: &str) -> Option<(u64, u64)> {
    let after_name = &stat[stat.rfind(')')? + 1..];
    let fields: Vec<&str> = after_name.split_whitespace().collect();
    let utime: u64 = fields.get(11)?.parse().ok()?;
    let stime: u64 = fields.get(12)?.parse().ok()?;
    Some((utime, stime))
}

fn clock_ticks_per_second() -> f64 {
    // SAFETY: sysconf only reads a configuration value.
    let n = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if n > 0 {
        n as f64
    } else {
        100.0
    }
}

/// User plus system CPU seconds this process has used (every thread).
pub fn cpu_seconds() -> Option<f64> {
    cpu_split().map(|(user, sys)| user + sys)
}

/// User-mode CPU seconds this process has used (every thread): the engine's own work,
/// without the kernel's I/O path, whose cost per read moves with the machine's load.
pub fn user_cpu_seconds() -> Option<f64> {
    cpu_split().map(|(user, _)| user)
}

/// (user, system) CPU seconds of this process.
fn cpu_split() -> Option<(f64, f64)> {
    // SAFETY: `getrusage` only writes the `rusage` it is given.
    let mut u: libc::rusage = unsafe { std::mem::zeroed() };
    if unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut u) } != 0 {
        return None;
    }
    let secs = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    Some((secs(u.ru_utime), secs(u.ru_stime)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_stat_cpu_fields_after_the_name() {
        let line = "42 (a (b) c) S 1 2 3 4 5 6 7 8 9 10 250 50 0 0 20 0 1";
        assert_eq!(parse_stat_cpu_ticks(line), Some(300));
        let own = cpu_seconds_of(std::process::id()).expect("own stat");
        assert!(own >= 0.0);
    }

    #[test]
    fn parses_vm_hwm() {
        let status = "Name:\tx\nVmPeak:\t  100 kB\nVmHWM:\t    2048 kB\nVmRSS:\t 1000 kB\n";
        assert_eq!(parse_status_kib(status, "VmHWM:"), Some(2 << 20));
        assert_eq!(parse_status_kib(status, "VmRSS:"), Some(1000 << 10));
        assert_eq!(parse_status_kib("Name: x\n", "VmHWM:"), None);
    }

    #[test]
    fn this_process_has_a_peak_rss() {
        assert!(rss_peak_bytes().is_some_and(|b| b > 0));
    }

    #[test]
    fn cpu_time_grows_with_work() {
        let before = cpu_seconds().expect("getrusage");
        let mut x = 0u64;
        let start = std::time::Instant::now();
        while start.elapsed().as_millis() < 50 {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1);
        }
        std::hint::black_box(x);
        assert!(cpu_seconds().expect("getrusage") > before);
    }

    #[test]
    fn status_memory_fields_parse() {
        let s = "Name:\tshale\nVmRSS:\t   10240 kB\nRssAnon:\t    8192 kB\n\
                 RssFile:\t    2048 kB\nThreads:\t47\n";
        let m = parse_mem(s).expect("parsed");
        assert_eq!(m.rss, 10 << 20);
        assert_eq!(m.rss_anon, 8 << 20);
        assert_eq!(m.rss_file, 2 << 20);
        assert_eq!(m.threads, 47);
        assert!(parse_mem("Name:\tx\n").is_none());
        let me = mem_of(std::process::id()).expect("own status");
        assert!(me.rss > 0 && me.threads >= 1);
    }
}
