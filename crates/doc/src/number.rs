//! Counts and sizes in replies typed as mongod types them: its `appendNumber` writes an int32
//! when the value fits and an int64 otherwise, and drivers read the type (Java's
//! `getInteger("n")` throws on an int64). One helper for every crate that builds replies.

use bson::Bson;

/// `n` as mongod's `BSONObjBuilder::appendNumber(long long)` appends it.
pub fn append_number(n: i64) -> Bson {
    i32::try_from(n).map_or(Bson::Int64(n), Bson::Int32)
}

/// A number of any BSON numeric type but decimal as a double (`None` for other types), for
/// the options mongod reads with `numberDouble()` (a delete's `limit`, an index's `v`).
pub fn number_as_f64(v: &Bson) -> Option<f64> {
    match v {
        Bson::Int32(n) => Some(f64::from(*n)),
        Bson::Int64(n) => Some(*n as f64),
        Bson::Double(n) => Some(*n),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn int32_where_it_fits() {
        assert_eq!(append_number(0), Bson::Int32(0));
        assert_eq!(append_number(-5), Bson::Int32(-5));
        assert_eq!(append_number(i64::from(i32::MAX)), Bson::Int32(i32::MAX));
        assert_eq!(append_number(i64::from(i32::MAX) + 1), Bson::Int64(1 << 31));
        assert_eq!(
            append_number(i64::from(i32::MIN) - 1),
            Bson::Int64(-(1 << 31) - 1)
        );
    }
}
