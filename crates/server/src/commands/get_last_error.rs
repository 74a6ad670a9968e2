//! `getLastError` (and its lower-case alias) and `resetError`: the outcome of the
//! connection's last legacy write (`crate::legacy::last_error`), as mongod 3.6 reported it
//! to drivers that wrote with OP_INSERT, OP_UPDATE and OP_DELETE. Each write has committed
//! before its message is done, so there is nothing to wait for; a write concern a
//! standalone cannot satisfy (`w` above 1) is refused as mongod refuses it.

use super::CommandResult;
use crate::ConnectionCtx;
use bson::{Bson, Document};
use shale_doc::{ErrorCode, MongoError};

pub fn get_last_error(ctx: &ConnectionCtx, _db: &str, body: &Document) -> CommandResult {
    check_w(body.get("w"))?;
    let state = ctx.legacy.lock().unwrap_or_else(|p| p.into_inner());
    Ok(state.last_error.to_document(ctx.connection_id))
}

pub fn reset_error(ctx: &ConnectionCtx, _db: &str, _body: &Document) -> CommandResult {
    let mut state = ctx.legacy.lock().unwrap_or_else(|p| p.into_inner());
    state.last_error = Default::default();
    Ok(Document::new())
}

/// `w` of 0, 1 or `majority` is met by a standalone; a larger number never is.
fn check_w(w: Option<&Bson>) -> Result<(), MongoError> {
    let n = match w {
        Some(Bson::Int32(n)) => i64::from(*n),
        Some(Bson::Int64(n)) => *n,
        Some(Bson::Double(n)) => *n as i64,
        _ => return Ok(()),
    };
    if n > 1 {
        return Err(MongoError::new(
            ErrorCode::BadValue,
            "cannot use 'w' > 1 with a standalone",
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn w_above_one_is_refused_on_a_standalone() {
        assert!(check_w(None).is_ok());
        assert!(check_w(Some(&Bson::Int32(1))).is_ok());
        assert!(check_w(Some(&Bson::String("majority".into()))).is_ok());
        let e = check_w(Some(&Bson::Int32(2))).expect_err("refused");
        assert_eq!(e.code, ErrorCode::BadValue);
    }
}
