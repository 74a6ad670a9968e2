//! The express path of a point read by `_id` (mongod 8.0's `EXPRESS_IDHACK`): a find whose
//! filter is one `_id` equality on a plain scalar reads one key of the collection's document
//! tree, as of the newest commit, without a plan, a matcher, a snapshot registration or a
//! cursor. The server decides from the command's fields whether a find may come here
//! (`server/commands/express.rs`); this file decides from the collection and the value, and
//! answers `None` whenever the general path must run instead, so the two always agree:
//!
//! - a view, a snapshot read (`snapshot_read.rs`) or a collection whose default collation is
//!   not simple (for a string `_id`, whose index key is binary: `collation_scope.rs`) go the
//!   general way;
//! - only types whose key encoding equals the matcher's equality take the path: numbers
//!   (finite: `1`, `1.0` and `NumberLong(1)` are one key, as they are one value to `$eq`),
//!   strings, ObjectIds, dates and booleans. Null (which also matches a missing field),
//!   NaN, decimals, documents, arrays, regexes and the rest are planned.
//!
//! The read counts one key and, when found, one document for the operation's work
//! (`op_context.rs`), as the IDHACK plan's scan does.

use crate::index_keys::id_key;
use crate::op_context::{add_work, check_interrupt};
use crate::{engine_error, Database, DbResult, Namespace};
use bson::{Bson, RawBsonRef, RawDocumentBuf};

impl Database {
    /// The document of `ns` whose `_id` equals `id`, read the express way: `Some(None)`
    /// when there is none (or no such collection), `None` when the general path must
    /// answer instead (see the file's header).
    pub fn find_by_id_express(
        &self,
        ns: &Namespace,
        id: RawBsonRef<'_>,
    ) -> DbResult<Option<Option<RawDocumentBuf>>> {
        let Some(id) = express_id(id) else {
            return Ok(None);
        };
        if crate::snapshot_read::active().is_some() {
            return Ok(None);
        }
        let _guard = self.data_lock();
        let Some(coll) = self.visible_collection(ns) else {
            // A view is not in the collection catalog; a missing collection finds nothing.
            return Ok(match self.catalog.view(ns) {
                Some(_) => None,
                None => Some(None),
            });
        };
        if matches!(id, Bson::String(_)) && coll.options.contains_key("collation") {
            return Ok(None);
        }
        check_interrupt()?;
        let found = coll.docs.get(&id_key(&id)).map_err(engine_error)?;
        add_work(1, u64::from(found.is_some()));
        found.map(crate::exec::raw).transpose().map(Some)
    }
}

/// `id` as an owned value when its key encoding is exactly `$eq`'s equality.
fn express_id(id: RawBsonRef<'_>) -> Option<Bson> {
    Some(match id {
        RawBsonRef::Int32(n) => Bson::Int32(n),
        RawBsonRef::Int64(n) => Bson::Int64(n),
        RawBsonRef::Double(d) if d.is_finite() => Bson::Double(d),
        RawBsonRef::String(s) => Bson::String(s.to_owned()),
        RawBsonRef::ObjectId(o) => Bson::ObjectId(o),
        RawBsonRef::DateTime(t) => Bson::DateTime(t),
        RawBsonRef::Boolean(b) => Bson::Boolean(b),
        _ => return None,
    })
}
