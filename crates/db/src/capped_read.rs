//! Reading a capped collection in natural (insertion) order: a find with no sort, or with
//! `$natural` as its sort or hint, and tailable / awaitData cursors, all served by the
//! oplog's reader (`oplog/reader.rs`) over the collection's natural-order entries
//! (`capped.rs`). Any other order takes the ordinary planned find.

use crate::capped::natural_seq;
use crate::catalog::Collection;
use crate::namespace::Namespace;
use crate::oplog::reader::{NaturalLog, NaturalRead, NaturalSource};
use crate::query_ops::FindSpec;
use crate::{engine_error, Database, DbResult};
use bson::RawDocument;
use shale_doc::{ErrorCode, MongoError};
use shale_engine::TreeHandle;
use std::borrow::Cow;
use std::sync::Arc;
use std::time::Instant;

/// A capped collection as a natural log: its size tree's natural-order entries, each
/// naming a document of its document tree by encoded `_id`.
pub struct CappedLog {
    coll: Arc<Collection>,
}

impl NaturalLog for CappedLog {
    fn tree(&self) -> &TreeHandle {
        &self.coll.size
    }

    fn prefix(&self) -> &[u8] {
        crate::capped::natural_prefix()
    }

    /// Every committed entry: inserts commit in sequence order (`capped.rs`).
    fn visible(&self) -> u64 {
        u64::MAX
    }

    fn wait_past(&self, after: u64, deadline: Instant) {
        if let Some(c) = &self.coll.capped {
            c.wait_past(after, deadline);
        }
    }

    fn document<'v>(&self, value: &'v [u8]) -> DbResult<Option<Cow<'v, RawDocument>>> {
        let Some(bytes) = self.coll.docs.get(value).map_err(engine_error)? else {
            // Deleted since its natural entry was read.
            return Ok(None);
        };
        let doc = bson::RawDocumentBuf::from_bytes(bytes).map_err(|_| {
            MongoError::new(
                ErrorCode::DataCorruptionDetected,
                format!("{}: a stored document is not BSON", self.coll.ns),
            )
        })?;
        Ok(Some(Cow::Owned(doc)))
    }

    fn name(&self) -> String {
        self.coll.ns.to_string()
    }
}

impl Database {
    /// Whether `ns` is a capped collection (the oplog of a member included).
    pub fn is_capped(&self, ns: &Namespace) -> bool {
        match self.catalog.get(ns) {
            Some(c) => c.capped.is_some() || (crate::oplog::is_oplog(ns) && self.oplog().is_some()),
            None => false,
        }
    }

    /// A find on a capped collection in natural order (see the header), or `None` when `ns`
    /// is not a capped collection or the find asks another order (then a tailable find is
    /// refused, as mongod refuses it). A tailable read must go forwards.
    pub fn find_capped(
        &self,
        ns: &Namespace,
        spec: &FindSpec,
        tailable: bool,
        await_data: bool,
    ) -> DbResult<Option<NaturalSource<CappedLog>>> {
        let Some(coll) = self.catalog.get(ns).filter(|c| c.capped.is_some()) else {
            return Ok(None);
        };
        let direction = crate::oplog::natural_direction(spec, None);
        if tailable && direction != Some(true) {
            return Err(crate::oplog::tailable_backwards());
        }
        let Some(forward) = direction else {
            return Ok(None);
        };
        let (matcher, projection) = crate::oplog::natural_filter(spec)?;
        let read = NaturalRead {
            matcher,
            projection,
            forward,
            tailable,
            await_data,
            from: None,
            skip: spec.skip,
            limit: spec.limit,
        };
        Ok(Some(NaturalSource::new(CappedLog { coll }, read)))
    }

    /// The `_id`s of a capped collection's documents in natural order (tests, `validate`).
    pub fn capped_order(&self, ns: &Namespace) -> DbResult<Vec<Vec<u8>>> {
        let Some(coll) = self.catalog.get(ns).filter(|c| c.capped.is_some()) else {
            return Ok(Vec::new());
        };
        let mut out = Vec::new();
        let mut cursor = coll.size.cursor();
        cursor
            .seek(crate::capped::natural_prefix())
            .map_err(engine_error)?;
        while let Some((k, v)) = cursor.entry() {
            if natural_seq(k).is_none() {
                break;
            }
            out.push(v.to_vec());
            cursor.next().map_err(engine_error)?;
        }
        Ok(out)
    }
}
