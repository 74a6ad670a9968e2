//! `$bucketAuto`'s `granularity`: the preferred-number series (Renard R5-R80, 1-2-5, E6-E192)
//! and powers of two that bucket boundaries are rounded to, with mongod 7.0's series values
//! (its R40 has no 335, as mongod's table) and its arithmetic: the series scaled by powers of
//! ten in doubles (`granularity_rounder_preferred_numbers.cpp`), powers of two through `$pow`'s
//! integer rules (`granularity_rounder_powers_of_two.cpp`). Unknown names are 40257.
//!
//! Inputs are checked by the stage first (numeric, not NaN, not negative); zero rounds to
//! itself. Decimal128 values are refused (`NotImplemented`): this crate has no decimal
//! arithmetic.

use bson::Bson;

use crate::{ErrorCode, MongoError};

const R5: &[f64] = &[10., 16., 25., 40., 63.];
const R10: &[f64] = &[100., 125., 160., 200., 250., 315., 400., 500., 630., 800.];
const R20: &[f64] = &[
    100., 112., 125., 140., 160., 180., 200., 224., 250., 280., 315., 355., 400., 450., 500., 560.,
    630., 710., 800., 900.,
];
const R40: &[f64] = &[
    100., 106., 112., 118., 125., 132., 140., 150., 160., 170., 180., 190., 200., 212., 224., 236.,
    250., 265., 280., 300., 315., 355., 375., 400., 425., 450., 475., 500., 530., 560., 600., 630.,
    670., 710., 750., 800., 850., 900., 950.,
];
const R80: &[f64] = &[
    103., 109., 115., 122., 128., 136., 145., 155., 165., 175., 185., 195., 206., 218., 230., 243.,
    258., 272., 290., 307., 325., 345., 365., 387., 412., 437., 462., 487., 515., 545., 575., 615.,
    650., 690., 730., 775., 825., 875., 925., 975.,
];
const ONE_TWO_FIVE: &[f64] = &[10., 20., 50.];
const E6: &[f64] = &[10., 15., 22., 33., 47., 68.];
const E12: &[f64] = &[10., 12., 15., 18., 22., 27., 33., 39., 47., 56., 68., 82.];
const E24: &[f64] = &[
    10., 11., 12., 13., 15., 16., 18., 20., 22., 24., 27., 30., 33., 36., 39., 43., 47., 51., 56.,
    62., 68., 75., 82., 91.,
];
const E48: &[f64] = &[
    100., 105., 110., 115., 121., 127., 133., 140., 147., 154., 162., 169., 178., 187., 196., 205.,
    215., 226., 237., 249., 261., 274., 287., 301., 316., 332., 348., 365., 383., 402., 422., 442.,
    464., 487., 511., 536., 562., 590., 619., 649., 681., 715., 750., 787., 825., 866., 909., 953.,
];
const E96: &[f64] = &[
    100., 102., 105., 107., 110., 113., 115., 118., 121., 124., 127., 130., 133., 137., 140., 143.,
    147., 150., 154., 158., 162., 165., 169., 174., 178., 182., 187., 191., 196., 200., 205., 210.,
    215., 221., 226., 232., 237., 243., 249., 255., 261., 267., 274., 280., 287., 294., 301., 309.,
    316., 324., 332., 340., 348., 357., 365., 374., 383., 392., 402., 412., 422., 432., 442., 453.,
    464., 475., 487., 499., 511., 523., 536., 549., 562., 576., 590., 604., 619., 634., 649., 665.,
    681., 698., 715., 732., 750., 768., 787., 806., 825., 845., 866., 887., 909., 931., 953., 976.,
];
const E192: &[f64] = &[
    100., 101., 102., 104., 105., 106., 107., 109., 110., 111., 113., 114., 115., 117., 118., 120.,
    121., 123., 124., 126., 127., 129., 130., 132., 133., 135., 137., 138., 140., 142., 143., 145.,
    147., 149., 150., 152., 154., 156., 158., 160., 162., 164., 165., 167., 169., 172., 174., 176.,
    178., 180., 182., 184., 187., 189., 191., 193., 196., 198., 200., 203., 205., 208., 210., 213.,
    215., 218., 221., 223., 226., 229., 232., 234., 237., 240., 243., 246., 249., 252., 255., 258.,
    261., 264., 267., 271., 274., 277., 280., 284., 287., 291., 294., 298., 301., 305., 309., 312.,
    316., 320., 324., 328., 332., 336., 340., 344., 348., 352., 357., 361., 365., 370., 374., 379.,
    383., 388., 392., 397., 402., 407., 412., 417., 422., 427., 432., 437., 442., 448., 453., 459.,
    464., 470., 475., 481., 487., 493., 499., 505., 511., 517., 523., 530., 536., 542., 549., 556.,
    562., 569., 576., 583., 590., 597., 604., 612., 619., 626., 634., 642., 649., 657., 665., 673.,
    681., 690., 698., 706., 715., 723., 732., 741., 750., 759., 768., 777., 787., 796., 806., 816.,
    825., 835., 845., 856., 866., 876., 887., 898., 909., 920., 931., 942., 953., 965., 976., 988.,
];

/// Most powers of ten a value is scaled through: past it (infinity) the search stops.
const SCALE_STEPS_MAX: u32 = 700;

/// A `granularity`: a preferred-number series or powers of two.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Rounder {
    Series(&'static [f64]),
    PowersOfTwo,
}

impl Rounder {
    /// The rounder named `name` (mongod's names, case-sensitive), else 40257.
    pub(crate) fn named(name: &str) -> Result<Rounder, MongoError> {
        let series = match name {
            "POWERSOF2" => return Ok(Rounder::PowersOfTwo),
            "R5" => R5,
            "R10" => R10,
            "R20" => R20,
            "R40" => R40,
            "R80" => R80,
            "1-2-5" => ONE_TWO_FIVE,
            "E6" => E6,
            "E12" => E12,
            "E24" => E24,
            "E48" => E48,
            "E96" => E96,
            "E192" => E192,
            _ => {
                return Err(MongoError::new(
                    ErrorCode::Location40257,
                    format!("Unknown rounding granularity '{name}'"),
                ))
            }
        };
        Ok(Rounder::Series(series))
    }

    /// The smallest boundary of the granularity strictly above `value` (zero stays zero).
    pub(crate) fn round_up(self, value: &Bson) -> Result<Bson, MongoError> {
        if as_f64(value)? == 0.0 {
            return Ok(value.clone());
        }
        match self {
            Rounder::Series(series) => series_up(series, as_f64(value)?).map(Bson::Double),
            Rounder::PowersOfTwo => Ok(power_of_two(up_exponent(value)?)),
        }
    }

    /// The largest boundary of the granularity strictly below `value` (zero stays zero).
    pub(crate) fn round_down(self, value: &Bson) -> Result<Bson, MongoError> {
        if as_f64(value)? == 0.0 {
            return Ok(value.clone());
        }
        match self {
            Rounder::Series(series) => series_down(series, as_f64(value)?).map(Bson::Double),
            Rounder::PowersOfTwo => Ok(power_of_two(down_exponent(value)?)),
        }
    }
}

/// A numeric value as a double; decimal128 is refused (no decimal arithmetic here).
pub(crate) fn as_f64(value: &Bson) -> Result<f64, MongoError> {
    match value {
        Bson::Int32(i) => Ok(f64::from(*i)),
        Bson::Int64(i) => Ok(*i as f64),
        Bson::Double(d) => Ok(*d),
        Bson::Decimal128(_) => Err(MongoError::new(
            ErrorCode::NotImplemented,
            "$bucketAuto with a 'granularity' over decimal128 values is not supported",
        )),
        _ => Err(MongoError::new(
            ErrorCode::BadValue,
            "a granularity rounder can only round numeric values",
        )),
    }
}

fn too_large() -> MongoError {
    MongoError::new(
        ErrorCode::BadValue,
        "$bucketAuto cannot round an infinite value to a granularity",
    )
}

fn series_up(series: &[f64], number: f64) -> Result<f64, MongoError> {
    let (first, last) = (series[0], series[series.len() - 1]);
    let mut multiplier = 1.0;
    let mut steps = 0;
    while number >= last * multiplier {
        multiplier *= 10.0;
        steps += 1;
        if steps > SCALE_STEPS_MAX {
            return Err(too_large());
        }
    }
    while number < first * multiplier {
        let previous_min = first * multiplier;
        multiplier /= 10.0;
        if number >= last * multiplier {
            return Ok(previous_min);
        }
    }
    let above = series.iter().find(|s| number < *s * multiplier);
    Ok(above.map_or(last * multiplier, |s| s * multiplier))
}

fn series_down(series: &[f64], number: f64) -> Result<f64, MongoError> {
    let (first, last) = (series[0], series[series.len() - 1]);
    let mut multiplier = 1.0;
    while number <= first * multiplier {
        multiplier /= 10.0;
    }
    let mut steps = 0;
    while number > last * multiplier {
        let previous_max = last * multiplier;
        multiplier *= 10.0;
        steps += 1;
        if steps > SCALE_STEPS_MAX {
            return Err(too_large());
        }
        if number <= first * multiplier {
            return Ok(previous_max);
        }
    }
    // The last series value at or above `number`, stepped back by one: strictly below it.
    let at_or_above = series
        .iter()
        .position(|s| s * multiplier >= number)
        .unwrap_or(series.len() - 1);
    Ok(series[at_or_above.saturating_sub(1)] * multiplier)
}

/// The exponent of the next power of two above `value` (a positive number).
fn up_exponent(value: &Bson) -> Result<i64, MongoError> {
    match value {
        Bson::Double(d) if d.is_infinite() => Err(too_large()),
        Bson::Double(d) => Ok(d.log2().floor() as i64 + 1),
        _ => Ok(64 - i64::from(positive_long(value)?.leading_zeros())),
    }
}

/// The exponent of the power of two below `value` (a positive number).
fn down_exponent(value: &Bson) -> Result<i64, MongoError> {
    match value {
        Bson::Double(d) if d.is_infinite() => Err(too_large()),
        Bson::Double(d) => Ok(d.log2().ceil() as i64 - 1),
        _ => {
            let n = positive_long(value)?;
            let top = 63 - i64::from(n.leading_zeros());
            Ok(if n.is_power_of_two() { top - 1 } else { top })
        }
    }
}

fn positive_long(value: &Bson) -> Result<u64, MongoError> {
    let n = match value {
        Bson::Int32(i) => i64::from(*i),
        Bson::Int64(i) => *i,
        _ => return as_f64(value).map(|_| 0),
    };
    u64::try_from(n).map_err(|_| {
        MongoError::new(
            ErrorCode::BadValue,
            "a granularity rounder can only round non-negative numbers",
        )
    })
}

/// `{$pow: [2, exponent]}` with `$pow`'s integer rules: an int when it fits, else a long, else
/// a double; a negative exponent gives a double.
fn power_of_two(exponent: i64) -> Bson {
    if !(0..63).contains(&exponent) {
        return Bson::Double(2f64.powf(exponent as f64));
    }
    let value = 1i64 << exponent;
    match i32::try_from(value) {
        Ok(small) => Bson::Int32(small),
        Err(_) => Bson::Int64(value),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn up(name: &str, value: Bson) -> Bson {
        Rounder::named(name)
            .expect("known")
            .round_up(&value)
            .expect("rounds")
    }

    fn down(name: &str, value: Bson) -> Bson {
        Rounder::named(name)
            .expect("known")
            .round_down(&value)
            .expect("rounds")
    }

    #[test]
    fn series_round_strictly_past_the_value_at_any_scale() {
        assert_eq!(up("E6", Bson::Double(0.8)), Bson::Double(1.0));
        assert_eq!(down("E6", Bson::Double(0.8)), Bson::Double(0.68));
        assert_eq!(up("R5", Bson::Int32(16)), Bson::Double(25.0));
        assert_eq!(down("R5", Bson::Int32(16)), Bson::Double(10.0));
        assert_eq!(up("1-2-5", Bson::Int32(50)), Bson::Double(100.0));
        assert_eq!(down("1-2-5", Bson::Int32(10)), Bson::Double(5.0));
        assert_eq!(up("R20", Bson::Int64(1234)), Bson::Double(1250.0));
        assert_eq!(up("E192", Bson::Int32(987)), Bson::Double(988.0));
        assert_eq!(up("R40", Bson::Int32(320)), Bson::Double(355.0));
        assert_eq!(up("E12", Bson::Int32(0)), Bson::Int32(0));
        // Every series value rounds up to the next one and down to the one before.
        for name in [
            "R5", "R10", "R20", "R40", "R80", "1-2-5", "E6", "E12", "E24", "E48",
        ] {
            let Rounder::Series(series) = Rounder::named(name).expect("known") else {
                panic!("a series");
            };
            for w in series.windows(2) {
                assert_eq!(up(name, Bson::Double(w[0])), Bson::Double(w[1]), "{name}");
                assert_eq!(down(name, Bson::Double(w[1])), Bson::Double(w[0]), "{name}");
            }
        }
    }

    #[test]
    fn powers_of_two_follow_pow_types() {
        assert_eq!(up("POWERSOF2", Bson::Int32(5)), Bson::Int32(8));
        assert_eq!(up("POWERSOF2", Bson::Int32(8)), Bson::Int32(16));
        assert_eq!(down("POWERSOF2", Bson::Int32(8)), Bson::Int32(4));
        assert_eq!(down("POWERSOF2", Bson::Int32(9)), Bson::Int32(8));
        assert_eq!(up("POWERSOF2", Bson::Double(0.3)), Bson::Double(0.5));
        assert_eq!(down("POWERSOF2", Bson::Double(0.3)), Bson::Double(0.25));
        assert_eq!(up("POWERSOF2", Bson::Int64(1 << 40)), Bson::Int64(1 << 41));
        assert_eq!(
            up("POWERSOF2", Bson::Int64(i64::MAX)),
            Bson::Double(9_223_372_036_854_775_808.0)
        );
        assert_eq!(
            Rounder::named("r5").unwrap_err().code.code(),
            40257,
            "names are case-sensitive"
        );
    }
}
