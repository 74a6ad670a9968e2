//! `$getField`, `$setField` and `$unsetField` (MongoDB 5.0+): reading and writing one field
//! named exactly as given, dots and a leading `$` included, which field paths and object
//! expressions cannot name. The field name must be a constant string (`"a.b"`,
//! `{$literal: "$a"}`); mongod's parse errors are kept: `$getField` 3041701-3041703 and
//! 5654600-5654602 (and its short form `{$getField: "name"}` on `$$CURRENT`), `$setField`/
//! `$unsetField` 4161100-4161109. At run time a null or missing input gives null (missing
//! for `$getField` of a missing input), a non-document input is missing for `$getField` and
//! 4161105 for `$setField`; a missing value removes the field.

use bson::raw::{RawBson, RawBsonRef, RawDocumentBuf};

use super::element::{type_alias, type_code};
use super::expr::{error, Expr, Value};
use super::expr_vars::Scope;
use super::path::{bson_error, lookup};
use crate::{ErrorCode, MongoError};

/// The codes and messages of one operator's checks on its `field` argument.
struct FieldRules<'n> {
    name: &'n str,
    field_path: ErrorCode,
    non_constant: ErrorCode,
    non_string: ErrorCode,
}

/// A `field` argument: a constant string, never a field path or variable.
fn constant_field(
    raw: RawBsonRef<'_>,
    parsed: &Expr,
    rules: &FieldRules<'_>,
) -> Result<String, MongoError> {
    if let RawBsonRef::String(s) = raw {
        if s.starts_with('$') {
            return Err(error(
                rules.field_path,
                format!(
                    "'{s}' is a field path reference which is not allowed in this context. Did \
                     you mean {{$literal: '{s}'}}?"
                ),
            ));
        }
    }
    let Expr::Literal(value) = parsed else {
        return Err(error(
            rules.non_constant,
            format!(
                "{} requires 'field' to evaluate to a constant, but got a non-constant argument",
                rules.name
            ),
        ));
    };
    match value {
        RawBson::String(s) if s.contains('\0') => Err(error(
            ErrorCode::Location9534700,
            format!(
                "{} 'field' must not contain embedded null characters",
                rules.name
            ),
        )),
        RawBson::String(s) => Ok(s.clone()),
        other => Err(error(
            rules.non_string,
            format!(
                "{} requires 'field' to evaluate to type String, but got {}",
                rules.name,
                type_alias(type_code(other.as_raw_bson_ref()))
            ),
        )),
    }
}

/// `{$getField: {field, input}}`, or `{$getField: <field>}` on `$$CURRENT`.
pub(crate) fn parse_get_field(
    arg: RawBsonRef<'_>,
    scope: &mut Scope<'_>,
) -> Result<Expr, MongoError> {
    let (mut field, mut input) = (None, None);
    match arg {
        RawBsonRef::Document(d) => {
            for item in d.iter() {
                let (key, value) = item.map_err(bson_error)?;
                if field.is_none() && input.is_none() && key.starts_with('$') {
                    // An operator: the whole argument is the field's expression.
                    field = Some((arg, Expr::parse_scoped(arg, scope)?));
                    input = Some(scope.variable("CURRENT")?);
                    break;
                }
                match key {
                    "field" => field = Some((value, Expr::parse_scoped(value, scope)?)),
                    "input" => input = Some(Expr::parse_scoped(value, scope)?),
                    other => {
                        return Err(error(
                            ErrorCode::Location3041701,
                            format!("$getField found an unknown argument: {other}"),
                        ))
                    }
                }
            }
        }
        other => {
            field = Some((other, Expr::parse_scoped(other, scope)?));
            input = Some(scope.variable("CURRENT")?);
        }
    }
    let (raw, field) = field.ok_or_else(|| {
        error(
            ErrorCode::Location3041702,
            "$getField requires 'field' to be specified",
        )
    })?;
    let input = input.ok_or_else(|| {
        error(
            ErrorCode::Location3041703,
            "$getField requires 'input' to be specified",
        )
    })?;
    let rules = FieldRules {
        name: "$getField",
        field_path: ErrorCode::Location5654600,
        non_constant: ErrorCode::Location5654601,
        non_string: ErrorCode::Location5654602,
    };
    Ok(Expr::GetField {
        field: constant_field(raw, &field, &rules)?,
        input: Box::new(input),
    })
}

/// `{$setField: {field, input, value}}` and `{$unsetField: {field, input}}`.
pub(crate) fn parse_set_field(
    name: &str,
    arg: RawBsonRef<'_>,
    scope: &mut Scope<'_>,
) -> Result<Expr, MongoError> {
    let unset = name == "$unsetField";
    let RawBsonRef::Document(d) = arg else {
        return Err(error(
            ErrorCode::Location4161100,
            format!("{name} only supports an object as its argument"),
        ));
    };
    let (mut field, mut input, mut value) = (None, None, None);
    for item in d.iter() {
        let (key, v) = item.map_err(bson_error)?;
        match key {
            "field" => field = Some((v, Expr::parse_scoped(v, scope)?)),
            "input" => input = Some(Expr::parse_scoped(v, scope)?),
            "value" if !unset => value = Some(Expr::parse_scoped(v, scope)?),
            other => {
                return Err(error(
                    ErrorCode::Location4161101,
                    format!("{name} found an unknown argument: {other}"),
                ))
            }
        }
    }
    if unset {
        value = Some(Expr::Remove);
    }
    let missing = |code, what| error(code, format!("{name} requires '{what}' to be specified"));
    let (raw, field) = field.ok_or_else(|| missing(ErrorCode::Location4161102, "field"))?;
    let value = value.ok_or_else(|| missing(ErrorCode::Location4161103, "value"))?;
    let input = input.ok_or_else(|| missing(ErrorCode::Location4161109, "input"))?;
    let rules = FieldRules {
        name,
        field_path: ErrorCode::Location4161108,
        non_constant: ErrorCode::Location4161106,
        non_string: ErrorCode::Location4161107,
    };
    Ok(Expr::SetField {
        field: constant_field(raw, &field, &rules)?,
        input: Box::new(input),
        value: Box::new(value),
    })
}

/// `$getField` of an evaluated input.
pub(crate) fn get_field<'a>(field: &str, input: Value<'a>) -> Result<Value<'a>, MongoError> {
    Ok(match input {
        Value::Missing => Value::Missing,
        Value::Ref(RawBsonRef::Document(d)) => lookup(d, field)?.map_or(Value::Missing, Value::Ref),
        Value::Owned(RawBson::Document(d)) => {
            lookup(&d, field)?.map_or(Value::Missing, |v| Value::Owned(v.to_raw_bson()))
        }
        v if v.is_nullish() => Value::Owned(RawBson::Null),
        _ => Value::Missing,
    })
}

/// `$setField` of an evaluated input; `value` is evaluated only for a document input.
pub(crate) fn set_field<'a>(
    field: &str,
    input: Value<'_>,
    value: impl FnOnce() -> Result<Value<'a>, MongoError>,
) -> Result<Value<'a>, MongoError> {
    if input.is_nullish() {
        return Ok(Value::Owned(RawBson::Null));
    }
    let Some(RawBsonRef::Document(d)) = input.as_raw() else {
        return Err(error(
            ErrorCode::Location4161105,
            "$setField requires 'input' to evaluate to type Object",
        ));
    };
    let value = value()?;
    let mut out = RawDocumentBuf::new();
    let mut placed = false;
    for item in d.iter() {
        let (key, existing) = item.map_err(bson_error)?;
        if key == field && !placed {
            placed = true;
            if let Some(v) = value.as_raw() {
                out.append_ref(key, v);
            }
        } else {
            out.append_ref(key, existing);
        }
    }
    if !placed {
        if let Some(v) = value.as_raw() {
            out.append_ref(field, v);
        }
    }
    Ok(Value::Owned(RawBson::Document(out)))
}

#[cfg(test)]
mod tests {
    use crate::variables::Variables;
    use bson::raw::RawDocumentBuf;
    use bson::{bson, doc, Bson, Document};

    use super::super::expr::Expr;

    fn doc_with_odd_names() -> Document {
        doc! {
            "_id": 0, "x": 1, "a.b": "bar", "$a": 10, "a$b": "foo",
            "$x..$y": {"$a": 1, "$b..$c": 2}, "e": {"$f": 30}, "c": {"d": "x"}, "$v..": null,
        }
    }

    fn run(expression: Bson, document: Document) -> Result<Option<Bson>, i32> {
        let spec = RawDocumentBuf::from_document(&doc! {"v": expression}).expect("encodes");
        let value = spec.get("v").expect("valid").expect("present");
        let e = Expr::parse_in(value, &Variables::new()).map_err(|e| e.code.code())?;
        let d = RawDocumentBuf::from_document(&document).expect("encodes");
        let v = e.evaluate(&d).map_err(|e| e.code.code())?;
        Ok(v.as_raw()
            .map(|r| Bson::try_from(r.to_raw_bson()).expect("converts")))
    }

    fn get(arg: Bson) -> Option<Bson> {
        run(bson!({"$getField": arg}), doc_with_odd_names()).expect("runs")
    }

    fn set(arg: Bson) -> Option<Bson> {
        run(bson!({"$setField": arg}), doc_with_odd_names()).expect("runs")
    }

    fn fails(expression: Bson) -> i32 {
        run(expression, doc_with_odd_names()).expect_err("fails")
    }

    // Expected values from jstests/aggregation/expressions/expression_get_field.js.
    #[test]
    fn get_field_reads_names_paths_cannot() {
        assert_eq!(get(bson!("a.b")), Some(bson!("bar")));
        assert_eq!(get(bson!("a$b")), Some(bson!("foo")));
        assert_eq!(get(bson!("x")), Some(bson!(1)));
        assert_eq!(get(bson!("a")), None);
        assert_eq!(get(bson!({"$const": "$a"})), Some(bson!(10)));
        assert_eq!(
            get(bson!({"$literal": "$x..$y"})),
            Some(bson!({"$a": 1, "$b..$c": 2}))
        );
        assert_eq!(
            get(bson!({"field": {"$const": "$f"}, "input": "$e"})),
            Some(bson!(30))
        );
        assert_eq!(
            get(bson!({"field": "a.b.c", "input": {"a": {"b": {"c": 5}}}})),
            None
        );
        assert_eq!(
            get(bson!({"field": "d", "input": {"$getField": "c"}})),
            Some(bson!("x"))
        );
        assert_eq!(get(bson!({"$const": "$v.."})), Some(Bson::Null));
        assert_eq!(get(bson!({"field": "a", "input": null})), Some(Bson::Null));
        assert_eq!(get(bson!({"field": "a", "input": "$nope"})), None);
        assert_eq!(get(bson!({"field": "a", "input": true})), None);
        assert_eq!(
            get(bson!({"field": {"$const": "$a"}, "input": {"$getField": {"$const": "$x..$y"}}})),
            Some(bson!(1))
        );
    }

    #[test]
    fn get_field_parse_errors() {
        let code = |arg: Bson| fails(bson!({"$getField": arg}));
        assert_eq!(code(bson!({"input": {"a": "b"}})), 3041702);
        assert_eq!(code(bson!({"field": "a"})), 3041703);
        assert_eq!(code(bson!({"field": true, "input": {"a": "b"}})), 5654602);
        assert_eq!(code(bson!({"field": {"a": 1}, "input": {"a": 1}})), 5654601);
        assert_eq!(code(bson!(5)), 5654602);
        assert_eq!(code(bson!({"field": null, "input": {"a": 1}})), 5654602);
        assert_eq!(
            code(bson!({"field": "a", "input": {}, "unknown": true})),
            3041701
        );
        assert_eq!(code(bson!({"field": "$a", "input": {"a": "b"}})), 5654600);
        assert_eq!(
            code(bson!({"field": "$$CURRENT.a", "input": {"a": "b"}})),
            5654600
        );
        assert_eq!(code(bson!({"$add": [2, 3]})), 5654601);
        assert_eq!(
            code(bson!({"field": {"$concat": ["a", "b"]}, "input": {}})),
            5654601
        );
        assert_eq!(code(bson!({"$const": true})), 5654602);
        assert_eq!(code(bson!({"field": {"$const": []}, "input": {}})), 5654602);
    }

    // Expected values from jstests/aggregation/expressions/expression_set_field.js.
    #[test]
    fn set_field_writes_names_paths_cannot() {
        assert_eq!(
            set(bson!({"field": "a", "input": {"a": "b"}, "value": 24})),
            Some(bson!({"a": 24}))
        );
        assert_eq!(
            set(bson!({"field": "a", "input": {"b": "b"}, "value": 24})),
            Some(bson!({"b": "b", "a": 24}))
        );
        assert_eq!(
            set(bson!({"field": "a", "input": {"a": "b"}, "value": "$$REMOVE"})),
            Some(bson!({}))
        );
        assert_eq!(
            set(bson!({"field": "a", "input": null, "value": 0})),
            Some(Bson::Null)
        );
        assert_eq!(
            set(bson!({"field": "a.b.c", "input": {"a": {"b": {"c": 5}}}, "value": 12345})),
            Some(bson!({"a": {"b": {"c": 5}}, "a.b.c": 12345}))
        );
        assert_eq!(
            set(bson!({"field": {"$const": "$b"}, "input": {"$const": {"$b": 5}}, "value": 1})),
            Some(bson!({"$b": 1}))
        );
        // Replaces in place, at the field's position.
        let root = set(bson!({"field": {"$literal": "a.b"}, "input": "$$ROOT", "value": 1}))
            .expect("a document");
        let keys: Vec<String> = root.as_document().expect("doc").keys().cloned().collect();
        assert_eq!(keys[2], "a.b");
        assert_eq!(root.as_document().expect("doc").get("a.b"), Some(&bson!(1)));
        let unset = run(
            bson!({"$unsetField": {"field": {"$literal": "$a"}, "input": "$$ROOT"}}),
            doc_with_odd_names(),
        )
        .expect("runs")
        .expect("a document");
        assert!(!unset.as_document().expect("doc").contains_key("$a"));
        let nested = set(bson!({
            "field": {"$const": "$x..$y"}, "input": {},
            "value": {"$setField": {"field": {"$const": "$a"}, "input": {"$getField": {"$const": "$x..$y"}}, "value": "z"}}
        }));
        assert_eq!(nested, Some(bson!({"$x..$y": {"$a": "z", "$b..$c": 2}})));
    }

    #[test]
    fn set_field_errors() {
        let set_code = |arg: Bson| fails(bson!({"$setField": arg}));
        let unset_code = |arg: Bson| fails(bson!({"$unsetField": arg}));
        assert_eq!(set_code(bson!({"input": {"a": "b"}})), 4161102);
        assert_eq!(unset_code(bson!({})), 4161102);
        assert_eq!(set_code(bson!({"field": "a", "input": {}})), 4161103);
        assert_eq!(unset_code(bson!({"field": "a", "value": "foo"})), 4161101);
        assert_eq!(set_code(bson!({"field": null, "value": 0})), 4161109);
        assert_eq!(unset_code(bson!({"field": "foo"})), 4161109);
        assert_eq!(
            set_code(bson!({"field": true, "input": {}, "value": 24})),
            4161107
        );
        assert_eq!(
            set_code(bson!({"field": {"a": 1}, "input": {}, "value": 24})),
            4161106
        );
        assert_eq!(
            set_code(bson!({"field": "a", "input": true, "value": 24})),
            4161105
        );
        assert_eq!(unset_code(bson!({"field": "a", "input": true})), 4161105);
        assert_eq!(
            set_code(bson!({"field": "$f", "input": {}, "value": 0})),
            4161108
        );
        assert_eq!(set_code(bson!(5)), 4161100);
        assert_eq!(set_code(bson!({"$add": [2, 3]})), 4161101);
        assert_eq!(
            set_code(bson!({"field": "a", "input": {}, "value": 1, "x": 1})),
            4161101
        );
        assert_eq!(
            set_code(bson!({"field": "a\u{0}b", "input": {}, "value": 1})),
            9534700
        );
    }
}
