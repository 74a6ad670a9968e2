//! Index bounds: which key ranges of an index (or of the `_id`-keyed document tree) can hold
//! documents a filter matches. Bounds are always a superset — the executor runs the full
//! matcher on every document it fetches — so a predicate the planner does not understand
//! only widens a scan, never changes a result.
//!
//! A bound on one field is a list of intervals between *cuts* in the space of that field's
//! encoded values (docs/keystring.md): `Before(b)` lies just before every encoding that
//! starts with bytes `b`, `After(b)` just after all of them. Comparisons are type-bracketed as
//! in MongoDB: `{$gt: 5}` spans from just after 5 to the end of the numbers bracket (the
//! bracket is the one-byte type tag prefix). A descending field's bytes are inverted, which
//! turns `Before(b)` into `After(!b)` and swaps an interval's ends.

use bson::{Bson, Document};
use shale_doc::{canonical_type_order, encode_value, Direction};
use std::cmp::Ordering;

/// A position between encoded keys.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Cut {
    Before(Vec<u8>),
    After(Vec<u8>),
}

impl Cut {
    fn bytes(&self) -> &[u8] {
        match self {
            Cut::Before(b) | Cut::After(b) => b,
        }
    }

    /// The cut in the inverted (descending) encoding.
    fn flipped(&self) -> Cut {
        let inv = |b: &[u8]| b.iter().map(|x| !x).collect::<Vec<u8>>();
        match self {
            Cut::Before(b) => Cut::After(inv(b)),
            Cut::After(b) => Cut::Before(inv(b)),
        }
    }
}

impl Ord for Cut {
    fn cmp(&self, other: &Cut) -> Ordering {
        let (a, b) = (self.bytes(), other.bytes());
        let n = a.len().min(b.len());
        match a[..n].cmp(&b[..n]) {
            Ordering::Equal => {}
            o => return o,
        }
        // One is a prefix of the other (or they are equal).
        let side = |c: &Cut| matches!(c, Cut::After(_));
        match a.len().cmp(&b.len()) {
            Ordering::Equal => side(self).cmp(&side(other)),
            // `a` is a proper prefix of `b`: Before(a) precedes everything under b, After(a)
            // follows it.
            Ordering::Less => {
                if side(self) {
                    Ordering::Greater
                } else {
                    Ordering::Less
                }
            }
            Ordering::Greater => {
                if side(other) {
                    Ordering::Less
                } else {
                    Ordering::Greater
                }
            }
        }
    }
}

impl PartialOrd for Cut {
    fn partial_cmp(&self, other: &Cut) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

/// An interval `[lo, hi]` between two cuts, with what `explain` shows at each end (in
/// value order, whatever the index direction: `[3, 7)`, `(5, inf.0]`), rendered only when
/// explain asks, not on every planned query.
#[derive(Debug, Clone)]
pub struct Interval {
    pub lo: Cut,
    pub hi: Cut,
    lo_end: Shown,
    hi_end: Shown,
}

/// One end of an interval as `explain` shows it.
#[derive(Debug, Clone)]
enum Shown {
    /// A value, included or not.
    Value(Bson, bool),
    /// The end of the value's type bracket (`[-inf.0`, `inf.0]`, `[""`, `{})`, ...).
    Bracket(Bson),
}

impl Shown {
    fn as_low(&self) -> String {
        match self {
            Shown::Value(v, incl) => format!("{}{}", if *incl { "[" } else { "(" }, shown(v)),
            Shown::Bracket(v) => bracket_ends(v).0,
        }
    }

    fn as_high(&self) -> String {
        match self {
            Shown::Value(v, incl) => format!("{}{}", shown(v), if *incl { "]" } else { ")" }),
            Shown::Bracket(v) => bracket_ends(v).1,
        }
    }
}

impl PartialEq for Interval {
    /// Intervals are equal when their cuts are (5 and 5.0 are one point).
    fn eq(&self, other: &Interval) -> bool {
        self.lo == other.lo && self.hi == other.hi
    }
}

impl Interval {
    pub fn point(v: &Bson) -> Interval {
        let e = encode(v);
        Interval {
            lo: Cut::Before(e.clone()),
            hi: Cut::After(e),
            lo_end: Shown::Value(v.clone(), true),
            hi_end: Shown::Value(v.clone(), true),
        }
    }

    /// `explain`'s text for the interval.
    pub fn text(&self) -> String {
        format!("{}, {}", self.lo_end.as_low(), self.hi_end.as_high())
    }

    pub fn is_point(&self) -> bool {
        matches!((&self.lo, &self.hi), (Cut::Before(a), Cut::After(b)) if a == b)
    }

    fn is_empty(&self) -> bool {
        self.lo >= self.hi
    }

    fn intersect(&self, other: &Interval) -> Interval {
        let lo = if self.lo >= other.lo { self } else { other };
        let hi = if self.hi <= other.hi { self } else { other };
        Interval {
            lo: lo.lo.clone(),
            hi: hi.hi.clone(),
            lo_end: lo.lo_end.clone(),
            hi_end: hi.hi_end.clone(),
        }
    }

    fn directed(&self, dir: Direction) -> Interval {
        match dir {
            Direction::Ascending => self.clone(),
            Direction::Descending => Interval {
                lo: self.hi.flipped(),
                hi: self.lo.flipped(),
                lo_end: self.lo_end.clone(),
                hi_end: self.hi_end.clone(),
            },
        }
    }
}

/// The bound on one field: intervals in ascending key order, or everything.
#[derive(Debug, Clone, PartialEq)]
pub enum FieldBound {
    All,
    Intervals(Vec<Interval>),
}

impl FieldBound {
    /// True when the field is pinned to exactly one value.
    pub fn is_single_point(&self) -> bool {
        matches!(self, FieldBound::Intervals(v) if v.len() == 1 && v[0].is_point())
    }

    pub fn is_points(&self) -> bool {
        matches!(self, FieldBound::Intervals(v) if v.iter().all(Interval::is_point))
    }

    /// The values of a points-only bound; `None` for any other bound.
    pub fn point_values(&self) -> Option<Vec<Bson>> {
        match self {
            FieldBound::Intervals(v) if self.is_points() => v
                .iter()
                .map(|i| match &i.lo_end {
                    Shown::Value(b, _) => Some(b.clone()),
                    Shown::Bracket(_) => None,
                })
                .collect(),
            _ => None,
        }
    }

    /// The encoded values of a points-only bound, ascending (each is the document tree's
    /// key for that `_id`); `None` for any other bound.
    pub fn point_keys(&self) -> Option<Vec<Vec<u8>>> {
        match self {
            FieldBound::Intervals(v) if self.is_points() => {
                Some(v.iter().map(|i| i.lo.bytes().to_vec()).collect())
            }
            _ => None,
        }
    }
}

fn encode(v: &Bson) -> Vec<u8> {
    let mut out = Vec::new();
    encode_value(v, &mut out);
    out
}

/// Whether an equality or comparison against `v` can be answered from index keys: arrays,
/// null, undefined and regular expressions match in ways keys do not show.
fn usable(v: &Bson) -> bool {
    !matches!(
        v,
        Bson::Array(_)
            | Bson::Null
            | Bson::Undefined
            | Bson::RegularExpression(_)
            | Bson::MinKey
            | Bson::MaxKey
    ) && !matches!(v, Bson::Document(d) if d.keys().next().is_some_and(|k| k.starts_with('$')))
}

/// The predicates of a filter's top-level conjunction on `path`, as one field bound.
/// `multikey`: the index holds several keys per document on some path, so two comparisons
/// on one field may be met by different array elements and must not be intersected.
pub fn field_bound(filter: &Document, path: &str, multikey: bool) -> FieldBound {
    let mut bound: Option<Vec<Interval>> = None;
    let add = |ivs: Vec<Interval>, bound: &mut Option<Vec<Interval>>| match bound {
        None => *bound = Some(ivs),
        Some(_) if multikey => {}
        Some(cur) => *cur = intersect_lists(cur, &ivs),
    };
    for_each_predicate(filter, path, &mut |op, v| {
        if let Some(ivs) = predicate_intervals(op, v) {
            add(ivs, &mut bound);
        }
    });
    match bound {
        None => FieldBound::All,
        Some(v) => FieldBound::Intervals(v),
    }
}

/// Calls `f(operator, value)` for every predicate on `path` in the filter's top-level
/// conjunction (`$and` included); a literal value is `$eq`.
fn for_each_predicate(filter: &Document, path: &str, f: &mut dyn FnMut(&str, &Bson)) {
    for (k, v) in filter {
        if k == "$and" {
            if let Bson::Array(items) = v {
                for item in items {
                    if let Bson::Document(d) = item {
                        for_each_predicate(d, path, f);
                    }
                }
            }
            continue;
        }
        if k != path {
            continue;
        }
        match v {
            Bson::Document(ops) if ops.keys().next().is_some_and(|k| k.starts_with('$')) => {
                for (op, arg) in ops {
                    f(op, arg);
                }
            }
            literal => f("$eq", literal),
        }
    }
}

fn predicate_intervals(op: &str, v: &Bson) -> Option<Vec<Interval>> {
    match op {
        "$eq" => usable(v).then(|| vec![Interval::point(v)]),
        "$in" => {
            let Bson::Array(items) = v else { return None };
            if !items.iter().all(usable) {
                return None;
            }
            let mut points: Vec<Interval> = items.iter().map(Interval::point).collect();
            points.sort_by(|a, b| a.lo.cmp(&b.lo));
            points.dedup();
            Some(points)
        }
        "$gt" | "$gte" | "$lt" | "$lte" => {
            if !usable(v) {
                return None;
            }
            let e = encode(v);
            let tag = vec![canonical_type_order(v)];
            let value = |incl| Shown::Value(v.clone(), incl);
            let bracket = Shown::Bracket(v.clone());
            // A decimal128's key is its nearest double, so a number's key may be shared by
            // values on both sides of it: a strict numeric bound keeps the keys equal to its
            // own and the matcher drops what is not past it (explain still shows it open).
            let strict_lo = |e: Vec<u8>| {
                if is_number(v) {
                    Cut::Before(e)
                } else {
                    Cut::After(e)
                }
            };
            let strict_hi = |e: Vec<u8>| {
                if is_number(v) {
                    Cut::After(e)
                } else {
                    Cut::Before(e)
                }
            };
            let (lo, hi, lo_end, hi_end) = match op {
                "$gt" => (strict_lo(e), Cut::After(tag), value(false), bracket),
                "$gte" => (Cut::Before(e), Cut::After(tag), value(true), bracket),
                "$lt" => (Cut::Before(tag), strict_hi(e), bracket, value(false)),
                _ => (Cut::Before(tag), Cut::After(e), bracket, value(true)),
            };
            Some(vec![Interval {
                lo,
                hi,
                lo_end,
                hi_end,
            }])
        }
        _ => None,
    }
}

fn is_number(v: &Bson) -> bool {
    matches!(
        v,
        Bson::Int32(_) | Bson::Int64(_) | Bson::Double(_) | Bson::Decimal128(_)
    )
}

/// A value as `explain` shows it in bounds.
fn shown(v: &Bson) -> String {
    match v {
        Bson::String(s) => format!("{s:?}"),
        other => other.to_string(),
    }
}

/// How `explain` shows the ends of a value's type bracket.
fn bracket_ends(v: &Bson) -> (String, String) {
    match v {
        Bson::Int32(_) | Bson::Int64(_) | Bson::Double(_) | Bson::Decimal128(_) => {
            ("[-inf.0".into(), "inf.0]".into())
        }
        Bson::String(_) | Bson::Symbol(_) => ("[\"\"".into(), "{})".into()),
        Bson::DateTime(_) => (
            "[new Date(-9223372036854775808)".into(),
            "new Date(9223372036854775807)]".into(),
        ),
        _ => ("[MinKey".into(), "MaxKey]".into()),
    }
}

fn intersect_lists(a: &[Interval], b: &[Interval]) -> Vec<Interval> {
    let mut out = Vec::new();
    for x in a {
        for y in b {
            let i = x.intersect(y);
            if !i.is_empty() {
                out.push(i);
            }
        }
    }
    out.sort_by(|p, q| p.lo.cmp(&q.lo));
    out
}

/// A range of tree keys: from `start` (inclusive) to `end` (exclusive; `None` = to the end).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyRange {
    pub start: Vec<u8>,
    pub end: Option<Vec<u8>>,
}

/// Most ranges one compound bound expands to before the planner stops adding fields.
const MAX_RANGES: usize = 512;

/// The key ranges for an index with fields in `dirs` and per-field bounds (same order),
/// sorted in ascending key order. Leading point-only fields are combined; the first field
/// that is not points contributes its intervals and ends the prefix.
pub fn key_ranges(bounds: &[FieldBound], dirs: &[Direction]) -> Vec<KeyRange> {
    let mut prefixes: Vec<Vec<u8>> = vec![Vec::new()];
    let mut tail: Option<Vec<Interval>> = None;
    for (bound, dir) in bounds.iter().zip(dirs) {
        let FieldBound::Intervals(ivs) = bound else {
            break;
        };
        let ivs: Vec<Interval> = ivs.iter().map(|i| i.directed(*dir)).collect();
        if bound.is_points() && prefixes.len() * ivs.len() <= MAX_RANGES {
            prefixes = prefixes
                .iter()
                .flat_map(|p| {
                    ivs.iter().map(move |i| {
                        let mut k = p.clone();
                        k.extend_from_slice(i.lo.bytes());
                        k
                    })
                })
                .collect();
            if ivs.is_empty() {
                return Vec::new();
            }
            continue;
        }
        if prefixes.len() * ivs.len() <= MAX_RANGES {
            tail = Some(ivs);
        }
        break;
    }
    let mut out = Vec::new();
    for p in &prefixes {
        match &tail {
            None => out.push(KeyRange {
                start: p.clone(),
                end: prefix_successor(p),
            }),
            Some(ivs) => {
                for iv in ivs {
                    out.push(KeyRange {
                        start: cut_key(p, &iv.lo),
                        end: cut_end(p, &iv.hi),
                    });
                }
            }
        }
    }
    out.sort_by(|a, b| a.start.cmp(&b.start));
    out
}

fn cut_key(prefix: &[u8], cut: &Cut) -> Vec<u8> {
    let mut k = prefix.to_vec();
    k.extend_from_slice(cut.bytes());
    match cut {
        Cut::Before(_) => k,
        Cut::After(_) => prefix_successor(&k).unwrap_or_else(|| vec![0xFF; k.len() + 1]),
    }
}

fn cut_end(prefix: &[u8], cut: &Cut) -> Option<Vec<u8>> {
    let mut k = prefix.to_vec();
    k.extend_from_slice(cut.bytes());
    match cut {
        Cut::Before(_) => Some(k),
        Cut::After(_) => prefix_successor(&k),
    }
}

/// The smallest key greater than every key that starts with `p`; `None` if there is none.
pub fn prefix_successor(p: &[u8]) -> Option<Vec<u8>> {
    let mut k = p.to_vec();
    while let Some(last) = k.pop() {
        if last != 0xFF {
            k.push(last + 1);
            return Some(k);
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::doc;
    use shale_doc::encode_key;

    fn in_ranges(ranges: &[KeyRange], key: &[u8]) -> bool {
        ranges
            .iter()
            .any(|r| key >= &r.start[..] && r.end.as_ref().is_none_or(|e| key < &e[..]))
    }

    fn key(vals: &[(Bson, Direction)], suffix: &[u8]) -> Vec<u8> {
        let pairs: Vec<(&Bson, Direction)> = vals.iter().map(|(v, d)| (v, *d)).collect();
        let mut k = encode_key(&pairs);
        k.extend_from_slice(suffix);
        k
    }

    #[test]
    fn ranges_hold_exactly_the_bracketed_values() {
        for dir in [Direction::Ascending, Direction::Descending] {
            let f = doc! {"a": {"$gt": 5, "$lte": 9}};
            let r = key_ranges(&[field_bound(&f, "a", false)], &[dir]);
            // The key of 5 itself is scanned: a decimal past 5 may share it (the matcher
            // drops the 5s).
            for (v, inside) in [(4, false), (5, true), (6, true), (9, true), (10, false)] {
                assert_eq!(
                    in_ranges(&r, &key(&[(Bson::Int32(v), dir)], b"\x05id")),
                    inside,
                    "{v} {dir:?}"
                );
            }
            assert!(!in_ranges(
                &r,
                &key(&[(Bson::String("7".into()), dir)], b"")
            ));
            let f = doc! {"a": {"$lt": 3}};
            let r = key_ranges(&[field_bound(&f, "a", false)], &[dir]);
            assert!(in_ranges(&r, &key(&[(Bson::Double(-1e300), dir)], b"x")));
            assert!(!in_ranges(&r, &key(&[(Bson::Null, dir)], b"x")));
            // Decimals on either side of the double 0.1 share its key; both are scanned.
            let below: bson::Decimal128 = "0.1".parse().expect("literal");
            let above: bson::Decimal128 = "0.10000000000000000556".parse().expect("literal");
            for (op, d) in [("$lt", below), ("$gt", above)] {
                let f = doc! {"a": {op: 0.1}};
                let r = key_ranges(&[field_bound(&f, "a", false)], &[dir]);
                assert!(
                    in_ranges(&r, &key(&[(Bson::Decimal128(d), dir)], b"x")),
                    "{op}"
                );
            }
        }
    }

    #[test]
    fn compound_points_then_range() {
        let f = doc! {"a": {"$in": [1, 2]}, "b": {"$gte": "m"}};
        let dirs = [Direction::Ascending, Direction::Descending];
        let bounds = [field_bound(&f, "a", false), field_bound(&f, "b", false)];
        let r = key_ranges(&bounds, &dirs);
        assert_eq!(r.len(), 2);
        let k = |a: i32, b: &str| {
            key(
                &[(Bson::Int32(a), dirs[0]), (Bson::String(b.into()), dirs[1])],
                b"id",
            )
        };
        assert!(in_ranges(&r, &k(1, "m")) && in_ranges(&r, &k(2, "z")));
        assert!(!in_ranges(&r, &k(1, "a")) && !in_ranges(&r, &k(3, "z")));
    }

    #[test]
    fn multikey_fields_keep_one_comparison() {
        let f = doc! {"a": {"$gt": 1, "$lt": 5}};
        let r = key_ranges(&[field_bound(&f, "a", true)], &[Direction::Ascending]);
        assert!(in_ranges(
            &r,
            &key(&[(Bson::Int32(10), Direction::Ascending)], b"")
        ));
        let r = key_ranges(&[field_bound(&f, "a", false)], &[Direction::Ascending]);
        assert!(!in_ranges(
            &r,
            &key(&[(Bson::Int32(10), Direction::Ascending)], b"")
        ));
    }

    #[test]
    fn explain_text_and_equal_numbers_are_one_point() {
        let texts = |f: Document| match field_bound(&f, "a", false) {
            FieldBound::Intervals(v) => v.iter().map(Interval::text).collect::<Vec<_>>(),
            FieldBound::All => vec![],
        };
        assert_eq!(texts(doc! {"a": {"$gt": 5, "$lt": 9}}), vec!["(5, 9)"]);
        assert_eq!(texts(doc! {"a": {"$lte": "m"}}), vec!["[\"\", \"m\"]"]);
        assert_eq!(texts(doc! {"a": {"$in": [5, 5.0, 2]}}).len(), 2);
    }

    #[test]
    fn unusable_predicates_leave_the_field_unbounded() {
        for f in [
            doc! {"a": null},
            doc! {"a": [1]},
            doc! {"a": {"$ne": 1}},
            doc! {"b": 1},
        ] {
            assert_eq!(field_bound(&f, "a", false), FieldBound::All, "{f}");
        }
        let f = doc! {"$and": [{"a": 1}, {"a": 2}]};
        assert_eq!(
            key_ranges(&[field_bound(&f, "a", false)], &[Direction::Ascending]),
            vec![]
        );
    }
}
