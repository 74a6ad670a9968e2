//! Aggregation expressions over raw BSON, as `$expr`, the pipeline stages, pipeline updates
//! and projections use them: field paths (`"$a.b"`, mapped over arrays), variables
//! (`expr_vars`: `$$ROOT`/`$$CURRENT`/`$$REMOVE`, `$$NOW`/`$$CLUSTER_TIME`, a command's `let`
//! variables and `$let`'s), literals (`$literal`, `$const`), array and object expressions, and
//! the operators `$eq $ne $gt $gte $lt $lte $cmp`, `$and $or $not`, `$ifNull $cond`, `$type`,
//! `$rand`, the strings `$concat $toLower $toUpper $strLenCP` and the arrays `$size
//! $arrayElemAt $in`. Arithmetic (`$add $subtract $multiply $divide $mod $abs`) lives in
//! `expr_arith`; strings and arrays in `expr_ops`; `$getField $setField $unsetField` in
//! `expr_fields`; `$switch` in `expr_switch`; `$map $filter $reduce` in `expr_arrays`; `$mergeObjects
//! $objectToArray $concatArrays $isArray $reverseArray` in `expr_objects`; the other strings
//! (`$substr* $split $indexOf* $strcasecmp $trim $replace*`) in `expr_strings`, `$regexMatch
//! $regexFind $regexFindAll` in `expr_regex`, `$convert $to* $isNumber` in `expr_convert`.
//!
//! Parsing raises MongoDB's parse errors (unknown operator 168, arity 16020, ...); evaluation
//! raises its runtime errors (e.g. `$size` of a non-array, 17124). Values borrowed from the
//! document stay borrowed; only computed values are owned. Comparisons use `compare_raw`.

use std::cmp::Ordering;
use std::sync::Arc;

use bson::raw::{RawArrayBuf, RawBson, RawBsonRef, RawDocument, RawDocumentBuf};

use super::element::{type_alias, type_code};
use super::expr_arith::{arithmetic, ArithOp};
use super::expr_vars::Scope;
use super::path::{bson_error, lookup, FieldPath};
use crate::collation::value::{collate_raw, has_strings};
use crate::collation::Collation;
use crate::compare_raw::compare_raw_values;
use crate::variables::Variables;
use crate::{ErrorCode, MongoError};

/// The result of evaluating an expression.
#[derive(Debug, Clone)]
pub enum Value<'a> {
    /// No value (a missing field, `$$REMOVE`); object expressions drop such fields.
    Missing,
    /// A value borrowed from a document.
    Ref(RawBsonRef<'a>),
    /// A value computed.
    Owned(RawBson),
}

impl Value<'_> {
    /// The value as raw BSON, `None` when missing.
    pub fn as_raw(&self) -> Option<RawBsonRef<'_>> {
        match self {
            Value::Missing => None,
            Value::Ref(v) => Some(*v),
            Value::Owned(v) => Some(v.as_raw_bson_ref()),
        }
    }

    /// Missing, null or undefined: the values `$ifNull` replaces and arithmetic turns to null.
    pub fn is_nullish(&self) -> bool {
        matches!(
            self.as_raw(),
            None | Some(RawBsonRef::Null) | Some(RawBsonRef::Undefined)
        )
    }

    /// The `$type` name of this value (`"missing"` when absent).
    pub fn type_name(&self) -> &'static str {
        self.as_raw()
            .map_or("missing", |v| type_alias(type_code(v)))
    }

    /// The same value, owning its bytes (for values read out of a shorter-lived one).
    pub fn into_owned<'b>(self) -> Value<'b> {
        match self {
            Value::Missing => Value::Missing,
            Value::Ref(v) => Value::Owned(v.to_raw_bson()),
            Value::Owned(v) => Value::Owned(v),
        }
    }
}

/// Aggregation truthiness: false, null, undefined, missing and numeric zero are false.
pub fn truthy(value: &Value<'_>) -> bool {
    match value.as_raw() {
        None => false,
        Some(v) => super::element::true_value(v),
    }
}

/// An expression operator.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    /// A comparison (`$eq`, `$cmp`, ...).
    Compare(CompareKind),
    /// `$and`.
    And,
    /// `$or`.
    Or,
    /// `$not`.
    Not,
    /// An arithmetic operator (`$add`, `$mod`, ...).
    Arith(ArithOp),
    /// `$concat`.
    Concat,
    /// `$toLower`.
    ToLower,
    /// `$toUpper`.
    ToUpper,
    /// `$strLenCP`.
    StrLenCP,
    /// `$size`.
    Size,
    /// `$arrayElemAt`.
    ArrayElemAt,
    /// `$in`.
    In,
    /// `$ifNull`.
    IfNull,
    /// `$cond`.
    Cond,
    /// `$type`.
    Type,
    /// `$mergeObjects`.
    MergeObjects,
    /// `$objectToArray`.
    ObjectToArray,
    /// `$concatArrays`.
    ConcatArrays,
    /// `$isArray`.
    IsArray,
    /// `$reverseArray`.
    ReverseArray,
    /// A positional string operator (`expr_strings.rs`: `$substrBytes`, `$split`, ...).
    Str(super::expr_strings::StrOp),
    /// `$isNumber` (`expr_convert.rs`).
    IsNumber,
    /// `$toHashedIndexKey`: mongod's hashed index key of a value (`hashed.rs`).
    ToHashedIndexKey,
    /// A numeric operator (`$round`, `$sqrt`, `$sin`, ...: `expr_math.rs`, `expr_trig.rs`).
    Math(super::expr_math::MathOp),
    /// An accumulator as an expression (`$sum`, `$avg`, ...: `expr_accumulate.rs`).
    Accumulate(super::expr_accumulate::AccumulateOp),
    /// A set operator (`$setUnion`, ...: `expr_sets.rs`).
    Set(super::expr_sets::SetOp),
    /// An array operator with plain arguments (`$slice`, `$range`, ...: `expr_array_more.rs`).
    Array(super::expr_array_more::ArrayOp),
}

/// A comparison expression operator.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CompareKind {
    /// `$eq`.
    Eq,
    /// `$ne`.
    Ne,
    /// `$gt`.
    Gt,
    /// `$gte`.
    Gte,
    /// `$lt`.
    Lt,
    /// `$lte`.
    Lte,
    /// `$cmp`: -1, 0 or 1.
    Cmp,
}

/// A parsed aggregation expression.
#[derive(Debug, Clone)]
pub enum Expr {
    /// A constant: a literal, or the value of a command's variable (`$$NOW`, a `let` name).
    Literal(RawBson),
    /// `"$a.b"` or `"$$ROOT.a"`: a path in the document.
    Field(FieldPath),
    /// `$$ROOT` (and `$$CURRENT` where no `$let` rebinds it).
    Root,
    /// `$$REMOVE`: no value.
    Remove,
    /// A `$let` variable (or `CURRENT` rebound by one): its slot on the evaluation stack, and
    /// a path into its value.
    Local {
        /// Its slot on the stack.
        slot: usize,
        /// The path into its value, if any.
        path: Option<FieldPath>,
    },
    /// An array of expressions.
    Array(Vec<Expr>),
    /// An object of expressions, fields in order.
    Object(Vec<(String, Expr)>),
    /// An operator and its arguments.
    Call(Op, Vec<Expr>),
    /// An argument of a comparison under the command's collation: its value with strings
    /// replaced by their collation keys.
    Collated(Box<Expr>, Arc<Collation>),
    /// `$let`: the values of its variables (pushed on the stack, in order), then its `in`.
    Let {
        /// The variables' values, in order.
        values: Vec<Expr>,
        /// The `in` expression.
        body: Box<Expr>,
    },
    /// `$getField`: the field named exactly `field` (dots and `$` included) of `input`.
    GetField {
        /// The field's name.
        field: String,
        /// The document (`$$CURRENT` by default).
        input: Box<Expr>,
    },
    /// `$setField`/`$unsetField` (whose value is `$$REMOVE`).
    SetField {
        /// The field's name.
        field: String,
        /// The document (`$$CURRENT` by default).
        input: Box<Expr>,
        /// The new value.
        value: Box<Expr>,
    },
    /// `$rand`: a double in [0, 1).
    Rand,
    /// `$map`, `$filter`, `$reduce` (`expr_arrays.rs`).
    Arrays(Box<super::expr_arrays::ArrayExpr>),
    /// `$trim $ltrim $rtrim $replaceOne $replaceAll` (`expr_strings.rs`).
    Strings(Box<super::expr_strings::NamedString>),
    /// `$regexMatch $regexFind $regexFindAll` (`expr_regex.rs`).
    Regex(Box<super::expr_regex::RegexExpr>),
    /// `$convert` and its shorthands `$toInt`, ... (`expr_convert.rs`).
    Convert(Box<super::expr_convert::Convert>),
    /// `$zip`, `$sortArray`, `$firstN $lastN $maxN $minN` (`expr_array_forms.rs`).
    ArrayForms(Box<super::expr_array_forms::ArrayForm>),
    /// The date operators (`expr_dates.rs`).
    Dates(Box<super::expr_dates::DateExpr>),
    /// `$switch` (`expr_switch.rs`): `(case, then)` branches and the default.
    Switch {
        /// `(case, then)` pairs, tried in order.
        branches: Vec<(Expr, Expr)>,
        /// The value when no case holds (an error when absent).
        default: Option<Box<Expr>>,
    },
}

pub(crate) fn error(code: ErrorCode, message: impl Into<String>) -> MongoError {
    MongoError::new(code, message)
}

fn operator(name: &str) -> Option<Op> {
    use CompareKind as C;
    Some(match name {
        "$eq" => Op::Compare(C::Eq),
        "$ne" => Op::Compare(C::Ne),
        "$gt" => Op::Compare(C::Gt),
        "$gte" => Op::Compare(C::Gte),
        "$lt" => Op::Compare(C::Lt),
        "$lte" => Op::Compare(C::Lte),
        "$cmp" => Op::Compare(C::Cmp),
        "$and" => Op::And,
        "$or" => Op::Or,
        "$not" => Op::Not,
        "$add" => Op::Arith(ArithOp::Add),
        "$subtract" => Op::Arith(ArithOp::Subtract),
        "$multiply" => Op::Arith(ArithOp::Multiply),
        "$divide" => Op::Arith(ArithOp::Divide),
        "$mod" => Op::Arith(ArithOp::Mod),
        "$abs" => Op::Arith(ArithOp::Abs),
        "$concat" => Op::Concat,
        "$toLower" => Op::ToLower,
        "$toUpper" => Op::ToUpper,
        "$strLenCP" => Op::StrLenCP,
        "$size" => Op::Size,
        "$arrayElemAt" => Op::ArrayElemAt,
        "$in" => Op::In,
        "$ifNull" => Op::IfNull,
        "$cond" => Op::Cond,
        "$type" => Op::Type,
        "$mergeObjects" => Op::MergeObjects,
        "$objectToArray" => Op::ObjectToArray,
        "$concatArrays" => Op::ConcatArrays,
        "$isArray" => Op::IsArray,
        "$reverseArray" => Op::ReverseArray,
        "$isNumber" => Op::IsNumber,
        "$toHashedIndexKey" => Op::ToHashedIndexKey,
        other => match super::expr_strings::StrOp::from_name(other) {
            Some(s) => Op::Str(s),
            None => return extra_operator(other),
        },
    })
}

/// The operators of the math, accumulator, set and array families, by name.
fn extra_operator(name: &str) -> Option<Op> {
    use super::{expr_accumulate, expr_array_more, expr_math, expr_sets};
    expr_math::MathOp::from_name(name)
        .map(Op::Math)
        .or_else(|| expr_accumulate::AccumulateOp::from_name(name).map(Op::Accumulate))
        .or_else(|| expr_sets::SetOp::from_name(name).map(Op::Set))
        .or_else(|| expr_array_more::ArrayOp::from_name(name).map(Op::Array))
}

/// Operators with their own argument forms (parsed outside `parse_call`).
const SPECIAL: &[&str] = &[
    "$literal",
    "$const",
    "$let",
    "$getField",
    "$setField",
    "$unsetField",
    "$rand",
    "$switch",
    "$map",
    "$filter",
    "$reduce",
    "$trim",
    "$ltrim",
    "$rtrim",
    "$replaceOne",
    "$replaceAll",
    "$regexMatch",
    "$regexFind",
    "$regexFindAll",
    "$convert",
    "$toString",
    "$toInt",
    "$toLong",
    "$toDouble",
    "$toDecimal",
    "$toBool",
    "$toDate",
    "$toObjectId",
    "$zip",
    "$sortArray",
    "$firstN",
    "$lastN",
    "$maxN",
    "$minN",
];

/// Whether `name` (with its `$`) is an expression operator this evaluator knows.
pub fn is_expression_name(name: &str) -> bool {
    SPECIAL.contains(&name) || operator(name).is_some() || super::expr_dates::is_date_operator(name)
}

/// Exact argument count, or `None` for variadic operators.
fn arity(op: Op) -> Option<usize> {
    match op {
        Op::And | Op::Or | Op::Concat | Op::IfNull => None,
        Op::MergeObjects | Op::ConcatArrays => None,
        Op::ObjectToArray | Op::IsArray | Op::ReverseArray | Op::IsNumber => Some(1),
        Op::ToHashedIndexKey => Some(1),
        Op::Arith(ArithOp::Add | ArithOp::Multiply) => None,
        Op::Not | Op::ToLower | Op::ToUpper | Op::StrLenCP | Op::Size | Op::Type => Some(1),
        Op::Arith(ArithOp::Abs) => Some(1),
        Op::Cond => Some(3),
        _ => Some(2),
    }
}

/// The evaluation stack of `$let` variables, indexed by the slots parsing gave them.
type Stack<'a> = Vec<Value<'a>>;

impl Expr {
    /// Parse an expression from its BSON form, for a command starting now with no `let`
    /// variables (`Variables::new()`). Commands parse with their own: `parse_in`.
    pub fn parse(value: RawBsonRef<'_>) -> Result<Expr, MongoError> {
        Expr::parse_in(value, &Variables::new())
    }

    /// Parse an expression that reads `vars` (`$$NOW`, `$$CLUSTER_TIME`, `let` names).
    pub fn parse_in(value: RawBsonRef<'_>, vars: &Variables) -> Result<Expr, MongoError> {
        Expr::parse_scoped(value, &mut Scope::new(vars))
    }

    pub(crate) fn parse_scoped(
        value: RawBsonRef<'_>,
        scope: &mut Scope<'_>,
    ) -> Result<Expr, MongoError> {
        match value {
            RawBsonRef::String(s) if s.starts_with("$$") => scope.variable(&s[2..]),
            RawBsonRef::String(s) if s.starts_with('$') => scope.field_path(&s[1..]),
            RawBsonRef::Array(items) => {
                let mut parsed = Vec::new();
                for item in items {
                    parsed.push(Expr::parse_scoped(item.map_err(bson_error)?, scope)?);
                }
                Ok(Expr::Array(parsed))
            }
            RawBsonRef::Document(d) => parse_document(d, scope),
            other => Ok(Expr::Literal(other.to_raw_bson())),
        }
    }

    /// Parse an expression in which `$$CURRENT`, and so every field path, is the value
    /// `evaluate_at` binds (stack slot 0) while `$$ROOT` stays the whole document: `$redact`,
    /// which judges each sub-document in turn.
    pub(crate) fn parse_with_current(
        value: RawBsonRef<'_>,
        vars: &Variables,
    ) -> Result<Expr, MongoError> {
        let mut scope = Scope::new(vars);
        scope.with_locals(&["CURRENT"], |s| Expr::parse_scoped(value, s))
    }

    /// Evaluate an expression from `parse_with_current` with `$$ROOT` `root` and `$$CURRENT`
    /// `current`.
    pub(crate) fn evaluate_at<'a>(
        &self,
        root: &'a RawDocument,
        current: &'a RawDocument,
    ) -> Result<Value<'a>, MongoError> {
        self.eval(root, &mut vec![Value::Ref(RawBsonRef::Document(current))])
    }

    /// Evaluate against `root` (which is both `$$ROOT` and `$$CURRENT`).
    pub fn evaluate<'a>(&self, root: &'a RawDocument) -> Result<Value<'a>, MongoError> {
        self.eval(root, &mut Vec::new())
    }

    pub(crate) fn eval<'a>(
        &self,
        root: &'a RawDocument,
        stack: &mut Stack<'a>,
    ) -> Result<Value<'a>, MongoError> {
        match self {
            Expr::Literal(v) => Ok(Value::Owned(v.clone())),
            Expr::Field(path) => field_value(root, path),
            Expr::Root => Ok(Value::Ref(RawBsonRef::Document(root))),
            Expr::Remove => Ok(Value::Missing),
            Expr::Local { slot, path } => {
                #[allow(
                    clippy::expect_used,
                    reason = "parsing gave every variable a slot its $let pushes"
                )]
                let value = stack
                    .get(*slot)
                    .cloned()
                    .expect("parsing gave every variable a slot its $let pushes");
                match path {
                    None => Ok(value),
                    Some(path) => path_in_value(value, path),
                }
            }
            Expr::Array(items) => evaluate_array(items, root, stack),
            Expr::Object(fields) => evaluate_object(fields, root, stack),
            Expr::Call(op, args) => call(*op, args, root, stack),
            Expr::Let { values, body } => {
                let mut bound = Vec::with_capacity(values.len());
                for v in values {
                    bound.push(v.eval(root, stack)?);
                }
                let depth = stack.len();
                stack.extend(bound);
                let out = body.eval(root, stack);
                stack.truncate(depth);
                out
            }
            Expr::GetField { field, input } => {
                super::expr_fields::get_field(field, input.eval(root, stack)?)
            }
            Expr::Switch { branches, default } => {
                super::expr_switch::eval(branches, default.as_deref(), root, stack)
            }
            Expr::Arrays(a) => a.eval(root, stack),
            Expr::Strings(s) => s.eval(root, stack),
            Expr::Regex(r) => r.eval(root, stack),
            Expr::Convert(c) => c.eval(root, stack),
            Expr::ArrayForms(a) => a.eval(root, stack),
            Expr::Dates(d) => d.eval(root, stack),
            Expr::SetField {
                field,
                input,
                value,
            } => {
                let input = input.eval(root, stack)?;
                super::expr_fields::set_field(field, input, || value.eval(root, stack))
            }
            Expr::Rand => Ok(Value::Owned(RawBson::Double(rand::random::<f64>()))),
            Expr::Collated(inner, c) => Ok(match inner.eval(root, stack)? {
                Value::Missing => Value::Missing,
                v => match v.as_raw() {
                    Some(raw) if has_strings(raw) => Value::Owned(collate_raw(c, raw)),
                    _ => v,
                },
            }),
        }
    }

    /// Whether the expression reads the document (a field path, `$$ROOT`, `$$CURRENT`): what
    /// a command's `let` values may not do.
    pub fn reads_document(&self) -> bool {
        match self {
            Expr::Field(_) | Expr::Root => true,
            Expr::Literal(_) | Expr::Remove | Expr::Local { .. } | Expr::Rand => false,
            Expr::Array(items) | Expr::Call(_, items) => items.iter().any(Expr::reads_document),
            Expr::Object(fields) => fields.iter().any(|(_, e)| e.reads_document()),
            Expr::Let { values, body } => {
                values.iter().any(Expr::reads_document) || body.reads_document()
            }
            Expr::GetField { input, .. } => input.reads_document(),
            Expr::Collated(inner, _) => inner.reads_document(),
            Expr::SetField { input, value, .. } => input.reads_document() || value.reads_document(),
            Expr::Arrays(a) => a.reads_document(),
            Expr::Strings(s) => s.reads_document(),
            Expr::Regex(r) => r.reads_document(),
            Expr::Convert(c) => c.reads_document(),
            Expr::ArrayForms(a) => a.reads_document(),
            Expr::Dates(d) => d.reads_document(),
            Expr::Switch { branches, default } => {
                branches
                    .iter()
                    .any(|(c, t)| c.reads_document() || t.reads_document())
                    || default.as_ref().is_some_and(|d| d.reads_document())
            }
        }
    }
}

/// `value.path` (a path into a variable's value): arrays along the way are mapped.
fn path_in_value<'a>(value: Value<'a>, path: &FieldPath) -> Result<Value<'a>, MongoError> {
    match value {
        Value::Missing => Ok(Value::Missing),
        Value::Ref(v) => descend(v, path, 0),
        Value::Owned(v) => Ok(descend(v.as_raw_bson_ref(), path, 0)?.into_owned()),
    }
}

pub(crate) fn parse_field_path(path: &str) -> Result<Expr, MongoError> {
    if path.is_empty() {
        return Err(error(
            ErrorCode::Location16872,
            "'$' by itself is not a valid FieldPath",
        ));
    }
    Ok(Expr::Field(FieldPath::parse(path)))
}

fn parse_document(d: &RawDocument, scope: &mut Scope<'_>) -> Result<Expr, MongoError> {
    let fields: Vec<(&str, RawBsonRef<'_>)> =
        d.iter().collect::<Result<_, _>>().map_err(bson_error)?;
    let Some((first, first_value)) = fields.first().copied() else {
        return Ok(Expr::Object(Vec::new()));
    };
    if !first.starts_with('$') {
        return parse_object(&fields, scope);
    }
    if fields.len() != 1 {
        return Err(error(
            ErrorCode::Location15983,
            format!(
                "an expression specification must contain exactly one field, the name of the \
                 expression. Found {} fields in {}",
                fields.len(),
                display(d)
            ),
        ));
    }
    match first {
        "$literal" | "$const" => return Ok(Expr::Literal(first_value.to_raw_bson())),
        "$let" => return scope.parse_let(first_value),
        "$getField" => return super::expr_fields::parse_get_field(first_value, scope),
        "$setField" | "$unsetField" => {
            return super::expr_fields::parse_set_field(first, first_value, scope)
        }
        "$rand" => return parse_rand(first_value),
        "$switch" => return super::expr_switch::parse(first_value, scope),
        "$map" => return super::expr_arrays::parse_map(first_value, scope),
        "$filter" => return super::expr_arrays::parse_filter(first_value, scope),
        "$reduce" => return super::expr_arrays::parse_reduce(first_value, scope),
        "$trim" | "$ltrim" | "$rtrim" => {
            return super::expr_strings::parse_trim(first, first_value, scope)
        }
        "$replaceOne" | "$replaceAll" => {
            return super::expr_strings::parse_replace(first, first_value, scope)
        }
        "$regexMatch" | "$regexFind" | "$regexFindAll" => {
            return super::expr_regex::parse(first, first_value, scope)
        }
        "$convert" => return super::expr_convert::parse(first_value, scope),
        name if super::expr_convert::alias_target(name).is_some() => {
            return super::expr_convert::parse_alias(name, first_value, scope)
        }
        _ => {}
    }
    if let Some(parsed) = super::expr_array_forms::parse(first, first_value, scope) {
        return parsed;
    }
    if let Some(parsed) = super::expr_dates::parse(first, first_value, scope) {
        return parsed;
    }
    let op = operator(first).ok_or_else(|| {
        error(
            ErrorCode::InvalidPipelineOperator,
            format!("Unrecognized expression '{first}'"),
        )
    })?;
    parse_call(op, first, first_value, scope)
}

fn display(d: &RawDocument) -> String {
    bson::Document::try_from(d).map_or_else(|_| "<malformed>".to_owned(), |d| d.to_string())
}

fn parse_object(
    fields: &[(&str, RawBsonRef<'_>)],
    scope: &mut Scope<'_>,
) -> Result<Expr, MongoError> {
    let mut parsed = Vec::new();
    for (name, value) in fields {
        if name.starts_with('$') {
            return Err(error(
                ErrorCode::Location16410,
                format!("FieldPath field names may not start with '$'. Consider using $getField or $setField. (field: {name})"),
            ));
        }
        if name.contains('.') {
            return Err(error(
                ErrorCode::Location16412,
                "FieldPath field names may not contain '.'. Consider using $getField or \
                 $setField.",
            ));
        }
        parsed.push(((*name).to_owned(), Expr::parse_scoped(*value, scope)?));
    }
    Ok(Expr::Object(parsed))
}

/// `$rand: {}` (mongod takes no arguments, 3040501).
fn parse_rand(arg: RawBsonRef<'_>) -> Result<Expr, MongoError> {
    match arg {
        RawBsonRef::Document(d) if d.iter().next().is_none() => Ok(Expr::Rand),
        _ => Err(error(
            ErrorCode::Location3040501,
            "$rand does not currently accept arguments",
        )),
    }
}

fn parse_call(
    op: Op,
    name: &str,
    arg: RawBsonRef<'_>,
    scope: &mut Scope<'_>,
) -> Result<Expr, MongoError> {
    if op == Op::Cond {
        if let RawBsonRef::Document(d) = arg {
            return parse_cond_object(d, scope);
        }
    }
    let args = match arg {
        RawBsonRef::Array(items) => {
            let mut parsed = Vec::new();
            for item in items {
                parsed.push(Expr::parse_scoped(item.map_err(bson_error)?, scope)?);
            }
            parsed
        }
        single => vec![Expr::parse_scoped(single, scope)?],
    };
    check_arity(op, name, args.len())?;
    // Under the command's collation, comparisons and `$in` compare collated values (the
    // booleans and numbers they give out never show a collation key).
    if let (Op::Compare(_) | Op::In, Some(c)) = (op, scope.collation()) {
        let collated = args
            .into_iter()
            .map(|a| Expr::Collated(Box::new(a), Arc::clone(c)))
            .collect();
        return Ok(Expr::Call(op, collated));
    }
    Ok(Expr::Call(op, args))
}

fn check_arity(op: Op, name: &str, count: usize) -> Result<(), MongoError> {
    if let Op::Str(s) = op {
        return s.check_arity(count);
    }
    let extra = match op {
        Op::Math(m) => Some(m.arity()),
        Op::Accumulate(a) => Some(a.arity()),
        Op::Set(s) => Some(s.arity()),
        Op::Array(a) => Some(a.arity()),
        _ => None,
    };
    if let Some(arity) = extra {
        if let Op::Set(s) = op {
            super::expr_sets::check_count(s, count)?;
        }
        return super::expr_arity::check(name, count, arity);
    }
    if op == Op::IfNull && count < 2 {
        return Err(error(
            ErrorCode::Location1257300,
            format!("$ifNull needs at least two arguments, had: {count}"),
        ));
    }
    match arity(op) {
        Some(n) if n != count => Err(error(
            ErrorCode::Location16020,
            format!("Expression {name} takes exactly {n} arguments. {count} were passed in."),
        )),
        _ => Ok(()),
    }
}

fn parse_cond_object(d: &RawDocument, scope: &mut Scope<'_>) -> Result<Expr, MongoError> {
    let (mut if_, mut then, mut else_) = (None, None, None);
    for item in d.iter() {
        let (key, value) = item.map_err(bson_error)?;
        let slot = match key {
            "if" => &mut if_,
            "then" => &mut then,
            "else" => &mut else_,
            other => {
                return Err(error(
                    ErrorCode::Location17083,
                    format!("Unrecognized parameter to $cond: {other}"),
                ))
            }
        };
        *slot = Some(Expr::parse_scoped(value, scope)?);
    }
    let missing = |code, which| error(code, format!("Missing '{which}' parameter to $cond"));
    let if_ = if_.ok_or_else(|| missing(ErrorCode::Location17080, "if"))?;
    let then = then.ok_or_else(|| missing(ErrorCode::Location17081, "then"))?;
    let else_ = else_.ok_or_else(|| missing(ErrorCode::Location17082, "else"))?;
    Ok(Expr::Call(Op::Cond, vec![if_, then, else_]))
}

/// `"$a.b"` over the document: arrays along the way are mapped element by element.
fn field_value<'a>(root: &'a RawDocument, path: &FieldPath) -> Result<Value<'a>, MongoError> {
    match lookup(root, path.part(0))? {
        None => Ok(Value::Missing),
        Some(v) => descend(v, path, 1),
    }
}

/// The value at components `next..` of `path` below `value`.
pub(crate) fn descend<'a>(
    value: RawBsonRef<'a>,
    path: &FieldPath,
    next: usize,
) -> Result<Value<'a>, MongoError> {
    if next == path.len() {
        return Ok(Value::Ref(value));
    }
    match value {
        RawBsonRef::Document(d) => match lookup(d, path.part(next))? {
            None => Ok(Value::Missing),
            Some(v) => descend(v, path, next + 1),
        },
        RawBsonRef::Array(items) => {
            let mut out = RawArrayBuf::new();
            for item in items {
                let item = item.map_err(bson_error)?;
                if matches!(item, RawBsonRef::Document(_) | RawBsonRef::Array(_)) {
                    if let Some(v) = descend(item, path, next)?.as_raw() {
                        out.push(v.to_raw_bson());
                    }
                }
            }
            Ok(Value::Owned(RawBson::Array(out)))
        }
        _ => Ok(Value::Missing),
    }
}

fn evaluate_array<'a>(
    items: &[Expr],
    root: &'a RawDocument,
    stack: &mut Stack<'a>,
) -> Result<Value<'a>, MongoError> {
    let mut out = RawArrayBuf::new();
    for item in items {
        match item.eval(root, stack)?.as_raw() {
            Some(v) => out.push(v.to_raw_bson()),
            None => out.push(RawBson::Null),
        }
    }
    Ok(Value::Owned(RawBson::Array(out)))
}

fn evaluate_object<'a>(
    fields: &[(String, Expr)],
    root: &'a RawDocument,
    stack: &mut Stack<'a>,
) -> Result<Value<'a>, MongoError> {
    let mut out = RawDocumentBuf::new();
    for (name, expr) in fields {
        if let Some(v) = expr.eval(root, stack)?.as_raw() {
            out.append_ref(name, v);
        }
    }
    Ok(Value::Owned(RawBson::Document(out)))
}

/// Aggregation order: missing below everything, then MongoDB's BSON order.
pub fn compare_values(a: &Value<'_>, b: &Value<'_>) -> Result<Ordering, MongoError> {
    match (a.as_raw(), b.as_raw()) {
        (None, None) => Ok(Ordering::Equal),
        (None, Some(_)) => Ok(Ordering::Less),
        (Some(_), None) => Ok(Ordering::Greater),
        (Some(x), Some(y)) => compare_raw_values(x, y).map_err(bson_error),
    }
}

fn boolean<'a>(b: bool) -> Value<'a> {
    Value::Owned(RawBson::Boolean(b))
}

fn call<'a>(
    op: Op,
    args: &[Expr],
    root: &'a RawDocument,
    stack: &mut Stack<'a>,
) -> Result<Value<'a>, MongoError> {
    match op {
        Op::And => logic(args, root, stack, false),
        Op::Or => logic(args, root, stack, true),
        Op::Cond => {
            let branch = if truthy(&args[0].eval(root, stack)?) {
                1
            } else {
                2
            };
            args[branch].eval(root, stack)
        }
        Op::IfNull => if_null(args, root, stack),
        _ => {
            let values = args
                .iter()
                .map(|a| a.eval(root, stack))
                .collect::<Result<Vec<_>, _>>()?;
            apply(op, values)
        }
    }
}

/// `$and` (stop at the first false) and `$or` (stop at the first true).
fn logic<'a>(
    args: &[Expr],
    root: &'a RawDocument,
    stack: &mut Stack<'a>,
    stop_on: bool,
) -> Result<Value<'a>, MongoError> {
    for arg in args {
        if truthy(&arg.eval(root, stack)?) == stop_on {
            return Ok(boolean(stop_on));
        }
    }
    Ok(boolean(!stop_on))
}

fn if_null<'a>(
    args: &[Expr],
    root: &'a RawDocument,
    stack: &mut Stack<'a>,
) -> Result<Value<'a>, MongoError> {
    #[allow(
        clippy::expect_used,
        reason = "parsing checked that $ifNull has at least two arguments"
    )]
    let (last, rest) = args
        .split_last()
        .expect("parse checked at least two arguments");
    for arg in rest {
        let v = arg.eval(root, stack)?;
        if !v.is_nullish() {
            return Ok(v);
        }
    }
    last.eval(root, stack)
}

fn apply(op: Op, values: Vec<Value<'_>>) -> Result<Value<'_>, MongoError> {
    match op {
        Op::Compare(kind) => compare_op(kind, &values[0], &values[1]),
        Op::Not => Ok(boolean(!truthy(&values[0]))),
        Op::Arith(a) => arithmetic(a, &values).map(Value::Owned),
        Op::Concat => super::expr_ops::concat(&values),
        Op::ToLower => super::expr_ops::change_case(&values[0], false),
        Op::ToUpper => super::expr_ops::change_case(&values[0], true),
        Op::StrLenCP => super::expr_ops::str_len_cp(&values[0]),
        Op::Size => super::expr_ops::size(&values[0]),
        Op::ArrayElemAt => super::expr_ops::array_elem_at(&values[0], &values[1]),
        Op::In => super::expr_ops::in_array(&values[0], &values[1]),
        Op::Type => Ok(Value::Owned(RawBson::String(
            values[0].type_name().to_owned(),
        ))),
        Op::MergeObjects => super::expr_objects::merge_objects(&values),
        Op::ObjectToArray => super::expr_objects::object_to_array(&values[0]),
        Op::ConcatArrays => super::expr_objects::concat_arrays(&values),
        Op::IsArray => Ok(super::expr_objects::is_array(&values[0])),
        Op::ReverseArray => super::expr_objects::reverse_array(&values[0]),
        Op::Str(s) => s.apply(&values),
        Op::IsNumber => Ok(super::expr_convert::is_number(&values[0])),
        Op::ToHashedIndexKey => Ok(to_hashed_index_key(&values[0])),
        Op::Math(m) => super::expr_math::apply(m, &values),
        Op::Accumulate(a) => super::expr_accumulate::apply(a, &values),
        Op::Set(set) => super::expr_sets::apply(set, &values),
        Op::Array(a) => super::expr_array_more::apply(a, &values),
        Op::And | Op::Or | Op::Cond | Op::IfNull => unreachable!("handled lazily in call"),
    }
}

fn compare_op<'a>(
    kind: CompareKind,
    a: &Value<'_>,
    b: &Value<'_>,
) -> Result<Value<'a>, MongoError> {
    let ord = compare_values(a, b)?;
    Ok(match kind {
        CompareKind::Eq => boolean(ord == Ordering::Equal),
        CompareKind::Ne => boolean(ord != Ordering::Equal),
        CompareKind::Gt => boolean(ord == Ordering::Greater),
        CompareKind::Gte => boolean(ord != Ordering::Less),
        CompareKind::Lt => boolean(ord == Ordering::Less),
        CompareKind::Lte => boolean(ord != Ordering::Greater),
        CompareKind::Cmp => Value::Owned(RawBson::Int32(ord as i32)),
    })
}

/// `$toHashedIndexKey`: the value's hashed index key as a long (a missing value hashes as
/// null, as mongod's does).
fn to_hashed_index_key(v: &Value<'_>) -> Value<'static> {
    let b = v
        .as_raw()
        .and_then(|r| bson::Bson::try_from(r.to_raw_bson()).ok())
        .unwrap_or(bson::Bson::Null);
    Value::Owned(RawBson::Int64(crate::hashed::hash64(&b)))
}
