//! `$group`: parsing (15947 not an object, 15955 no `_id`, 40235/40236 output names, the
//! accumulator codes in `accumulator`) and grouping under the memory budget.
//!
//! The group key is `_id` evaluated against each document (any expression: a path, null, a
//! document of expressions); a missing key groups and prints as null. Keys are equal when
//! MongoDB's order says so (`1`, `1.0` and `NumberLong(1)` are one group), found through their
//! `keystring` encoding; the first key seen is the one printed. Groups come out in the order
//! they were first seen (MongoDB leaves the order unspecified); no input gives no output.
//! Under the command's collation, keys equal by it are one group (strings are hashed by
//! their collation keys).

use std::collections::HashMap;
use std::sync::Arc;

use bson::raw::{RawBsonRef, RawDocumentBuf};
use bson::{Bson, Document};

use super::accumulator::{self, Accumulator, State};
use super::execute::{
    approximate_size, blocking, to_raw, value_to_bson, Ctx, DocStream, MemoryBudget,
};
use crate::collation::value::collate;
use crate::collation::Collation;
use crate::keystring::encode_value_exact;
use crate::matcher::expr::Expr;
use crate::matcher::path::bson_error;
use crate::variables::Variables;
use crate::{ErrorCode, MongoError};

/// A parsed `$group` specification.
#[derive(Debug, Clone)]
pub(crate) struct GroupSpec {
    id: Expr,
    fields: Vec<(String, Accumulator)>,
    /// The command's collation: keys that are equal under it are one group, and the
    /// accumulators compare by it.
    collation: Option<Arc<Collation>>,
}

fn error(code: ErrorCode, message: impl Into<String>) -> MongoError {
    MongoError::new(code, message)
}

pub(crate) fn parse(spec: RawBsonRef<'_>, vars: &Variables) -> Result<GroupSpec, MongoError> {
    let RawBsonRef::Document(d) = spec else {
        return Err(error(
            ErrorCode::Location15947,
            "a group's fields must be specified in an object",
        ));
    };
    let mut id = None;
    let mut fields = Vec::new();
    for item in d.iter() {
        let (name, value) = item.map_err(bson_error)?;
        if name == "_id" {
            id = Some(Expr::parse_in(value, vars)?);
            continue;
        }
        fields.push((name.to_owned(), parse_output_field(name, value, vars)?));
    }
    let id = id.ok_or_else(|| {
        error(
            ErrorCode::Location15955,
            "a group specification must include an _id",
        )
    })?;
    Ok(GroupSpec {
        id,
        fields,
        collation: vars.collation().cloned(),
    })
}

/// One output field of `$group` (or `$bucketAuto`'s `output`): its name checked (40235,
/// 40236), then its accumulator.
pub(crate) fn parse_output_field(
    name: &str,
    value: RawBsonRef<'_>,
    vars: &Variables,
) -> Result<Accumulator, MongoError> {
    if name.contains('.') {
        return Err(error(
            ErrorCode::Location40235,
            format!("The field name '{name}' cannot contain '.'"),
        ));
    }
    if name.starts_with('$') {
        return Err(error(
            ErrorCode::Location40236,
            format!("The field name '{name}' cannot be an operator name"),
        ));
    }
    accumulator::parse(name, value, vars)
}

impl GroupSpec {
    /// `{_id: <id>, <field>: {$sum: 1}}`, as `$sortByCount` groups.
    pub(crate) fn counting(id: Expr, field: &str, vars: &Variables) -> GroupSpec {
        GroupSpec {
            id,
            fields: vec![(field.to_owned(), Accumulator::sum_of_one())],
            collation: vars.collation().cloned(),
        }
    }
}

/// One group: its printed key and one state per output field.
struct Group {
    id: Bson,
    states: Vec<State>,
}

/// The groups seen so far, in first-seen order.
struct Groups<'s> {
    spec: &'s GroupSpec,
    index: HashMap<Vec<u8>, usize>,
    groups: Vec<Group>,
    budget: MemoryBudget,
}

impl<'s> Groups<'s> {
    fn add(&mut self, doc: &RawDocumentBuf) -> Result<(), MongoError> {
        let id = value_to_bson(&self.spec.id.evaluate(doc)?)?.unwrap_or(Bson::Null);
        let mut key = Vec::new();
        encode_value_exact(&collate(self.spec.collation.as_deref(), &id), &mut key);
        let position = match self.index.get(&key) {
            Some(p) => *p,
            None => self.open(key, id)?,
        };
        let group = &mut self.groups[position];
        for ((_, acc), state) in self.spec.fields.iter().zip(&mut group.states) {
            let value = value_to_bson(&acc.arg.evaluate(doc)?)?;
            let held = state.add_collated(value, self.spec.collation.as_deref())?;
            self.budget.charge(held)?;
        }
        Ok(())
    }

    fn open(&mut self, key: Vec<u8>, id: Bson) -> Result<usize, MongoError> {
        const STATE_BYTES: usize = 64;
        self.budget
            .charge(key.len() + approximate_size(&id) + STATE_BYTES * self.spec.fields.len())?;
        let states = self
            .spec
            .fields
            .iter()
            .map(|(_, acc)| State::new(acc.op))
            .collect();
        self.groups.push(Group { id, states });
        let position = self.groups.len() - 1;
        self.index.insert(key, position);
        Ok(position)
    }

    fn finish(self) -> Result<Vec<RawDocumentBuf>, MongoError> {
        let spec = self.spec;
        self.groups
            .into_iter()
            .map(|group| {
                let mut out = Document::new();
                out.insert("_id", group.id);
                for ((name, _), state) in spec.fields.iter().zip(group.states) {
                    out.insert(name.as_str(), state.finish());
                }
                to_raw(&out)
            })
            .collect()
    }
}

/// Group the whole input.
pub(crate) fn run<'a>(spec: &'a GroupSpec, input: DocStream<'a>, ctx: Ctx<'a>) -> DocStream<'a> {
    blocking(input, move |input| {
        let mut groups = Groups {
            spec,
            index: HashMap::new(),
            groups: Vec::new(),
            budget: MemoryBudget::new("$group", ctx.options),
        };
        for doc in input {
            groups.add(&doc?)?;
        }
        groups.finish()
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::aggregate::{NoCollections, Pipeline, RunOptions};
    use bson::doc;

    fn group(spec: Document, input: Vec<Document>) -> Result<Vec<Document>, MongoError> {
        Pipeline::parse(&[doc! {"$group": spec}])?.run_documents(&input, &NoCollections)
    }

    #[test]
    fn parse_errors() {
        let code = |spec: Bson| {
            Pipeline::parse(&[doc! {"$group": spec}])
                .unwrap_err()
                .code
                .code()
        };
        assert_eq!(code(Bson::Int32(1)), 15947);
        assert_eq!(code(bson::bson!({"n": {"$sum": 1}})), 15955);
        assert_eq!(code(bson::bson!({"_id": null, "a.b": {"$sum": 1}})), 40235);
        assert_eq!(code(bson::bson!({"_id": null, "$a": {"$sum": 1}})), 40236);
        assert_eq!(code(bson::bson!({"_id": null, "a": 1})), 40234);
        assert_eq!(
            code(bson::bson!({"_id": null, "a": {"$sum": 1, "$max": 1}})),
            40238
        );
        assert_eq!(code(bson::bson!({"_id": null, "a": {"$foo": 1}})), 15952);
        assert_eq!(
            code(bson::bson!({"_id": null, "a": {"$sum": [1, 2]}})),
            40237
        );
        assert_eq!(code(bson::bson!({"_id": null, "a": {"$count": 1}})), 14);
        assert_eq!(
            code(
                bson::bson!({"_id": null, "a": {"$median": {"input": "$x", "method": "approximate"}}})
            ),
            238
        );
    }

    #[test]
    fn keys_compare_by_value_and_missing_is_null() {
        let input = vec![
            doc! {"k": 1, "v": 1},
            doc! {"k": 1.0, "v": 2},
            doc! {"k": null, "v": 3},
            doc! {"v": 4},
            doc! {"k": {"a": 1_i64}, "v": 5},
            doc! {"k": {"a": 1}, "v": 6},
        ];
        let out = group(doc! {"_id": "$k", "t": {"$sum": "$v"}}, input).expect("groups");
        assert_eq!(
            out,
            vec![
                doc! {"_id": 1, "t": 3},
                doc! {"_id": null, "t": 7},
                doc! {"_id": {"a": 1_i64}, "t": 11},
            ]
        );
        assert!(group(doc! {"_id": null, "n": {"$count": {}}}, vec![])
            .expect("groups")
            .is_empty());
    }

    #[test]
    fn memory_limit_is_enforced() {
        let pipeline = Pipeline::parse(&[doc! {"$group": {"_id": "$k", "all": {"$push": "$s"}}}])
            .expect("parses");
        let input: Vec<_> = (0..100)
            .map(|i| {
                RawDocumentBuf::from_document(&doc! {"k": i % 3, "s": "x".repeat(100)})
                    .map_err(|e| MongoError::new(ErrorCode::BadValue, e.to_string()))
            })
            .collect();
        let options = RunOptions {
            memory_limit_bytes: 4096,
            allow_disk_use: false,
        };
        let e = pipeline
            .run_from(0, input, &NoCollections, options)
            .collect::<Result<Vec<_>, _>>()
            .unwrap_err();
        assert_eq!(e.code, ErrorCode::QueryExceededMemoryLimitNoDiskUseAllowed);
    }
}
