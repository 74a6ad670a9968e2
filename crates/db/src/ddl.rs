//! Catalog commands: create, drop, rename and list collections and databases; create, list
//! and drop indexes (an index is published under the DDL lock and filled without it,
//! `index_build.rs`; a unique index the data violates is refused). DDL holds the database's DDL lock exclusively, so no
//! write or query runs against a collection while its trees change; DDL that replaces or
//! removes an existing collection, or builds or drops its indexes, first aborts every live
//! session transaction (they hold no lock between statements). Creating a collection
//! aborts none: an insert in a transaction creates its collection.

use crate::catalog::{Collection, Index};
use crate::ddl_log::{create_command, ddl_op, view_op};
use crate::index_spec::{id_index_spec, parse_spec};
use crate::namespace::{validate_db_name, Namespace};
use crate::{engine_error, Database, DbResult};
use bson::{doc, Bson, Document};
use shale_doc::{ErrorCode, MongoError};
use std::sync::{Arc, RwLockReadGuard};

/// Why DDL aborts the live session transactions (docs/plan-wire-transactions.md §0.3).
const KILLED_BY_DDL: &str = "a catalog change (drop, rename or index build) ended it";

/// What `createIndexes` did.
#[derive(Debug)]
pub struct CreateIndexesResult {
    /// Indexes before (`numIndexesBefore`).
    pub before: usize,
    /// Indexes after (`numIndexesAfter`).
    pub after: usize,
    /// True when the collection was created for the indexes.
    pub created_collection: bool,
    /// Set when every requested index already existed.
    pub note: Option<&'static str>,
}

impl Collection {
    pub(crate) fn with_indexes(&self, indexes: Vec<Arc<Index>>) -> Collection {
        Collection {
            ns: self.ns.clone(),
            id: self.id,
            uuid: self.uuid,
            options: self.options.clone(),
            docs: self.docs.clone(),
            size: self.size.clone(),
            indexes,
            validator: self.validator.clone(),
            capped: self.capped.clone(),
        }
    }
}

impl Database {
    /// Creates the empty collection `ns` with `options`, its record and its `create` entry
    /// (`{create: <coll>, ...options}`) in one commit. The caller holds the DDL lock and has
    /// checked the name is free.
    pub(crate) fn create_logged(
        &self,
        ns: &Namespace,
        options: Document,
    ) -> DbResult<Arc<Collection>> {
        let coll = self.catalog.prepare(self.engine(), ns, options)?;
        let command = create_command(&ns.coll, doc! {}, &coll.options);
        let ops = vec![ddl_op(&ns.db, Some(coll.uuid), command)?];
        Ok(self.catalog.commit(coll, &self.ddl_commit(ops))?.0)
    }

    /// The collection, created (implicitly, as an insert does) if missing, with the data
    /// lock held for the caller's operation.
    pub(crate) fn collection_or_create(
        &self,
        ns: &Namespace,
    ) -> DbResult<(Arc<Collection>, RwLockReadGuard<'_, ()>)> {
        self.refuse_view(ns)?;
        loop {
            {
                let guard = self.data_lock();
                if let Some(c) = self.catalog.get(ns) {
                    return Ok((c, guard));
                }
            }
            let _ddl = self.ddl_lock();
            if self.catalog.get(ns).is_none() {
                self.create_logged(ns, Document::new())?;
            }
        }
    }

    /// `create`: a new empty collection with `options`. A collection that exists with the
    /// same options is left as it is (mongod 7.0's `create` is idempotent); with other
    /// options, or a view of that name, it is `NamespaceExists`.
    pub fn create_collection(&self, ns: &Namespace, options: Document) -> DbResult<()> {
        let _ddl = self.ddl_lock();
        if self.catalog.view(ns).is_some() {
            return Err(MongoError::new(
                ErrorCode::NamespaceExists,
                format!("Namespace {ns} already exists"),
            ));
        }
        if let Some(existing) = self.catalog.get(ns) {
            if existing.options == options {
                return Ok(());
            }
            let mut shown = format!("uuid: UUID(\"{}\")", existing.uuid);
            for (k, v) in &existing.options {
                shown.push_str(&format!(", {k}: {v}"));
            }
            return Err(MongoError::new(
                ErrorCode::NamespaceExists,
                format!("namespace {ns} already exists, but with different options: {{ {shown} }}"),
            ));
        }
        let c = self.create_logged(ns, options)?;
        if c.keeps_pre_images() {
            self.ensure_pre_images()?;
        }
        Ok(())
    }

    /// Collection `ns`, which must exist and not be a view (mongod's `NamespaceNotFound`
    /// "ns does not exist").
    pub fn existing(&self, ns: &Namespace) -> DbResult<Arc<Collection>> {
        self.refuse_view(ns)?;
        self.catalog.get(ns).ok_or_else(|| {
            MongoError::new(
                ErrorCode::NamespaceNotFound,
                format!("ns does not exist: {ns}"),
            )
        })
    }

    /// `collMod`'s option changes: `changes` holds any of `validator`, `validationLevel`,
    /// `validationAction` and `changeStreamPreAndPostImages`; they replace the stored ones,
    /// checked as `create` checks them, in one catalog write (pre-images turned off leave
    /// the options). Live session transactions are aborted, as by any DDL here (their
    /// writes would be checked against the old settings).
    pub fn set_collection_options(&self, ns: &Namespace, changes: &Document) -> DbResult<()> {
        let _ddl = self.ddl_lock();
        let coll = self.existing(ns)?;
        let mut options = coll.options.clone();
        for (k, v) in changes {
            if k == crate::pre_images::OPTION {
                match crate::pre_images::parse_option("collMod", v)? {
                    true => {
                        crate::pre_images::check_namespace(ns)?;
                        self.ensure_pre_images()?;
                        options.insert(k.clone(), doc! {"enabled": true});
                    }
                    false => {
                        options.remove(k);
                    }
                }
                continue;
            }
            options.insert(k.clone(), v.clone());
        }
        let validator = crate::validation::Validator::from_options(&options)?.map(Arc::new);
        self.kill_user_txns(KILLED_BY_DDL);
        let mut changed = coll.with_indexes(coll.indexes.clone());
        changed.options = options;
        changed.validator = validator;
        let mut command = doc! {"collMod": &ns.coll};
        command.extend(changes.clone());
        let ops = vec![ddl_op(&ns.db, Some(coll.uuid), command)?];
        self.catalog.commit(changed, &self.ddl_commit(ops))?;
        Ok(())
    }

    /// `drop`: removes the collection and its indexes; returns how many indexes it had
    /// (counting `_id_`), or `None` if it did not exist. A view is dropped as `Some(0)`.
    pub fn drop_collection(&self, ns: &Namespace) -> DbResult<Option<usize>> {
        let _ddl = self.ddl_lock();
        self.refuse_pre_images_drop(ns)?;
        if let Some(dropped) = self.drop_timeseries(ns)? {
            return Ok(Some(dropped));
        }
        if let Some(v) = self.catalog.view(ns) {
            let ops = vec![view_op(&v, false)?];
            self.catalog.remove_view(ns, &self.ddl_commit(ops))?;
            return Ok(Some(0));
        }
        if self.catalog.get(ns).is_some() {
            self.kill_user_txns(KILLED_BY_DDL);
        }
        self.cursors.kill_namespace(&ns.to_string());
        let ops = match self.catalog.get(ns) {
            Some(c) => vec![ddl_op(&ns.db, Some(c.uuid), doc! {"drop": &ns.coll})?],
            None => Vec::new(),
        };
        let removed = self
            .catalog
            .remove(self.engine(), ns, &self.ddl_commit(ops))?;
        Ok(removed.map(|c| c.indexes.len() + 1))
    }

    /// `dropDatabase`: drops every collection of `db`.
    pub fn drop_database(&self, db: &str) -> DbResult<()> {
        validate_db_name(db)?;
        let _ddl = self.ddl_lock();
        for c in self.catalog.list(Some(db)) {
            self.refuse_pre_images_drop(&c.ns)?;
        }
        if !self.catalog.list(Some(db)).is_empty() {
            self.kill_user_txns(KILLED_BY_DDL);
        }
        self.cursors.kill_namespace(&format!("{db}."));
        let had = !self.catalog.list(Some(db)).is_empty();
        // One commit per collection, each with its `drop` entry, then `dropDatabase`'s entry
        // alone (it changes no record of its own), as mongod logs them.
        for c in self.catalog.list(Some(db)) {
            let ops = vec![ddl_op(db, Some(c.uuid), doc! {"drop": &c.ns.coll})?];
            self.catalog
                .remove(self.engine(), &c.ns, &self.ddl_commit(ops))?;
        }
        // The views go as mongod's `system.views` goes: one `drop` of it (no view event).
        let ops = vec![ddl_op(db, None, doc! {"drop": "system.views"})?];
        self.catalog.remove_views(db, &self.ddl_commit(ops))?;
        if had {
            let ops = vec![ddl_op(db, None, doc! {"dropDatabase": 1})?];
            self.ddl_commit(ops)(crate::catalog::CatalogChange::none(&self.catalog))?;
        }
        Ok(())
    }

    /// A command's `collectionUUID`: `ns` must be the collection with that UUID, else
    /// `CollectionUUIDMismatch` (361) naming the collection of `ns`'s database that has it,
    /// if any (mongod's `actualCollection`; a view or a missing namespace mismatches).
    pub fn check_collection_uuid(&self, ns: &Namespace, uuid: bson::Uuid) -> DbResult<()> {
        if self.catalog.get(ns).is_some_and(|c| c.uuid == uuid) {
            return Ok(());
        }
        let actual = self
            .catalog
            .list(Some(&ns.db))
            .into_iter()
            .find(|c| c.uuid == uuid)
            .map_or(Bson::Null, |c| Bson::String(c.ns.coll.clone()));
        Err(MongoError::new(
            ErrorCode::CollectionUUIDMismatch,
            "Collection UUID does not match that specified",
        )
        .with_info(doc! {
            "db": ns.db.clone(),
            "collectionUUID": uuid,
            "expectedCollection": ns.coll.clone(),
            "actualCollection": actual,
        }))
    }

    /// `listCollections` entries of `db`.
    pub fn list_collections(&self, db: &str) -> Vec<Document> {
        let mut out: Vec<Document> = self
            .catalog
            .list(Some(db))
            .iter()
            .map(|c| {
                let mut listing = doc! {
                    "name": c.ns.coll.clone(),
                    "type": "collection",
                    "options": c.options.clone(),
                    "info": { "readOnly": false, "uuid": c.uuid },
                };
                // A clustered collection has no separate `_id` index to list (mongod).
                if !c.options.contains_key("clusteredIndex") {
                    listing.insert("idIndex", id_index_spec());
                }
                listing
            })
            .collect();
        out.extend(
            self.catalog
                .list_views(Some(db))
                .iter()
                .map(|v| self.timeseries_listing(v).unwrap_or_else(|| v.listing())),
        );
        out.sort_by(|a, b| a.get_str("name").ok().cmp(&b.get_str("name").ok()));
        out
    }

    /// Databases with at least one collection: (name, bytes on disk).
    pub fn list_databases(&self) -> Vec<(String, u64)> {
        let mut out: Vec<(String, u64)> = Vec::new();
        for c in self.catalog.list(None) {
            let bytes = collection_disk_bytes(&c);
            match out.last_mut() {
                Some((name, total)) if *name == c.ns.db => *total += bytes,
                _ => out.push((c.ns.db.clone(), bytes)),
            }
        }
        out
    }

    /// `renameCollection`: moves `from` to `to` (any database) without moving data.
    pub fn rename_collection(
        &self,
        from: &Namespace,
        to: &Namespace,
        drop_target: bool,
    ) -> DbResult<()> {
        let _ddl = self.ddl_lock();
        self.refuse_view(from)?;
        if self.catalog.view(to).is_some() {
            return Err(MongoError::new(
                ErrorCode::NamespaceExists,
                "target namespace exists",
            ));
        }
        if self.catalog.get(from).is_none() {
            return Err(MongoError::new(
                ErrorCode::NamespaceNotFound,
                "source namespace does not exist",
            ));
        }
        if from == to {
            return Err(MongoError::new(
                ErrorCode::IllegalOperation,
                "Can't rename a collection to itself",
            ));
        }
        if self.catalog.get(to).is_some() && !drop_target {
            return Err(MongoError::new(
                ErrorCode::NamespaceExists,
                "target namespace exists",
            ));
        }
        self.kill_user_txns(KILLED_BY_DDL);
        if self.catalog.get(to).is_some() {
            self.cursors.kill_namespace(&to.to_string());
        }
        self.cursors.kill_namespace(&from.to_string());
        self.move_logged(from, to)
    }

    /// Moves `from` over `to` (dropping the collection there, if any) with its
    /// `renameCollection` entry in one commit: one entry even when a target is dropped, as
    /// mongod writes it (`dropTarget: <the dropped collection's UUID>`, absent when there
    /// was none). The caller holds the DDL lock and has checked `from` exists.
    fn move_logged(&self, from: &Namespace, to: &Namespace) -> DbResult<()> {
        let ui = self.catalog.get(from).map(|c| c.uuid);
        let mut command = doc! {
            "renameCollection": from.to_string(),
            "to": to.to_string(),
            "stayTemp": false,
        };
        if let Some(target) = self.catalog.get(to) {
            command.insert("dropTarget", target.uuid);
        }
        let ops = vec![ddl_op(&from.db, ui, command)?];
        self.catalog
            .replace(self.engine(), from, to, &self.ddl_commit(ops))?;
        Ok(())
    }

    /// `listIndexes`: `_id_` first, then the secondary indexes in creation order, builds in
    /// progress included (mongod lists them; `Index::is_ready` tells them apart).
    pub fn list_indexes(&self, ns: &Namespace) -> DbResult<Vec<Document>> {
        if self.timeseries(ns).is_some() {
            return self.list_timeseries_indexes(ns);
        }
        let coll = self.existing(ns)?;
        let mut id = crate::clustered::listed_index(&coll.options).unwrap_or_else(id_index_spec);
        if let Some(c) = coll.options.get("collation") {
            id.insert("collation", c.clone());
        }
        let mut out = vec![id];
        // Builds in progress too, as mongod 7.0 lists every index in its catalog.
        out.extend(coll.indexes.iter().map(|i| i.spec.clone()));
        Ok(out)
    }

    /// `createIndexes`: publishes each index not yet present under the DDL lock, then fills
    /// them without it, so other work goes on during the scan (index_build.rs, B1-B4). An
    /// identical index another build is filling is waited for.
    pub fn create_indexes(
        &self,
        ns: &Namespace,
        specs: &[Document],
    ) -> DbResult<CreateIndexesResult> {
        if self.timeseries(ns).is_some() {
            return self.create_timeseries_indexes(ns, specs);
        }
        let (published, coll_id, before, created_collection) = loop {
            match self.publish_indexes(ns, specs)? {
                Publish::Wait => std::thread::sleep(std::time::Duration::from_millis(10)),
                Publish::Done(p) => break p,
            }
        };
        for (i, index) in published.iter().enumerate() {
            if let Err(e) = self.hot_build(ns, coll_id, index) {
                // The builds not yet run go too: the command failed as a whole.
                let _ddl = self.ddl_lock();
                for rest in &published[i + 1..] {
                    self.abandon_index(ns, rest)?;
                }
                return Err(e);
            }
        }
        // Each index's `createIndexes` entry committed with its record made ready (B4).
        let coll = self.catalog.get(ns);
        let after = coll.map_or(before, |c| c.ready_indexes().count() + 1);
        Ok(CreateIndexesResult {
            before,
            after,
            created_collection,
            note: published.is_empty().then_some("all indexes already exist"),
        })
    }

    /// The first step of `createIndexes`, under the DDL lock: each new index gets its tree
    /// and goes into the catalog unready (B1), so writes maintain it from here on.
    pub(crate) fn publish_indexes(&self, ns: &Namespace, specs: &[Document]) -> DbResult<Publish> {
        // An index named with no collation takes the collection's default, as in mongod.
        let default = self
            .catalog
            .get(ns)
            .and_then(|c| c.options.get("collation").cloned());
        let specs: Vec<Document> = specs
            .iter()
            .map(|s| match &default {
                Some(c) if !s.contains_key("collation") => {
                    let mut s = s.clone();
                    s.insert("collation", c.clone());
                    s
                }
                _ => s.clone(),
            })
            .collect();
        let parsed = specs.iter().map(parse_spec).collect::<DbResult<Vec<_>>>()?;
        let _ddl = self.ddl_lock();
        self.refuse_view(ns)?;
        let created_collection = self.catalog.get(ns).is_none();
        if created_collection {
            // Its own `create` entry first, as mongod logs an implicit create.
            self.create_logged(ns, Document::new())?;
        }
        let mut coll = self
            .catalog
            .get(ns)
            .ok_or_else(|| MongoError::new(ErrorCode::InternalError, "collection vanished"))?;
        let before = coll.ready_indexes().count() + 1;
        let mut published = Vec::new();
        for (stored, def) in parsed {
            if def.name == "_id_" {
                continue;
            }
            match existing(&coll, &stored)? {
                Existing::Ready => continue,
                Existing::Building => return Ok(Publish::Wait),
                Existing::No => {}
            }
            if published.is_empty() && !created_collection {
                // A live transaction's writes would miss the index, and its later reads
                // could be planned onto an index filled after its snapshot.
                self.kill_user_txns(KILLED_BY_DDL);
            }
            let (id, tree) =
                self.catalog
                    .create_index_tree(self.engine(), &coll, &stored, def.clustering)?;
            let index = Arc::new(Index::new_empty(id, stored, def, tree, false));
            let mut indexes = coll.indexes.clone();
            indexes.push(index.clone());
            // Published unready: no entry until the build makes it ready (B4).
            coll = self
                .catalog
                .commit(coll.with_indexes(indexes), &self.ddl_commit(Vec::new()))?
                .0;
            published.push(index);
        }
        Ok(Publish::Done((
            published,
            coll.id,
            before,
            created_collection,
        )))
    }

    /// Takes a published index that will not be built out of the catalog, if still there.
    fn abandon_index(&self, ns: &Namespace, index: &Arc<Index>) -> DbResult<()> {
        match self.catalog.get(ns) {
            Some(coll) if coll.indexes.iter().any(|i| Arc::ptr_eq(i, index)) => {
                self.remove_index(&coll, index)
            }
            _ => Ok(()),
        }
    }

    /// `dropIndexes`: by name, key pattern, list of names, or `"*"` (all but `_id_`).
    /// Returns the index count before.
    pub fn drop_indexes(&self, ns: &Namespace, which: &Bson) -> DbResult<usize> {
        if self.timeseries(ns).is_some() {
            return self.drop_timeseries_indexes(ns, which);
        }
        let _ddl = self.ddl_lock();
        self.refuse_view(ns)?;
        let coll = self.catalog.get(ns).ok_or_else(|| {
            MongoError::new(ErrorCode::NamespaceNotFound, format!("ns not found {ns}"))
        })?;
        let before = coll.indexes.len() + 1;
        let names: Vec<String> = match which {
            Bson::String(s) if s == "*" => {
                coll.indexes.iter().map(|i| i.def.name.clone()).collect()
            }
            Bson::String(s) => vec![s.clone()],
            Bson::Array(a) => a
                .iter()
                .map(|v| {
                    v.as_str().map(str::to_owned).ok_or_else(|| {
                        MongoError::new(
                            ErrorCode::TypeMismatch,
                            "dropIndexes index names must be strings",
                        )
                    })
                })
                .collect::<DbResult<_>>()?,
            Bson::Document(pattern) => {
                let found = coll
                    .indexes
                    .iter()
                    .find(|i| i.def.key_pattern() == *pattern);
                match found {
                    Some(i) => vec![i.def.name.clone()],
                    None if *pattern == doc! {"_id": 1} => vec!["_id_".to_owned()],
                    None => {
                        return Err(MongoError::new(
                            ErrorCode::IndexNotFound,
                            format!("can't find index with key: {pattern}"),
                        ))
                    }
                }
            }
            _ => {
                return Err(MongoError::new(
                    ErrorCode::TypeMismatch,
                    "dropIndexes 'index' must be a string, object or array",
                ))
            }
        };
        for n in &names {
            if n == "_id_" {
                return Err(MongoError::new(
                    ErrorCode::InvalidOptions,
                    "cannot drop _id index",
                ));
            }
            if coll.index(n).is_none() {
                return Err(MongoError::new(
                    ErrorCode::IndexNotFound,
                    format!("index not found with name [{n}]"),
                ));
            }
        }
        self.kill_user_txns(KILLED_BY_DDL);
        let (keep, gone): (Vec<Arc<Index>>, Vec<Arc<Index>>) = coll
            .indexes
            .iter()
            .cloned()
            .partition(|i| !names.contains(&i.def.name));
        self.cursors.kill_namespace(&ns.to_string());
        let ops = gone
            .iter()
            .map(|i| {
                let command =
                    doc! {"dropIndexes": &ns.coll, "index": &i.def.name, "o2": i.spec.clone()};
                ddl_op(&ns.db, Some(coll.uuid), command)
            })
            .collect::<DbResult<Vec<_>>>()?;
        self.catalog
            .commit(coll.with_indexes(keep), &self.ddl_commit(ops))?;
        for i in gone {
            self.engine()
                .drop_tree(i.tree.name())
                .map_err(engine_error)?;
        }
        Ok(before)
    }
}

impl Database {
    /// Creates `ns` with `options` and the indexes `specs` (a `$out`'s temporary collection,
    /// shaped like its target) in one commit, with the entries mongod writes for it: `create`
    /// with `temp: true`, then one `createIndexes` per index. The collection is new, so no
    /// session transaction is aborted.
    pub(crate) fn create_with_indexes(
        &self,
        ns: &Namespace,
        options: Document,
        specs: &[Document],
    ) -> DbResult<()> {
        let parsed = specs.iter().map(parse_spec).collect::<DbResult<Vec<_>>>()?;
        let _ddl = self.ddl_lock();
        if self.catalog.get(ns).is_some() {
            return Err(MongoError::new(
                ErrorCode::NamespaceExists,
                format!("Collection {ns} already exists."),
            ));
        }
        let mut coll = self.catalog.prepare(self.engine(), ns, options)?;
        let create = create_command(&ns.coll, doc! {"temp": true}, &coll.options);
        let mut ops = vec![ddl_op(&ns.db, Some(coll.uuid), create)?];
        for (stored, def) in parsed {
            if def.name == "_id_" {
                continue;
            }
            let (id, tree) =
                self.catalog
                    .create_index_tree(self.engine(), &coll, &stored, def.clustering)?;
            let mut command = doc! {"createIndexes": &ns.coll};
            command.extend(stored.clone());
            ops.push(ddl_op(&ns.db, Some(coll.uuid), command)?);
            coll.indexes
                .push(Arc::new(Index::new_empty(id, stored, def, tree, true)));
        }
        self.catalog.commit(coll, &self.ddl_commit(ops))?;
        Ok(())
    }

    /// Renames `from` over `to` in one catalog write if `to` is still as `expected` (absent,
    /// or the same collection with the same options and indexes), else `CommandFailed` as
    /// mongod's `$out` reports a target changed while it ran.
    pub(crate) fn replace_collection(
        &self,
        from: &Namespace,
        to: &Namespace,
        expected: Option<&Collection>,
    ) -> DbResult<()> {
        let _ddl = self.ddl_lock();
        let current = self.catalog.get(to);
        let unchanged = match (expected, current.as_deref()) {
            (None, None) => true,
            (Some(a), Some(b)) => {
                a.uuid == b.uuid && a.options == b.options && index_specs(a) == index_specs(b)
            }
            _ => false,
        };
        if !unchanged {
            return Err(MongoError::new(
                ErrorCode::CommandFailed,
                format!(
                    "collection or indexes of target collection {to} changed during processing"
                ),
            ));
        }
        if current.is_some() {
            self.kill_user_txns(KILLED_BY_DDL);
            self.cursors.kill_namespace(&to.to_string());
        }
        self.cursors.kill_namespace(&from.to_string());
        self.move_logged(from, to)
    }
}

/// A collection's (built) index specifications, `_id_` excluded, in creation order.
pub(crate) fn index_specs(coll: &Collection) -> Vec<Document> {
    coll.ready_indexes().map(|i| i.spec.clone()).collect()
}

/// True if an index with the same name and spec exists; an error if one conflicts.
/// Whether `stored` is already an index of `coll`, ready or being built; a different
/// index under its name or its key is mongod's conflict error.
pub(crate) fn existing(coll: &Collection, stored: &Document) -> DbResult<Existing> {
    let name = stored.get_str("name").unwrap_or_default();
    let key = stored.get_document("key").ok();
    for i in &coll.indexes {
        let same_key = Some(&i.def.key_pattern()) == key.map(normalize).as_ref();
        if i.def.name == name {
            if i.spec == *stored {
                return Ok(if i.is_ready() {
                    Existing::Ready
                } else {
                    Existing::Building
                });
            }
            let code = if same_key {
                ErrorCode::IndexOptionsConflict
            } else {
                ErrorCode::IndexKeySpecsConflict
            };
            return Err(MongoError::new(code, format!(
                "An existing index has the same name as the requested index. When index names are not specified, they are auto generated and can cause conflicts. Please refer to our documentation. Requested index: {stored}, existing index: {}", i.spec)));
        }
        if same_key
            && i.spec.get("unique") == stored.get("unique")
            && i.spec.get("sparse") == stored.get("sparse")
            && i.spec.get("partialFilterExpression") == stored.get("partialFilterExpression")
        {
            return Err(MongoError::new(
                ErrorCode::IndexOptionsConflict,
                format!("Index already exists with a different name: {}", i.def.name),
            ));
        }
    }
    Ok(Existing::No)
}

/// What `existing` found.
pub(crate) enum Existing {
    No,
    Ready,
    Building,
}

/// What the publishing step of `createIndexes` did.
pub(crate) enum Publish {
    /// An identical index is being built by another command: wait for it, then look again.
    Wait,
    /// The published (unready) indexes, the collection's id, the index count before, and
    /// whether the collection was created.
    Done((Vec<Arc<Index>>, u64, usize, bool)),
}

fn normalize(key: &Document) -> Document {
    key.iter()
        .map(|(k, v)| {
            let n = match v {
                Bson::Int32(n) => f64::from(*n),
                Bson::Int64(n) => *n as f64,
                Bson::Double(n) => *n,
                _ => 1.0,
            };
            (k.clone(), Bson::Int32(if n < 0.0 { -1 } else { 1 }))
        })
        .collect()
}

/// Bytes of a collection's tree files.
pub fn collection_disk_bytes(c: &Collection) -> u64 {
    c.docs.file_bytes()
        + c.size.file_bytes()
        + c.indexes.iter().map(|i| i.tree.file_bytes()).sum::<u64>()
}
