//! `$setWindowFields`' `window` argument and the documents it covers: `{documents: [lo, hi]}`
//! (offsets from the current document) or `{range: [lo, hi], unit?}` (distances from the
//! current document's `sortBy` value, numbers, or dates stepped by `unit`), each bound
//! `"unbounded"`, `"current"` or a constant, parsed as mongod 7.0's `WindowBounds::parse`
//! parses them (`FailedToParse` 9, 5339900 inverted, 5339901 documents without `sortBy`,
//! 5339902 range without one `sortBy` field, 8947401 descending); and the endpoints of the
//! window around one document of a partition, as mongod's `PartitionIterator` finds them
//! (5429413, 5429414, 5429513 for a current `sortBy` value of the wrong type). Pure: it
//! never evaluates an expression; callers hand it each document's sort value.

use crate::compare::raw_number_as_f64;
use std::cmp::Ordering;

use bson::raw::RawBsonRef;
use bson::Bson;

use super::super::simple::render;
use super::super::sort::SortSpec;
use crate::compare::compare_values;
use crate::matcher::expr_date_arith::date_add;
use crate::matcher::expr_date_zone::{Unit, Zone};
use crate::matcher::path::bson_error;
use crate::update::render::type_name;
use crate::{ErrorCode, MongoError};

/// One end of a window.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Bound<T> {
    Unbounded,
    Current,
    At(T),
}

/// A parsed `window`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Window {
    /// Offsets from the current document.
    Documents(Bound<i64>, Bound<i64>),
    /// Distances from the current document's sort value; with a unit, in date units.
    Range(Bound<f64>, Bound<f64>, Option<Unit>),
}

/// No `window`: the whole partition.
pub(crate) const WHOLE_PARTITION: Window = Window::Documents(Bound::Unbounded, Bound::Unbounded);

/// From the start of the partition to the current document (`$rank`, `$locf`, ...).
pub(crate) const TO_CURRENT: Window = Window::Documents(Bound::Unbounded, Bound::Current);

fn parse_error(message: impl Into<String>) -> MongoError {
    MongoError::new(ErrorCode::FailedToParse, message)
}

/// A window function's spec that holds the function `name` and an optional `window`: the
/// window (the whole partition when none is given) and the function's argument, if given;
/// any other field is mongod's FailedToParse.
pub(crate) fn window_and_argument<'a>(
    spec: &'a bson::RawDocument,
    name: &str,
    sort_by: Option<&SortSpec>,
) -> Result<(Window, Option<RawBsonRef<'a>>), MongoError> {
    let (mut window, mut argument) = (WHOLE_PARTITION, None);
    for item in spec {
        let (field, value) = item.map_err(bson_error)?;
        match field {
            "window" => window = parse(value, sort_by)?,
            f if f == name => argument = Some(value),
            other => {
                return Err(parse_error(format!(
                    "Window function found an unknown argument: {other}"
                )))
            }
        }
    }
    Ok((window, argument))
}

/// Parse `window: {...}` under the stage's `sortBy`.
pub(crate) fn parse(
    value: RawBsonRef<'_>,
    sort_by: Option<&SortSpec>,
) -> Result<Window, MongoError> {
    let RawBsonRef::Document(spec) = value else {
        return Err(parse_error("'window' field must be an object"));
    };
    let (mut documents, mut range, mut unit, mut fields) = (None, None, None, 0);
    for field in spec {
        let (name, value) = field.map_err(bson_error)?;
        fields += 1;
        match name {
            "documents" => documents = Some(value),
            "range" => range = Some(value),
            "unit" => unit = Some(value),
            _ => {}
        }
    }
    if documents.is_some() && range.is_some() {
        return Err(parse_error(
            "Window bounds can specify either 'documents' or 'unit', not both.",
        ));
    }
    if range.is_none() && unit.is_some() {
        return Err(parse_error(
            "Window bounds can only specify 'unit' with range-based bounds.",
        ));
    }
    if let Some(documents) = documents {
        if fields != 1 {
            return Err(parse_error(
                "'window' field that specifies documents cannot have other fields",
            ));
        }
        return parse_documents(documents, sort_by);
    }
    if let Some(range) = range {
        return parse_range(range, unit, fields, sort_by);
    }
    if fields != 0 {
        return Err(parse_error(
            "'window' field can only contain 'documents' as the only argument or 'range' with an \
             optional 'unit' field",
        ));
    }
    Ok(WHOLE_PARTITION)
}

fn parse_documents(
    value: RawBsonRef<'_>,
    sort_by: Option<&SortSpec>,
) -> Result<Window, MongoError> {
    let (lo, hi) = pair(value)?;
    let integer = |v: RawBsonRef<'_>| {
        whole_number(v)
            .filter(|n| i32::try_from(*n).is_ok())
            .ok_or_else(|| parse_error("Numeric document-based bounds must be an integer"))
    };
    let lower = bound(lo, integer)?;
    let upper = bound(hi, integer)?;
    check_forward(lower, upper, |x| x as f64)?;
    let window = Window::Documents(lower, upper);
    if window != WHOLE_PARTITION && sort_by.is_none() {
        return Err(MongoError::new(
            ErrorCode::Location5339901,
            "Document-based bounds require a sortBy",
        ));
    }
    Ok(window)
}

fn parse_range(
    value: RawBsonRef<'_>,
    unit: Option<RawBsonRef<'_>>,
    fields: usize,
    sort_by: Option<&SortSpec>,
) -> Result<Window, MongoError> {
    let (lo, hi) = pair(value)?;
    let unit = match unit {
        Some(unit) => {
            if fields != 2 {
                return Err(parse_error(
                    "'window' field that specifies unit cannot have other fields besides 'range'",
                ));
            }
            let RawBsonRef::String(name) = unit else {
                return Err(parse_error("'unit' must be a string"));
            };
            Some(
                Unit::parse(name)
                    .ok_or_else(|| parse_error(format!("unknown time unit value: {name}")))?,
            )
        }
        None if fields != 1 => {
            return Err(parse_error(
                "'window' field that specifies range cannot have other fields besides 'unit'",
            ))
        }
        None => None,
    };
    let number = |v: RawBsonRef<'_>| match unit {
        Some(_) => whole_number(v)
            .map(|n| n as f64)
            .ok_or_else(|| parse_error("With 'unit', range-based bounds must be an integer")),
        None => raw_number_as_f64(v)
            .ok_or_else(|| parse_error("Range-based bounds expression must be a number")),
    };
    let lower = bound(lo, number)?;
    let upper = bound(hi, number)?;
    check_forward(lower, upper, |x| x)?;
    match sort_by.map(SortSpec::single_key) {
        Some(Some((_, false))) => Ok(Window::Range(lower, upper, unit)),
        Some(Some((_, true))) => Err(MongoError::new(
            ErrorCode::Location8947401,
            "Range-based bounds require an ascending sortBy",
        )),
        _ => Err(MongoError::new(
            ErrorCode::Location5339902,
            "Range-based bounds require sortBy a single field",
        )),
    }
}

/// The two elements of a bounds array.
fn pair(value: RawBsonRef<'_>) -> Result<(RawBsonRef<'_>, RawBsonRef<'_>), MongoError> {
    let items: Vec<RawBsonRef<'_>> = match value {
        RawBsonRef::Array(a) => a
            .into_iter()
            .collect::<Result<_, _>>()
            .map_err(bson_error)?,
        _ => Vec::new(),
    };
    match items.as_slice() {
        [lo, hi] => Ok((*lo, *hi)),
        _ => Err(parse_error(format!(
            "Window bounds must be a 2-element array: {}",
            render(value)
        ))),
    }
}

fn bound<T>(
    value: RawBsonRef<'_>,
    convert: impl Fn(RawBsonRef<'_>) -> Result<T, MongoError>,
) -> Result<Bound<T>, MongoError> {
    match value {
        RawBsonRef::String("unbounded") => Ok(Bound::Unbounded),
        RawBsonRef::String("current") => Ok(Bound::Current),
        RawBsonRef::String(_) => Err(parse_error(
            "Window bounds must be 'unbounded', 'current', or a number.",
        )),
        RawBsonRef::Document(_) | RawBsonRef::Array(_) => {
            Err(parse_error("Window bounds expression must be a constant."))
        }
        other => convert(other).map(Bound::At),
    }
}

/// With `current` read as 0, a numeric lower bound may not pass a numeric upper one.
fn check_forward<T: Copy>(
    lower: Bound<T>,
    upper: Bound<T>,
    as_f64: impl Fn(T) -> f64,
) -> Result<(), MongoError> {
    let number = |b: Bound<T>| match b {
        Bound::Current => Some(0.0),
        Bound::At(x) => Some(as_f64(x)),
        Bound::Unbounded => None,
    };
    if let (Some(lo), Some(hi)) = (number(lower), number(upper)) {
        if lo > hi {
            return Err(MongoError::new(
                ErrorCode::Location5339900,
                format!("Lower bound must not exceed upper bound: [{lo}, {hi}]"),
            ));
        }
    }
    Ok(())
}

/// `check_forward` over document offsets, for other modules' tests.
#[cfg(test)]
pub(crate) fn check_forward_for_tests(
    lower: Bound<i64>,
    upper: Bound<i64>,
) -> Result<(), MongoError> {
    check_forward(lower, upper, |x| x as f64)
}

fn whole_number(v: RawBsonRef<'_>) -> Option<i64> {
    match v {
        RawBsonRef::Int32(i) => Some(i64::from(i)),
        RawBsonRef::Int64(i) => Some(i),
        other => raw_number_as_f64(other)
            .filter(|d| d.fract() == 0.0 && d.abs() < 9.0e15)
            .map(|d| d as i64),
    }
}

/// The window around document `at` of a partition of `len` documents, as inclusive
/// indexes, or `None` when it holds no document. `sort_values` (the `sortBy` field of each
/// document, `None` when missing) is read only by range windows.
pub(crate) fn endpoints(
    window: Window,
    at: usize,
    len: usize,
    sort_values: &[Option<Bson>],
) -> Result<Option<(usize, usize)>, MongoError> {
    debug_assert!(at < len);
    match window {
        Window::Documents(lower, upper) => Ok(document_endpoints(lower, upper, at, len)),
        Window::Range(lower, upper, unit) => range_endpoints(lower, upper, unit, at, sort_values),
    }
}

fn document_endpoints(
    lower: Bound<i64>,
    upper: Bound<i64>,
    at: usize,
    len: usize,
) -> Option<(usize, usize)> {
    let at = i64::try_from(at).ok()?;
    let last = i64::try_from(len).ok()? - 1;
    let offset = |b: Bound<i64>, unbounded: i64| match b {
        Bound::Unbounded => unbounded,
        Bound::Current => at,
        Bound::At(n) => at.saturating_add(n),
    };
    let lo = offset(lower, 0);
    let hi = offset(upper, last);
    if lo > last || hi < 0 {
        return None;
    }
    let lo = usize::try_from(lo.max(0)).ok()?;
    let hi = usize::try_from(hi.min(last)).ok()?;
    Some((lo, hi))
}

/// mongod's range search: the lower end is the first document at or past `base + lo` (if it
/// has the sort value's type), the upper end the last one at or before `base + hi`.
fn range_endpoints(
    lower: Bound<f64>,
    upper: Bound<f64>,
    unit: Option<Unit>,
    at: usize,
    values: &[Option<Bson>],
) -> Result<Option<(usize, usize)>, MongoError> {
    let base = values.get(at).cloned().flatten();
    let base_millis = check_base(base.as_ref(), unit)?;
    let expected = |v: &Option<Bson>| match (v, unit) {
        (Some(Bson::DateTime(_)), Some(_)) => true,
        (Some(v), None) => is_number(v),
        _ => false,
    };
    let threshold = |delta: f64| -> Result<Bson, MongoError> {
        match (unit, &base) {
            (Some(unit), _) => {
                let millis = date_add(base_millis, unit, delta as i64, Zone::Utc)?;
                Ok(Bson::DateTime(bson::DateTime::from_millis(millis)))
            }
            (None, Some(b)) => Ok(Bson::Double(number_of(b) + delta)),
            (None, None) => Ok(Bson::Null),
        }
    };
    // The partition is sorted by the sort value, so each end is a binary search.
    let null = Bson::Null;
    let key = |v: &'_ Option<Bson>| -> Bson { v.as_ref().unwrap_or(&null).clone() };
    let below = |t: &Bson| values.partition_point(|v| compare_values(&key(v), t) == Ordering::Less);
    let up_to =
        |t: &Bson| values.partition_point(|v| compare_values(&key(v), t) != Ordering::Greater);
    let (type_min, type_max) = match unit {
        Some(_) => (
            Bson::DateTime(bson::DateTime::MIN),
            Bson::DateTime(bson::DateTime::MAX),
        ),
        None => (Bson::Double(f64::NAN), Bson::Double(f64::INFINITY)),
    };
    let lo = match lower {
        Bound::Current => Some(at),
        Bound::Unbounded => Some(below(&type_min)),
        Bound::At(delta) => Some(below(&threshold(delta)?)),
    };
    let Some(lo) = lo.filter(|i| values.get(*i).is_some_and(expected)) else {
        return Ok(None);
    };
    let hi = match upper {
        Bound::Current => Some(at),
        Bound::Unbounded => up_to(&type_max).checked_sub(1),
        Bound::At(delta) => {
            let end = up_to(&threshold(delta)?);
            (end > lo).then(|| end - 1)
        }
    };
    Ok(hi.filter(|hi| *hi >= lo).map(|hi| (lo, hi)))
}

/// The current document's sort value must be a date with a unit, a number without one.
fn check_base(base: Option<&Bson>, unit: Option<Unit>) -> Result<i64, MongoError> {
    let type_of = |b: Option<&Bson>| b.map_or("missing", type_name);
    match (base, unit) {
        (Some(Bson::DateTime(d)), Some(_)) => Ok(d.timestamp_millis()),
        (other, Some(_)) => Err(MongoError::new(
            ErrorCode::Location5429513,
            format!(
                "Invalid range: Expected the sortBy field to be a Date, but it was {}",
                type_of(other)
            ),
        )),
        (Some(Bson::DateTime(_)), None) => Err(MongoError::new(
            ErrorCode::Location5429413,
            "Invalid range: For windows that involve date or time ranges, a unit must be \
             provided.",
        )),
        (Some(v), None) if is_number(v) => Ok(0),
        (other, None) => Err(MongoError::new(
            ErrorCode::Location5429414,
            format!(
                "Invalid range: Expected the sortBy field to be a number, but it was {}",
                type_of(other)
            ),
        )),
    }
}

fn is_number(v: &Bson) -> bool {
    matches!(
        v,
        Bson::Int32(_) | Bson::Int64(_) | Bson::Double(_) | Bson::Decimal128(_)
    )
}

fn number_of(v: &Bson) -> f64 {
    match v {
        Bson::Int32(i) => f64::from(*i),
        Bson::Int64(i) => *i as f64,
        Bson::Double(d) => *d,
        Bson::Decimal128(d) => crate::compare::decimal128_to_f64(d),
        _ => f64::NAN,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Variables;
    use bson::{doc, rawdoc};

    fn sort(spec: bson::Document) -> SortSpec {
        let raw = bson::RawDocumentBuf::from_document(&spec).expect("raw");
        super::super::super::sort::parse(RawBsonRef::Document(&raw), &Variables::new())
            .expect("sort")
    }

    fn window(spec: bson::RawDocumentBuf, by: Option<&SortSpec>) -> Result<Window, MongoError> {
        parse(RawBsonRef::Document(&spec), by)
    }

    #[test]
    fn parses_document_and_range_bounds_with_mongods_codes() {
        let by = sort(doc! {"x": 1});
        assert_eq!(
            window(rawdoc! {"documents": ["unbounded", -1]}, Some(&by)).expect("ok"),
            Window::Documents(Bound::Unbounded, Bound::At(-1))
        );
        assert_eq!(window(rawdoc! {}, None).expect("ok"), WHOLE_PARTITION);
        let code = |spec, by| window(spec, by).unwrap_err().code.code();
        assert_eq!(code(rawdoc! {"documents": [-1, 0]}, None), 5339901);
        assert_eq!(code(rawdoc! {"documents": [1, 0]}, Some(&by)), 5339900);
        assert_eq!(
            code(rawdoc! {"documents": ["current", -1]}, Some(&by)),
            5339900
        );
        assert_eq!(code(rawdoc! {"documents": [0.5, 1]}, Some(&by)), 9);
        assert_eq!(code(rawdoc! {"documents": [0]}, Some(&by)), 9);
        assert_eq!(code(rawdoc! {"documents": ["now", 0]}, Some(&by)), 9);
        assert_eq!(
            code(rawdoc! {"documents": [0, 1], "range": [0, 1]}, Some(&by)),
            9
        );
        assert_eq!(
            code(rawdoc! {"documents": [0, 1], "unit": "day"}, Some(&by)),
            9
        );
        assert_eq!(code(rawdoc! {"foo": 1}, Some(&by)), 9);
        assert_eq!(code(rawdoc! {"range": [-1, 1]}, None), 5339902);
        let two = sort(doc! {"x": 1, "y": 1});
        assert_eq!(code(rawdoc! {"range": [-1, 1]}, Some(&two)), 5339902);
        let down = sort(doc! {"x": -1});
        assert_eq!(code(rawdoc! {"range": [-1, 1]}, Some(&down)), 8947401);
        assert_eq!(code(rawdoc! {"range": ["a", 1]}, Some(&by)), 9);
        assert_eq!(
            code(rawdoc! {"range": [1.5, 2], "unit": "day"}, Some(&by)),
            9
        );
        assert_eq!(code(rawdoc! {"range": [1, 2], "unit": "eon"}, Some(&by)), 9);
        assert_eq!(
            window(rawdoc! {"range": [-1.5, "current"]}, Some(&by)).expect("ok"),
            Window::Range(Bound::At(-1.5), Bound::Current, None)
        );
    }

    #[test]
    fn document_windows_clamp_to_the_partition() {
        let w = |lo, hi, at| document_endpoints(lo, hi, at, 5);
        assert_eq!(w(Bound::At(-1), Bound::At(1), 0), Some((0, 1)));
        assert_eq!(w(Bound::At(-1), Bound::At(1), 4), Some((3, 4)));
        assert_eq!(w(Bound::Unbounded, Bound::Current, 2), Some((0, 2)));
        assert_eq!(w(Bound::Current, Bound::Unbounded, 2), Some((2, 4)));
        assert_eq!(w(Bound::At(-3), Bound::At(-2), 1), None);
        assert_eq!(w(Bound::At(2), Bound::At(9), 3), None);
        assert_eq!(w(Bound::At(1), Bound::At(9), 3), Some((4, 4)));
    }

    /// mongod's scan, document by document, as the model the binary search must match.
    fn scanned(
        lower: Bound<f64>,
        upper: Bound<f64>,
        at: usize,
        values: &[Option<Bson>],
    ) -> Option<(usize, usize)> {
        let number = |v: &Option<Bson>| v.as_ref().filter(|v| is_number(v)).map(number_of);
        let base = number(&values[at])?;
        let lo = match lower {
            Bound::Current => at,
            Bound::Unbounded => values.iter().position(|v| number(v).is_some())?,
            Bound::At(d) => {
                let i = values.iter().position(|v| match v {
                    Some(v) if is_number(v) => number_of(v) >= base + d,
                    Some(Bson::String(_)) => true,
                    _ => false,
                })?;
                number(&values[i])?;
                i
            }
        };
        let hi = match upper {
            Bound::Current => at,
            Bound::Unbounded => (lo.max(at)..values.len())
                .take_while(|i| number(&values[*i]).is_some())
                .last()?,
            Bound::At(d) => (lo..values.len())
                .take_while(|i| number(&values[*i]).is_some_and(|x| x <= base + d))
                .last()?,
        };
        (hi >= lo).then_some((lo, hi))
    }

    #[test]
    fn binary_search_matches_the_scan() {
        let mut seed = 7u64;
        let mut next = move |n: u64| {
            seed = seed
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            (seed >> 33) % n
        };
        let bounds = [
            Bound::Unbounded,
            Bound::Current,
            Bound::At(-3.0),
            Bound::At(-0.5),
            Bound::At(0.0),
            Bound::At(2.5),
        ];
        for _ in 0..200 {
            let nulls = next(3) as usize;
            let mut numbers: Vec<i64> = (0..next(12)).map(|_| next(20) as i64 - 5).collect();
            numbers.sort_unstable();
            let mut values: Vec<Option<Bson>> = vec![None; nulls];
            values.extend(numbers.iter().map(|n| Some(Bson::Int64(*n))));
            values.extend((0..next(2)).map(|_| Some(Bson::String("s".into()))));
            for (lower, upper) in bounds
                .iter()
                .flat_map(|l| bounds.iter().map(move |u| (*l, *u)))
            {
                if check_forward(lower, upper, |x| x).is_err() {
                    continue;
                }
                for at in nulls..nulls + numbers.len() {
                    let got = range_endpoints(lower, upper, None, at, &values).expect("numbers");
                    assert_eq!(
                        got,
                        scanned(lower, upper, at, &values),
                        "{lower:?} {upper:?} at {at} in {values:?}"
                    );
                }
            }
        }
    }

    #[test]
    fn range_windows_follow_sort_values() {
        let vals: Vec<Option<Bson>> = vec![
            None,
            Some(Bson::Null),
            Some(Bson::Int32(1)),
            Some(Bson::Int32(2)),
            Some(Bson::Double(2.5)),
            Some(Bson::Int32(4)),
            Some(Bson::String("s".into())),
        ];
        let r = |lo, hi, at| range_endpoints(lo, hi, None, at, &vals).expect("numeric");
        assert_eq!(r(Bound::At(-1.0), Bound::At(1.0), 3), Some((2, 4)));
        assert_eq!(r(Bound::Unbounded, Bound::Current, 4), Some((2, 4)));
        assert_eq!(r(Bound::Current, Bound::Unbounded, 3), Some((3, 5)));
        assert_eq!(r(Bound::At(-0.5), Bound::At(0.5), 5), Some((5, 5)));
        assert_eq!(r(Bound::At(-10.0), Bound::At(-5.0), 2), None);
        assert_eq!(r(Bound::At(5.0), Bound::At(9.0), 5), None);
        let err = |at| range_endpoints(Bound::Current, Bound::Current, None, at, &vals);
        assert_eq!(err(0).unwrap_err().code.code(), 5429414);
        assert_eq!(err(6).unwrap_err().code.code(), 5429414);
        let day = 86_400_000;
        let dates: Vec<Option<Bson>> = (0..4)
            .map(|d| Some(Bson::DateTime(bson::DateTime::from_millis(d * day))))
            .collect();
        let d = |lo, hi, at| range_endpoints(lo, hi, Some(Unit::Day), at, &dates);
        assert_eq!(
            d(Bound::At(-1.0), Bound::Current, 2).expect("dates"),
            Some((1, 2))
        );
        assert_eq!(
            range_endpoints(Bound::Current, Bound::Current, None, 0, &dates)
                .unwrap_err()
                .code
                .code(),
            5429413
        );
        assert_eq!(
            range_endpoints(Bound::Current, Bound::Current, Some(Unit::Day), 2, &vals)
                .unwrap_err()
                .code
                .code(),
            5429513
        );
    }
}
