//! Any bytes as a BSON document, read by everything that reads client documents: as a
//! filter (parse, then match the document against itself), a projection, an update, an
//! aggregation stage, and as index keys on its own fields. Errors are fine; panics are not.
//! Like the server's wire layer, it first refuses documents nested past mongod's limit with
//! the iterative depth scan (docs/limits.md); the seeds include deep documents on both sides
//! of that limit.

#![no_main]

use bson::{Document, RawDocumentBuf};
use libfuzzer_sys::fuzz_target;
use shale_doc::aggregate::Pipeline;
use shale_doc::{encode_value, ApplyContext, Matcher, Projection, UpdateSpec};

fuzz_target!(|data: &[u8]| {
    if shale_doc::check_depth(data, shale_doc::MAX_WIRE_DEPTH).is_err() {
        return;
    }
    let Ok(raw) = RawDocumentBuf::from_bytes(data.to_vec()) else {
        return;
    };
    if let Ok(m) = Matcher::parse(&raw) {
        let _ = m.matches_with_position(&raw);
    }
    if let Ok(p) = Projection::parse(&raw) {
        let _ = p.apply(&raw, Some(0));
        let _ = p.apply(&raw, None);
    }
    let Ok(doc) = Document::try_from(raw.as_ref()) else {
        return;
    };
    if let Ok(u) = UpdateSpec::parse(&doc, None) {
        let mut target = doc.clone();
        let _ = u.apply(
            &mut target,
            &ApplyContext::new(bson::DateTime::from_millis(0)),
        );
        let _ = u.build_upsert(&doc, &ApplyContext::new(bson::DateTime::from_millis(0)));
    }
    let _ = Pipeline::parse(std::slice::from_ref(&doc)).map(|p| {
        p.run_documents(
            std::slice::from_ref(&doc),
            &shale_doc::aggregate::NoCollections,
        )
    });
    let mut out = Vec::new();
    for (_, v) in &doc {
        encode_value(v, &mut out);
    }
});
