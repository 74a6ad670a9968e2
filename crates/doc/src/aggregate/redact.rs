//! `$redact: <expression>`: each document judged level by level, as mongod 7.0's
//! `DocumentSourceRedact` does. The expression is evaluated with `$$CURRENT` (which field
//! paths read) bound to the document, and must give `$$KEEP` (the level stays as it is, all
//! below included), `$$PRUNE` (the level goes: a top-level document is dropped, a
//! sub-document field removed, an array element left out) or `$$DESCEND` (the level stays
//! and every sub-document below it is judged the same way: fields holding documents, and
//! documents inside arrays, at any array nesting). `$$ROOT` stays the whole input document.
//! Anything else is 17053. The three answers are defined only here
//! (`Variables::with_redact_answers`).
//!
//! It never looks at a value that is not a document or an array: scalars always stay.

use bson::raw::{RawArrayBuf, RawBson, RawBsonRef, RawDocument, RawDocumentBuf};

use super::simple::render;
use crate::matcher::expr::{Expr, Value};
use crate::matcher::path::bson_error;
use crate::variables::Variables;
use crate::{ErrorCode, MongoError};

/// A parsed `$redact`.
#[derive(Debug, Clone)]
pub(crate) struct Redact {
    expr: Expr,
}

/// What the expression said about one level.
enum Verdict {
    Keep,
    Prune,
    Descend,
}

pub(crate) fn parse(spec: RawBsonRef<'_>, vars: &Variables) -> Result<Redact, MongoError> {
    let expr = Expr::parse_with_current(spec, &vars.with_redact_answers())?;
    Ok(Redact { expr })
}

impl Redact {
    /// The redacted document, or `None` when its top level is pruned.
    pub(crate) fn apply(&self, doc: &RawDocument) -> Result<Option<RawDocumentBuf>, MongoError> {
        self.redact_document(doc, doc)
    }

    fn redact_document(
        &self,
        root: &RawDocument,
        current: &RawDocument,
    ) -> Result<Option<RawDocumentBuf>, MongoError> {
        match self.verdict(root, current)? {
            Verdict::Keep => Ok(Some(current.to_raw_document_buf())),
            Verdict::Prune => Ok(None),
            Verdict::Descend => {
                let mut out = RawDocumentBuf::new();
                for field in current {
                    let (name, value) = field.map_err(bson_error)?;
                    if let Some(kept) = self.redact_value(root, value)? {
                        out.append(name, kept);
                    }
                }
                Ok(Some(out))
            }
        }
    }

    /// A field's value after redaction; `None` for a pruned sub-document.
    fn redact_value(
        &self,
        root: &RawDocument,
        value: RawBsonRef<'_>,
    ) -> Result<Option<RawBson>, MongoError> {
        match value {
            RawBsonRef::Document(d) => Ok(self.redact_document(root, d)?.map(RawBson::Document)),
            RawBsonRef::Array(items) => {
                let mut out = RawArrayBuf::new();
                for item in items {
                    if let Some(kept) = self.redact_value(root, item.map_err(bson_error)?)? {
                        out.push(kept);
                    }
                }
                Ok(Some(RawBson::Array(out)))
            }
            other => Ok(Some(other.to_raw_bson())),
        }
    }

    fn verdict(&self, root: &RawDocument, current: &RawDocument) -> Result<Verdict, MongoError> {
        let value = self.expr.evaluate_at(root, current)?;
        let text = match value.as_raw() {
            Some(RawBsonRef::String(s)) => Some(s),
            Some(RawBsonRef::Symbol(s)) => Some(s),
            _ => None,
        };
        match text {
            Some("keep") => Ok(Verdict::Keep),
            Some("prune") => Ok(Verdict::Prune),
            Some("descend") => Ok(Verdict::Descend),
            _ => Err(MongoError::new(
                ErrorCode::Location17053,
                format!(
                    "$redact's expression should not return anything aside from the variables \
                     $$KEEP, $$DESCEND, and $$PRUNE, but returned {}",
                    shown(&value)
                ),
            )),
        }
    }
}

/// A result as mongod's `Value::toString` shows it (`MISSING` for no value).
fn shown(value: &Value<'_>) -> String {
    value.as_raw().map_or_else(|| "MISSING".to_owned(), render)
}

#[cfg(test)]
mod tests {
    use crate::aggregate::{NoCollections, Pipeline};
    use bson::{bson, doc, Bson, Document};

    fn redact(expr: Bson, input: Vec<Document>) -> Result<Vec<Document>, crate::MongoError> {
        Pipeline::parse(&[doc! {"$redact": expr}])?.run_documents(&input, &NoCollections)
    }

    /// The naive reading of `$redact` for a level filter: keep a (sub-)document when its
    /// `level` is at most `max` (or absent), recursing through documents and arrays.
    fn naive(value: &Bson, max: i32) -> Option<Bson> {
        match value {
            Bson::Document(d) => {
                if d.get_i32("level").is_ok_and(|l| l > max) {
                    return None;
                }
                let mut out = Document::new();
                for (k, v) in d {
                    if let Some(v) = naive(v, max) {
                        out.insert(k.clone(), v);
                    }
                }
                Some(Bson::Document(out))
            }
            Bson::Array(items) => Some(Bson::Array(
                items.iter().filter_map(|i| naive(i, max)).collect(),
            )),
            other => Some(other.clone()),
        }
    }

    #[test]
    fn levels_are_judged_through_documents_and_arrays() {
        let input = vec![
            doc! {"_id": 1, "level": 1, "a": {"level": 3, "x": 1}, "b": {"level": 2, "c": {"level": 5}},
            "arr": [{"level": 1}, {"level": 4}, [{"level": 9}, {"y": 1}], 7]},
            doc! {"_id": 2, "level": 4, "a": 1},
            doc! {"_id": 3, "n": [[[{"level": 3}]]]},
        ];
        let expr =
            bson!({"$cond": [{"$gt": [{"$ifNull": ["$level", 0]}, 2]}, "$$PRUNE", "$$DESCEND"]});
        let got = redact(expr, input.clone()).expect("runs");
        let want: Vec<Document> = input
            .iter()
            .filter_map(|d| naive(&Bson::Document(d.clone()), 2))
            .filter_map(|b| b.as_document().cloned())
            .collect();
        assert_eq!(got, want);
        assert_eq!(got.len(), 2);
    }

    #[test]
    fn keep_stops_descending_and_root_is_the_whole_document() {
        let input = vec![doc! {"tag": "k", "sub": {"tag": "p", "deep": {"tag": "p"}}}];
        let keep_all = redact(bson!("$$KEEP"), input.clone()).expect("runs");
        assert_eq!(keep_all, input);
        // $$ROOT.tag is "k" at every level, so nothing is pruned.
        let by_root = bson!({"$cond": [{"$eq": ["$$ROOT.tag", "k"]}, "$$DESCEND", "$$PRUNE"]});
        assert_eq!(redact(by_root, input.clone()).expect("runs"), input);
        // $$CURRENT.tag is the level's own.
        let by_current =
            bson!({"$cond": [{"$eq": ["$$CURRENT.tag", "p"]}, "$$PRUNE", "$$DESCEND"]});
        assert_eq!(
            redact(by_current, input).expect("runs"),
            vec![doc! {"tag": "k"}]
        );
        assert!(redact(bson!("$$PRUNE"), vec![doc! {"a": 1}])
            .expect("runs")
            .is_empty());
    }

    #[test]
    fn other_results_and_undefined_answers_fail() {
        let e = redact(bson!("keeps"), vec![doc! {"a": 1}]).unwrap_err();
        assert_eq!(e.code.code(), 17053);
        assert!(
            e.message.ends_with("but returned \"keeps\""),
            "{}",
            e.message
        );
        let e = redact(bson!("$missing"), vec![doc! {"a": 1}]).unwrap_err();
        assert_eq!(e.code.code(), 17053);
        // The answers are plain strings: a literal one is accepted as mongod accepts it.
        assert_eq!(
            redact(bson!("keep"), vec![doc! {"a": 1}]).expect("runs"),
            vec![doc! {"a": 1}]
        );
        // Outside $redact the answers are undefined.
        let e = Pipeline::parse(&[doc! {"$project": {"x": "$$KEEP"}}]).unwrap_err();
        assert_eq!(e.code.code(), 17276);
    }
}
