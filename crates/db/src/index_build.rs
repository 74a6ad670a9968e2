//! Hot index builds (TokuMX's hot indexing; mongod 4.2+ builds the same way in spirit):
//! `createIndexes` holds the DDL lock only to publish and to finish, never for the scan, so
//! reads and writes go on — on this collection and every other — while an index fills.
//!
//! Invariants:
//! - B1. An index is published unready (`Index::ready` false, `building: true` in the
//!   catalog record) under the DDL lock, which no write holds across; every write that
//!   starts after it sees the index in `Collection::indexes` and maintains it like any
//!   other (doc_write.rs). Queries and checks see only ready indexes
//!   (`Collection::ready_indexes`); `listIndexes` lists it, as mongod 7.0 lists a build
//!   in progress.
//! - B2. The scan fills the index chunk by chunk, each chunk one engine transaction that
//!   takes a shared lock on every document it indexes (`Txn::lock_shared`). A document a
//!   write changed after the chunk's snapshot fails the lock with `WriteConflict` and the
//!   chunk runs again; a write arriving after the lock fails with `WriteConflict` and
//!   retries once the chunk has committed (write_ops.rs `in_txn`). So the chunk indexes the
//!   current version of each document, and any later change finds those entries and
//!   replaces them: no stale entry survives, no entry is missed. Entries a write already
//!   made are put again with the same bytes.
//! - B3. Each chunk starts under the data lock with a check that the collection and the
//!   index are still in the catalog; a DDL in between (drop, rename, dropIndexes) aborts the
//!   build with `IndexBuildAborted`. No cursor or snapshot is held between chunks, so the
//!   build never reads a tree a DDL dropped.
//! - B4. The index becomes ready under the DDL lock (catalog record rewritten without
//!   `building`), in one commit with its `createIndexes` oplog entry on a member; a failed build (a duplicate key in a unique index, an abort) removes the
//!   index and its tree under the same lock.
//! - B5. A build a shutdown or crash interrupted is still `building` in the catalog; opening
//!   the database runs it again from the start before anything else (`resume_builds`).
//! - B6. A build that failed because the engine did (a full device) cannot remove its index
//!   then; the engine's reopen in place removes it (`revive.rs`), so once writes go on the
//!   index whose `createIndexes` failed is gone, in memory and on disk. (A restart before
//!   that reopen runs the build again instead, B5.)

use crate::catalog::{Collection, Index};
use crate::doc_write::{duplicate, id_of};
use crate::index_keys::id_key;
use crate::namespace::Namespace;
use crate::{engine_error, Database, DbResult};
use bson::{Document, RawDocument};
use shale_doc::{ErrorCode, MongoError};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Documents per build transaction (each holds one shared lock per document).
const BUILD_CHUNK: usize = 1000;

/// Attempts of one chunk that keeps meeting concurrent writes before the build gives up.
const MAX_CHUNK_ATTEMPTS: u32 = 10_000;

/// Where a build stands after a chunk.
enum Progress {
    /// More documents follow the last one indexed (its `_id` key).
    After(Vec<u8>),
    Done,
}

impl Database {
    /// Fills the published, unready `index` of `ns` from its documents while other work
    /// goes on (B2, B3), then makes it ready (B4). On failure the index is removed.
    pub(crate) fn hot_build(
        &self,
        ns: &Namespace,
        coll_id: u64,
        index: &Arc<Index>,
    ) -> DbResult<()> {
        let filled = self.fill_hot(ns, coll_id, index);
        let _ddl = self.ddl_lock();
        let current = self.live_collection(ns, coll_id, index);
        let (Ok(()), Ok(coll)) = (&filled, &current) else {
            if let Ok(coll) = &current {
                self.remove_failed(ns, coll, index)?;
            }
            return filled.and(current.map(|_| ()));
        };
        // The record made ready and the index's `createIndexes` entry: one commit (B4).
        let mut command = bson::doc! {"createIndexes": &ns.coll};
        command.extend(index.spec.clone());
        let ops = vec![crate::ddl_log::ddl_op(&ns.db, Some(coll.uuid), command)?];
        index.ready.store(true, Ordering::SeqCst);
        if let Err(e) = self.catalog.commit(
            coll.with_indexes(coll.indexes.clone()),
            &self.ddl_commit(ops),
        ) {
            // The build reports failure, so its index goes (B4), now or at the reopen (B6).
            index.ready.store(false, Ordering::SeqCst);
            let _ = self.remove_failed(ns, coll, index);
            return Err(e);
        }
        index
            .multikey_durable
            .store(index.multikey.load(Ordering::SeqCst), Ordering::SeqCst);
        Ok(())
    }

    /// Removes the index of a build that failed (B4). If the engine failed too (a full
    /// device), its record stays `building` and a restart would run the build again (B5);
    /// the reopen in place removes it instead, as the build's caller was told it failed
    /// (B6).
    fn remove_failed(&self, ns: &Namespace, coll: &Collection, index: &Arc<Index>) -> DbResult<()> {
        self.remove_index(coll, index).inspect_err(|_| {
            self.revival.remove_after_reopen(ns, coll.id, index);
        })
    }

    /// The chunks of a hot build (B2, B3).
    fn fill_hot(&self, ns: &Namespace, coll_id: u64, index: &Arc<Index>) -> DbResult<()> {
        let total = self.catalog.get(ns).map_or(0, |c| c.docs.count().max(0));
        tracing::info!(%ns, index = %index.def.name, documents = total, "index build started");
        let (mut resume, mut done, mut last_log) = (None, 0u64, Instant::now());
        loop {
            let mut attempt = 0;
            let progress = loop {
                let chunk = {
                    let _data = self.data_lock();
                    let coll = self.live_collection(ns, coll_id, index)?;
                    self.fill_chunk(&coll, index, resume.as_deref(), true)
                };
                match chunk {
                    Err(e)
                        if e.code == ErrorCode::WriteConflict && attempt < MAX_CHUNK_ATTEMPTS =>
                    {
                        attempt += 1;
                        // Let the conflicting write commit before the chunk runs again.
                        std::thread::sleep(Duration::from_micros(200 << attempt.min(6)));
                    }
                    other => break other?,
                }
            };
            done += BUILD_CHUNK as u64;
            if last_log.elapsed().as_secs() >= 5 {
                tracing::info!(%ns, index = %index.def.name, done = done.min(total as u64), total, "index build progress");
                last_log = Instant::now();
            }
            match progress {
                Progress::After(key) => resume = Some(key),
                Progress::Done => break,
            }
        }
        tracing::info!(%ns, index = %index.def.name, "index build finished");
        Ok(())
    }

    /// `ns` as the catalog has it now, if it is still collection `coll_id` with `index` in
    /// it (B3).
    pub(crate) fn live_collection(
        &self,
        ns: &Namespace,
        coll_id: u64,
        index: &Arc<Index>,
    ) -> DbResult<Arc<Collection>> {
        let coll = self
            .catalog
            .get(ns)
            .filter(|c| c.id == coll_id)
            .ok_or_else(|| aborted(ns, index, "the collection was dropped or renamed"))?;
        if !coll.indexes.iter().any(|i| Arc::ptr_eq(i, index)) {
            return Err(aborted(ns, index, "the index was dropped"));
        }
        Ok(coll)
    }

    /// Indexes up to `BUILD_CHUNK` documents after `resume` in one transaction; with
    /// `lock_docs`, each under a shared lock (B2: a hot build; an offline rebuild needs none).
    fn fill_chunk(
        &self,
        coll: &Collection,
        index: &Index,
        resume: Option<&[u8]>,
        lock_docs: bool,
    ) -> DbResult<Progress> {
        let mut txn = self.engine().begin();
        let mut cursor = txn.cursor(&coll.docs);
        match resume {
            Some(k) => {
                cursor.seek(k).map_err(engine_error)?;
                if cursor.entry().is_some_and(|(key, _)| key == k) {
                    cursor.next().map_err(engine_error)?;
                }
            }
            None => cursor.seek_to_first().map_err(engine_error)?,
        }
        let mut last = None;
        for _ in 0..BUILD_CHUNK {
            let Some((key, value)) = cursor.entry() else {
                break;
            };
            if lock_docs {
                txn.lock_shared(&coll.docs, key).map_err(engine_error)?;
            }
            index_document(&mut txn, coll, index, value)?;
            last = Some(key.to_vec());
            cursor.next().map_err(engine_error)?;
        }
        let more = cursor.entry().is_some();
        txn.commit().map_err(engine_error)?;
        Ok(match (more, last) {
            (true, Some(k)) => Progress::After(k),
            _ => Progress::Done,
        })
    }

    /// Fills `index` of `coll` with no concurrent writer (repair, an empty collection):
    /// the chunks without locks.
    pub(crate) fn build_index(&self, coll: &Collection, index: &Index) -> DbResult<()> {
        let mut resume = None;
        loop {
            match self.fill_chunk(coll, index, resume.as_deref(), false)? {
                Progress::After(k) => resume = Some(k),
                Progress::Done => return Ok(()),
            }
        }
    }

    /// Takes `index` out of `coll` in the catalog and drops its tree (B4).
    pub(crate) fn remove_index(&self, coll: &Collection, index: &Arc<Index>) -> DbResult<()> {
        let rest = coll
            .indexes
            .iter()
            .filter(|i| !Arc::ptr_eq(i, index))
            .cloned()
            .collect();
        // Never made ready, so never logged: nothing records its removal.
        self.catalog
            .commit(coll.with_indexes(rest), &self.ddl_commit(Vec::new()))?;
        let _ = self.engine().drop_tree(index.tree.name());
        Ok(())
    }

    /// Runs again every build a shutdown or crash interrupted (B5); called at open.
    pub(crate) fn resume_builds(&self) -> DbResult<()> {
        for coll in self.catalog.list(None) {
            for index in coll.indexes.iter().filter(|i| !i.is_ready()) {
                tracing::warn!(ns = %coll.ns, index = %index.def.name, "an interrupted index build runs again");
                self.hot_build(&coll.ns, coll.id, index)?;
            }
        }
        Ok(())
    }
}

/// Puts `doc`'s entries into `index`; a unique key another document holds is the build's
/// `DuplicateKey` (an entry this document's own write already made is put again).
fn index_document(
    txn: &mut shale_engine::Txn,
    coll: &Collection,
    index: &Index,
    value: &[u8],
) -> DbResult<()> {
    let doc = RawDocument::from_bytes(value)
        .map_err(|e| MongoError::new(ErrorCode::DataCorruptionDetected, e.to_string()))?;
    let idk = id_key(&id_of(doc)?);
    let Some(keys) = index.def.keys(doc)? else {
        return Ok(());
    };
    if keys.multikey {
        index.multikey.store(true, Ordering::SeqCst);
    }
    for (tuple, values) in &keys.tuples {
        let k = index.def.entry_key(tuple, &idk);
        if index.def.unique {
            if let Some(holder) = txn.get(&index.tree, &k).map_err(engine_error)? {
                if index.def.value_id_key(&holder)? != idk {
                    let mut kv = Document::new();
                    for ((p, _), v) in index.def.fields.iter().zip(values) {
                        kv.insert(p.clone(), v.clone());
                    }
                    return Err(duplicate(
                        coll,
                        &index.def.name,
                        &index.def.key_pattern(),
                        &kv,
                    ));
                }
            }
        }
        txn.put(&index.tree, &k, index.def.entry_value(&idk, doc))
            .map_err(engine_error)?;
    }
    Ok(())
}

/// mongod's error for a build a DDL on its collection ended.
fn aborted(ns: &Namespace, index: &Index, why: &str) -> MongoError {
    MongoError::new(
        ErrorCode::IndexBuildAborted,
        format!(
            "Index build aborted: index {} on {ns}: {why}",
            index.def.name
        ),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ddl::Publish;
    use crate::DbOptions;
    use bson::{doc, RawDocumentBuf};

    fn fill(db: &Database, ns: &Namespace, n: i64) {
        let docs: Vec<_> = (0..n)
            .map(|i| RawDocumentBuf::from_document(&doc! {"_id": i, "a": i % 7}).expect("raw"))
            .collect();
        db.insert(ns, &docs, true).expect("insert");
    }

    /// Publishes `a_1` on `ns` without building it, as a crash mid-build leaves it.
    fn publish(db: &Database, ns: &Namespace) -> (u64, Arc<Index>) {
        let Publish::Done((published, coll_id, _, _)) = db
            .publish_indexes(ns, &[doc! {"key": {"a": 1}, "name": "a_1"}])
            .expect("publish")
        else {
            panic!("nothing to wait for");
        };
        (coll_id, published[0].clone())
    }

    fn names(db: &Database, ns: &Namespace) -> Vec<String> {
        let specs = db.list_indexes(ns).expect("list");
        specs
            .iter()
            .map(|s| s.get_str("name").expect("name").to_owned())
            .collect()
    }

    #[test]
    fn an_interrupted_build_runs_again_when_the_database_opens() {
        let dir = tempfile::tempdir().expect("tempdir");
        let ns = Namespace::new("t", "c").expect("ns");
        let db = Database::open(dir.path(), DbOptions::default()).expect("open");
        fill(&db, &ns, 3000);
        let (_, index) = publish(&db, &ns);
        assert!(!index.is_ready());
        assert_eq!(
            names(&db, &ns),
            ["_id_", "a_1"],
            "listed while building, as mongod"
        );
        // A write after publication maintains the unready index (B1).
        fill_more(&db, &ns);
        drop(index);
        db.close().expect("close");
        let db = Database::open(dir.path(), DbOptions::default()).expect("reopen");
        assert_eq!(names(&db, &ns), ["_id_", "a_1"]);
        let v = db.validate(&ns).expect("validate");
        assert!(v.get_bool("valid").expect("valid"), "{v}");
        assert_eq!(
            v.get_document("keysPerIndex").expect("keys").get("a_1"),
            Some(&bson::Bson::Int32(3001))
        );
    }

    fn fill_more(db: &Database, ns: &Namespace) {
        let d = RawDocumentBuf::from_document(&doc! {"_id": -1, "a": 3}).expect("raw");
        db.insert(ns, &[d], true).expect("insert");
    }

    #[test]
    fn dropping_the_collection_aborts_its_build() {
        let dir = tempfile::tempdir().expect("tempdir");
        let ns = Namespace::new("t", "c").expect("ns");
        let db = Database::open(dir.path(), DbOptions::default()).expect("open");
        fill(&db, &ns, 100);
        let (coll_id, index) = publish(&db, &ns);
        db.drop_collection(&ns).expect("drop");
        let e = db.hot_build(&ns, coll_id, &index).expect_err("aborted");
        assert_eq!(e.code, ErrorCode::IndexBuildAborted, "{e:?}");
        // Dropping just the index aborts it too.
        fill(&db, &ns, 100);
        let (coll_id, index) = publish(&db, &ns);
        db.drop_indexes(&ns, &bson::Bson::String("a_1".into()))
            .expect("drop index");
        let e = db.hot_build(&ns, coll_id, &index).expect_err("aborted");
        assert_eq!(e.code, ErrorCode::IndexBuildAborted, "{e:?}");
        assert_eq!(names(&db, &ns), ["_id_"]);
    }
}
