//! A parsed filter put under a collation: every comparison (`$eq`, `$ne`, `$gt...`, `$in`,
//! `$nin`, `$all`'s equalities, inside `$elemMatch`, `$not`, `$and`/`$or`/`$nor`) compares
//! strings by the collation. `$regex`, `$type`, `$exists`, `$size` and `$mod` are not
//! affected, as in mongod. `$expr` is not collated here (docs/compat.md).

use std::sync::Arc;

use super::{Node, Pred};
use crate::collation::Collation;

/// Puts every comparison under `node` under collation `c`.
pub(crate) fn collate_node(node: &mut Node, c: &Arc<Collation>) {
    match node {
        Node::And(children) | Node::Or(children) | Node::Nor(children) => {
            for child in children {
                collate_node(child, c);
            }
        }
        Node::Not(child) => collate_node(child, c),
        Node::Leaf { pred, .. } => collate_pred(pred, c),
        Node::Expr(_) | Node::Always(_) => {}
    }
}

fn collate_pred(pred: &mut Pred, c: &Arc<Collation>) {
    match pred {
        Pred::Compare(compare) => compare.collated(c),
        Pred::In(list) => list.collated(c),
        Pred::ElemMatchValue(nodes) => {
            for n in nodes {
                collate_node(n, c);
            }
        }
        Pred::ElemMatchObject(node) => collate_node(node, c),
        Pred::Exists | Pred::Type(_) | Pred::Regex(_) | Pred::Mod(_) | Pred::Size(_) => {}
    }
}

#[cfg(test)]
mod tests {
    use crate::matcher::test_support::raw;
    use crate::{Collation, Matcher, Variables};
    use bson::{doc, Bson, Document};
    use std::sync::Arc;

    fn matches_under(spec: Document, filter: Document, d: Document) -> bool {
        let c = Collation::parse(&Bson::Document(spec), "find")
            .unwrap()
            .map(Arc::new);
        let vars = Variables::new().with_collation(c);
        let m = Matcher::parse_with(&raw(filter), &vars).expect("parses");
        m.matches(&raw(d)).expect("runs")
    }

    #[test]
    fn comparisons_follow_the_collation() {
        let s2 = || doc! {"locale": "en_US", "strength": 2};
        assert!(matches_under(s2(), doc! {"x": "PING"}, doc! {"x": "ping"}));
        assert!(matches_under(
            s2(),
            doc! {"x": {"$eq": "PING"}},
            doc! {"x": ["a", "Ping"]}
        ));
        assert!(!matches_under(
            s2(),
            doc! {"x": {"$ne": "PING"}},
            doc! {"x": "ping"}
        ));
        assert!(matches_under(
            s2(),
            doc! {"x": {"$in": ["A", "B"]}},
            doc! {"x": "b"}
        ));
        assert!(!matches_under(
            s2(),
            doc! {"x": {"$nin": ["A", "B"]}},
            doc! {"x": "b"}
        ));
        assert!(matches_under(
            s2(),
            doc! {"x": {"$gt": "a"}},
            doc! {"x": "B"}
        ));
        assert!(!matches_under(
            s2(),
            doc! {"x": {"$gt": "B"}},
            doc! {"x": "b"}
        ));
        assert!(matches_under(
            s2(),
            doc! {"x": {"$all": ["A", "b"]}},
            doc! {"x": ["a", "B"]}
        ));
        assert!(matches_under(
            s2(),
            doc! {"x": {"$elemMatch": {"y": "Q"}}},
            doc! {"x": [{"y": "q"}]}
        ));
        assert!(matches_under(
            s2(),
            doc! {"x": {"a": "Q"}},
            doc! {"x": {"a": "q"}}
        ));
        assert!(!matches_under(
            s2(),
            doc! {"x": {"A": "q"}},
            doc! {"x": {"a": "q"}}
        ));
        // Accents still count at strength 2, not at strength 1.
        assert!(!matches_under(s2(), doc! {"x": "cafe"}, doc! {"x": "café"}));
        assert!(matches_under(
            doc! {"locale": "en", "strength": 1},
            doc! {"x": "cafe"},
            doc! {"x": "CAFÉ"}
        ));
        // Numbers are unaffected.
        assert!(matches_under(
            s2(),
            doc! {"x": {"$in": [1, "A"]}},
            doc! {"x": 1.0}
        ));
    }

    #[test]
    fn regex_ignores_the_collation() {
        let s2 = doc! {"locale": "en", "strength": 2};
        assert!(!matches_under(
            s2.clone(),
            doc! {"x": {"$regex": "^P"}},
            doc! {"x": "ping"}
        ));
        assert!(!matches_under(
            s2,
            doc! {"x": {"$in": [Bson::RegularExpression(bson::Regex { pattern: "^P".into(), options: String::new() })]}},
            doc! {"x": "ping"}
        ));
    }

    #[test]
    fn a_long_in_list_is_searched_under_the_collation() {
        let s2 = doc! {"locale": "en", "strength": 2};
        let list: Vec<Bson> = (0..20).map(|i| Bson::String(format!("Name{i}"))).collect();
        assert!(matches_under(
            s2.clone(),
            doc! {"x": {"$in": list.clone()}},
            doc! {"x": "NAME7"}
        ));
        assert!(!matches_under(
            s2,
            doc! {"x": {"$in": list}},
            doc! {"x": "NAME77"}
        ));
    }

    #[test]
    fn simple_collation_is_binary() {
        assert!(!matches_under(
            doc! {"locale": "simple"},
            doc! {"x": "PING"},
            doc! {"x": "ping"}
        ));
    }
}
