//! The stages that write a pipeline's results into a collection, `$out` and `$merge`, as
//! MongoDB 7.0 parses them: `$out` as a collection name or `{db, coll}`; `$merge` with `into`
//! (a name or `{db, coll}`), `on`, `let`, `whenMatched` (`replace`, `keepExisting`, `merge`,
//! `fail` or an update pipeline) and `whenNotMatched` (`insert`, `discard`, `fail`), refusing
//! the mode combinations mongod refuses, each with mongod's code.
//!
//! This file only parses and checks. Writing needs storage, so the executor passes the
//! documents that reach a write stage through unchanged and the database (`shale_db`'s
//! `aggregate_write.rs`) writes them and answers with no documents. Where a write stage may
//! stand (last, not inside `$lookup` or `$facet`) is checked in `mod.rs`.

use bson::raw::{RawBsonRef, RawDocument};
use bson::{Bson, Document};

use super::execute::raw_to_bson;
use super::simple::type_name;
use crate::matcher::expr::Expr;
use crate::matcher::path::bson_error;
use crate::update::UpdateSpec;
use crate::variables::Variables;
use crate::{ErrorCode, MongoError};

/// Where a write stage writes: a collection of the aggregation's database (`db` unset) or of
/// another one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WriteTarget {
    /// The database, when not the aggregation's own.
    pub db: Option<String>,
    /// The collection.
    pub coll: String,
}

/// A parsed `$out` or `$merge`.
#[derive(Debug, Clone)]
pub enum WriteStage {
    /// `$out`: the target collection is replaced by the results.
    Out(WriteTarget),
    /// `$merge`: the results are merged into the target.
    Merge(Box<MergeSpec>),
}

/// `$merge`'s `whenMatched`.
#[derive(Debug, Clone, PartialEq)]
pub enum WhenMatched {
    /// The result replaces the matched document.
    Replace,
    /// The matched document is kept as it is.
    KeepExisting,
    /// The result's fields are merged into the matched document.
    Merge,
    /// The stage fails.
    Fail,
    /// An update pipeline applied to the matched document (its stages as given).
    Pipeline(Vec<Document>),
}

/// `$merge`'s `whenNotMatched`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WhenNotMatched {
    /// The result is inserted.
    Insert,
    /// The result is dropped.
    Discard,
    /// The stage fails.
    Fail,
}

/// A parsed `$merge`.
#[derive(Debug, Clone)]
pub struct MergeSpec {
    /// The target collection.
    pub into: WriteTarget,
    /// The fields that identify a target document: `["_id"]` unless `on` is given.
    pub on: Vec<String>,
    /// What happens to a result that matches a target document.
    pub when_matched: WhenMatched,
    /// What happens to a result that matches none.
    pub when_not_matched: WhenNotMatched,
    /// The `let` variables, evaluated per source document (`{new: "$$ROOT"}` by default).
    lets: Vec<(String, Expr)>,
    /// The command's variables the `let` expressions and the pipeline also read.
    vars: Variables,
}

impl WhenMatched {
    fn name(&self) -> &'static str {
        match self {
            WhenMatched::Replace => "replace",
            WhenMatched::KeepExisting => "keepExisting",
            WhenMatched::Merge => "merge",
            WhenMatched::Fail => "fail",
            WhenMatched::Pipeline(_) => "pipeline",
        }
    }
}

impl WhenNotMatched {
    fn name(self) -> &'static str {
        match self {
            WhenNotMatched::Insert => "insert",
            WhenNotMatched::Discard => "discard",
            WhenNotMatched::Fail => "fail",
        }
    }
}

impl MergeSpec {
    /// The variables the `whenMatched` pipeline reads for one source document: the command's
    /// plus this stage's `let` values computed from `source`.
    pub fn variables_for(&self, source: &RawDocument) -> Result<Variables, MongoError> {
        let mut values = Vec::with_capacity(self.lets.len());
        for (name, expr) in &self.lets {
            let value = expr.evaluate(source)?.as_raw().map(|v| v.to_raw_bson());
            values.push((name.clone(), value));
        }
        Ok(self.vars.with_bindings(values))
    }

    /// The `whenMatched` pipeline as an update for one source document.
    pub fn pipeline_update(&self, source: &RawDocument) -> Result<Option<UpdateSpec>, MongoError> {
        let WhenMatched::Pipeline(stages) = &self.when_matched else {
            return Ok(None);
        };
        let vars = self.variables_for(source)?;
        let stages = Bson::Array(stages.iter().cloned().map(Bson::Document).collect());
        UpdateSpec::parse_value_with(&stages, None, &vars).map(Some)
    }
}

fn unknown_field(stage: &str, field: &str) -> MongoError {
    MongoError::new(
        ErrorCode::Location40415,
        format!("BSON field '{stage}.{field}' is an unknown field."),
    )
}

fn wrong_type(stage: &str, field: &str, value: RawBsonRef<'_>, expected: &str) -> MongoError {
    MongoError::new(
        ErrorCode::TypeMismatch,
        format!(
            "BSON field '{stage}.{field}' is the wrong type '{}', expected type '{expected}'",
            type_name(value)
        ),
    )
}

fn missing(stage: &str, field: &str) -> MongoError {
    MongoError::new(
        ErrorCode::Location40414,
        format!("BSON field '{stage}.{field}' is missing but a required field"),
    )
}

/// `{db, coll}` as both stages take it.
fn parse_target(stage: &str, d: &RawDocument) -> Result<WriteTarget, MongoError> {
    let (mut db, mut coll) = (None, None);
    for item in d.iter() {
        let (key, value) = item.map_err(bson_error)?;
        let slot = match key {
            "db" => &mut db,
            "coll" => &mut coll,
            "timeseries" if stage == "$out" => {
                return Err(MongoError::new(
                    ErrorCode::NotImplemented,
                    "$out to a time-series collection is not supported by shale",
                ))
            }
            other => return Err(unknown_field(stage, other)),
        };
        match value {
            RawBsonRef::String(s) => *slot = Some(s.to_owned()),
            other => return Err(wrong_type(stage, key, other, "string")),
        }
    }
    let coll = coll.ok_or_else(|| missing(stage, "coll"))?;
    if stage == "$out" && db.is_none() {
        return Err(missing(stage, "db"));
    }
    Ok(WriteTarget { db, coll })
}

/// `$out: "coll"` or `$out: {db, coll}`.
pub(crate) fn parse_out(spec: RawBsonRef<'_>) -> Result<WriteStage, MongoError> {
    match spec {
        RawBsonRef::String(s) => Ok(WriteStage::Out(WriteTarget {
            db: None,
            coll: s.to_owned(),
        })),
        RawBsonRef::Document(d) => parse_target("$out", d).map(WriteStage::Out),
        other => Err(MongoError::new(
            ErrorCode::Location16990,
            format!(
                "$out only supports a string or object argument, but found {}",
                type_name(other)
            ),
        )),
    }
}

/// `$merge: "coll"` or `$merge: {into, on, let, whenMatched, whenNotMatched}`.
pub(crate) fn parse_merge(
    spec: RawBsonRef<'_>,
    vars: &Variables,
) -> Result<WriteStage, MongoError> {
    let d = match spec {
        RawBsonRef::String(s) => {
            return Ok(WriteStage::Merge(Box::new(MergeSpec {
                into: WriteTarget {
                    db: None,
                    coll: s.to_owned(),
                },
                on: vec!["_id".to_owned()],
                when_matched: WhenMatched::Merge,
                when_not_matched: WhenNotMatched::Insert,
                lets: default_lets(vars)?,
                vars: vars.clone(),
            })))
        }
        RawBsonRef::Document(d) => d,
        other => {
            return Err(MongoError::new(
                ErrorCode::Location51182,
                format!(
                    "$merge only supports a string or object argument, not {}",
                    type_name(other)
                ),
            ))
        }
    };
    let mut into = None;
    let mut on = None;
    let mut lets = None;
    let mut when_matched = WhenMatched::Merge;
    let mut when_not_matched = WhenNotMatched::Insert;
    for item in d.iter() {
        let (key, value) = item.map_err(bson_error)?;
        match key {
            "into" => into = Some(parse_into(value)?),
            "on" => on = Some(parse_on(value)?),
            "let" => match value {
                RawBsonRef::Document(l) => lets = Some(l),
                other => return Err(wrong_type("$merge", "let", other, "object")),
            },
            "whenMatched" => when_matched = parse_when_matched(value)?,
            "whenNotMatched" => when_not_matched = parse_when_not_matched(value)?,
            other => return Err(unknown_field("$merge", other)),
        }
    }
    let into = into.ok_or_else(|| missing("$merge", "into"))?;
    check_modes(&when_matched, when_not_matched)?;
    let lets = match lets {
        Some(l) if !matches!(when_matched, WhenMatched::Pipeline(_)) => {
            let _ = l;
            return Err(MongoError::new(
                ErrorCode::Location51199,
                format!(
                    "Cannot use 'let' variables with 'whenMatched: {}' mode",
                    when_matched.name()
                ),
            ));
        }
        Some(l) => parse_lets(l, vars)?,
        None => default_lets(vars)?,
    };
    let spec = MergeSpec {
        into,
        on: on.unwrap_or_else(|| vec!["_id".to_owned()]),
        when_matched,
        when_not_matched,
        lets,
        vars: vars.clone(),
    };
    // The pipeline is parsed once here so that its errors come at parse time; it is parsed
    // again per document with that document's `let` values.
    if let WhenMatched::Pipeline(stages) = &spec.when_matched {
        let placeholders = spec.lets.iter().map(|(n, _)| (n.clone(), None)).collect();
        let stages = Bson::Array(stages.iter().cloned().map(Bson::Document).collect());
        UpdateSpec::parse_value_with(&stages, None, &vars.with_bindings(placeholders))?;
    }
    Ok(WriteStage::Merge(Box::new(spec)))
}

fn default_lets(vars: &Variables) -> Result<Vec<(String, Expr)>, MongoError> {
    Ok(vec![(
        "new".to_owned(),
        Expr::parse_in(RawBsonRef::String("$$ROOT"), vars)?,
    )])
}

fn parse_lets(spec: &RawDocument, vars: &Variables) -> Result<Vec<(String, Expr)>, MongoError> {
    let mut out = Vec::new();
    for item in spec.iter() {
        let (name, value) = item.map_err(bson_error)?;
        crate::variables::check_let_name(name)?;
        out.push((name.to_owned(), Expr::parse_in(value, vars)?));
    }
    Ok(out)
}

fn parse_into(value: RawBsonRef<'_>) -> Result<WriteTarget, MongoError> {
    match value {
        RawBsonRef::String(s) => Ok(WriteTarget {
            db: None,
            coll: s.to_owned(),
        }),
        RawBsonRef::Document(d) => parse_target("$merge", d),
        other => Err(MongoError::new(
            ErrorCode::Location51178,
            format!(
                "$merge 'into' field  must be either a string or an object, but found {}",
                type_name(other)
            ),
        )),
    }
}

fn parse_on(value: RawBsonRef<'_>) -> Result<Vec<String>, MongoError> {
    let fields = match value {
        RawBsonRef::String(s) => vec![s.to_owned()],
        RawBsonRef::Array(a) => {
            let mut fields = Vec::new();
            for item in a {
                match item.map_err(bson_error)? {
                    RawBsonRef::String(s) => fields.push(s.to_owned()),
                    other => {
                        return Err(MongoError::new(
                            ErrorCode::Location51134,
                            format!(
                                "$merge 'on' array elements must be strings, but found {}",
                                type_name(other)
                            ),
                        ))
                    }
                }
            }
            if fields.is_empty() {
                return Err(MongoError::new(
                    ErrorCode::Location51187,
                    "If explicitly specifying $merge 'on', must include at least one field",
                ));
            }
            fields
        }
        other => {
            return Err(MongoError::new(
                ErrorCode::Location51186,
                format!(
                    "$merge 'on' field  must be either a string or an array of strings, but \
                     found {}",
                    type_name(other)
                ),
            ))
        }
    };
    let mut seen: Vec<&String> = Vec::new();
    for f in &fields {
        if seen.contains(&f) {
            return Err(MongoError::new(
                ErrorCode::Location31465,
                format!("Found a duplicate field '{f}'"),
            ));
        }
        seen.push(f);
    }
    Ok(fields)
}

fn parse_when_matched(value: RawBsonRef<'_>) -> Result<WhenMatched, MongoError> {
    match value {
        RawBsonRef::String("replace") => Ok(WhenMatched::Replace),
        RawBsonRef::String("keepExisting") => Ok(WhenMatched::KeepExisting),
        RawBsonRef::String("merge") => Ok(WhenMatched::Merge),
        RawBsonRef::String("fail") => Ok(WhenMatched::Fail),
        RawBsonRef::String(other) => Err(bad_enum("whenMatched", other)),
        RawBsonRef::Array(a) => {
            let mut stages = Vec::new();
            for item in a {
                match raw_to_bson(item.map_err(bson_error)?)? {
                    Bson::Document(d) => stages.push(d),
                    _ => {
                        return Err(MongoError::new(
                            ErrorCode::TypeMismatch,
                            "Each element of the 'pipeline' array must be an object",
                        ))
                    }
                }
            }
            Ok(WhenMatched::Pipeline(stages))
        }
        other => Err(MongoError::new(
            ErrorCode::Location51191,
            format!(
                "$merge 'whenMatched' field  must be either a string or an array, but found {}",
                type_name(other)
            ),
        )),
    }
}

fn parse_when_not_matched(value: RawBsonRef<'_>) -> Result<WhenNotMatched, MongoError> {
    match value {
        RawBsonRef::String("insert") => Ok(WhenNotMatched::Insert),
        RawBsonRef::String("discard") => Ok(WhenNotMatched::Discard),
        RawBsonRef::String("fail") => Ok(WhenNotMatched::Fail),
        RawBsonRef::String(other) => Err(bad_enum("whenNotMatched", other)),
        other => Err(wrong_type("$merge", "whenNotMatched", other, "string")),
    }
}

fn bad_enum(field: &str, value: &str) -> MongoError {
    MongoError::new(
        ErrorCode::BadValue,
        format!("Enumeration value '{value}' for field '$merge.{field}' is not a valid value."),
    )
}

/// The combinations mongod runs; any other is 51181.
fn check_modes(matched: &WhenMatched, not_matched: WhenNotMatched) -> Result<(), MongoError> {
    use WhenMatched as M;
    use WhenNotMatched as N;
    let supported = match matched {
        M::Replace | M::Merge | M::Pipeline(_) => true,
        M::KeepExisting | M::Fail => not_matched == N::Insert,
    };
    if supported {
        return Ok(());
    }
    Err(MongoError::new(
        ErrorCode::Location51181,
        format!(
            "Combination of $merge modes 'whenMatched: {}' and 'whenNotMatched: {}' is not \
             supported",
            matched.name(),
            not_matched.name()
        ),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::{doc, RawDocumentBuf};

    fn merge(spec: Bson) -> Result<MergeSpec, MongoError> {
        let d = RawDocumentBuf::from_document(&doc! { "s": spec }).expect("encodes");
        let value = d.get("s").expect("reads").expect("present");
        match parse_merge(value, &Variables::new())? {
            WriteStage::Merge(m) => Ok(*m),
            WriteStage::Out(_) => unreachable!("a $merge parses as $merge"),
        }
    }

    fn code(r: Result<MergeSpec, MongoError>) -> i32 {
        r.expect_err("refused").code.code()
    }

    #[test]
    fn merge_defaults_and_forms() {
        let m = merge(Bson::String("t".into())).expect("valid");
        assert_eq!(m.on, vec!["_id"]);
        assert_eq!(m.when_matched, WhenMatched::Merge);
        assert_eq!(m.when_not_matched, WhenNotMatched::Insert);
        let m = merge(Bson::Document(doc! {
            "into": {"db": "d", "coll": "c"}, "on": ["a", "b"],
            "whenMatched": "replace", "whenNotMatched": "discard"
        }))
        .expect("valid");
        assert_eq!(m.into.db.as_deref(), Some("d"));
        assert_eq!(m.on, vec!["a", "b"]);
    }

    #[test]
    fn merge_refusals_carry_mongods_codes() {
        assert_eq!(code(merge(Bson::Int32(1))), 51182);
        assert_eq!(code(merge(Bson::Document(doc! {}))), 40414);
        assert_eq!(code(merge(Bson::Document(doc! {"into": 1}))), 51178);
        assert_eq!(
            code(merge(Bson::Document(doc! {"into": "t", "on": 1}))),
            51186
        );
        assert_eq!(
            code(merge(Bson::Document(doc! {"into": "t", "on": []}))),
            51187
        );
        assert_eq!(
            code(merge(Bson::Document(doc! {"into": "t", "on": [1]}))),
            51134
        );
        assert_eq!(
            code(merge(Bson::Document(doc! {"into": "t", "x": 1}))),
            40415
        );
        assert_eq!(
            code(merge(Bson::Document(doc! {"into": "t", "whenMatched": 1}))),
            51191
        );
        assert_eq!(
            code(merge(Bson::Document(
                doc! {"into": "t", "whenMatched": "nope"}
            ))),
            2
        );
        assert_eq!(
            code(merge(Bson::Document(
                doc! {"into": "t", "whenMatched": "keepExisting", "whenNotMatched": "fail"}
            ))),
            51181
        );
        assert_eq!(
            code(merge(Bson::Document(
                doc! {"into": "t", "whenMatched": "fail", "whenNotMatched": "discard"}
            ))),
            51181
        );
        assert_eq!(
            code(merge(Bson::Document(
                doc! {"into": "t", "whenMatched": "merge", "let": {"a": 1}}
            ))),
            51199
        );
        // An undefined variable in the pipeline is found at parse time.
        assert_eq!(
            code(merge(Bson::Document(
                doc! {"into": "t", "whenMatched": [{"$set": {"x": "$$nope"}}]}
            ))),
            17276
        );
    }

    #[test]
    fn pipeline_reads_new_and_let_values_per_document() {
        let m = merge(Bson::Document(doc! {
            "into": "t",
            "let": {"inc": "$n"},
            "whenMatched": [{"$set": {"total": {"$add": ["$total", "$$inc"]}}}],
        }))
        .expect("valid");
        let source = RawDocumentBuf::from_document(&doc! {"_id": 1, "n": 5}).expect("encodes");
        let update = m
            .pipeline_update(&source)
            .expect("parses")
            .expect("pipeline");
        let mut target = doc! {"_id": 1, "total": 10};
        update
            .apply(
                &mut target,
                &crate::ApplyContext::new(bson::DateTime::now()),
            )
            .expect("applies");
        assert_eq!(target, doc! {"_id": 1, "total": 15});
        // Without `let`, `$$new` is the source document.
        let m = merge(Bson::Document(doc! {
            "into": "t", "whenMatched": [{"$set": {"got": "$$new.n"}}],
        }))
        .expect("valid");
        let update = m
            .pipeline_update(&source)
            .expect("parses")
            .expect("pipeline");
        let mut target = doc! {"_id": 1};
        update
            .apply(
                &mut target,
                &crate::ApplyContext::new(bson::DateTime::now()),
            )
            .expect("applies");
        assert_eq!(target, doc! {"_id": 1, "got": 5});
    }

    #[test]
    fn out_forms() {
        let d = RawDocumentBuf::from_document(
            &doc! {"a": "x", "b": {"db": "d", "coll": "c"}, "c": 1, "e": {"coll": 1}},
        )
        .expect("encodes");
        let get = |k: &str| d.get(k).expect("reads").expect("present");
        assert!(matches!(
            parse_out(get("a")),
            Ok(WriteStage::Out(WriteTarget { db: None, .. }))
        ));
        assert!(matches!(
            parse_out(get("b")),
            Ok(WriteStage::Out(WriteTarget { db: Some(_), .. }))
        ));
        assert_eq!(parse_out(get("c")).expect_err("refused").code.code(), 16990);
        assert_eq!(parse_out(get("e")).expect_err("refused").code.code(), 14);
    }
}
