//! Start-up failures (docs/operations.md): every reason the server cannot start becomes one
//! log line — what failed, where (the file, and the block or offset when the data is
//! damaged), why, and what the operator should do next — and exit status 1. Never a
//! backtrace: these are the operator's problems to act on, not the program's bugs.
//!
//! The data directory is checked before the engine opens it, so that a path that is a file
//! or cannot be written says so plainly instead of as the first failing file call.

use shale_doc::{ErrorCode, MongoError};
use std::fmt;
use std::path::Path;

/// A failure that stops the process, with the operator's next step.
#[derive(Debug)]
pub struct StartupError {
    pub what: String,
    pub next_step: String,
}

impl fmt::Display for StartupError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}; {}", self.what, self.next_step)
    }
}

impl std::error::Error for StartupError {}

impl StartupError {
    pub fn new(what: impl Into<String>, next_step: impl Into<String>) -> Self {
        StartupError {
            what: what.into(),
            next_step: next_step.into(),
        }
    }
}

/// Checks that `dbpath` is a directory this process can write, creating it if missing.
pub fn check_dbpath(dbpath: &Path) -> Result<(), StartupError> {
    let shown = dbpath.display();
    match std::fs::metadata(dbpath) {
        Ok(m) if !m.is_dir() => {
            return Err(StartupError::new(
                format!("data directory {shown} is not a directory"),
                "remove it or point --dbpath (storage.dbPath) at a directory",
            ))
        }
        Ok(_) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            std::fs::create_dir_all(dbpath).map_err(|e| {
                StartupError::new(
                    format!("cannot create data directory {shown}: {e}"),
                    "create it with write access for this user, or choose another --dbpath",
                )
            })?;
        }
        Err(e) => {
            return Err(StartupError::new(
                format!("cannot read data directory {shown}: {e}"),
                "check the path and its permissions, or choose another --dbpath",
            ))
        }
    }
    let probe = dbpath.join(format!(".shale-write-probe-{}", std::process::id()));
    match std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&probe)
    {
        Ok(_) => {
            // The probe is ours alone (pid in the name, created exclusively).
            let _ = std::fs::remove_file(&probe);
            Ok(())
        }
        Err(e) => Err(StartupError::new(
            format!(
                "data directory {shown} is not writable by this process (uid {}): {e}",
                // SAFETY: getuid has no preconditions and cannot fail.
                unsafe { libc::getuid() }
            ),
            "give this user write access to it, or choose another --dbpath",
        )),
    }
}

/// The start-up failure for `Database::open`'s error on `dbpath`.
pub fn open_failure(dbpath: &Path, e: &MongoError) -> StartupError {
    let shown = dbpath.display();
    let next = match e.code {
        ErrorCode::DBPathInUse => format!(
            "another shale process is using {shown} (it holds {shown}/LOCK): stop it, or \
             choose another --dbpath"
        ),
        ErrorCode::DataCorruptionDetected => format!(
            "run `shale verify --dbpath {shown}` for a report of the damage, then \
             `shale serve --repair --dbpath {shown}` to salvage what is intact (damaged files \
             are kept as *.damaged)"
        ),
        ErrorCode::OutOfDiskSpace => {
            "free space on the device holding the data directory, then start again".to_owned()
        }
        _ => "check the file and the device named above (permissions, space, mount), then \
              start again"
            .to_owned(),
    };
    StartupError::new(
        format!(
            "cannot open data directory {shown}: {} ({})",
            e.message,
            e.code.name()
        ),
        next,
    )
}

/// Writes the one line for a failure that ends the process (`doing` says what failed:
/// "cannot start", "verify failed"): to the log once it is set up, else to stderr.
pub fn report(doing: &str, e: &anyhow::Error) {
    let line = match e.downcast_ref::<StartupError>() {
        Some(s) => s.to_string(),
        None => format!("{e:#}"),
    };
    if tracing::dispatcher::has_been_set() {
        tracing::error!("{doing}: {line}");
    } else {
        eprintln!("shale: {doing}: {line}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_is_not_a_data_directory() {
        let dir = tempfile::tempdir().expect("tempdir");
        let file = dir.path().join("f");
        std::fs::write(&file, b"x").expect("write");
        let e = check_dbpath(&file).expect_err("a file");
        assert!(e.what.contains("is not a directory"), "{e}");
    }

    #[test]
    fn a_missing_directory_is_created() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("a/b");
        check_dbpath(&path).expect("created");
        assert!(path.is_dir());
        assert_eq!(std::fs::read_dir(&path).expect("list").count(), 0);
    }

    #[test]
    fn corruption_points_at_verify_and_repair() {
        let e = MongoError::new(
            ErrorCode::DataCorruptionDetected,
            "corruption in /d/CATALOG: catalog: catalog checksum mismatch".to_owned(),
        );
        let line = open_failure(Path::new("/d"), &e).to_string();
        assert!(line.contains("/d/CATALOG"), "{line}");
        assert!(line.contains("shale verify --dbpath /d"), "{line}");
        assert!(line.contains("--repair"), "{line}");
        assert!(!line.contains('\n'), "one line: {line}");
    }
}
