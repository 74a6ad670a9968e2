//! `/proc/diskstats`: the kernel's per-device I/O counts, the device-side truth the wire
//! workloads put next to a server's own counters (reads per query, bytes per read, bytes
//! written, cache flushes). It only reads and parses; it never decides which device matters.

/// The counters of one block device, as `/proc/diskstats` reports them (cumulative since
/// boot). Sectors are always 512 bytes there, whatever the device's real sector size.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DiskStat {
    pub reads: u64,
    pub read_sectors: u64,
    pub writes: u64,
    pub write_sectors: u64,
    /// Completed cache-flush requests (field 20, kernels 5.5+); 0 where absent.
    pub flushes: u64,
}

impl DiskStat {
    pub fn read_bytes(&self) -> u64 {
        self.read_sectors * 512
    }

    pub fn write_bytes(&self) -> u64 {
        self.write_sectors * 512
    }

    /// `self - before`, field by field (saturating: a counter never goes back, but a device
    /// can be re-attached).
    pub fn since(&self, before: &DiskStat) -> DiskStat {
        DiskStat {
            reads: self.reads.saturating_sub(before.reads),
            read_sectors: self.read_sectors.saturating_sub(before.read_sectors),
            writes: self.writes.saturating_sub(before.writes),
            write_sectors: self.write_sectors.saturating_sub(before.write_sectors),
            flushes: self.flushes.saturating_sub(before.flushes),
        }
    }
}

/// Reads the counters of device `name` (`vda`, `nvme0n1p2`). `None` if the file or the
/// device is missing.
pub fn read(name: &str) -> Option<DiskStat> {
    parse(&std::fs::read_to_string("/proc/diskstats").ok()?, name)
}

/// Finds device `name` in the text of `/proc/diskstats`:
/// `major minor name reads merged sectors ms writes merged sectors ms inflight io_ms
/// weighted_ms [discards merged sectors ms [flushes ms]]`.
pub fn parse(text: &str, name: &str) -> Option<DiskStat> {
    text.lines().find_map(|line| {
        let f: Vec<&str> = line.split_whitespace().collect();
        if f.len() < 14 || f[2] != name {
            return None;
        }
        let n = |i: usize| f.get(i).and_then(|s| s.parse::<u64>().ok());
        Some(DiskStat {
            reads: n(3)?,
            read_sectors: n(5)?,
            writes: n(7)?,
            write_sectors: n(9)?,
            flushes: n(18).unwrap_or(0),
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const TEXT: &str = "\
 253       0 vda 6 1 300 4 8 2 160 9 0 13 13 1 0 8 0 77 3
 253       1 vda1 1 0 8 0 0 0 0 0 0 0 0
   7       0 loop0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0
";

    #[test]
    fn parses_the_named_device() {
        let d = parse(TEXT, "vda").expect("vda");
        assert_eq!(
            d,
            DiskStat {
                reads: 6,
                read_sectors: 300,
                writes: 8,
                write_sectors: 160,
                flushes: 77,
            }
        );
        assert_eq!(d.read_bytes(), 300 * 512);
        assert_eq!(parse(TEXT, "vda1").expect("vda1").flushes, 0);
        assert!(parse(TEXT, "sdz").is_none());
    }

    #[test]
    fn deltas_saturate() {
        let a = DiskStat {
            reads: 10,
            ..DiskStat::default()
        };
        let b = DiskStat {
            reads: 4,
            writes: 2,
            ..DiskStat::default()
        };
        assert_eq!(a.since(&b).reads, 6);
        assert_eq!(a.since(&b).writes, 0);
    }
}
