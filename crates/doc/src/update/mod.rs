//! MongoDB 7.0 update semantics as pure functions over owned `bson::Document`s: parse an update
//! once (`UpdateSpec::parse`, or `UpdateSpec::parse_as_sent` from the raw bytes a client sent),
//! then apply it to each matched document (`UpdateSpec::apply`, `UpdateSpec::apply_raw`), or
//! build an upsert's document (`upsert_seed`, `UpdateSpec::build_upsert`,
//! `UpdateSpec::build_upsert_raw`). A replacement is held raw, as sent. Operator documents,
//! replacement documents, pipeline-style updates (the reshaping stages only) and their `_id`
//! rules are supported. It knows no storage and no wire protocol, and never matches a query
//! against a document (the caller says which array index the query matched).
//!
//! Files: `parse.rs` (classification, validation, conflicts, order), `path.rs` (dotted paths),
//! `field.rs` and `array.rs` (the operators), `positional.rs` (`$`, `$[]`, `$[id]`,
//! `arrayFilters`), `predicate.rs` (element conditions for `$pull` and filters: simple ones
//! evaluated directly, the rest by the crate's `Matcher`),
//! `replacement.rs` (replacements kept and applied raw), `repeated.rs` (an operator document
//! read as sent when a name repeats in it), `stored_repeats.rs` (a stored document that
//! repeats a name, decoded and written back with its repeats), `pipeline.rs`, `upsert.rs`, `render.rs` (values in
//! messages), `blind.rs` (what an update applied without reading the document first may
//! write), `raw_apply.rs` (top-level field operators and replacements applied to raw BSON
//! without decoding the document).

mod array;
mod blind;
mod field;
mod parse;
mod path;
mod pipeline;
mod positional;
mod predicate;
mod raw_apply;
pub(crate) mod render;
mod repeated;
mod replacement;
mod stored_repeats;
mod upsert;

use std::collections::BTreeSet;

use bson::{Bson, DateTime, Document, RawBsonRef, RawDocumentBuf, Timestamp};

pub use path::{Component, FieldPath, MAX_ARRAY_PADDING};
pub use predicate::{ElementPredicate, EqualsValue, QueryPredicate, SimplePredicate};
pub use raw_apply::RawApply;
pub(crate) use repeated::first_repeat;
pub use repeated::operators_as_sent;
pub use stored_repeats::StoredDocument;
pub use upsert::upsert_seed;

use crate::variables::Variables;
use crate::{ErrorCode, MongoError};
use array::ArrayOp;
use field::FieldOp;
use path::Lookup;
use positional::ArrayFilters;

/// What an update needs to know about the write it is part of.
#[derive(Debug, Clone, PartialEq)]
pub struct ApplyContext {
    /// True when applying to an upsert's new document (`$setOnInsert` runs only then).
    pub is_insert: bool,
    /// The array index the query matched, for the positional `$`.
    pub matched_index: Option<usize>,
    /// The time `$currentDate` stores as a date.
    pub now: DateTime,
    /// The time `$currentDate` stores as a timestamp.
    pub now_timestamp: Timestamp,
}

impl ApplyContext {
    /// An update of an existing document at `now`; the timestamp is `now`'s second with
    /// increment 1 (callers with a logical clock set `now_timestamp` themselves).
    pub fn new(now: DateTime) -> ApplyContext {
        let secs = now.timestamp_millis().div_euclid(1000);
        ApplyContext {
            is_insert: false,
            matched_index: None,
            now,
            now_timestamp: Timestamp {
                time: u32::try_from(secs).unwrap_or(0),
                increment: 1,
            },
        }
    }

    /// The same context, applied to an upsert's new document when `is_insert`.
    pub fn with_insert(mut self, is_insert: bool) -> ApplyContext {
        self.is_insert = is_insert;
        self
    }

    /// The same context, with the array index the query matched.
    pub fn with_matched_index(mut self, index: usize) -> ApplyContext {
        self.matched_index = Some(index);
        self
    }
}

/// The result of applying an update to one document.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ApplyOutcome {
    /// Whether the document's bytes changed (what `nModified` counts).
    pub modified: bool,
}

/// A parsed, validated update.
#[derive(Debug)]
pub struct UpdateSpec {
    form: Form,
    array_filters: ArrayFilters,
    /// The operator document as given (operator form only): what a read-free update sends
    /// down the tree and parses again where it is applied (`blind.rs`).
    source: Option<Document>,
}

#[derive(Debug)]
enum Form {
    /// The replacement document as sent (a name may repeat in it).
    Replacement(RawDocumentBuf),
    Operators(Vec<Operation>),
    Pipeline(pipeline::UpdatePipeline),
}

/// One operator on one path, in application order.
#[derive(Debug)]
struct Operation {
    path: FieldPath,
    action: Action,
}

#[derive(Debug)]
enum Action {
    Field(FieldOp),
    Array(ArrayOp),
    /// `$rename` from `Operation::path` to this path.
    Rename(FieldPath),
}

/// What an operator does at one concrete path.
#[derive(Debug, Clone, PartialEq)]
enum Change {
    Keep,
    /// Store the value; a byte-identical value is a no-op.
    Write(Bson),
    /// Store the value and count the document as modified even if the bytes are the same
    /// (the server does so for `$currentDate` and for `$push` with `$sort`).
    Rewrite(Bson),
    Remove,
}

/// Where an operator acts, for its error messages and the `_id` rule.
struct Site<'a> {
    parts: &'a [String],
    doc_id: Option<&'a Bson>,
    ctx: &'a ApplyContext,
    /// The document had an `_id` before the update, so it may not change.
    id_is_immutable: bool,
}

impl Site<'_> {
    fn field_name(&self) -> &str {
        self.parts.last().map_or("", String::as_str)
    }

    fn dotted(&self) -> String {
        path::dotted(self.parts)
    }
}

impl UpdateSpec {
    /// Parse an update document (operators or replacement) and its `arrayFilters`.
    pub fn parse(
        update: &Document,
        array_filters: Option<&[Document]>,
    ) -> Result<UpdateSpec, MongoError> {
        let (form, array_filters) = parse::parse(update, array_filters)?;
        let source = matches!(form, Form::Operators(_)).then(|| update.clone());
        Ok(UpdateSpec {
            form,
            array_filters,
            source,
        })
    }

    /// Parse an update given as any BSON value: documents as `parse`, arrays as update
    /// pipelines, anything else is `TypeMismatch`. A pipeline reads no `let` variables.
    pub fn parse_value(
        update: &Bson,
        array_filters: Option<&[Document]>,
    ) -> Result<UpdateSpec, MongoError> {
        UpdateSpec::parse_value_with(update, array_filters, &Variables::new())
    }

    /// `parse_value` for a command whose update pipeline reads `vars` (its `let` variables,
    /// `$$NOW`, `$$CLUSTER_TIME`).
    pub fn parse_value_with(
        update: &Bson,
        array_filters: Option<&[Document]>,
        vars: &Variables,
    ) -> Result<UpdateSpec, MongoError> {
        match update {
            Bson::Document(d) => UpdateSpec::parse(d, array_filters),
            Bson::Array(stages) => Ok(UpdateSpec {
                form: Form::Pipeline(pipeline::parse(stages, array_filters.is_some(), vars)?),
                array_filters: ArrayFilters::default(),
                source: None,
            }),
            other => Err(parse::refuse_non_document(other)),
        }
    }

    /// Parse an update from the bytes the client sent: a replacement kept as sent (a name
    /// given twice stays twice, as mongod stores it), an operator document read as sent
    /// (`operators_as_sent`: an operator given twice applies both, a field given twice is
    /// `ConflictingUpdateOperators`), a pipeline as `parse_value_with` reads it. Decodes
    /// only an operator document or a pipeline, each once.
    pub fn parse_as_sent(
        update: RawBsonRef<'_>,
        array_filters: Option<&[Document]>,
        vars: &Variables,
    ) -> Result<UpdateSpec, MongoError> {
        let RawBsonRef::Document(raw) = update else {
            let value = Bson::try_from(update).map_err(invalid_bson)?;
            return UpdateSpec::parse_value_with(&value, array_filters, vars);
        };
        let first = raw.iter().next().transpose().map_err(invalid_bson)?;
        if first.is_some_and(|(name, _)| name.starts_with('$')) {
            let operators = match operators_as_sent(raw)? {
                Some(merged) => merged,
                None => Document::try_from(raw).map_err(invalid_bson)?,
            };
            return UpdateSpec::parse(&operators, array_filters);
        }
        let filters = ArrayFilters::parse(array_filters.unwrap_or(&[]))?;
        let (form, array_filters) = parse::replacement_form(raw.to_owned(), filters)?;
        Ok(UpdateSpec {
            form,
            array_filters,
            source: None,
        })
    }

    /// True for a replacement-style update.
    pub fn is_replacement(&self) -> bool {
        matches!(self.form, Form::Replacement(_))
    }

    /// Apply the update to `doc` in place. On error `doc` may be partly updated; callers
    /// apply to a copy and discard it on error.
    pub fn apply(
        &self,
        doc: &mut Document,
        ctx: &ApplyContext,
    ) -> Result<ApplyOutcome, MongoError> {
        let modified = match &self.form {
            Form::Replacement(r) => replacement::apply(r, doc)?,
            Form::Operators(ops) => apply_operators(ops, &self.array_filters, doc, ctx)?,
            Form::Pipeline(p) => pipeline::apply(p, doc)?,
        };
        Ok(ApplyOutcome { modified })
    }

    /// The document an upsert inserts when `filter` matched nothing: the filter's equalities
    /// (only its `_id` for a replacement) with the update applied as an insert. The caller adds
    /// a generated `_id` when the result has none.
    pub fn build_upsert(
        &self,
        filter: &Document,
        ctx: &ApplyContext,
    ) -> Result<Document, MongoError> {
        let mut seed = upsert_seed(filter)?;
        if self.is_replacement() {
            let id = seed.remove("_id");
            seed = Document::new();
            if let Some(id) = id {
                seed.insert("_id", id);
            }
        }
        let insert_ctx = ctx.clone().with_insert(true);
        self.apply(&mut seed, &insert_ctx)?;
        Ok(seed)
    }

    /// `build_upsert` as raw BSON, ready to store once its `_id` is settled: a replacement's
    /// document is built from its bytes as sent, never decoded.
    pub fn build_upsert_raw(
        &self,
        filter: &Document,
        ctx: &ApplyContext,
    ) -> Result<RawDocumentBuf, MongoError> {
        if let Form::Replacement(r) = &self.form {
            let seed_id = upsert_seed(filter)?.remove("_id");
            return replacement::upsert_raw(r, seed_id.as_ref());
        }
        RawDocumentBuf::from_document(&self.build_upsert(filter, ctx)?)
            .map_err(|e| MongoError::new(ErrorCode::BadValue, e.to_string()))
    }
}

fn invalid_bson(e: bson::raw::Error) -> MongoError {
    MongoError::new(ErrorCode::InvalidBSON, e.to_string())
}

fn apply_operators(
    ops: &[Operation],
    filters: &ArrayFilters,
    doc: &mut Document,
    ctx: &ApplyContext,
) -> Result<bool, MongoError> {
    let original_id = doc.get("_id").cloned();
    let mut touched = TouchedPaths::default();
    let mut modified = false;
    for op in ops {
        if matches!(op.action, Action::Field(FieldOp::SetOnInsert(_))) && !ctx.is_insert {
            continue;
        }
        for parts in positional::expand(doc, &op.path, ctx, filters)? {
            touched.claim(&parts)?;
            let site = Site {
                parts: &parts,
                doc_id: original_id.as_ref(),
                ctx,
                id_is_immutable: original_id.is_some(),
            };
            modified |= apply_at(doc, &op.action, &site)?;
        }
    }
    Ok(modified)
}

/// Concrete paths already changed by this update: a second change at, above or below one of
/// them is the server's "Update created a conflict" (reachable through `$`, `$[]`, `$[id]`).
#[derive(Default)]
struct TouchedPaths(BTreeSet<Vec<String>>);

impl TouchedPaths {
    fn claim(&mut self, parts: &[String]) -> Result<(), MongoError> {
        let above = (1..=parts.len()).any(|n| self.0.contains(&parts[..n]));
        let below = self
            .0
            .range(parts.to_vec()..)
            .next()
            .is_some_and(|p| p.starts_with(parts));
        if above || below {
            return Err(MongoError::new(
                ErrorCode::ConflictingUpdateOperators,
                format!("Update created a conflict at '{}'", path::dotted(parts)),
            ));
        }
        self.0.insert(parts.to_vec());
        Ok(())
    }
}

impl Action {
    /// Whether the operator creates a missing path.
    fn creates_path(&self) -> bool {
        match self {
            Action::Field(f) => f.creates_path(),
            Action::Array(a) => a.creates_path(),
            Action::Rename(_) => true,
        }
    }

    /// The change at one concrete path (not for `$rename`, which moves values itself).
    fn compute(&self, current: Option<&Bson>, site: &Site<'_>) -> Result<Change, MongoError> {
        match self {
            Action::Field(f) => f.compute(current, site),
            Action::Array(a) => a.compute(current, site),
            Action::Rename(_) => unreachable!("apply_at hands $rename to field::apply_rename"),
        }
    }
}

/// Apply one operator at one concrete path; returns whether the document changed.
fn apply_at(doc: &mut Document, action: &Action, site: &Site<'_>) -> Result<bool, MongoError> {
    let parts = site.parts;
    if let Action::Rename(to) = action {
        let to_parts: Vec<String> = to.literal_parts().into_iter().map(str::to_string).collect();
        return field::apply_rename(doc, parts, &to_parts, site);
    }
    let change = match path::lookup(doc, parts) {
        Lookup::Found(current) => match action.compute(Some(current), site)? {
            Change::Write(v) if same_value(current, &v) => Change::Keep,
            other => other,
        },
        Lookup::Missing => action.compute(None, site)?,
        Lookup::Blocked { depth } => {
            return blocked(doc, parts, depth, action.creates_path(), action)
        }
    };
    if change == Change::Keep {
        return Ok(false);
    }
    if site.id_is_immutable && parts[0] == "_id" {
        return Err(immutable_id(parts));
    }
    match change {
        Change::Write(v) | Change::Rewrite(v) => path::write(doc, parts, v)?,
        Change::Remove => {
            path::remove(doc, parts);
        }
        Change::Keep => {}
    }
    Ok(true)
}

/// A path through a scalar (or through an array by name): creating operators fail as the
/// server's path creation does, `$pop` fails with its own message, the others do nothing.
fn blocked(
    doc: &Document,
    parts: &[String],
    depth: usize,
    op_creates: bool,
    action: &Action,
) -> Result<bool, MongoError> {
    let blocker = match path::lookup(doc, &parts[..depth]) {
        Lookup::Found(v) => v.clone(),
        _ => Bson::Null,
    };
    let name = &parts[depth - 1];
    if op_creates {
        return Err(path::cannot_create(&parts[depth], name, &blocker));
    }
    if let Action::Array(ArrayOp::Pop { .. }) = action {
        return Err(MongoError::new(
            ErrorCode::PathNotViable,
            format!(
                "Cannot use the part ({}) of ({}) to traverse the element ({{{}}})",
                parts[depth],
                path::dotted(parts),
                render::element(name, &blocker)
            ),
        ));
    }
    Ok(false)
}

fn immutable_id(parts: &[String]) -> MongoError {
    MongoError::new(
        ErrorCode::ImmutableField,
        format!(
            "Performing an update on the path '{}' would modify the immutable field '_id'",
            path::dotted(parts)
        ),
    )
}

/// Byte-for-byte equality of two values (type, field order and all), the server's test for a
/// no-op write. Doubles compare by bits, so NaN equals NaN and -0.0 differs from 0.0.
fn same_value(a: &Bson, b: &Bson) -> bool {
    match (a, b) {
        (Bson::Double(x), Bson::Double(y)) => x.to_bits() == y.to_bits(),
        (Bson::Document(x), Bson::Document(y)) => same_document(x, y),
        (Bson::Array(x), Bson::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(p, q)| same_value(p, q))
        }
        _ => a == b,
    }
}

fn same_document(a: &Document, b: &Document) -> bool {
    a.len() == b.len()
        && a.iter()
            .zip(b.iter())
            .all(|((ka, va), (kb, vb))| ka == kb && same_value(va, vb))
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::doc;

    fn ctx() -> ApplyContext {
        ApplyContext::new(DateTime::from_millis(1_700_000_000_000))
    }

    fn apply(update: Document, mut doc: Document) -> (Document, bool) {
        let spec = UpdateSpec::parse(&update, None).expect("valid update");
        let outcome = spec.apply(&mut doc, &ctx()).expect("applies");
        (doc, outcome.modified)
    }

    #[test]
    fn set_same_value_is_unmodified() {
        let (d, m) = apply(doc! {"$set": {"a": 1}}, doc! {"_id": 1, "a": 1});
        assert_eq!(d, doc! {"_id": 1, "a": 1});
        assert!(!m);
        let (_, m) = apply(doc! {"$set": {"a": 1.0}}, doc! {"_id": 1, "a": 1});
        assert!(m, "a different type is a change");
    }

    #[test]
    fn id_is_immutable() {
        let spec = UpdateSpec::parse(&doc! {"$set": {"_id": 2}}, None).expect("valid");
        let e = spec
            .apply(&mut doc! {"_id": 1}, &ctx())
            .expect_err("immutable");
        assert_eq!(e.code, ErrorCode::ImmutableField);
        assert_eq!(
            e.message,
            "Performing an update on the path '_id' would modify the immutable field '_id'"
        );
        let (_, m) = apply(doc! {"$set": {"_id": 1}}, doc! {"_id": 1});
        assert!(!m);
    }

    #[test]
    fn touched_paths_conflict() {
        let mut t = TouchedPaths::default();
        t.claim(&["a".into(), "0".into()]).expect("first");
        assert!(t.claim(&["a".into(), "0".into(), "b".into()]).is_err());
        assert!(t.claim(&["a".into()]).is_err());
        t.claim(&["a".into(), "1".into()]).expect("sibling");
    }

    #[test]
    fn upsert_applies_set_on_insert() {
        let spec = UpdateSpec::parse(&doc! {"$setOnInsert": {"b": 1}, "$set": {"c": 2}}, None)
            .expect("valid");
        let d = spec.build_upsert(&doc! {"a": 5}, &ctx()).expect("upsert");
        assert_eq!(d, doc! {"a": 5, "b": 1, "c": 2});
        let (d, _) = apply(doc! {"$setOnInsert": {"b": 1}}, doc! {"_id": 1});
        assert_eq!(d, doc! {"_id": 1});
    }
}
