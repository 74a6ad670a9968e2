//! The `$changeStream` stage's document, checked as mongod's IDL parser and
//! `assertIsLegalSpecification` check it: the start point (`resumeAfter`, `startAfter`,
//! `startAtOperationTime`, at most one), `fullDocument`, `fullDocumentBeforeChange`,
//! `allChangesForCluster`, `showExpandedEvents`. Options that would change the events and
//! are not built here (`showSystemEvents`, `showRawUpdateDescription`, ...) are refused when
//! true. Pure.

use super::token::ResumeToken;
use bson::{Bson, Document, RawDocumentBuf, Timestamp};
use shale_doc::{type_name, ErrorCode, MongoError};

/// `fullDocument`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FullDocument {
    /// Only inserts and replacements carry `fullDocument`.
    Default,
    /// Updates carry the document as it is when the event is read.
    UpdateLookup,
    /// Post-images: no collection here can keep them (`create`/`collMod` refuse
    /// `changeStreamPreAndPostImages`), so an update's `fullDocument` is null.
    WhenAvailable,
    /// As `WhenAvailable`, but an update event fails `NoMatchingDocument` (47).
    Required,
}

/// `fullDocumentBeforeChange` (pre-images: never kept here, as for `FullDocument`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BeforeChange {
    /// No `fullDocumentBeforeChange`.
    Off,
    /// The pre-image when one is kept, else null.
    WhenAvailable,
    /// The pre-image; an event without one fails.
    Required,
}

/// Where a stream starts.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Start {
    /// Now: after the newest visible entry.
    Now,
    /// After the event (or at the high-water mark) of a token (`resumeAfter`).
    ResumeAfter(ResumeToken),
    /// As `ResumeAfter`, also from an `invalidate` (`startAfter`).
    StartAfter(ResumeToken),
    /// Events at or after this time (`startAtOperationTime`).
    At(Timestamp),
}

/// A parsed `$changeStream` stage.
#[derive(Debug, Clone, PartialEq)]
pub struct ChangeStreamSpec {
    /// Where the stream starts.
    pub start: Start,
    /// `fullDocument`.
    pub full_document: FullDocument,
    /// `fullDocumentBeforeChange`.
    pub before_change: BeforeChange,
    /// `allChangesForCluster`: the stream watches every database.
    pub all_changes_for_cluster: bool,
    /// DDL events beyond drop/rename, `collectionUUID`, `operationDescription`,
    /// `disambiguatedPaths`.
    pub show_expanded_events: bool,
}

const NOT_BUILT: [&str; 5] = [
    "showSystemEvents",
    "showRawUpdateDescription",
    "showMigrationEvents",
    "allowToRunOnConfigDB",
    "allowToRunOnSystemNS",
];

impl ChangeStreamSpec {
    /// Parses the value of a `$changeStream` stage.
    pub fn parse(value: &Bson) -> Result<ChangeStreamSpec, MongoError> {
        let Bson::Document(d) = value else {
            return Err(MongoError::new(
                ErrorCode::Location50808,
                "$changeStream stage expects a document as argument",
            ));
        };
        let mut spec = ChangeStreamSpec {
            start: Start::Now,
            full_document: FullDocument::Default,
            before_change: BeforeChange::Off,
            all_changes_for_cluster: false,
            show_expanded_events: false,
        };
        let (mut resume_after, mut start_after, mut at) = (None, None, None);
        for (k, v) in d {
            match k.as_str() {
                "resumeAfter" => resume_after = Some(token(k, v)?),
                "startAfter" => start_after = Some(token(k, v)?),
                "startAtOperationTime" => match v {
                    Bson::Timestamp(t) => at = Some(*t),
                    other => return Err(wrong_type(k, other, "timestamp")),
                },
                "fullDocument" => {
                    spec.full_document = match string(k, v)? {
                        "default" => FullDocument::Default,
                        "updateLookup" => FullDocument::UpdateLookup,
                        "whenAvailable" => FullDocument::WhenAvailable,
                        "required" => FullDocument::Required,
                        other => return Err(bad_enum(k, other)),
                    }
                }
                "fullDocumentBeforeChange" => {
                    spec.before_change = match string(k, v)? {
                        "off" => BeforeChange::Off,
                        "whenAvailable" => BeforeChange::WhenAvailable,
                        "required" => BeforeChange::Required,
                        other => return Err(bad_enum(k, other)),
                    }
                }
                "allChangesForCluster" => spec.all_changes_for_cluster = boolean(k, v)?,
                "showExpandedEvents" => spec.show_expanded_events = boolean(k, v)?,
                k if NOT_BUILT.contains(&k) => {
                    if boolean(k, v)? {
                        return Err(MongoError::new(
                            ErrorCode::NotImplemented,
                            format!("$changeStream option '{k}' is not supported by ShaleDB"),
                        ));
                    }
                }
                other => {
                    return Err(MongoError::new(
                        ErrorCode::Location40415,
                        format!("BSON field '$changeStream.{other}' is an unknown field."),
                    ))
                }
            }
        }
        if resume_after.is_some() && start_after.is_some() {
            return Err(MongoError::new(
                ErrorCode::Location50865,
                "Do not specify both 'resumeAfter' and 'startAfter' in a $changeStream stage",
            ));
        }
        if at.is_some() && (resume_after.is_some() || start_after.is_some()) {
            return Err(MongoError::new(
                ErrorCode::Location40674,
                "Only one type of resume option is allowed, but multiple were found",
            ));
        }
        if resume_after.is_some_and(|t: ResumeToken| t.from_invalidate()) {
            return Err(MongoError::new(
                ErrorCode::InvalidResumeToken,
                "Attempting to resume a change stream using 'resumeAfter' is not allowed from \
                 an invalidate notification",
            ));
        }
        spec.start = match (resume_after, start_after, at) {
            (Some(t), _, _) => Start::ResumeAfter(t),
            (_, Some(t), _) => Start::StartAfter(t),
            (_, _, Some(t)) => Start::At(t),
            _ => Start::Now,
        };
        Ok(spec)
    }
}

fn token(k: &str, v: &Bson) -> Result<ResumeToken, MongoError> {
    match v {
        Bson::Document(d) => ResumeToken::parse(&to_raw(d)?),
        other => Err(wrong_type(k, other, "object")),
    }
}

fn to_raw(d: &Document) -> Result<RawDocumentBuf, MongoError> {
    RawDocumentBuf::from_document(d)
        .map_err(|e| MongoError::new(ErrorCode::BadValue, e.to_string()))
}

fn string<'a>(k: &str, v: &'a Bson) -> Result<&'a str, MongoError> {
    match v {
        Bson::String(s) => Ok(s),
        other => Err(wrong_type(k, other, "string")),
    }
}

fn boolean(k: &str, v: &Bson) -> Result<bool, MongoError> {
    match v {
        Bson::Boolean(b) => Ok(*b),
        other => Err(wrong_type(k, other, "bool")),
    }
}

fn wrong_type(k: &str, v: &Bson, expected: &str) -> MongoError {
    MongoError::new(
        ErrorCode::TypeMismatch,
        format!(
            "BSON field '$changeStream.{k}' is the wrong type '{}', expected type '{expected}'",
            type_name(v)
        ),
    )
}

fn bad_enum(k: &str, v: &str) -> MongoError {
    MongoError::new(
        ErrorCode::BadValue,
        format!("Enumeration value '{v}' for field '$changeStream.{k}' is not a valid value."),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::doc;

    fn parse(d: Document) -> Result<ChangeStreamSpec, MongoError> {
        ChangeStreamSpec::parse(&Bson::Document(d))
    }

    fn token_doc(t: ResumeToken) -> Document {
        t.document().to_document().expect("doc")
    }

    #[test]
    fn defaults_and_options() {
        let s = parse(doc! {}).expect("empty");
        assert_eq!(s.start, Start::Now);
        assert_eq!(s.full_document, FullDocument::Default);
        let t = ResumeToken::event(
            Timestamp {
                time: 3,
                increment: 1,
            },
            0,
        );
        let s = parse(doc! {"resumeAfter": token_doc(t), "fullDocument": "updateLookup"})
            .expect("resume");
        assert_eq!(s.start, Start::ResumeAfter(t));
        assert_eq!(s.full_document, FullDocument::UpdateLookup);
    }

    #[test]
    fn refusals_have_mongods_codes() {
        let t = ResumeToken::event(
            Timestamp {
                time: 3,
                increment: 1,
            },
            0,
        );
        let code = |d: Document| parse(d).unwrap_err().code;
        assert_eq!(code(doc! {"bogus": 1}), ErrorCode::Location40415);
        assert_eq!(
            code(doc! {"resumeAfter": token_doc(t), "startAfter": token_doc(t)}),
            ErrorCode::Location50865
        );
        assert_eq!(
            code(
                doc! {"resumeAfter": token_doc(t), "startAtOperationTime": Timestamp { time: 1, increment: 0 }}
            ),
            ErrorCode::Location40674
        );
        assert_eq!(
            code(doc! {"resumeAfter": token_doc(t.invalidating())}),
            ErrorCode::InvalidResumeToken
        );
        assert_eq!(
            code(doc! {"fullDocument": "sometimes"}),
            ErrorCode::BadValue
        );
        assert_eq!(code(doc! {"fullDocument": 1}), ErrorCode::TypeMismatch);
        assert_eq!(
            code(doc! {"showSystemEvents": true}),
            ErrorCode::NotImplemented
        );
        assert!(parse(doc! {"showSystemEvents": false}).is_ok());
        assert!(
            parse(doc! {"showExpandedEvents": true})
                .expect("expanded")
                .show_expanded_events
        );
        assert_eq!(
            ChangeStreamSpec::parse(&Bson::Int32(1)).unwrap_err().code,
            ErrorCode::Location50808
        );
        let s = parse(doc! {"startAfter": token_doc(t.invalidating())}).expect("startAfter");
        assert_eq!(s.start, Start::StartAfter(t.invalidating()));
    }
}
