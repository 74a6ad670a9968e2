//! Helpers shared by the matcher's unit tests: BSON documents as raw bytes, and one filter
//! applied to one document.

use crate::matcher::Matcher;
use bson::RawDocumentBuf;

pub(crate) fn raw(d: bson::Document) -> RawDocumentBuf {
    RawDocumentBuf::from_document(&d).expect("test document encodes")
}

/// Whether `filter` (which must parse) matches `d`.
pub(crate) fn check(filter: bson::Document, d: bson::Document) -> bool {
    let m = Matcher::parse(&raw(filter)).expect("filter parses");
    m.matches(&raw(d)).expect("match runs")
}
