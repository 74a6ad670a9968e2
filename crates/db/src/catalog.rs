//! The catalog: which collections and indexes exist, with their engine trees, kept in the
//! engine tree `catalog` (one entry per collection, key = namespace, value = a BSON record:
//! docs/format-collections.md) and in memory as immutable `Collection` values that DDL
//! replaces whole. Callers serialise DDL (the database's DDL lock); readers of the map take
//! an `Arc<Collection>` and keep using it for one operation.
//!
//! Engine trees are named by catalog id, not by namespace, so a rename rewrites one catalog
//! entry and moves no data: `c<id>` holds the documents keyed by encoded `_id`, `c<id>.size`
//! counts the documents' BSON bytes in its entry count and holds at most the fast-update
//! marker (`fast_update.rs`), `i<id>` holds
//! one index. Trees are created before the catalog entry that names them commits and
//! dropped after the entry that named them is gone, so a crash can leave only unnamed
//! trees, which `open` drops.
//!
//! Records carry `formatVersion` (docs/format-collections.md): 2 since clustering indexes;
//! a record without it is version 1 (no index is clustering) and opens unchanged. A record
//! of a newer version than `CATALOG_FORMAT_VERSION` is refused, never misread. A view is a
//! record of its own kind (`kind: "view"`, version 3, no trees: `views.rs`), under the same
//! key space, so a view and a collection never share a name; binaries before views refuse
//! its version rather than misread it. A collection record with an index still being built
//! is version 4 (`index_build.rs`), so older binaries refuse it too.
//!
//! The catalog never commits its own writes: each change is handed as a `CatalogChange` to
//! the caller's `CatalogCommit`, which on a `--replSet` member puts it in the engine
//! transaction that also writes the change's oplog entries (`ddl_log.rs`), and on a
//! standalone writes it alone; only once that commit succeeded is the change published in
//! memory.

use crate::index_keys::IndexDef;
use crate::index_spec::parse_spec;
use crate::namespace::Namespace;
use crate::tree_layout::tree_options;
use crate::validation::Validator;
use crate::{engine_error, DbResult};
use bson::{doc, Bson, Document};
use shale_doc::{ErrorCode, MongoError};
use shale_engine::{Compression, Env, TreeHandle, TreeOptions, Txn, WriteBatch};
use std::collections::{BTreeMap, HashSet};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, RwLock};

const CATALOG_TREE: &str = "catalog";

/// The catalog record format this code writes and the newest it reads.
pub const CATALOG_FORMAT_VERSION: i32 = 2;

/// The format of a collection record while one of its indexes is being built (`building:
/// true` on its entry): binaries before hot builds refuse it rather than take an unfilled
/// index for a complete one. Views have version 3.
pub const BUILDING_FORMAT_VERSION: i32 = 4;

/// One secondary index.
pub struct Index {
    pub id: u64,
    /// The spec as `listIndexes` shows it.
    pub spec: Document,
    pub def: IndexDef,
    pub tree: TreeHandle,
    /// Set (never cleared) once a document put an array on one of its paths; set before the
    /// write commits.
    pub multikey: AtomicBool,
    /// Whether the stored catalog record says multikey.
    pub multikey_durable: AtomicBool,
    /// Filled and usable by queries. A hot build (`index_build.rs`) publishes the index
    /// unready, so every write maintains it while the build fills it from the documents,
    /// then sets this; the record says `building: true` until then.
    pub ready: AtomicBool,
}

impl Index {
    /// A new index over a new, empty tree: not multikey, and ready or (a hot build's,
    /// `index_build.rs`) not yet.
    pub(crate) fn new_empty(
        id: u64,
        spec: Document,
        def: IndexDef,
        tree: TreeHandle,
        ready: bool,
    ) -> Index {
        Index {
            id,
            spec,
            def,
            tree,
            multikey: AtomicBool::new(false),
            multikey_durable: AtomicBool::new(false),
            ready: AtomicBool::new(ready),
        }
    }

    /// Whether queries, listings and checks may use the index (its build finished).
    pub fn is_ready(&self) -> bool {
        self.ready.load(Ordering::SeqCst)
    }
}

/// One collection: its document tree, size counter and indexes.
pub struct Collection {
    pub ns: Namespace,
    pub id: u64,
    pub uuid: bson::Uuid,
    /// The options given at `create` (listCollections shows them).
    pub options: Document,
    pub docs: TreeHandle,
    pub size: TreeHandle,
    pub indexes: Vec<Arc<Index>>,
    /// The validator `options` give, parsed (`validation.rs`).
    pub validator: Option<Arc<Validator>>,
    /// A capped collection's bounds and natural order (`capped.rs`); `None` for every
    /// other collection and for the oplog, which keeps its own.
    pub capped: Option<Arc<crate::capped::Capped>>,
}

impl std::fmt::Debug for Index {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Index")
            .field("id", &self.id)
            .field("spec", &self.spec)
            .finish_non_exhaustive()
    }
}

impl std::fmt::Debug for Collection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Collection")
            .field("ns", &self.ns)
            .field("id", &self.id)
            .field("indexes", &self.indexes)
            .finish_non_exhaustive()
    }
}

impl Collection {
    /// The catalog record for this collection.
    pub(crate) fn record(&self) -> Document {
        let indexes: Vec<Bson> = self
            .indexes
            .iter()
            .map(|i| {
                let mut entry = doc! {
                    "id": i.id as i64,
                    "spec": i.spec.clone(),
                    "multikey": i.multikey.load(Ordering::Relaxed),
                };
                if !i.is_ready() {
                    entry.insert("building", true);
                }
                Bson::Document(entry)
            })
            .collect();
        let building = self.indexes.iter().any(|i| !i.is_ready());
        doc! {
            "formatVersion": if building { BUILDING_FORMAT_VERSION } else { CATALOG_FORMAT_VERSION },
            "ns": self.ns.to_string(),
            "id": self.id as i64,
            "uuid": self.uuid,
            "options": self.options.clone(),
            "indexes": indexes,
        }
    }

    pub fn index(&self, name: &str) -> Option<&Arc<Index>> {
        self.indexes.iter().find(|i| i.def.name == name)
    }

    /// The indexes queries, listings and checks see: those whose build finished. Writes
    /// maintain every index in `indexes`, building ones included.
    pub fn ready_indexes(&self) -> impl Iterator<Item = &Arc<Index>> {
        self.indexes.iter().filter(|i| i.is_ready())
    }

    /// The stored record's bytes, for a write that must change it in a transaction.
    pub(crate) fn record_bytes(&self) -> DbResult<Vec<u8>> {
        bson::to_vec(&self.record()).map_err(|e| internal(format!("encoding catalog record: {e}")))
    }
}

pub fn doc_tree_name(id: u64) -> String {
    format!("c{id}")
}
pub fn size_tree_name(id: u64) -> String {
    format!("c{id}.size")
}
pub fn index_tree_name(id: u64) -> String {
    format!("i{id}")
}

/// The writes one catalog change makes to the catalog tree: each key with its new record,
/// or `None` for a removal. Committed by a `CatalogCommit`, never by the catalog itself.
#[must_use = "a catalog change does nothing until it is committed"]
pub(crate) struct CatalogChange<'a> {
    tree: &'a TreeHandle,
    writes: Vec<(Vec<u8>, Option<Vec<u8>>)>,
}

impl<'a> CatalogChange<'a> {
    fn new(tree: &'a TreeHandle) -> CatalogChange<'a> {
        CatalogChange {
            tree,
            writes: Vec::new(),
        }
    }

    /// A change that writes nothing (a DDL entry with no catalog record of its own:
    /// `dropDatabase`).
    pub(crate) fn none(catalog: &'a Catalog) -> CatalogChange<'a> {
        CatalogChange::new(&catalog.tree)
    }

    fn put(&mut self, key: &Namespace, record: Vec<u8>) {
        self.writes
            .push((key.to_string().into_bytes(), Some(record)));
    }

    fn delete(&mut self, key: &Namespace) {
        self.writes.push((key.to_string().into_bytes(), None));
    }

    /// Commits the change alone, in one engine write.
    pub(crate) fn write(self, env: &Env) -> DbResult<()> {
        if self.writes.is_empty() {
            return Ok(());
        }
        let mut batch = WriteBatch::new();
        for (key, record) in &self.writes {
            match record {
                Some(r) => batch.put(self.tree, key, r),
                None => batch.delete(self.tree, key),
            }
        }
        env.write(batch).map_err(engine_error)
    }

    /// Puts the change into `txn`, to commit with whatever else `txn` writes.
    pub(crate) fn put_into(self, txn: &mut Txn) -> DbResult<()> {
        for (key, record) in &self.writes {
            match record {
                Some(r) => txn.put(self.tree, key, r),
                None => txn.delete(self.tree, key),
            }
            .map_err(engine_error)?;
        }
        Ok(())
    }
}

/// What commits a catalog change durably: `Database::ddl_commit` (the change with the oplog
/// entries that record it). An error leaves the catalog as it was, in memory too.
pub(crate) type CatalogCommit<'a> = &'a dyn Fn(CatalogChange<'_>) -> DbResult<()>;

/// The catalog of one database directory.
pub struct Catalog {
    tree: TreeHandle,
    colls: RwLock<BTreeMap<Namespace, Arc<Collection>>>,
    /// The views (`views.rs`), kept apart from the collections.
    pub(crate) views: RwLock<BTreeMap<Namespace, Arc<crate::views::View>>>,
    next_id: AtomicU64,
}

impl std::fmt::Debug for Catalog {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Catalog").finish_non_exhaustive()
    }
}

impl Catalog {
    /// Loads the catalog (creating its tree in a new directory) and drops trees no entry names.
    pub fn open(env: &Env) -> DbResult<Catalog> {
        let tree = match env.open_tree(CATALOG_TREE) {
            Ok(t) => t,
            Err(_) => env
                .create_tree(CATALOG_TREE, Some(catalog_tree_options()))
                .map_err(engine_error)?,
        };
        let mut colls = BTreeMap::new();
        let mut views = BTreeMap::new();
        let mut max_id = 0;
        let mut cursor = tree.cursor();
        cursor.seek_to_first().map_err(engine_error)?;
        while let Some((_, value)) = cursor.entry() {
            let record: Document = bson::from_slice(value)
                .map_err(|e| corrupt(format!("catalog record does not decode: {e}")))?;
            if crate::views::is_view_record(&record) {
                let view = crate::views::View::from_record(&record)?;
                views.insert(view.ns.clone(), Arc::new(view));
                cursor.next().map_err(engine_error)?;
                continue;
            }
            let coll = load_collection(env, &record)?;
            max_id = max_id.max(coll.id);
            for i in &coll.indexes {
                max_id = max_id.max(i.id);
            }
            colls.insert(coll.ns.clone(), Arc::new(coll));
            cursor.next().map_err(engine_error)?;
        }
        drop(cursor);
        drop_unnamed_trees(env, &colls)?;
        Ok(Catalog {
            tree,
            colls: RwLock::new(colls),
            views: RwLock::new(views),
            next_id: AtomicU64::new(max_id + 1),
        })
    }

    pub fn get(&self, ns: &Namespace) -> Option<Arc<Collection>> {
        self.read().get(ns).cloned()
    }

    /// Every collection, or those of one database, in name order.
    pub fn list(&self, db: Option<&str>) -> Vec<Arc<Collection>> {
        self.read()
            .values()
            .filter(|c| db.is_none_or(|d| c.ns.db == d))
            .cloned()
            .collect()
    }

    /// The engine tree holding the catalog (transactions that mark an index multikey write it).
    pub fn tree(&self) -> &TreeHandle {
        &self.tree
    }

    /// The change that puts `record` under `ns`, or removes `ns`'s (a view's, `views.rs`).
    pub(crate) fn view_change(&self, ns: &Namespace, record: Option<Vec<u8>>) -> CatalogChange<'_> {
        let mut change = CatalogChange::new(&self.tree);
        match record {
            Some(r) => change.put(ns, r),
            None => change.delete(ns),
        }
        change
    }

    /// The change that removes the records of `nss` (a database's views, `views.rs`).
    pub(crate) fn removal<'n>(
        &self,
        nss: impl Iterator<Item = &'n Namespace>,
    ) -> CatalogChange<'_> {
        let mut change = CatalogChange::new(&self.tree);
        for ns in nss {
            change.delete(ns);
        }
        change
    }

    /// Creates an empty collection, committed by `commit`. The caller holds the DDL lock and
    /// has checked it is new.
    pub(crate) fn create(
        &self,
        env: &Env,
        ns: &Namespace,
        options: Document,
        commit: CatalogCommit<'_>,
    ) -> DbResult<Arc<Collection>> {
        let coll = self.prepare(env, ns, options)?;
        self.commit(coll, commit).map(|(c, _)| c)
    }

    /// A new empty collection with its trees made, neither recorded nor published: a
    /// session transaction's `create` (`txn_ddl.rs`), which records it in its own commit.
    /// Trees of one never recorded are dropped at the next open (`drop_unnamed_trees`).
    pub(crate) fn prepare(
        &self,
        env: &Env,
        ns: &Namespace,
        options: Document,
    ) -> DbResult<Collection> {
        let tree_options = tree_options(env.options().tree_defaults, &options)?;
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let docs = env
            .create_tree(&doc_tree_name(id), Some(tree_options))
            .map_err(engine_error)?;
        let size = env
            .create_tree(&size_tree_name(id), Some(catalog_tree_options()))
            .map_err(engine_error)?;
        let validator = Validator::from_options(&options)?.map(Arc::new);
        let capped = capped_state(ns, &options, &size)?;
        let coll = Collection {
            ns: ns.clone(),
            id,
            uuid: bson::Uuid::new(),
            options,
            docs,
            size,
            indexes: Vec::new(),
            validator,
            capped,
        };
        Ok(coll)
    }

    /// Publishes `coll`, whose record a committed transaction wrote, unless the name is
    /// taken (false then).
    pub(crate) fn publish(&self, coll: Arc<Collection>) -> bool {
        let mut colls = self.write();
        if colls.contains_key(&coll.ns) {
            return false;
        }
        colls.insert(coll.ns.clone(), coll);
        true
    }

    /// Makes a new index tree for `coll` (not yet in the catalog). Its layout is the spec's
    /// layout options (`tree_layout.rs`) over a base: the collection's layout for a
    /// clustering index (which holds documents), the defaults for any other.
    pub fn create_index_tree(
        &self,
        env: &Env,
        coll: &Collection,
        spec: &Document,
        clustering: bool,
    ) -> DbResult<(u64, TreeHandle)> {
        let base = if clustering {
            *coll.docs.options()
        } else {
            env.options().tree_defaults
        };
        let options = tree_options(base, spec)?;
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let tree = env
            .create_tree(&index_tree_name(id), Some(options))
            .map_err(engine_error)?;
        Ok((id, tree))
    }

    /// Writes `coll`'s record through `commit` and publishes it; returns it and the version
    /// it replaced.
    pub(crate) fn commit(
        &self,
        coll: Collection,
        commit: CatalogCommit<'_>,
    ) -> DbResult<(Arc<Collection>, Option<Arc<Collection>>)> {
        let mut change = CatalogChange::new(&self.tree);
        change.put(&coll.ns, coll.record_bytes()?);
        commit(change)?;
        let coll = Arc::new(coll);
        let old = self.write().insert(coll.ns.clone(), coll.clone());
        Ok((coll, old))
    }

    /// Removes `ns` from the catalog (durably, through `commit`) and drops its trees.
    pub(crate) fn remove(
        &self,
        env: &Env,
        ns: &Namespace,
        commit: CatalogCommit<'_>,
    ) -> DbResult<Option<Arc<Collection>>> {
        let Some(coll) = self.get(ns) else {
            return Ok(None);
        };
        let mut change = CatalogChange::new(&self.tree);
        change.delete(ns);
        commit(change)?;
        self.write().remove(ns);
        drop_trees(env, &coll)?;
        Ok(Some(coll))
    }

    /// Moves `from` to `to`, over `to` if it exists, in one catalog write (delete `from`,
    /// put `to` naming `from`'s trees; no data moves), so a crash leaves either the old `to`
    /// or the new one, then drops the replaced collection's trees; returns it.
    /// (`renameCollection` with `dropTarget`, and `$out` over its target.)
    pub(crate) fn replace(
        &self,
        env: &Env,
        from: &Namespace,
        to: &Namespace,
        commit: CatalogCommit<'_>,
    ) -> DbResult<Option<Arc<Collection>>> {
        let replaced = self.move_entry(from, to, commit)?;
        if let Some(old) = &replaced {
            drop_trees(env, old)?;
        }
        Ok(replaced)
    }

    /// Deletes `from`'s record and puts it under `to` in one catalog write; returns the
    /// entry that was at `to` (its trees untouched).
    fn move_entry(
        &self,
        from: &Namespace,
        to: &Namespace,
        commit: CatalogCommit<'_>,
    ) -> DbResult<Option<Arc<Collection>>> {
        let Some(source) = self.get(from) else {
            return Err(MongoError::new(
                ErrorCode::NamespaceNotFound,
                format!("Source collection {from} does not exist"),
            ));
        };
        let moved = Collection {
            ns: to.clone(),
            id: source.id,
            uuid: source.uuid,
            options: source.options.clone(),
            docs: source.docs.clone(),
            size: source.size.clone(),
            indexes: source.indexes.clone(),
            validator: source.validator.clone(),
            capped: source.capped.clone(),
        };
        let mut change = CatalogChange::new(&self.tree);
        change.delete(from);
        change.put(to, moved.record_bytes()?);
        commit(change)?;
        let mut map = self.write();
        map.remove(from);
        Ok(map.insert(to.clone(), Arc::new(moved)))
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, BTreeMap<Namespace, Arc<Collection>>> {
        self.colls.read().unwrap_or_else(|p| p.into_inner())
    }

    fn write(&self) -> std::sync::RwLockWriteGuard<'_, BTreeMap<Namespace, Arc<Collection>>> {
        self.colls.write().unwrap_or_else(|p| p.into_inner())
    }
}

/// The capped state of a collection whose options say `capped` (not the oplog's).
fn capped_state(
    ns: &Namespace,
    options: &Document,
    size: &TreeHandle,
) -> DbResult<Option<Arc<crate::capped::Capped>>> {
    if crate::oplog::is_oplog(ns) {
        return Ok(None);
    }
    crate::capped::CappedOptions::from_stored(options)
        .map(|o| crate::capped::Capped::open(o, size).map(Arc::new))
        .transpose()
}

/// Drops a collection's trees (after its catalog entry is gone).
pub fn drop_trees(env: &Env, coll: &Collection) -> DbResult<()> {
    env.drop_tree(coll.docs.name()).map_err(engine_error)?;
    env.drop_tree(coll.size.name()).map_err(engine_error)?;
    for i in &coll.indexes {
        env.drop_tree(i.tree.name()).map_err(engine_error)?;
    }
    Ok(())
}

fn load_collection(env: &Env, record: &Document) -> DbResult<Collection> {
    let field = |name: &str| corrupt(format!("catalog record lacks a valid '{name}': {record}"));
    let version = match record.get("formatVersion") {
        None => 1,
        Some(Bson::Int32(v)) if (1..=CATALOG_FORMAT_VERSION).contains(v) => *v,
        Some(Bson::Int32(BUILDING_FORMAT_VERSION)) => BUILDING_FORMAT_VERSION,
        Some(Bson::Int32(v)) if *v > CATALOG_FORMAT_VERSION => {
            return Err(MongoError::new(
                ErrorCode::UnsupportedFormat,
                format!(
                    "catalog record format {v} is newer than this binary reads \
                     ({CATALOG_FORMAT_VERSION}): {record}"
                ),
            ))
        }
        Some(_) => return Err(field("formatVersion")),
    };
    let ns = Namespace::parse(record.get_str("ns").map_err(|_| field("ns"))?)?;
    let id = record.get_i64("id").map_err(|_| field("id"))? as u64;
    let uuid = match record.get("uuid") {
        Some(Bson::Binary(b)) => b.to_uuid().map_err(|_| field("uuid"))?,
        _ => return Err(field("uuid")),
    };
    let options = record
        .get_document("options")
        .map_err(|_| field("options"))?
        .clone();
    let docs = env.open_tree(&doc_tree_name(id)).map_err(engine_error)?;
    let size = env.open_tree(&size_tree_name(id)).map_err(engine_error)?;
    let mut indexes = Vec::new();
    for entry in record.get_array("indexes").map_err(|_| field("indexes"))? {
        let Bson::Document(entry) = entry else {
            return Err(field("indexes"));
        };
        let index_id = entry.get_i64("id").map_err(|_| field("indexes.id"))? as u64;
        let spec = entry
            .get_document("spec")
            .map_err(|_| field("indexes.spec"))?
            .clone();
        let (_, def) = parse_spec(&spec)?;
        if def.clustering && version < 2 {
            return Err(field("indexes.spec.clustering (not in format 1)"));
        }
        let tree = env
            .open_tree(&index_tree_name(index_id))
            .map_err(engine_error)?;
        indexes.push(Arc::new(Index {
            id: index_id,
            spec,
            def,
            tree,
            multikey: AtomicBool::new(entry.get_bool("multikey").unwrap_or(true)),
            multikey_durable: AtomicBool::new(entry.get_bool("multikey").unwrap_or(true)),
            ready: AtomicBool::new(!entry.get_bool("building").unwrap_or(false)),
        }));
    }
    // A stored validator this binary cannot parse (none can be stored by it) leaves the
    // collection open and says so; it is not enforced.
    let validator = match Validator::from_options(&options) {
        Ok(v) => v.map(Arc::new),
        Err(e) => {
            tracing::error!(%ns, error = %e.message, "the collection's validator does not parse and is not enforced");
            None
        }
    };
    let capped = capped_state(&ns, &options, &size)?;
    Ok(Collection {
        ns,
        id,
        uuid,
        options,
        docs,
        size,
        indexes,
        validator,
        capped,
    })
}

fn drop_unnamed_trees(env: &Env, colls: &BTreeMap<Namespace, Arc<Collection>>) -> DbResult<()> {
    let mut named: HashSet<String> = HashSet::new();
    named.insert(CATALOG_TREE.to_owned());
    named.insert(crate::retryable::RETRY_TREE.to_owned());
    for c in colls.values() {
        named.insert(c.docs.name().to_owned());
        named.insert(c.size.name().to_owned());
        for i in &c.indexes {
            named.insert(i.tree.name().to_owned());
        }
    }
    for t in env.list_trees() {
        if !named.contains(&t) {
            tracing::warn!(tree = %t, "dropping a tree no catalog entry names (left by a crash during DDL)");
            env.drop_tree(&t).map_err(engine_error)?;
        }
    }
    Ok(())
}

fn catalog_tree_options() -> TreeOptions {
    TreeOptions {
        node_size_bytes: 256 << 10,
        basement_size_bytes: 16 << 10,
        read_page_bytes: 0,
        fanout: 16,
        compression: Compression::Zstd,
    }
}

fn corrupt(message: String) -> MongoError {
    MongoError::new(ErrorCode::DataCorruptionDetected, message)
}

fn internal(message: String) -> MongoError {
    MongoError::new(ErrorCode::InternalError, message)
}
