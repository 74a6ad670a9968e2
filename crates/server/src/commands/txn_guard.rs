//! What the server does with a command's transaction fields (`txnNumber`, `autocommit`,
//! `startTransaction`) until sessions carry real multi-document transactions: it refuses the
//! command before it runs, as mongod does on a standalone, so a driver's transaction can
//! never be applied statement by statement and kept after an abort (issue 24, item 1).
//! Drivers send `txnNumber` for retryable writes only to replica sets, which this server
//! does not claim to be, so plain writes never carry it.

use bson::Document;
use shale_doc::{ErrorCode, MongoError};

/// Refuses `body` if it asks for a transaction or a transaction number.
pub fn refuse_transaction_fields(body: &Document) -> Result<(), MongoError> {
    if body.contains_key("txnNumber") {
        return Err(MongoError::new(
            ErrorCode::IllegalOperation,
            "Transaction numbers are only allowed on a replica set member or mongos",
        ));
    }
    for field in ["autocommit", "startTransaction"] {
        if body.contains_key(field) {
            return Err(MongoError::new(
                ErrorCode::InvalidOptions,
                format!("'{field}' field requires a transaction number to also be specified"),
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::doc;

    #[test]
    fn transaction_fields_are_refused_with_mongods_codes() {
        let stmt = doc! {"insert": "c", "documents": [{}], "lsid": {"id": 1},
        "txnNumber": 1i64, "autocommit": false, "startTransaction": true};
        let e = refuse_transaction_fields(&stmt).expect_err("refused");
        assert_eq!(e.code, ErrorCode::IllegalOperation);
        let e = refuse_transaction_fields(&doc! {"find": "c", "autocommit": false})
            .expect_err("refused");
        assert_eq!(e.code, ErrorCode::InvalidOptions);
        assert!(refuse_transaction_fields(&doc! {"find": "c", "lsid": {"id": 1}}).is_ok());
    }
}
