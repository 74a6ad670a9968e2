//! Queryable Encryption's server half (protocol V2, as mongod 7.0 runs it; docs/compat.md,
//! Queryable Encryption). The client encrypts; the server never sees a key or a plaintext.
//! It keeps, per encrypted collection, the ESC (`enxcol_.<coll>.esc`, one document per
//! insert of a value, so a query can count them) and the ECOC (`enxcol_.<coll>.ecoc`, each
//! insert's tokens, which compaction reads), and stores each indexed field as an encrypted
//! value with a tag appended to `__safeContent__`, which an equality query's rewritten
//! filter matches with `$in`.
//!
//! Parts: `tokens` (HMAC and AES-CTR), `payload` (what the client sends and what is
//! stored), `esc` (counting inserts, mongod's `emuBinaryV2`), `config` (`encryptedFields`),
//! `insert` (inserts), `update` (updates), `rewrite` (reads), `compact` (`compactStructuredEncryptionData`,
//! `cleanupStructuredEncryptionData`). Range indexes (`rangePreview`) are not built.

mod compact;
pub mod config;
pub(crate) mod esc;
pub(crate) mod insert;
#[cfg(test)]
mod memory_esc;
pub mod payload;
mod rewrite;
pub mod tokens;
pub(crate) mod update;

pub use compact::CompactStats;
pub use config::{check_and_fill, EncryptedConfig};

use crate::catalog::Collection;
use crate::{Database, DbResult, Namespace};
use shale_doc::{ErrorCode, MongoError};
use std::sync::Arc;

/// The field every document of an encrypted collection carries its tags in.
pub const SAFE_CONTENT: &str = "__safeContent__";

/// The name of the index `create` builds on `__safeContent__`.
pub const SAFE_CONTENT_INDEX: &str = "__safeContent___1";

/// An encrypted collection's configuration and state collections, for one write.
pub(crate) struct QeTarget {
    pub(crate) config: EncryptedConfig,
    pub(crate) esc: Arc<Collection>,
    pub(crate) ecoc: Arc<Collection>,
}

/// The parsed `encryptedFields` of a collection's options, if it has them.
pub fn config_of(coll_options: &bson::Document) -> Option<EncryptedConfig> {
    coll_options
        .get_document("encryptedFields")
        .ok()
        .and_then(EncryptedConfig::from_stored)
}

impl Database {
    /// The state collections of encrypted collection `coll`, or `None` when it is not
    /// encrypted. A missing state collection is mongod's 6371506 (the driver or a user
    /// dropped it).
    pub(crate) fn qe_target(&self, coll: &Collection) -> DbResult<Option<QeTarget>> {
        let Some(config) = config_of(&coll.options) else {
            return Ok(None);
        };
        let state = |name: &str| {
            let ns = Namespace::new(&coll.ns.db, name)?;
            self.catalog.get(&ns).ok_or_else(|| {
                MongoError::new(
                    ErrorCode::Location6371506,
                    format!(
                        "Encrypted state collection {ns} of {} does not exist",
                        coll.ns
                    ),
                )
            })
        };
        Ok(Some(QeTarget {
            esc: state(&config.esc)?,
            ecoc: state(&config.ecoc)?,
            config,
        }))
    }
}
