//! In-memory rings of recent log lines that `getLog` returns, like mongod's RamLog: `global`
//! (the last lines the server logged) and `startupWarnings` (warnings logged while starting).
//! The binary's logging setup writes formatted lines into them through [`RamLogWriter`]; this
//! module knows nothing of the logging library. Bounded: a ring keeps its last
//! [`RAM_LOG_LINES_MAX`] lines, each cut to [`RAM_LOG_LINE_BYTES_MAX`].

use std::collections::VecDeque;
use std::io;
use std::sync::Mutex;

/// Lines a ring keeps (mongod keeps 1024).
pub const RAM_LOG_LINES_MAX: usize = 1024;
/// Longest line kept; longer ones are cut at a character boundary.
pub const RAM_LOG_LINE_BYTES_MAX: usize = 10 * 1024;
/// The target under which the binary logs a startup warning, so it reaches `startupWarnings`.
pub const STARTUP_WARNING_TARGET: &str = "startupWarnings";

/// One named ring of log lines.
#[derive(Debug)]
pub struct RamLog {
    name: &'static str,
    state: Mutex<RingState>,
}

#[derive(Debug, Default)]
struct RingState {
    lines: VecDeque<String>,
    total_lines_written: u64,
}

static GLOBAL: RamLog = RamLog::new("global");
static STARTUP_WARNINGS: RamLog = RamLog::new("startupWarnings");

impl RamLog {
    const fn new(name: &'static str) -> Self {
        RamLog {
            name,
            state: Mutex::new(RingState {
                lines: VecDeque::new(),
                total_lines_written: 0,
            }),
        }
    }

    /// Every line the server logs.
    pub fn global() -> &'static RamLog {
        &GLOBAL
    }

    /// Warnings logged at startup under [`STARTUP_WARNING_TARGET`].
    pub fn startup_warnings() -> &'static RamLog {
        &STARTUP_WARNINGS
    }

    /// The rings by name, in the order `getLog: '*'` lists them.
    pub fn all() -> [&'static RamLog; 2] {
        [&GLOBAL, &STARTUP_WARNINGS]
    }

    /// The ring of that name (`global`, `startupWarnings`).
    pub fn by_name(name: &str) -> Option<&'static RamLog> {
        RamLog::all().into_iter().find(|l| l.name == name)
    }

    /// The ring's name.
    pub fn name(&self) -> &'static str {
        self.name
    }

    /// Appends one line (without its newline), dropping the oldest when full.
    pub fn push(&self, line: &str) {
        let mut line = line.trim_end_matches(['\n', '\r']);
        if line.len() > RAM_LOG_LINE_BYTES_MAX {
            let mut cut = RAM_LOG_LINE_BYTES_MAX;
            while !line.is_char_boundary(cut) {
                cut -= 1;
            }
            line = &line[..cut];
        }
        let mut s = self.state.lock().unwrap_or_else(|p| p.into_inner());
        if s.lines.len() == RAM_LOG_LINES_MAX {
            s.lines.pop_front();
        }
        s.lines.push_back(line.to_owned());
        s.total_lines_written += 1;
        debug_assert!(s.lines.len() <= RAM_LOG_LINES_MAX);
    }

    /// Lines written since start (kept or not) and the lines kept, oldest first.
    pub fn snapshot(&self) -> (u64, Vec<String>) {
        let s = self.state.lock().unwrap_or_else(|p| p.into_inner());
        (s.total_lines_written, s.lines.iter().cloned().collect())
    }

    /// A writer that splits what it is given into lines for this ring. The logging setup
    /// makes one per event.
    pub fn writer(&'static self) -> RamLogWriter {
        RamLogWriter {
            log: self,
            partial: Vec::new(),
        }
    }
}

/// An [`io::Write`] that pushes each complete line to a [`RamLog`]; a last line without a
/// newline is pushed when the writer is dropped.
#[derive(Debug)]
pub struct RamLogWriter {
    log: &'static RamLog,
    partial: Vec<u8>,
}

impl io::Write for RamLogWriter {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.partial.extend_from_slice(buf);
        while let Some(nl) = self.partial.iter().position(|&b| b == b'\n') {
            let line: Vec<u8> = self.partial.drain(..=nl).collect();
            self.log.push(&String::from_utf8_lossy(&line));
        }
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl Drop for RamLogWriter {
    fn drop(&mut self) {
        if !self.partial.is_empty() {
            self.log.push(&String::from_utf8_lossy(&self.partial));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    #[test]
    fn the_ring_keeps_the_newest_lines_and_counts_all() {
        static RING: RamLog = RamLog::new("test");
        for i in 0..RAM_LOG_LINES_MAX + 5 {
            RING.push(&format!("line {i}\n"));
        }
        let (total, lines) = RING.snapshot();
        assert_eq!(total, RAM_LOG_LINES_MAX as u64 + 5);
        assert_eq!(lines.len(), RAM_LOG_LINES_MAX);
        assert_eq!(lines[0], "line 5");
        assert_eq!(
            lines.last().map(String::as_str),
            Some(format!("line {}", RAM_LOG_LINES_MAX + 4).as_str())
        );
    }

    #[test]
    fn the_writer_splits_lines_and_flushes_the_rest_on_drop() {
        static RING: RamLog = RamLog::new("test");
        {
            let mut w = RING.writer();
            w.write_all(b"one\ntw").expect("write");
            w.write_all(b"o\nthree").expect("write");
            assert_eq!(RING.snapshot().1, ["one", "two"]);
        }
        assert_eq!(RING.snapshot().1, ["one", "two", "three"]);
    }

    #[test]
    fn long_lines_are_cut_on_a_char_boundary() {
        static RING: RamLog = RamLog::new("test");
        RING.push(&"é".repeat(RAM_LOG_LINE_BYTES_MAX));
        let (_, lines) = RING.snapshot();
        assert!(lines[0].len() <= RAM_LOG_LINE_BYTES_MAX);
        assert!(lines[0].len() >= RAM_LOG_LINE_BYTES_MAX - 1);
    }

    #[test]
    fn rings_are_found_by_name() {
        assert_eq!(RamLog::by_name("global").map(RamLog::name), Some("global"));
        assert_eq!(
            RamLog::by_name("startupWarnings").map(RamLog::name),
            Some("startupWarnings")
        );
        assert!(RamLog::by_name("nope").is_none());
    }
}
