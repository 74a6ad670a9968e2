//! The offline commands on a stopped data directory (docs/operations.md): `shale verify`
//! prints a report of every tree, the catalog and the log and exits 0 when clean, 2 when
//! damaged; `shale repair` and `shale serve --repair` (mongod's flag: repair, then exit)
//! salvage what is intact and report what was dropped. Both refuse, in one line and with
//! exit status 1, a directory that a running server holds.

use crate::startup::StartupError;
use shale_db::repair::RepairSummary;
use shale_db::DbOptions;
use std::path::Path;
use std::process::ExitCode;

/// Exit status of `verify` for a damaged directory (1 is "could not check").
const DAMAGED: u8 = 2;

/// `shale verify --dbpath D`: the report on stdout.
pub fn verify(dbpath: &Path) -> anyhow::Result<ExitCode> {
    existing(dbpath)?;
    let report = shale_db::repair::verify(dbpath).map_err(|e| refused(dbpath, "verify", &e))?;
    println!("{report}");
    Ok(if report.is_clean() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(DAMAGED)
    })
}

/// Salvages `dbpath` and returns the summary; the caller reports it.
pub fn repair(dbpath: &Path, options: DbOptions) -> anyhow::Result<RepairSummary> {
    existing(dbpath)?;
    Ok(shale_db::repair::repair(dbpath, options).map_err(|e| refused(dbpath, "repair", &e))?)
}

/// The exit status after a repair: 0 when everything validates.
pub fn repair_status(summary: &RepairSummary) -> ExitCode {
    if summary.valid {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(DAMAGED)
    }
}

fn existing(dbpath: &Path) -> Result<(), StartupError> {
    if dbpath.is_dir() {
        return Ok(());
    }
    Err(StartupError {
        what: format!("{} is not a data directory", dbpath.display()),
        next_step: "give the --dbpath of a stopped server".to_owned(),
    })
}

fn refused(dbpath: &Path, what: &str, e: &shale_doc::MongoError) -> StartupError {
    let next_step = if e.code == shale_doc::ErrorCode::DBPathInUse {
        format!(
            "a server is running on {}: stop it first ({what} works on a stopped database)",
            dbpath.display()
        )
    } else {
        "check the file and device named above, then try again".to_owned()
    };
    StartupError {
        what: format!("{}: {}", dbpath.display(), e.message),
        next_step,
    }
}
