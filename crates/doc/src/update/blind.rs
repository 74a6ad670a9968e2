//! What an update applied blind — without reading the document first, as a read-free
//! ("fast") update is — may write: the operator document to send, and every path it can
//! change. An update qualifies only in operator form, with no positional path (`$`, `$[]`,
//! `$[id]`: they need the query's match or the document's arrays), no `arrayFilters`, and no
//! zero timestamp anywhere in its arguments (mongod fills a stored top-level zero timestamp
//! with the current time, which a callback replayed after a restart could not repeat). It
//! never decides about indexes or storage: the caller checks the paths against them.

use bson::{Bson, Document};

use super::{Action, Form, UpdateSpec};

impl UpdateSpec {
    /// The paths (dotted, as written) this update may change if it can be applied blind,
    /// `$rename` giving both its source and its destination; `None` when it cannot be.
    pub fn blind_paths(&self) -> Option<Vec<&str>> {
        let Form::Operators(ops) = &self.form else {
            return None;
        };
        if self.array_filters.ids().next().is_some() {
            return None;
        }
        if self.source.as_ref().is_some_and(has_zero_timestamp) {
            return None;
        }
        let mut paths = Vec::with_capacity(ops.len());
        for op in ops {
            if op.path.is_dynamic() {
                return None;
            }
            paths.push(op.path.dotted());
            if let Action::Rename(to) = &op.action {
                if to.is_dynamic() {
                    return None;
                }
                paths.push(to.dotted());
            }
        }
        Some(paths)
    }

    /// The operator document as given, for an operator-form update (what a blind application
    /// parses again where it runs).
    pub fn operator_document(&self) -> Option<&Document> {
        self.source.as_ref()
    }
}

/// Whether a zero timestamp (time 0, increment 0) appears anywhere in `doc`.
fn has_zero_timestamp(doc: &Document) -> bool {
    // Iterative, so a deep argument cannot exhaust the stack.
    let mut pending: Vec<&Bson> = doc.values().collect();
    while let Some(v) = pending.pop() {
        match v {
            Bson::Timestamp(t) if t.time == 0 && t.increment == 0 => return true,
            Bson::Document(d) => pending.extend(d.values()),
            Bson::Array(a) => pending.extend(a.iter()),
            _ => {}
        }
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::doc;

    fn spec(u: Document) -> UpdateSpec {
        UpdateSpec::parse(&u, None).expect("parse")
    }

    #[test]
    fn operator_updates_give_their_paths() {
        let u = spec(doc! {"$inc": {"a": 1, "b.c": 2}, "$set": {"d": 1}, "$rename": {"e": "f"}});
        let mut paths = u.blind_paths().expect("blind");
        paths.sort_unstable();
        assert_eq!(paths, ["a", "b.c", "d", "e", "f"]);
        assert_eq!(
            u.operator_document().expect("source").keys().count(),
            3,
            "the document is kept as given"
        );
    }

    #[test]
    fn replacement_positional_filtered_and_zero_timestamps_are_not_blind() {
        assert!(spec(doc! {"a": 1}).blind_paths().is_none());
        assert!(spec(doc! {"$set": {"a.$": 1}}).blind_paths().is_none());
        assert!(spec(doc! {"$inc": {"a.$[].b": 1}}).blind_paths().is_none());
        let filtered = UpdateSpec::parse(
            &doc! {"$set": {"a.$[x]": 1}},
            Some(&[doc! {"x": {"$gt": 1}}]),
        )
        .expect("parse");
        assert!(filtered.blind_paths().is_none());
        let zero = bson::Timestamp {
            time: 0,
            increment: 0,
        };
        assert!(spec(doc! {"$set": {"t": zero}}).blind_paths().is_none());
        assert!(spec(doc! {"$push": {"l": {"t": zero}}})
            .blind_paths()
            .is_none());
        let pipeline = UpdateSpec::parse_value(
            &Bson::Array(vec![Bson::Document(doc! {"$set": {"a": 1}})]),
            None,
        )
        .expect("pipeline");
        assert!(pipeline.blind_paths().is_none());
        assert!(pipeline.operator_document().is_none());
    }
}
