//! `$fill: {partitionBy? | partitionByFields?, sortBy?, output}` as mongod 7.0 desugars it: the
//! fields filled by `method` (`"locf"`, `"linear"`) become one `$setWindowFields` with
//! `{field: {$locf | $linearFill: "$field"}}` outputs (so its rules and codes apply:
//! `"linear"` needs a one-field `sortBy`, 605001), run first; the fields filled by `value`
//! then become one `$addFields` of `{field: {$ifNull: ["$field", value]}}`. Spec errors are
//! mongod's: 9 not an object, 14 wrong field type, 40414 no `output`, 40415 unknown field,
//! 6050200 an output spec not an object, 6050201 both `method` and `value`, 6050202 an
//! unknown method, 6050203 an empty `output`, 6050204 both partition options.

use super::densify_spec::wrong_type;
use bson::raw::{RawArrayBuf, RawBsonRef, RawDocument, RawDocumentBuf};

use super::execute::{Ctx, DocStream};
use super::set_fields::{self, SetFields};
use super::simple::type_name;
use super::window::{self, SetWindowFields};
use crate::matcher::path::bson_error;
use crate::variables::Variables;
use crate::{ErrorCode, MongoError};

/// A parsed `$fill`: the stages it stands for, in order.
#[derive(Debug, Clone)]
pub(crate) struct Fill {
    window: Option<Box<SetWindowFields>>,
    values: Option<SetFields>,
}

const STAGE: &str = "$fill";

fn fail(code: ErrorCode, message: impl Into<String>) -> MongoError {
    MongoError::new(code, message)
}

fn unknown(field: &str) -> MongoError {
    fail(
        ErrorCode::Location40415,
        format!("BSON field '{field}' is an unknown field."),
    )
}

/// The parts of a `$fill` spec, checked for type.
#[derive(Default)]
struct Parts<'a> {
    sort_by: Option<&'a RawDocument>,
    partition_by: Option<RawBsonRef<'a>>,
    partition_by_fields: Option<Vec<&'a str>>,
    output: Option<&'a RawDocument>,
}

pub(crate) fn parse(spec: RawBsonRef<'_>, vars: &Variables) -> Result<Fill, MongoError> {
    let RawBsonRef::Document(d) = spec else {
        return Err(fail(
            ErrorCode::FailedToParse,
            format!(
                "The {STAGE} stage specification must be an object, found {}",
                type_name(spec)
            ),
        ));
    };
    let parts = read_parts(d)?;
    let output = parts.output.ok_or_else(|| {
        fail(
            ErrorCode::Location40414,
            format!("BSON field '{STAGE}.output' is missing but a required field"),
        )
    })?;
    if output.iter().next().is_none() {
        return Err(fail(
            ErrorCode::Location6050203,
            "The output field in '$fill' must contain an object with at least one element",
        ));
    }
    let (methods, values) = split_output(output)?;
    if parts.partition_by.is_some() && parts.partition_by_fields.is_some() {
        return Err(fail(
            ErrorCode::Location6050204,
            "Maximum one of 'partitionBy' and 'partitionByFields can be specified in '$fill'",
        ));
    }
    let window = match methods.iter().next() {
        None => None,
        Some(_) => {
            let spec = window_spec(&parts, methods)?;
            let parsed = window::parse(RawBsonRef::Document(&spec), vars)?;
            Some(Box::new(parsed))
        }
    };
    let values = match values.iter().next() {
        None => None,
        Some(_) => Some(set_fields::parse(
            "$addFields",
            RawBsonRef::Document(&values),
            vars,
        )?),
    };
    Ok(Fill { window, values })
}

fn read_parts(d: &RawDocument) -> Result<Parts<'_>, MongoError> {
    let mut parts = Parts::default();
    for field in d {
        let (name, value) = field.map_err(bson_error)?;
        let path = format!("{STAGE}.{name}");
        match (name, value) {
            ("sortBy", RawBsonRef::Document(s)) => parts.sort_by = Some(s),
            ("sortBy" | "output", v) if !matches!(v, RawBsonRef::Document(_)) => {
                return Err(wrong_type(&path, v, "object"))
            }
            ("output", RawBsonRef::Document(o)) => parts.output = Some(o),
            ("partitionBy", v @ (RawBsonRef::String(_) | RawBsonRef::Document(_))) => {
                parts.partition_by = Some(v)
            }
            ("partitionBy", v) => return Err(wrong_type(&path, v, "[string, object]")),
            ("partitionByFields", RawBsonRef::Array(items)) => {
                let mut names = Vec::new();
                for item in items {
                    match item.map_err(bson_error)? {
                        RawBsonRef::String(s) => names.push(s),
                        other => return Err(wrong_type(&path, other, "string")),
                    }
                }
                parts.partition_by_fields = Some(names);
            }
            ("partitionByFields", v) => return Err(wrong_type(&path, v, "array")),
            _ => return Err(unknown(&path)),
        }
    }
    Ok(parts)
}

/// The `method` outputs as `$setWindowFields` outputs, and the `value` outputs as an
/// `$addFields` spec.
fn split_output(output: &RawDocument) -> Result<(RawDocumentBuf, RawDocumentBuf), MongoError> {
    let (mut methods, mut values) = (RawDocumentBuf::new(), RawDocumentBuf::new());
    for field in output {
        let (name, spec) = field.map_err(bson_error)?;
        let RawBsonRef::Document(spec) = spec else {
            return Err(fail(
                ErrorCode::Location6050200,
                "Each fill output specification must be an object with exactly one field",
            ));
        };
        let (mut method, mut value) = (None, None);
        for item in spec {
            let (key, v) = item.map_err(bson_error)?;
            match (key, v) {
                ("method", RawBsonRef::String(m)) => method = Some(m),
                ("method", other) => {
                    return Err(wrong_type(&format!("{STAGE}.method"), other, "string"))
                }
                ("value", v) => value = Some(v),
                (other, _) => return Err(unknown(&format!("{STAGE}.{other}"))),
            }
        }
        if let Some(method) = method {
            if value.is_some() {
                return Err(fail(
                    ErrorCode::Location6050201,
                    "Each fill output specification must have exactly one of 'method' or \
                     'value' fields, not both",
                ));
            }
            let function = match method {
                "locf" => "$locf",
                "linear" => "$linearFill",
                _ => {
                    return Err(fail(
                        ErrorCode::Location6050202,
                        "Method must be either locf or linear",
                    ))
                }
            };
            let mut call = RawDocumentBuf::new();
            call.append(function, format!("${name}"));
            methods.append(name, call);
        }
        if let Some(value) = value {
            let mut args = RawArrayBuf::new();
            args.push(format!("${name}"));
            args.push(value.to_raw_bson());
            let mut if_null = RawDocumentBuf::new();
            if_null.append("$ifNull", args);
            values.append(name, if_null);
        }
    }
    Ok((methods, values))
}

/// The `$setWindowFields` spec the `method` outputs stand for.
fn window_spec(parts: &Parts<'_>, methods: RawDocumentBuf) -> Result<RawDocumentBuf, MongoError> {
    let mut spec = RawDocumentBuf::new();
    if let Some(sort_by) = parts.sort_by {
        spec.append("sortBy", sort_by.to_raw_document_buf());
    }
    match (parts.partition_by, &parts.partition_by_fields) {
        (Some(by), _) => spec.append("partitionBy", by.to_raw_bson()),
        (None, Some(fields)) => {
            let mut by = RawDocumentBuf::new();
            for field in fields {
                by.append(*field, format!("${field}"));
            }
            spec.append("partitionBy", by);
        }
        (None, None) => {}
    }
    spec.append("output", methods);
    Ok(spec)
}

pub(crate) fn run<'a>(spec: &'a Fill, input: DocStream<'a>, ctx: Ctx<'a>) -> DocStream<'a> {
    let stream = match &spec.window {
        Some(window) => window::run(window, input, ctx),
        None => input,
    };
    match &spec.values {
        Some(values) => super::execute::map_docs(stream, move |d| values.apply(&d)),
        None => stream,
    }
}

#[cfg(test)]
mod tests {
    use crate::aggregate::{NoCollections, Pipeline};
    use bson::{doc, Document};

    fn run(stage: Document, input: &[Document]) -> Result<Vec<Document>, crate::MongoError> {
        Pipeline::parse(&[doc! {"$fill": stage}])?.run_documents(input, &NoCollections)
    }

    fn code(stage: Document) -> i32 {
        run(stage, &[]).unwrap_err().code.code()
    }

    #[test]
    fn fills_by_value_locf_and_linear_per_partition() {
        let input = [
            doc! {"t": 1, "g": "a", "x": 10, "y": 1},
            doc! {"t": 2, "g": "a", "x": null},
            doc! {"t": 3, "g": "a", "x": 30, "y": 3},
            doc! {"t": 1, "g": "b"},
            doc! {"t": 2, "g": "b", "x": 5, "y": 7},
        ];
        let out = run(
            doc! {"partitionByFields": ["g"], "sortBy": {"t": 1}, "output": {
                "x": {"method": "linear"}, "y": {"method": "locf"}, "z": {"value": 0},
            }},
            &input,
        )
        .expect("fills");
        let xs: Vec<_> = out.iter().map(|d| d.get("x").cloned()).collect();
        let ys: Vec<_> = out.iter().map(|d| d.get("y").cloned()).collect();
        use bson::Bson::{Double, Int32, Null};
        assert_eq!(
            xs,
            vec![
                Some(Int32(10)),
                Some(Double(20.0)),
                Some(Int32(30)),
                Some(Null),
                Some(Int32(5))
            ]
        );
        assert_eq!(
            ys,
            vec![
                Some(Int32(1)),
                Some(Int32(1)),
                Some(Int32(3)),
                Some(Null),
                Some(Int32(7))
            ]
        );
        assert!(out.iter().all(|d| d.get_i32("z") == Ok(0)));
    }

    #[test]
    fn spec_errors_carry_mongods_codes() {
        assert_eq!(code(doc! {"sortBy": {"t": 1}}), 40414);
        assert_eq!(code(doc! {"output": {}}), 6050203);
        assert_eq!(code(doc! {"output": {"x": 1}}), 6050200);
        assert_eq!(
            code(doc! {"output": {"x": {"method": "locf", "value": 1}}}),
            6050201
        );
        assert_eq!(code(doc! {"output": {"x": {"method": "nearest"}}}), 6050202);
        assert_eq!(
            code(
                doc! {"output": {"x": {"value": 1}}, "partitionBy": "$g", "partitionByFields": ["g"]}
            ),
            6050204
        );
        let both = doc! {"output": {"x": {"method": "locf"}}, "partitionBy": "$g", "partitionByFields": ["g"]};
        assert_eq!(code(both), 6050204);
        assert_eq!(code(doc! {"output": {"x": {"method": "linear"}}}), 605001);
        assert_eq!(code(doc! {"output": {"x": {"value": 1}}, "foo": 1}), 40415);
        assert_eq!(
            code(doc! {"output": {"x": {"value": 1}}, "partitionBy": 1}),
            14
        );
        assert_eq!(
            Pipeline::parse(&[doc! {"$fill": 1}])
                .unwrap_err()
                .code
                .code(),
            9
        );
    }
}
