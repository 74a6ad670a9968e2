//! Statistics and checks: `collStats`, `dbStats` (document count and data size are the
//! engine's exact counters, read in O(1); sizes on disk are tree file sizes; numbers typed as
//! mongod types them: counts and collStats sizes int32 when they fit, dbStats sizes double,
//! `fsUsedSize`/`fsTotalSize` from `statvfs` of the data directory; `collStats.shale`
//! gives each tree's layout and its written nodes' raw and stored bytes) and `validate`
//! (every engine tree verified, and every document's index keys present with no extra
//! entries, counted against the stored document count; a clustering index's entries must
//! each hold exactly the document the document tree holds). The data size of a collection
//! that took fast updates is only as exact as `validate` last left it: a fast update does
//! not know how much it grows the document, so `validate` corrects the counter there (a
//! warning) instead of calling the difference an error (`fast_update.rs`).

use crate::catalog::Collection;
use crate::ddl::collection_disk_bytes;
use crate::doc_write::{id_of, MAX_DOCUMENT_BYTES};
use crate::index_keys::id_key;
use crate::namespace::{validate_db_name, Namespace};
use crate::tree_layout::{describe, figures};
use crate::{engine_error, Database, DbResult};
use bson::{doc, Bson, Document, RawDocumentBuf};
use shale_doc::append_number as number;
use shale_doc::{ErrorCode, MongoError};
use shale_engine::TreeSpace;

/// `collStats.shale`: each tree's layout and what its written nodes hold raw and stored
/// (`_id_` is the document tree), and the totals over them.
fn tree_figures(coll: &Collection, scale: i64) -> DbResult<Document> {
    let mut trees = Document::new();
    let mut total = TreeSpace::default();
    let named = std::iter::once(("_id_", &coll.docs))
        .chain(coll.indexes.iter().map(|i| (i.def.name.as_str(), &i.tree)));
    for (name, tree) in named {
        let space = tree.space().map_err(engine_error)?;
        total.nodes += space.nodes;
        total.raw_bytes += space.raw_bytes;
        total.stored_bytes += space.stored_bytes;
        total.file_bytes += space.file_bytes;
        total.free_bytes += space.free_bytes;
        trees.insert(name, describe(tree.name(), tree.options(), &space, scale));
    }
    let mut out = doc! { "trees": trees };
    out.extend(figures(&total, scale));
    Ok(out)
}

fn data_size(c: &Collection) -> i64 {
    c.size.count().max(0)
}

/// What `validate` is asked beyond its full check of every document and index entry (which
/// every validate here runs: `full` and `checkBSONConformance` ask nothing more).
#[derive(Debug, Default, Clone, Copy)]
pub struct ValidateOptions {
    /// `background: true`: counters are compared but never corrected (mongod's background
    /// validation changes nothing).
    pub background: bool,
    /// `enforceFastCount: true`: a data size the counter gets wrong is an error, even where
    /// fast updates explain it (which a foreground validate otherwise corrects, as mongod
    /// corrects its counts).
    pub enforce_fast_count: bool,
}

impl Database {
    /// A collection's exact document count and BSON bytes, from its counters (O(1));
    /// `None` when it does not exist.
    pub fn exact_counts(&self, ns: &Namespace) -> Option<(i64, i64)> {
        let _guard = self.data_lock();
        let coll = self.catalog.get(ns)?;
        Some((coll.docs.count().max(0), data_size(&coll)))
    }

    /// `collStats` figures divided by `scale`.
    pub fn coll_stats(&self, ns: &Namespace, scale: i64) -> DbResult<Document> {
        if let Some(stats) = self.timeseries_stats(ns, scale)? {
            return Ok(stats);
        }
        self.refuse_view(ns)?;
        let _guard = self.data_lock();
        let coll = self.catalog.get(ns).ok_or_else(|| {
            MongoError::new(
                ErrorCode::NamespaceNotFound,
                format!("Collection [{ns}] not found."),
            )
        })?;
        let building: Vec<Bson> = coll
            .indexes
            .iter()
            .filter(|i| !i.is_ready())
            .map(|i| Bson::String(i.def.name.clone()))
            .collect();
        let coll = coll.with_indexes(coll.ready_indexes().cloned().collect());
        let scale = scale.max(1);
        let count = coll.docs.count().max(0);
        let size = data_size(&coll);
        let mut index_sizes = Document::new();
        index_sizes.insert("_id_", 0i32);
        let mut total_index = 0i64;
        for i in &coll.indexes {
            let b = i.tree.file_bytes() as i64;
            total_index += b;
            index_sizes.insert(i.def.name.clone(), number(b / scale));
        }
        let storage = (coll.docs.file_bytes() + coll.size.file_bytes()) as i64;
        let capped = crate::capped::CappedOptions::from_stored(&coll.options);
        let mut stats = doc! {
            "ns": ns.to_string(),
            "size": number(size / scale),
            "count": number(count),
            "avgObjSize": number(if count > 0 { size / count } else { 0 }),
            "storageSize": number(storage / scale),
            "freeStorageSize": 0i32,
            "capped": false,
            "nindexes": (coll.indexes.len() + 1) as i32,
            "indexBuilds": building,
            "totalIndexSize": number(total_index / scale),
            "totalSize": number((storage + total_index) / scale),
            "indexSizes": index_sizes,
            "scaleFactor": number(scale),
            "maxSize": MAX_DOCUMENT_BYTES as i64,
            "shale": tree_figures(&coll, scale)?,
        };
        // A capped collection's bounds, as mongod reports them (no `max`: 2^63 - 1).
        if let Some(c) = capped {
            stats.insert("capped", true);
            stats.insert("max", c.max.unwrap_or(i64::MAX));
            stats.insert("maxSize", c.size / scale);
        }
        Ok(stats)
    }

    /// `dbStats` figures divided by `scale`.
    pub fn db_stats(&self, db: &str, scale: i64) -> DbResult<Document> {
        validate_db_name(db)?;
        let _guard = self.data_lock();
        let scale = scale.max(1);
        let colls = self.catalog.list(Some(db));
        let objects: i64 = colls.iter().map(|c| c.docs.count().max(0)).sum();
        let data: i64 = colls.iter().map(|c| data_size(c)).sum();
        let storage: i64 = colls
            .iter()
            .map(|c| (c.docs.file_bytes() + c.size.file_bytes()) as i64)
            .sum();
        let total: i64 = colls.iter().map(|c| collection_disk_bytes(c) as i64).sum();
        let indexes: i64 = colls.iter().map(|c| c.indexes.len() as i64 + 1).sum();
        let (fs_used, fs_total) = match shale_io::fs_space(self.engine().dir()) {
            Ok(space) => (
                (space.total_bytes - space.available_bytes) as f64 / scale as f64,
                space.total_bytes as f64 / scale as f64,
            ),
            Err(e) => {
                tracing::info!(error = %e, "Failed to query filesystem disk stats");
                (-1.0, -1.0)
            }
        };
        let views = self
            .list_collections(db)
            .iter()
            .filter(|c| c.get_str("type") == Ok("view"))
            .count();
        Ok(doc! {
            "db": db,
            "collections": number(colls.len() as i64),
            "views": number(views as i64),
            "objects": number(objects),
            "avgObjSize": if objects > 0 { data as f64 / objects as f64 } else { 0.0 },
            "dataSize": (data / scale) as f64,
            "storageSize": (storage / scale) as f64,
            "indexes": number(indexes),
            "indexSize": ((total - storage) / scale) as f64,
            "totalSize": (total / scale) as f64,
            "scaleFactor": scale as f64,
            "fsUsedSize": fs_used,
            "fsTotalSize": fs_total,
        })
    }

    /// `validate`: checks the collection's trees and that documents, index entries and the
    /// stored counters agree.
    pub fn validate(&self, ns: &Namespace) -> DbResult<Document> {
        self.validate_with(ns, ValidateOptions::default())
    }

    /// `validate` with its options (see `ValidateOptions`).
    pub fn validate_with(&self, ns: &Namespace, opts: ValidateOptions) -> DbResult<Document> {
        // A time series collection is validated as its buckets are (mongod 7.0 does too).
        if self.timeseries(ns).is_some() {
            return self.validate_with(&crate::timeseries::buckets_ns(ns)?, opts);
        }
        self.refuse_view(ns)?;
        let _guard = self.data_lock();
        let coll = self.catalog.get(ns).ok_or_else(|| {
            MongoError::new(
                ErrorCode::NamespaceNotFound,
                format!("Collection '{ns}' does not exist to validate."),
            )
        })?;
        // An index still being built is incomplete by design: only ready ones are checked.
        let coll = coll.with_indexes(coll.ready_indexes().cloned().collect());
        let mut errors: Vec<String> = Vec::new();
        for tree in std::iter::once(&coll.docs).chain(coll.indexes.iter().map(|i| &i.tree)) {
            if let Err(e) = tree.verify() {
                errors.push(format!("tree {}: {e}", tree.name()));
            }
        }
        let view = self.engine().read_view();
        let mut expected = vec![0i64; coll.indexes.len()];
        let (mut nrecords, mut bytes, mut invalid) = (0i64, 0i64, 0i64);
        let mut cursor = view.cursor(&coll.docs);
        cursor.seek_to_first().map_err(engine_error)?;
        while let Some((key, value)) = cursor.entry() {
            nrecords += 1;
            bytes += value.len() as i64;
            match RawDocumentBuf::from_bytes(value.to_vec()) {
                Err(e) => {
                    invalid += 1;
                    errors.push(format!("document {nrecords} is not BSON: {e}"));
                }
                Ok(doc) => {
                    self.validate_doc(&coll, &view, key, &doc, &mut expected, &mut errors)?
                }
            }
            cursor.next().map_err(engine_error)?;
        }
        let mut keys_per_index = doc! { "_id_": number(nrecords) };
        for (i, want) in coll.indexes.iter().zip(&expected) {
            let mut c = view.cursor(&i.tree);
            c.seek_to_first().map_err(engine_error)?;
            let mut n = 0i64;
            while c.entry().is_some() {
                n += 1;
                c.next().map_err(engine_error)?;
            }
            if n != *want {
                errors.push(format!(
                    "index {} has {n} entries; the documents give {want}",
                    i.def.name
                ));
            }
            keys_per_index.insert(i.def.name.clone(), number(n));
        }
        if coll.docs.count() != nrecords {
            errors.push(format!(
                "stored document count {} but {nrecords} documents",
                coll.docs.count()
            ));
        }
        let mut warnings: Vec<String> = Vec::new();
        if data_size(&coll) != bytes {
            let message = format!(
                "stored data size {} but documents hold {bytes} bytes",
                data_size(&coll)
            );
            if opts.enforce_fast_count || !self.size_marked(&coll, &view)? {
                errors.push(message);
            } else if opts.background {
                warnings.push(format!(
                    "{message} (fast updates change sizes unseen): not corrected by a background validation"
                ));
            } else {
                self.correct_size(&coll, bytes)?;
                warnings.push(format!(
                    "{message}: corrected (fast updates change sizes unseen)"
                ));
            }
        }
        Ok(doc! {
            "ns": ns.to_string(),
            "uuid": coll.uuid,
            "nInvalidDocuments": number(invalid),
            "nNonCompliantDocuments": 0i32,
            "nrecords": number(nrecords),
            "nIndexes": (coll.indexes.len() + 1) as i32,
            "keysPerIndex": keys_per_index,
            "valid": errors.is_empty(),
            "repaired": false,
            "warnings": warnings,
            "errors": errors,
            "extraIndexEntries": [],
            "missingIndexEntries": [],
            "corruptRecords": [],
        })
    }

    /// Whether `coll`'s size tree carries the fast-update marker (`fast_update.rs`).
    fn size_marked(&self, coll: &Collection, view: &shale_engine::ReadView) -> DbResult<bool> {
        let marker = view
            .get(&coll.size, crate::fast_update::SIZE_MARKER_KEY)
            .map_err(engine_error)?;
        Ok(marker.is_some())
    }

    /// Sets `coll`'s data size counter to `bytes` (exact when no write to the collection runs
    /// while `validate` does).
    fn correct_size(&self, coll: &Collection, bytes: i64) -> DbResult<()> {
        self.in_txn(|txn| {
            let delta = bytes - txn.count(&coll.size);
            txn.add_count(&coll.size, delta);
            Ok(())
        })
    }

    fn validate_doc(
        &self,
        coll: &Collection,
        view: &shale_engine::ReadView,
        key: &[u8],
        doc: &RawDocumentBuf,
        expected: &mut [i64],
        errors: &mut Vec<String>,
    ) -> DbResult<()> {
        let idk = id_key(&id_of(doc)?);
        if idk != key {
            errors.push("a document is stored under a key that is not its _id".to_owned());
        }
        for (slot, index) in expected.iter_mut().zip(&coll.indexes) {
            let Some(keys) = index.def.keys(doc)? else {
                continue;
            };
            let want = index.def.entry_value(&idk, doc);
            for (tuple, _) in &keys.tuples {
                *slot += 1;
                let k = index.def.entry_key(tuple, &idk);
                match view.get(&index.tree, &k).map_err(engine_error)? {
                    Some(v) if v == want => {}
                    Some(_) if index.def.clustering => errors.push(format!(
                        "clustering index {} holds a document that differs from the stored one",
                        index.def.name
                    )),
                    Some(_) => errors.push(format!(
                        "index {} has an entry naming another document",
                        index.def.name
                    )),
                    None => errors.push(format!(
                        "index {} lacks an entry for a document",
                        index.def.name
                    )),
                }
            }
        }
        Ok(())
    }
}
