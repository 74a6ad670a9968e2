//! The embeddable database: a data directory opened on the engine, with the catalog of
//! databases, collections and indexes, the planner and executor, and transactions as they are
//! built. It knows no wire protocol; the server is one of its callers.

use shale_doc::{ErrorCode, MongoError};
use shale_engine::{Env, EnvOptions};
use std::path::Path;

/// Options for opening a database directory.
#[derive(Debug, Clone, Default)]
pub struct DbOptions {
    pub engine: EnvOptions,
}

/// An open database directory.
#[derive(Debug)]
pub struct Database {
    env: Env,
}

impl Database {
    /// Opens (creating if needed) the database stored in `dir`.
    pub fn open(dir: impl AsRef<Path>, options: DbOptions) -> Result<Database, MongoError> {
        let env = Env::open(dir, options.engine).map_err(engine_error)?;
        Ok(Database { env })
    }

    /// The engine environment underneath (for counters and diagnostics).
    pub fn engine(&self) -> &Env {
        &self.env
    }
}

/// Maps an engine error to the error a MongoDB client sees.
pub fn engine_error(e: shale_engine::Error) -> MongoError {
    let code = if e.is_corruption() {
        ErrorCode::DataCorruptionDetected
    } else {
        ErrorCode::InternalError
    };
    MongoError::new(code, e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_directory_is_owned_by_one_database() {
        let dir = tempfile::tempdir().expect("tempdir");
        let _db = Database::open(dir.path(), DbOptions::default()).expect("open");
        let second = Database::open(dir.path(), DbOptions::default());
        assert!(second.is_err());
    }
}
