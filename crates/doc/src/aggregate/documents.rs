//! `$documents`: the documents of a collection-less aggregation (`{aggregate: 1}`), given as
//! an array or as an expression that evaluates to one (MongoDB 5.1). It must lead the
//! pipeline (40602, checked in `mod.rs`); a value that is not an array is 5858203 and an
//! element that is not a document 40228, as mongod reports them. The stage ignores its input:
//! the database gives a collection-less pipeline none.

use bson::raw::{RawBsonRef, RawDocumentBuf};

use super::execute::{DocResult, DocStream};
use super::simple::type_name;
use crate::matcher::expr::Expr;
use crate::variables::Variables;
use crate::{ErrorCode, MongoError};

pub(crate) fn parse(spec: RawBsonRef<'_>, vars: &Variables) -> Result<Expr, MongoError> {
    let expr = Expr::parse_in(spec, vars)?;
    if expr.reads_document() {
        // There is no document to read: mongod evaluates it over an empty one, where a field
        // path is missing, so it cannot give an array.
        return Err(not_an_array("missing"));
    }
    Ok(expr)
}

fn not_an_array(found: &str) -> MongoError {
    MongoError::new(
        ErrorCode::Location5858203,
        format!("an array is expected, but found {found}"),
    )
}

/// The stage's documents, computed once when first pulled.
pub(crate) fn run<'a>(expr: &'a Expr, _input: DocStream<'a>) -> DocStream<'a> {
    let docs: Vec<DocResult> = match evaluate(expr) {
        Ok(docs) => docs.into_iter().map(Ok).collect(),
        Err(e) => vec![Err(e)],
    };
    Box::new(docs.into_iter())
}

fn evaluate(expr: &Expr) -> Result<Vec<RawDocumentBuf>, MongoError> {
    let empty = RawDocumentBuf::new();
    let value = expr.evaluate(&empty)?;
    let Some(RawBsonRef::Array(items)) = value.as_raw() else {
        return Err(not_an_array(value.type_name()));
    };
    let mut out = Vec::new();
    for item in items {
        match item.map_err(crate::matcher::path::bson_error)? {
            RawBsonRef::Document(d) => out.push(d.to_raw_document_buf()),
            other => {
                return Err(MongoError::new(
                    ErrorCode::Location40228,
                    format!(
                        "'newRoot' expression must evaluate to an object, but resulting value \
                         was of type: {}",
                        type_name(other)
                    ),
                ))
            }
        }
    }
    Ok(out)
}
