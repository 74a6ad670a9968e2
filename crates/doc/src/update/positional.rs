//! Positional updates: parsing `arrayFilters` (one identifier per filter, MongoDB's identifier
//! rules, conditions through `ElementPredicate`), checking that every `$[id]` has a filter and
//! every filter is used, and expanding a path with `$` (the index the query matched), `$[]`
//! (every element) and `$[id]` (the elements its filter selects) into the concrete paths it
//! names in one document. It never changes a document.

use bson::{Bson, Document};

use super::path::{self, Component, FieldPath, Lookup};
use super::predicate::{
    needs_matcher, simple_or_query, ElementPredicate, QueryPredicate, SimplePredicate,
};
use super::{render, ApplyContext};
use crate::{ErrorCode, MongoError};

/// The parsed `arrayFilters` of one update, by identifier.
#[derive(Debug, Default)]
pub struct ArrayFilters {
    filters: Vec<(String, Box<dyn ElementPredicate>)>,
}

impl ArrayFilters {
    /// Parse the `arrayFilters` option.
    pub fn parse(raw: &[Document]) -> Result<ArrayFilters, MongoError> {
        let mut filters: Vec<(String, Box<dyn ElementPredicate>)> = Vec::with_capacity(raw.len());
        for filter in raw {
            let (id, predicate) = parse_filter(filter)?;
            if filters.iter().any(|(seen, _)| *seen == id) {
                return Err(MongoError::new(
                    ErrorCode::FailedToParse,
                    format!("Found multiple array filters with the same top-level field name {id}"),
                ));
            }
            filters.push((id, predicate));
        }
        Ok(ArrayFilters { filters })
    }

    pub fn get(&self, id: &str) -> Option<&dyn ElementPredicate> {
        self.filters
            .iter()
            .find(|(name, _)| name == id)
            .map(|(_, p)| p.as_ref())
    }

    /// Identifiers in the order the filters were given.
    pub fn ids(&self) -> impl Iterator<Item = &str> {
        self.filters.iter().map(|(id, _)| id.as_str())
    }
}

fn parse_filter(filter: &Document) -> Result<(String, Box<dyn ElementPredicate>), MongoError> {
    let id = filter_identifier(filter)?;
    check_identifier(&id)?;
    let simple =
        simple_fields(filter).and_then(|fields| SimplePredicate::on_fields(&fields, false));
    let predicate = simple_or_query(simple, || QueryPredicate::named(filter, &id))?;
    Ok((id, predicate))
}

/// The one identifier a filter's top-level field names (and those inside `$and`, `$or`,
/// `$nor`) start with.
fn filter_identifier(filter: &Document) -> Result<String, MongoError> {
    let mut ids = Vec::new();
    collect_identifiers(filter, &mut ids)?;
    let Some(first) = ids.first() else {
        return Err(MongoError::new(
            ErrorCode::FailedToParse,
            "Cannot use an expression without a top-level field name in arrayFilters",
        ));
    };
    if let Some(other) = ids.iter().find(|id| *id != first) {
        return Err(MongoError::new(
            ErrorCode::FailedToParse,
            format!(
                "Error parsing array filter :: caused by :: Expected a single top-level field \
                 name, found '{first}' and '{other}'"
            ),
        ));
    }
    Ok(first.clone())
}

fn collect_identifiers(filter: &Document, out: &mut Vec<String>) -> Result<(), MongoError> {
    for (key, value) in filter {
        match key.as_str() {
            "$and" | "$or" | "$nor" => {
                for clause in value.as_array().into_iter().flatten() {
                    if let Bson::Document(d) = clause {
                        collect_identifiers(d, out)?;
                    }
                }
            }
            k if k.starts_with('$') => {
                return Err(MongoError::new(
                    ErrorCode::FailedToParse,
                    format!(
                        "Error parsing array filter :: caused by :: {k} is not allowed in an \
                         array filter without a top-level field name"
                    ),
                ))
            }
            k => out.push(k.split('.').next().unwrap_or(k).to_string()),
        }
    }
    Ok(())
}

/// The filter's conditions as paths below the element, when it has no logical operators.
fn simple_fields(filter: &Document) -> Result<Vec<(Vec<String>, &Bson)>, MongoError> {
    let mut fields = Vec::with_capacity(filter.len());
    for (key, condition) in filter {
        if key.starts_with('$') {
            return Err(needs_matcher(&format!("The array filter operator {key}")));
        }
        let below = key.split('.').skip(1).map(str::to_string).collect();
        fields.push((below, condition));
    }
    Ok(fields)
}

/// Identifiers start with a lowercase ASCII letter and contain only ASCII letters and digits.
fn check_identifier(id: &str) -> Result<(), MongoError> {
    let mut chars = id.chars();
    let first_ok = chars.next().is_some_and(|c| c.is_ascii_lowercase());
    if first_ok && chars.all(|c| c.is_ascii_alphanumeric()) {
        return Ok(());
    }
    Err(MongoError::new(
        ErrorCode::BadValue,
        format!(
            "Error parsing array filter :: caused by :: The top-level field name must be an \
             alphanumeric string beginning with a lowercase letter, found '{id}'"
        ),
    ))
}

/// Check every `$[id]` in `paths` against `filters`, then that every filter was used.
pub fn check_identifiers(
    paths: &[&FieldPath],
    filters: &ArrayFilters,
    update: &Document,
) -> Result<(), MongoError> {
    let mut used: Vec<&str> = Vec::new();
    for p in paths {
        for component in p.components() {
            if let Component::Filtered(id) = component {
                if filters.get(id).is_none() {
                    return Err(MongoError::new(
                        ErrorCode::BadValue,
                        format!(
                            "No array filter found for identifier '{id}' in path '{}'",
                            p.dotted()
                        ),
                    ));
                }
                used.push(id);
            }
        }
    }
    match filters.ids().find(|id| !used.contains(id)) {
        Some(unused) => Err(MongoError::new(
            ErrorCode::FailedToParse,
            format!(
                "The array filter for identifier '{unused}' was not used in the update {}",
                render::document(update)
            ),
        )),
        None => Ok(()),
    }
}

/// The concrete paths `target` names in `doc`.
pub fn expand(
    doc: &Document,
    target: &FieldPath,
    ctx: &ApplyContext,
    filters: &ArrayFilters,
) -> Result<Vec<Vec<String>>, MongoError> {
    let mut out = Vec::new();
    if !target.is_dynamic() {
        let parts = target
            .literal_parts()
            .into_iter()
            .map(str::to_string)
            .collect();
        out.push(parts);
        return Ok(out);
    }
    let walker = Walker { doc, ctx, filters };
    walker.expand_from(target.components(), Vec::new(), &mut out)?;
    Ok(out)
}

struct Walker<'a> {
    doc: &'a Document,
    ctx: &'a ApplyContext,
    filters: &'a ArrayFilters,
}

impl Walker<'_> {
    fn expand_from(
        &self,
        components: &[Component],
        mut prefix: Vec<String>,
        out: &mut Vec<Vec<String>>,
    ) -> Result<(), MongoError> {
        let Some((first, rest)) = components.split_first() else {
            out.push(prefix);
            return Ok(());
        };
        match first {
            Component::Field(name) => {
                prefix.push(name.clone());
                self.expand_from(rest, prefix, out)
            }
            Component::Positional => {
                let idx = self.ctx.matched_index.ok_or_else(|| {
                    MongoError::new(
                        ErrorCode::BadValue,
                        "The positional operator did not find the match needed from the query.",
                    )
                })?;
                prefix.push(idx.to_string());
                self.expand_from(rest, prefix, out)
            }
            Component::AllElements => self.each_element(None, rest, prefix, out),
            Component::Filtered(id) => {
                #[allow(
                    clippy::expect_used,
                    reason = "identifiers are checked against the array filters at parse time"
                )]
                let filter = self
                    .filters
                    .get(id)
                    .expect("identifiers are checked against the filters at parse time");
                self.each_element(Some(filter), rest, prefix, out)
            }
        }
    }

    fn each_element(
        &self,
        filter: Option<&dyn ElementPredicate>,
        rest: &[Component],
        prefix: Vec<String>,
        out: &mut Vec<Vec<String>>,
    ) -> Result<(), MongoError> {
        let items = match path::lookup(self.doc, &prefix) {
            Lookup::Found(Bson::Array(items)) => items,
            Lookup::Found(other) => {
                let name = prefix.last().map_or("", String::as_str);
                return Err(MongoError::new(
                    ErrorCode::BadValue,
                    format!(
                        "Cannot apply array updates to non-array element {}",
                        render::element(name, other)
                    ),
                ));
            }
            Lookup::Missing | Lookup::Blocked { .. } => {
                return Err(MongoError::new(
                    ErrorCode::BadValue,
                    format!(
                        "The path '{}' must exist in the document in order to apply array updates.",
                        path::dotted(&prefix)
                    ),
                ))
            }
        };
        for (i, item) in items.iter().enumerate() {
            if let Some(f) = filter {
                if !f.matches(item)? {
                    continue;
                }
            }
            let mut next = prefix.clone();
            next.push(i.to_string());
            self.expand_from(rest, next, out)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::{doc, DateTime};

    fn filters(raw: &[Document]) -> ArrayFilters {
        ArrayFilters::parse(raw).expect("valid filters")
    }

    #[test]
    fn filter_identifier_rules() {
        let e = ArrayFilters::parse(&[doc! {"X": 1}]).expect_err("uppercase");
        assert_eq!(e.code, ErrorCode::BadValue);
        let e = ArrayFilters::parse(&[doc! {"i": 1}, doc! {"i": 2}]).expect_err("duplicate");
        assert_eq!(e.code, ErrorCode::FailedToParse);
        let e = ArrayFilters::parse(&[doc! {"i.a": 1, "j.b": 2}]).expect_err("two ids");
        assert_eq!(e.code, ErrorCode::FailedToParse);
        let e = ArrayFilters::parse(&[doc! {}]).expect_err("empty");
        assert_eq!(e.code, ErrorCode::FailedToParse);
    }

    #[test]
    fn expands_filtered_and_all() {
        let f = filters(&[doc! {"x": {"$gte": 2}}]);
        let d = doc! {"a": [1, 2, 3], "b": [{"c": [0, 0]}, {"c": [0]}]};
        let ctx = ApplyContext::new(DateTime::from_millis(0));
        let p = FieldPath::parse("a.$[x]").expect("valid");
        assert_eq!(
            expand(&d, &p, &ctx, &f).expect("array"),
            vec![vec!["a", "1"], vec!["a", "2"]]
        );
        let p = FieldPath::parse("b.$[].c.$[]").expect("valid");
        assert_eq!(expand(&d, &p, &ctx, &f).expect("arrays").len(), 3);
    }

    #[test]
    fn positional_needs_a_match() {
        let ctx = ApplyContext::new(DateTime::from_millis(0));
        let p = FieldPath::parse("a.$").expect("valid");
        let e = expand(&doc! {"a": [1]}, &p, &ctx, &ArrayFilters::default()).expect_err("no match");
        assert_eq!(e.code, ErrorCode::BadValue);
        let ctx = ctx.with_matched_index(0);
        let got = expand(&doc! {"a": [1]}, &p, &ctx, &ArrayFilters::default()).expect("match");
        assert_eq!(got, vec![vec!["a", "0"]]);
    }
}
