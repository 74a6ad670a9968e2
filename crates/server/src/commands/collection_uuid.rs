//! `collectionUUID` (mongod 6.0+): a command that names its collection may also name the
//! UUID it expects that collection to have; when the name now belongs to another
//! collection, or to none, the command fails with `CollectionUUIDMismatch` (361) before it
//! reads or writes anything, so a client never acts on a collection that was dropped and
//! re-created or renamed under it. The check itself is `Database::check_collection_uuid`.

use crate::command::{to_bson, Command};
use crate::ConnectionCtx;
use bson::spec::BinarySubtype;
use bson::RawBsonRef;
use shale_db::Namespace;
use shale_doc::{ErrorCode, MongoError};

/// Checks `cmd`'s `collectionUUID`, if it has one, against the collection it names.
pub(super) fn check(ctx: &ConnectionCtx, db: &str, cmd: &Command<'_>) -> Result<(), MongoError> {
    // The commands whose mongod 7.0 IDL has the field (`known_fields.rs` lists it).
    let name = cmd.name();
    if !super::known_fields::has_field(name, "collectionUUID") {
        return Ok(());
    }
    let Some(value) = cmd.get("collectionUUID") else {
        return Ok(());
    };
    let uuid = parse(name, value)?;
    // The namespace is the command's own value; renameCollection's is a full one. Any
    // other form (`aggregate: 1`) is left to the handler to refuse.
    let ns = match (name, cmd.get(name)) {
        ("renameCollection", Some(RawBsonRef::String(full))) => Namespace::parse(full)?,
        (_, Some(RawBsonRef::String(coll))) => Namespace::new(db, coll)?,
        _ => return Ok(()),
    };
    ctx.db.check_collection_uuid(&ns, uuid)
}

/// A UUID as mongod's IDL reads one: binary data of subtype 4, else `TypeMismatch`.
fn parse(command: &str, value: RawBsonRef<'_>) -> Result<bson::Uuid, MongoError> {
    let field = format!("{command}.collectionUUID");
    match value {
        RawBsonRef::Binary(b) if b.subtype == BinarySubtype::Uuid => {
            let bytes: [u8; 16] = b.bytes.try_into().map_err(|_| {
                MongoError::new(
                    ErrorCode::TypeMismatch,
                    format!("BSON field '{field}' is not a 16-byte UUID"),
                )
            })?;
            Ok(bson::Uuid::from_bytes(bytes))
        }
        RawBsonRef::Binary(_) => Err(MongoError::new(
            ErrorCode::TypeMismatch,
            format!("BSON field '{field}' is the wrong binData type, expected type 'UUID'"),
        )),
        other => Err(super::data::wrong_type(&field, &to_bson(other), "binData")),
    }
}
