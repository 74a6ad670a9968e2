//! `DataFile`: one open file, written only in whole 4 KiB pages at page-aligned offsets and
//! read in the smallest units the file allows, with every call counted. O_DIRECT is used
//! where the filesystem accepts it; where it does not (tmpfs, some overlay filesystems) the
//! file is opened buffered and readahead is turned off with `posix_fadvise(RANDOM)`, so a
//! read still costs what it asks for.
//!
//! Reads of a direct file are aligned to the file's direct-I/O offset alignment as the
//! kernel reports it (`statx` `STATX_DIOALIGN`: 512 bytes on most devices, the logical
//! sector), not to the page: a 2.5 KB partition costs a 3 KB read instead of one or two
//! 4 KiB pages, as RocksDB's direct reads do. Buffered files read whole pages (the page
//! cache fills pages, and `/proc` counts them).

use crate::fault::{SyncVerdict, WriteVerdict};
use crate::{AlignedBuf, Category, Error, FaultInjector};
use crate::{IoStats, Result, PAGE_SIZE};
use std::fs::{File, OpenOptions};
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::os::unix::io::AsRawFd;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// How to open a file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OpenMode {
    /// Create it; fail if it exists.
    CreateNew,
    /// Open it; fail if it does not exist.
    Existing,
}

/// A file read and written in page-aligned extents.
#[derive(Debug)]
pub struct DataFile {
    file: File,
    path: PathBuf,
    direct: bool,
    /// Every read's offset and length are multiples of this (a power of two, 512..=4096).
    read_align: usize,
    stats: Arc<IoStats>,
    faults: Option<Arc<FaultInjector>>,
}

/// The bytes of one read: a view into the page-aligned buffer that the OS filled.
#[derive(Debug)]
pub struct ReadBuf {
    buf: AlignedBuf,
    start: usize,
    len: usize,
}

impl ReadBuf {
    /// Bytes the read transferred from the device: the aligned extent around the requested
    /// range (what the read counters count).
    pub fn device_bytes(&self) -> usize {
        self.buf.len()
    }
}

impl std::ops::Deref for ReadBuf {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        &self.buf[self.start..self.start + self.len]
    }
}

impl DataFile {
    /// Opens `path`. With `want_direct` it tries O_DIRECT first and falls back to buffered
    /// I/O with readahead disabled if the filesystem refuses.
    pub fn open(
        path: &Path,
        mode: OpenMode,
        want_direct: bool,
        stats: Arc<IoStats>,
        faults: Option<Arc<FaultInjector>>,
    ) -> Result<Self> {
        let attempt = |direct: bool| {
            let mut opts = OpenOptions::new();
            opts.read(true).write(true);
            if mode == OpenMode::CreateNew {
                opts.create_new(true);
            }
            if direct {
                opts.custom_flags(libc::O_DIRECT);
            }
            opts.open(path)
        };
        let (file, direct) = match (want_direct, attempt(want_direct)) {
            (true, Err(e)) if e.raw_os_error() == Some(libc::EINVAL) => (attempt(false), false),
            (direct, result) => (result, direct),
        };
        let file = file.map_err(|source| Error::Os {
            path: path.to_owned(),
            op: "open",
            offset: 0,
            source,
        })?;
        if !direct {
            // SAFETY: fd is valid for the life of `file`; advice failure is harmless.
            unsafe { libc::posix_fadvise(file.as_raw_fd(), 0, 0, libc::POSIX_FADV_RANDOM) };
        }
        let read_align = if direct {
            direct_read_align(&file)
        } else {
            PAGE_SIZE
        };
        Ok(DataFile {
            file,
            path: path.to_owned(),
            direct,
            read_align,
            stats,
            faults,
        })
    }

    /// The path the file was opened at.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// True when the file bypasses the page cache.
    pub fn is_direct(&self) -> bool {
        self.direct
    }

    /// The alignment of every read's offset and length (module doc).
    pub fn read_align(&self) -> usize {
        self.read_align
    }

    /// Current file length in bytes.
    pub fn len(&self) -> Result<u64> {
        self.file
            .metadata()
            .map(|m| m.len())
            .map_err(|e| self.os_err("stat", 0, e))
    }

    /// True when the file has no bytes.
    pub fn is_empty(&self) -> Result<bool> {
        Ok(self.len()? == 0)
    }

    /// Reads `len` bytes at `offset` with a single pread of the enclosing extent aligned to
    /// `read_align`. Counts the whole extent, padding included.
    pub fn read_exact_at(&self, offset: u64, len: usize, cat: Category) -> Result<ReadBuf> {
        let align = self.read_align as u64;
        let start = offset / align * align;
        let lead = (offset - start) as usize;
        let extent = (lead + len).max(1).div_ceil(self.read_align) * self.read_align;
        let (buf, got) = self.pread_new(extent, start)?;
        self.stats.add_read(cat, extent);
        if got < lead + len {
            return Err(Error::ShortRead {
                path: self.path.clone(),
                offset,
                wanted: len,
                got: got.saturating_sub(lead),
            });
        }
        Ok(ReadBuf {
            buf,
            start: lead,
            len,
        })
    }

    /// Writes `data` (its full padded capacity) at page-aligned `offset`.
    pub fn write_at(&self, offset: u64, data: &AlignedBuf, cat: Category) -> Result<()> {
        assert_eq!(
            offset % PAGE_SIZE as u64,
            0,
            "unaligned write offset {offset}"
        );
        let bytes = data.padded();
        let bytes = match self.faults.as_ref().map(|f| f.on_write()) {
            None | Some(WriteVerdict::Proceed) => bytes,
            Some(WriteVerdict::Fail) => return Err(self.injected("pwrite", offset)),
            Some(WriteVerdict::Tear(keep)) => {
                self.tear(offset, &bytes[..keep.min(bytes.len())]);
                return Err(self.injected("pwrite", offset));
            }
            Some(WriteVerdict::NoSpace(keep)) => {
                self.tear(offset, &bytes[..keep.min(bytes.len())]);
                let full = std::io::Error::from_raw_os_error(libc::ENOSPC);
                return Err(self.os_err("pwrite", offset, full));
            }
        };
        self.file
            .write_all_at(bytes, offset)
            .map_err(|e| self.os_err("pwrite", offset, e))?;
        self.stats.add_write(cat, bytes.len());
        Ok(())
    }

    /// Makes every completed write durable (`fdatasync`).
    pub fn sync(&self, cat: Category) -> Result<()> {
        match self.faults.as_ref().map(|f| f.on_sync()) {
            None | Some(SyncVerdict::Proceed) => {}
            Some(SyncVerdict::Fail) => return Err(self.injected("fdatasync", 0)),
            Some(SyncVerdict::NoSpace) => {
                let full = std::io::Error::from_raw_os_error(libc::ENOSPC);
                return Err(self.os_err("fdatasync", 0, full));
            }
        }
        self.file
            .sync_data()
            .map_err(|e| self.os_err("fdatasync", 0, e))?;
        self.stats.add_fsync(cat);
        Ok(())
    }

    /// Gives the pages of `[offset, offset + len)` back to the filesystem (a hole: reads
    /// return zeros, the file's length is unchanged, a later write allocates again). For
    /// space the caller no longer references. `Ok(false)` where the filesystem cannot
    /// punch holes; the range is then left as it was.
    pub fn punch_hole(&self, offset: u64, len: u64) -> Result<bool> {
        assert_eq!(offset % PAGE_SIZE as u64, 0, "unaligned hole at {offset}");
        assert_eq!(len % PAGE_SIZE as u64, 0, "unaligned hole length {len}");
        let (Ok(off), Ok(n)) = (libc::off_t::try_from(offset), libc::off_t::try_from(len)) else {
            return Ok(false);
        };
        let mode = libc::FALLOC_FL_PUNCH_HOLE | libc::FALLOC_FL_KEEP_SIZE;
        // SAFETY: fallocate on an open descriptor with plain integer arguments.
        let rc = unsafe { libc::fallocate(self.file.as_raw_fd(), mode, off, n) };
        if rc == 0 {
            return Ok(true);
        }
        let e = std::io::Error::last_os_error();
        match e.raw_os_error() {
            Some(libc::EOPNOTSUPP | libc::ENOSYS) => Ok(false),
            _ => Err(self.os_err("fallocate(punch hole)", offset, e)),
        }
    }

    /// Truncates or extends the file to `len` bytes (a page multiple).
    pub fn set_len(&self, len: u64) -> Result<()> {
        assert_eq!(len % PAGE_SIZE as u64, 0, "unaligned file length {len}");
        self.file
            .set_len(len)
            .map_err(|e| self.os_err("ftruncate", len, e))
    }

    /// A new buffer of `extent` bytes read from `start` (exactly `extent`: the buffer's
    /// capacity may be larger), and how many bytes the file had there (the rest of the
    /// buffer is zeroes).
    fn pread_new(&self, extent: usize, start: u64) -> Result<(AlignedBuf, usize)> {
        let fd = self.file.as_raw_fd();
        AlignedBuf::filled_by(extent, |ptr, cap| {
            let want = extent.min(cap);
            let mut done = 0;
            while done < want {
                let at = start + done as u64;
                let off = libc::off_t::try_from(at).map_err(|_| {
                    self.os_err("pread", at, std::io::ErrorKind::InvalidInput.into())
                })?;
                // SAFETY: `ptr + done .. ptr + cap` lies inside the buffer's allocation,
                // which nothing else references while it is filled.
                let n = unsafe { libc::pread(fd, ptr.add(done).cast(), want - done, off) };
                match n {
                    0 => break,
                    n if n > 0 => done += n as usize,
                    _ => {
                        let e = std::io::Error::last_os_error();
                        if e.kind() != std::io::ErrorKind::Interrupted {
                            return Err(self.os_err("pread", at, e));
                        }
                    }
                }
            }
            Ok(done)
        })
    }

    /// A torn write: the prefix reaches the file through a second, buffered descriptor
    /// (O_DIRECT cannot write a partial page), as a power cut mid-write could leave it.
    fn tear(&self, offset: u64, prefix: &[u8]) {
        if let Ok(f) = OpenOptions::new().write(true).open(&self.path) {
            let _ = f.write_all_at(prefix, offset);
            let _ = f.sync_data();
        }
    }

    fn os_err(&self, op: &'static str, offset: u64, source: std::io::Error) -> Error {
        Error::Os {
            path: self.path.clone(),
            op,
            offset,
            source,
        }
    }

    fn injected(&self, op: &'static str, offset: u64) -> Error {
        Error::Injected {
            path: self.path.clone(),
            op,
            offset,
        }
    }
}

/// The offset alignment the kernel requires of direct reads of `file` (`statx` with
/// `STATX_DIOALIGN`, Linux 6.1+), when it is a power of two in 512..=4096 and buffers
/// aligned to a page satisfy its memory alignment; a page otherwise.
fn direct_read_align(file: &File) -> usize {
    // SAFETY: an all-zero statx is a valid value for the kernel to overwrite.
    let mut stx: libc::statx = unsafe { std::mem::zeroed() };
    // SAFETY: a valid descriptor, an empty NUL-terminated path with AT_EMPTY_PATH (the
    // descriptor itself), and a pointer to a statx the call may write.
    let rc = unsafe {
        libc::statx(
            file.as_raw_fd(),
            c"".as_ptr(),
            libc::AT_EMPTY_PATH,
            libc::STATX_DIOALIGN,
            &mut stx,
        )
    };
    let off = stx.stx_dio_offset_align as usize;
    let mem = stx.stx_dio_mem_align as usize;
    let known = rc == 0 && stx.stx_mask & libc::STATX_DIOALIGN != 0;
    if known && off.is_power_of_two() && (512..=PAGE_SIZE).contains(&off) && mem <= PAGE_SIZE {
        off
    } else {
        PAGE_SIZE
    }
}

/// Makes a directory's entries (files created, renamed or removed in it) durable.
pub fn sync_dir(dir: &Path) -> Result<()> {
    let d = File::open(dir).map_err(|source| Error::Os {
        path: dir.to_owned(),
        op: "open dir",
        offset: 0,
        source,
    })?;
    d.sync_all().map_err(|source| Error::Os {
        path: dir.to_owned(),
        op: "fsync dir",
        offset: 0,
        source,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Fault;

    fn open(dir: &Path, faults: Option<Arc<FaultInjector>>) -> (DataFile, Arc<IoStats>) {
        let stats = Arc::new(IoStats::default());
        let f = DataFile::open(
            &dir.join("f"),
            OpenMode::CreateNew,
            true,
            stats.clone(),
            faults,
        )
        .expect("open");
        (f, stats)
    }

    #[test]
    fn write_then_read_an_unaligned_extent() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (f, stats) = open(dir.path(), None);
        let mut data = AlignedBuf::zeroed(3 * PAGE_SIZE);
        for (i, b) in data.iter_mut().enumerate() {
            *b = (i % 251) as u8;
        }
        f.write_at(0, &data, Category::Checkpoint).expect("write");
        let got = f
            .read_exact_at(5000, 100, Category::UserRead)
            .expect("read");
        assert_eq!(&got[..], &data[5000..5100]);
        let c = stats.snapshot();
        assert_eq!(c.checkpoint.write_bytes, 3 * PAGE_SIZE as u64);
        assert_eq!(c.user_read.read_calls, 1);
        // The aligned unit around 5000..5100: a sector on a direct file, a page otherwise.
        assert_eq!(c.user_read.read_bytes, f.read_align() as u64);
    }

    #[test]
    fn a_direct_file_reads_in_its_direct_io_unit() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (f, stats) = open(dir.path(), None);
        let align = f.read_align();
        assert!(align.is_power_of_two() && (512..=PAGE_SIZE).contains(&align));
        if !f.is_direct() {
            assert_eq!(align, PAGE_SIZE, "a buffered file reads whole pages");
        }
        let mut data = AlignedBuf::zeroed(4 * PAGE_SIZE);
        for (i, b) in data.iter_mut().enumerate() {
            *b = (i % 253) as u8;
        }
        f.write_at(0, &data, Category::Checkpoint).expect("write");
        // Every start and length around unit boundaries reads the right bytes and counts
        // exactly the aligned extent around them.
        for (off, len) in [(0, 1), (511, 2), (512, 512), (1000, 3000), (4095, 4097)] {
            let before = stats.snapshot().user_read.read_bytes;
            let got = f.read_exact_at(off, len, Category::UserRead).expect("read");
            assert_eq!(&got[..], &data[off as usize..off as usize + len]);
            let start = off as usize / align * align;
            let end = (off as usize + len).div_ceil(align) * align;
            assert_eq!(got.device_bytes(), end - start);
            let counted = stats.snapshot().user_read.read_bytes - before;
            assert_eq!(counted, (end - start) as u64, "{off}+{len}");
        }
    }

    #[test]
    fn read_spanning_two_pages_reads_both() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (f, stats) = open(dir.path(), None);
        f.write_at(0, &AlignedBuf::zeroed(2 * PAGE_SIZE), Category::Meta)
            .expect("write");
        f.read_exact_at(4000, 200, Category::UserRead)
            .expect("read");
        let a = f.read_align() as u64;
        let want = (4200u64.div_ceil(a) - 4000 / a) * a;
        assert_eq!(stats.snapshot().user_read.read_bytes, want);
    }

    #[test]
    fn a_punched_hole_reads_as_zeros_frees_its_pages_and_keeps_the_rest() {
        use std::os::unix::fs::MetadataExt;
        let dir = tempfile::tempdir().expect("tempdir");
        let (f, _) = open(dir.path(), None);
        let mut data = AlignedBuf::zeroed(8 * PAGE_SIZE);
        data.iter_mut().for_each(|b| *b = 0xA5);
        f.write_at(0, &data, Category::Checkpoint).expect("write");
        f.sync(Category::Checkpoint).expect("sync");
        let blocks = |f: &DataFile| std::fs::metadata(f.path()).expect("stat").blocks();
        let before = blocks(&f);
        let page = PAGE_SIZE as u64;
        if !f.punch_hole(2 * page, 4 * page).expect("punch") {
            return; // the filesystem cannot punch holes; nothing to check
        }
        let got = f
            .read_exact_at(0, 8 * PAGE_SIZE, Category::UserRead)
            .expect("read");
        assert!(got[..2 * PAGE_SIZE].iter().all(|&b| b == 0xA5));
        assert!(got[2 * PAGE_SIZE..6 * PAGE_SIZE].iter().all(|&b| b == 0));
        assert!(got[6 * PAGE_SIZE..].iter().all(|&b| b == 0xA5));
        assert_eq!(f.len().expect("len"), 8 * page, "the length is kept");
        assert!(
            blocks(&f) + 4 * page / 512 <= before,
            "pages not freed: {before} -> {} blocks",
            blocks(&f)
        );
    }

    #[test]
    fn short_read_is_reported() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (f, _) = open(dir.path(), None);
        f.write_at(0, &AlignedBuf::zeroed(10), Category::Meta)
            .expect("write");
        let err = f.read_exact_at(4000, 200, Category::UserRead).unwrap_err();
        assert!(matches!(err, Error::ShortRead { .. }), "{err}");
    }

    #[test]
    fn injected_write_failure_sticks() {
        let dir = tempfile::tempdir().expect("tempdir");
        let inj = Arc::new(FaultInjector::new(Fault::FailWrite { after: 2 }));
        let (f, _) = open(dir.path(), Some(inj.clone()));
        let page = AlignedBuf::from_slice(&[1; 10]);
        f.write_at(0, &page, Category::Log).expect("first write");
        assert!(f.write_at(4096, &page, Category::Log).is_err());
        assert!(inj.tripped());
        assert!(f.write_at(8192, &page, Category::Log).is_err());
        assert!(f.sync(Category::Log).is_err());
    }

    #[test]
    fn torn_write_keeps_only_a_prefix() {
        let dir = tempfile::tempdir().expect("tempdir");
        let inj = Arc::new(FaultInjector::new(Fault::TornWrite {
            after: 1,
            keep_bytes: 512,
        }));
        let (f, _) = open(dir.path(), Some(inj));
        let page = AlignedBuf::from_slice(&[9; PAGE_SIZE]);
        assert!(f.write_at(0, &page, Category::Log).is_err());
        let on_disk = std::fs::read(dir.path().join("f")).expect("read back");
        assert_eq!(on_disk.len(), 512);
        assert!(on_disk.iter().all(|&b| b == 9));
    }

    #[test]
    fn failed_fsync_is_reported() {
        let dir = tempfile::tempdir().expect("tempdir");
        let inj = Arc::new(FaultInjector::new(Fault::FailSync { after: 1 }));
        let (f, stats) = open(dir.path(), Some(inj));
        assert!(f.sync(Category::Log).is_err());
        assert_eq!(stats.snapshot().log.fsyncs, 0);
    }

    #[test]
    fn a_held_fsync_waits_for_its_release_then_fails_once_with_enospc() {
        let dir = tempfile::tempdir().expect("tempdir");
        let inj = Arc::new(FaultInjector::default());
        let (f, stats) = open(dir.path(), Some(inj.clone()));
        inj.hold_next_sync(true);
        let syncing = std::thread::spawn(move || (f.sync(Category::Log), f));
        inj.wait_until_sync_held();
        assert!(!syncing.is_finished(), "held until released");
        inj.release_held_sync();
        let (result, f) = syncing.join().expect("sync thread");
        let e = result.expect_err("armed to fail");
        assert!(e.to_string().contains("No space left"), "{e}");
        assert!(!inj.tripped(), "not sticky");
        f.sync(Category::Log).expect("the next fsync goes through");
        assert_eq!(stats.snapshot().log.fsyncs, 1);
    }
}
