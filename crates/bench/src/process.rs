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

/// User plus system CPU seconds this process has used (every thread).
pub fn cpu_seconds() -> Option<f64> {
    // SAFETY: `getrusage` only writes the `rusage` it is given.
    let mut u: libc::rusage = unsafe { std::mem::zeroed() };
    if unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut u) } != 0 {
        return None;
    }
    let secs = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    Some(secs(u.ru_utime) + secs(u.ru_stime))
}

#[cfg(test)]
mod tests {
    use super::*;

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
}
