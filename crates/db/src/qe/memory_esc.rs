//! An ESC held in a map (tests only): what `esc_tests.rs` counts over and
//! `rewrite_tests.rs` rewrites filters against, without a database.

use super::esc::EscReader;
use super::tokens::Token;
use crate::DbResult;
use bson::RawDocumentBuf;

/// The ESC's documents by `_id`.
#[derive(Default)]
pub(crate) struct MemoryEsc(pub(crate) std::collections::HashMap<Token, RawDocumentBuf>);

impl EscReader for MemoryEsc {
    fn get(&mut self, id: &Token) -> DbResult<Option<RawDocumentBuf>> {
        Ok(self.0.get(id).cloned())
    }
    fn count(&mut self) -> u64 {
        self.0.len() as u64
    }
}

impl MemoryEsc {
    pub(crate) fn put(&mut self, doc: bson::Document) {
        let id = match doc.get("_id") {
            Some(bson::Bson::Binary(b)) => b.bytes.clone().try_into().unwrap(),
            _ => unreachable!(),
        };
        self.0
            .insert(id, RawDocumentBuf::from_document(&doc).unwrap());
    }
}
