//! Reads the kernel's per-process I/O accounting (`/proc/<pid>/io`), the figures our own
//! counters are checked against.

use std::path::Path;

/// The fields of `/proc/<pid>/io` that matter for storage accounting.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ProcIo {
    /// Bytes this process caused to be fetched from storage.
    pub read_bytes: u64,
    /// Bytes this process caused to be sent to storage (page-granular for buffered I/O).
    pub write_bytes: u64,
    /// Dirty bytes this process truncated away before they were written back.
    pub cancelled_write_bytes: u64,
    /// read(2)-family calls.
    pub syscr: u64,
    /// write(2)-family calls.
    pub syscw: u64,
}

impl ProcIo {
    /// What happened between `before` and this reading (counters never go back; a smaller
    /// reading gives 0, not a wrap).
    pub fn since(&self, before: &ProcIo) -> ProcIo {
        ProcIo {
            read_bytes: self.read_bytes.saturating_sub(before.read_bytes),
            write_bytes: self.write_bytes.saturating_sub(before.write_bytes),
            cancelled_write_bytes: self
                .cancelled_write_bytes
                .saturating_sub(before.cancelled_write_bytes),
            syscr: self.syscr.saturating_sub(before.syscr),
            syscw: self.syscw.saturating_sub(before.syscw),
        }
    }
}

/// Reads `/proc/self/io`. `None` where the kernel does not provide it.
pub fn read_self() -> Option<ProcIo> {
    read_path(Path::new("/proc/self/io"))
}

/// Reads `/proc/<pid>/io` of another process.
pub fn read_pid(pid: u32) -> Option<ProcIo> {
    read_path(&Path::new("/proc").join(pid.to_string()).join("io"))
}

fn read_path(path: &Path) -> Option<ProcIo> {
    parse(&std::fs::read_to_string(path).ok()?)
}

/// Parses the text format of `/proc/<pid>/io`.
pub fn parse(text: &str) -> Option<ProcIo> {
    let mut io = ProcIo::default();
    for line in text.lines() {
        let (key, value) = line.split_once(':')?;
        let value: u64 = value.trim().parse().ok()?;
        match key {
            "read_bytes" => io.read_bytes = value,
            "write_bytes" => io.write_bytes = value,
            "cancelled_write_bytes" => io.cancelled_write_bytes = value,
            "syscr" => io.syscr = value,
            "syscw" => io.syscw = value,
            _ => {}
        }
    }
    Some(io)
}

#[cfg(test)]
mod tests {
    #[test]
    fn since_subtracts_every_counter_and_never_wraps() {
        let before = super::ProcIo {
            read_bytes: 10,
            write_bytes: 20,
            cancelled_write_bytes: 3,
            syscr: 4,
            syscw: 5,
        };
        let after = super::ProcIo {
            read_bytes: 15,
            write_bytes: 40,
            cancelled_write_bytes: 3,
            syscr: 9,
            syscw: 6,
        };
        let d = after.since(&before);
        assert_eq!(
            (
                d.read_bytes,
                d.write_bytes,
                d.cancelled_write_bytes,
                d.syscr,
                d.syscw
            ),
            (5, 20, 0, 5, 1)
        );
        assert_eq!(before.since(&after).write_bytes, 0);
    }

    #[test]
    fn parses_the_kernel_format() {
        let text = "rchar: 10\nwchar: 20\nsyscr: 3\nsyscw: 4\nread_bytes: 4096\nwrite_bytes: 8192\ncancelled_write_bytes: 0\n";
        let io = super::parse(text).expect("parse");
        assert_eq!(io.read_bytes, 4096);
        assert_eq!(io.write_bytes, 8192);
        assert_eq!(io.syscw, 4);
    }

    #[test]
    fn self_is_readable_on_linux() {
        assert!(super::read_self().is_some());
    }
}
