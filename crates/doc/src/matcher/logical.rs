//! Logical operators: `$and`, `$or`, `$nor` (top level, over whole filters) and `$not` (per
//! field, over that field's operators or a regex). Parsing checks MongoDB's argument rules;
//! evaluation short-circuits and keeps the positional index of the branch that matched.

use bson::raw::{RawBsonRef, RawDocument};

use super::evaluation::RegexPred;
use super::{bad_value, leaf, parse_filter, parse_operators, path::bson_error, Level, Node, Pred};
use crate::variables::Variables;
use crate::MongoError;

/// `$and`/`$or`/`$nor` (`name` without the `$`): a non-empty array of filter documents.
pub(crate) fn parse_tree(
    name: &str,
    value: RawBsonRef<'_>,
    level: Level,
    vars: &Variables,
) -> Result<Node, MongoError> {
    let RawBsonRef::Array(items) = value else {
        return Err(bad_value(format!("${name} must be an array")));
    };
    let mut children = Vec::new();
    for item in items {
        let RawBsonRef::Document(sub) = item.map_err(bson_error)? else {
            return Err(bad_value("$or/$and/$nor entries need to be full objects"));
        };
        children.push(parse_filter(sub, level, vars)?);
    }
    if children.is_empty() {
        return Err(bad_value("$and/$or/$nor must be a nonempty array"));
    }
    Ok(match name {
        "and" => Node::And(children),
        "or" => Node::Or(children),
        _ => Node::Nor(children),
    })
}

/// `{field: {$not: arg}}`: a regex or a non-empty document of operators.
pub(crate) fn parse_not(field: &str, arg: RawBsonRef<'_>) -> Result<Node, MongoError> {
    let inner = match arg {
        RawBsonRef::RegularExpression(re) => leaf(field, Pred::Regex(RegexPred::from_bson(re)?)),
        RawBsonRef::Document(ops) => parse_not_document(field, ops)?,
        _ => return Err(bad_value("$not needs a regex or a document")),
    };
    Ok(Node::Not(Box::new(inner)))
}

#[allow(clippy::expect_used, reason = "the length was checked to be one")]
fn parse_not_document(field: &str, ops: &RawDocument) -> Result<Node, MongoError> {
    if ops.is_empty() {
        return Err(bad_value("$not cannot be empty"));
    }
    let mut children = Vec::new();
    parse_operators(field, ops, &mut children)?;
    Ok(if children.len() == 1 {
        children.pop().expect("one child")
    } else {
        Node::And(children)
    })
}

pub(crate) fn eval_and(
    children: &[Node],
    doc: &RawDocument,
    position: &mut Option<usize>,
) -> Result<bool, MongoError> {
    for child in children {
        if !child.eval(doc, position)? {
            return Ok(false);
        }
    }
    Ok(true)
}

pub(crate) fn eval_or(
    children: &[Node],
    doc: &RawDocument,
    position: &mut Option<usize>,
) -> Result<bool, MongoError> {
    for child in children {
        let mut branch_position = None;
        if child.eval(doc, &mut branch_position)? {
            if position.is_none() {
                *position = branch_position;
            }
            return Ok(true);
        }
    }
    Ok(false)
}

pub(crate) fn eval_nor(children: &[Node], doc: &RawDocument) -> Result<bool, MongoError> {
    for child in children {
        if child.eval(doc, &mut None)? {
            return Ok(false);
        }
    }
    Ok(true)
}

#[cfg(test)]
mod tests {
    use crate::error_code::ErrorCode;
    use crate::matcher::test_support::{check, raw};
    use crate::matcher::Matcher;
    use bson::doc;

    fn error(filter: bson::Document) -> String {
        let e = Matcher::parse(&raw(filter)).expect_err("filter is refused");
        assert_eq!(e.code, ErrorCode::BadValue);
        e.message
    }

    #[test]
    fn and_or_nor() {
        assert!(check(
            doc! {"$and": [{"a": 1}, {"b": 2}]},
            doc! {"a": 1, "b": 2}
        ));
        assert!(check(
            doc! {"$or": [{"a": 2}, {"b": 2}]},
            doc! {"a": 1, "b": 2}
        ));
        assert!(!check(
            doc! {"$nor": [{"a": 2}, {"b": 2}]},
            doc! {"a": 1, "b": 2}
        ));
        assert!(check(doc! {"$nor": [{"a": 2}]}, doc! {}));
    }

    #[test]
    fn not_inverts_the_whole_field() {
        assert!(check(doc! {"a": {"$not": {"$gt": 5}}}, doc! {"a": 3}));
        assert!(check(doc! {"a": {"$not": {"$gt": 5}}}, doc! {}));
        assert!(!check(doc! {"a": {"$not": {"$gt": 5}}}, doc! {"a": [1, 9]}));
        assert!(check(
            doc! {"a": {"$not": bson::Regex{pattern: "^x".into(), options: String::new()}}},
            doc! {"a": "y"}
        ));
    }

    #[test]
    fn argument_errors() {
        assert_eq!(
            error(doc! {"$or": []}),
            "$and/$or/$nor must be a nonempty array"
        );
        assert_eq!(error(doc! {"$and": 1}), "$and must be an array");
        assert_eq!(
            error(doc! {"$or": [1]}),
            "$or/$and/$nor entries need to be full objects"
        );
        assert_eq!(
            error(doc! {"a": {"$not": 1}}),
            "$not needs a regex or a document"
        );
        assert_eq!(error(doc! {"a": {"$not": {}}}), "$not cannot be empty");
        assert_eq!(
            error(doc! {"$not": {"a": 1}}).split('.').next(),
            Some("unknown top level operator: $not")
        );
    }
}
