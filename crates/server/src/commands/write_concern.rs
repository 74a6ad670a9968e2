//! The `writeConcern` a command carries, checked as a standalone mongod checks it
//! (`validateWriteConcern`): a standalone has no other node to wait for, so `w` above 1 and a
//! `w` mode other than `"majority"` (a tag set's name) are `BadValue`, never accepted and
//! ignored. `w: 0`, `w: 1`, `"majority"`, `j` and `wtimeout` are served (every commit is
//! durable in the log before it is answered). Checked before a command runs, on a
//! standalone only: a `--replSet` member applies the write and reports what one member cannot
//! satisfy as a `writeConcernError` (`crate::repl::concern`).

use crate::command::get;
use bson::{RawBsonRef, RawDocument};
use shale_doc::{ErrorCode, MongoError};

/// Refuses a `writeConcern` a standalone cannot satisfy (`body` is the raw command).
pub fn check(body: &RawDocument) -> Result<(), MongoError> {
    let Some(RawBsonRef::Document(wc)) = get(body, "writeConcern") else {
        return Ok(());
    };
    match get(wc, "w") {
        Some(RawBsonRef::String(mode)) if mode != "majority" => Err(MongoError::new(
            ErrorCode::BadValue,
            format!(
                "cannot use non-majority 'w' mode {mode} when a host is not a member of a \
                 replica set"
            ),
        )),
        Some(w) if nodes(w).is_some_and(|n| n > 1.0) => Err(MongoError::new(
            ErrorCode::BadValue,
            "cannot use 'w' > 1 when a host is not replicated",
        )),
        _ => Ok(()),
    }
}

/// A numeric `w`: the number of nodes to wait for.
fn nodes(w: RawBsonRef<'_>) -> Option<f64> {
    match w {
        RawBsonRef::Int32(n) => Some(f64::from(n)),
        RawBsonRef::Int64(n) => Some(n as f64),
        RawBsonRef::Double(x) => Some(x),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::{doc, Document, RawDocumentBuf};

    fn check(body: &Document) -> Result<(), MongoError> {
        super::check(&RawDocumentBuf::from_document(body).expect("raw"))
    }

    #[test]
    fn a_standalone_refuses_more_than_one_node_and_tag_modes() {
        for ok in [
            doc! {"insert": "c"},
            doc! {"insert": "c", "writeConcern": {}},
            doc! {"insert": "c", "writeConcern": {"w": 0}},
            doc! {"insert": "c", "writeConcern": {"w": 1, "j": true, "wtimeout": 100}},
            doc! {"insert": "c", "writeConcern": {"w": "majority"}},
            doc! {"insert": "c", "writeConcern": {"w": 1.0}},
        ] {
            assert_eq!(check(&ok), Ok(()), "{ok}");
        }
        let two = check(&doc! {"insert": "c", "writeConcern": {"w": 2}}).expect_err("w: 2");
        assert_eq!(two.code, ErrorCode::BadValue);
        assert_eq!(
            two.message,
            "cannot use 'w' > 1 when a host is not replicated"
        );
        assert!(check(&doc! {"insert": "c", "writeConcern": {"w": 3_i64}}).is_err());
        assert!(check(&doc! {"insert": "c", "writeConcern": {"w": 2.0}}).is_err());
        let tag = check(&doc! {"insert": "c", "writeConcern": {"w": "dc1"}}).expect_err("tag");
        assert_eq!(
            tag.message,
            "cannot use non-majority 'w' mode dc1 when a host is not a member of a replica set"
        );
    }
}
