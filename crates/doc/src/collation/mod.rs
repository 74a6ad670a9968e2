//! Collation: the collation document of a command, an index or a collection (parsed and
//! checked here with mongod's codes and messages), and the comparison it defines over
//! strings.
//!
//! Comparison works the way mongod's does: every string is turned into its *collation key*
//! (`key.rs`), a string whose binary order is the collation's order, and values are then
//! compared with the simple (binary) order. `value.rs` replaces the strings inside a BSON
//! value with their keys, so the matcher, sort, `distinct` and `$group` compare collated
//! values with the comparators they already have, and the order is a total order because
//! it is the binary order of the keys.
//!
//! What the keys implement is a simplification of the Unicode Collation Algorithm with the
//! root order, not ICU (docs/compat.md, Collation): strings are decomposed (NFD) so accents
//! become secondary weights; case is the tertiary weight; spaces, punctuation, symbols,
//! digits and letters form the primary groups in that order. This file never compares
//! strings itself.

mod key;
mod locales;
pub mod value;

use bson::{doc, Bson, Document};

use crate::update::render;
use crate::{ErrorCode, MongoError};

/// Which of upper and lower case sorts first at the tertiary (or case) level.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CaseFirst {
    /// Neither: ordered as the locale orders them.
    Off,
    /// Upper case first.
    Upper,
    /// Lower case first.
    Lower,
}

/// Whether spaces and punctuation are base characters (`NonIgnorable`) or ignored below
/// the quaternary level (`Shifted`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Alternate {
    /// Spaces and punctuation are base characters.
    NonIgnorable,
    /// Spaces and punctuation are ignored below the quaternary level.
    Shifted,
}

/// Which characters `Alternate::Shifted` ignores: spaces and punctuation, or spaces only.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MaxVariable {
    /// Spaces and punctuation.
    Punct,
    /// Spaces only.
    Space,
}

/// A non-simple collation (`locale: "simple"` parses to no collation at all).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Collation {
    /// The ICU locale (`en`, `fr_CA`, ...).
    pub locale: String,
    /// 1 (base letters) to 5 (identical).
    pub strength: u8,
    /// `caseLevel`: case compared at a level of its own.
    pub case_level: bool,
    /// `caseFirst`.
    pub case_first: CaseFirst,
    /// `numericOrdering`: digit runs compared as numbers.
    pub numeric_ordering: bool,
    /// `alternate`.
    pub alternate: Alternate,
    /// `maxVariable`.
    pub max_variable: MaxVariable,
    /// `normalization`: strings decomposed before comparison.
    pub normalization: bool,
    /// `backwards`: secondary differences compared from the end (French).
    pub backwards: bool,
}

/// The ICU version mongod 7.0 reports in every collation spec.
const ICU_VERSION: &str = "57.1";

impl Collation {
    /// The defaults of `locale` (every field but `backwards` is the same for all locales
    /// this server knows; `fr_CA` orders accents backwards).
    fn defaults(locale: &str) -> Collation {
        Collation {
            locale: locale.to_owned(),
            strength: 3,
            case_level: false,
            case_first: CaseFirst::Off,
            numeric_ordering: false,
            alternate: Alternate::NonIgnorable,
            max_variable: MaxVariable::Punct,
            normalization: false,
            backwards: locales::backwards_by_default(locale),
        }
    }

    /// Parses a command's `collation` field. `command` names the command for mongod's IDL
    /// messages (`BSON field 'create.collation.locale' is missing ...`). `Ok(None)` is the
    /// simple collation (`locale: "simple"`).
    pub fn parse(value: &Bson, command: &str) -> Result<Option<Collation>, MongoError> {
        let Bson::Document(spec) = value else {
            return Err(MongoError::new(
                ErrorCode::TypeMismatch,
                format!(
                    "BSON field '{command}.collation' is the wrong type '{}', expected type 'object'",
                    render::type_name(value)
                ),
            ));
        };
        Collation::parse_document(spec, command)
    }

    /// Parses a collation document (see `parse`).
    pub fn parse_document(spec: &Document, command: &str) -> Result<Option<Collation>, MongoError> {
        let locale = match spec.get("locale") {
            None => {
                return Err(MongoError::new(
                    ErrorCode::Location40414,
                    format!(
                        "BSON field '{command}.collation.locale' is missing but a required field"
                    ),
                ))
            }
            Some(Bson::String(s)) => s.clone(),
            Some(other) => return Err(wrong_type("locale", other, "string")),
        };
        let mut c = Collation::defaults(&locale);
        for (name, v) in spec {
            match name.as_str() {
                "locale" => {}
                "strength" => c.strength = strength(v)?,
                "caseLevel" => c.case_level = boolean(name, v)?,
                "caseFirst" => {
                    c.case_first = match enumeration(name, v, &["upper", "lower", "off"])? {
                        "upper" => CaseFirst::Upper,
                        "lower" => CaseFirst::Lower,
                        _ => CaseFirst::Off,
                    }
                }
                "numericOrdering" => c.numeric_ordering = boolean(name, v)?,
                "alternate" => {
                    c.alternate = match enumeration(name, v, &["non-ignorable", "shifted"])? {
                        "shifted" => Alternate::Shifted,
                        _ => Alternate::NonIgnorable,
                    }
                }
                "maxVariable" => {
                    c.max_variable = match enumeration(name, v, &["punct", "space"])? {
                        "space" => MaxVariable::Space,
                        _ => MaxVariable::Punct,
                    }
                }
                "normalization" => c.normalization = boolean(name, v)?,
                "backwards" => c.backwards = boolean(name, v)?,
                "version" => check_version(v)?,
                _ => {
                    return Err(MongoError::new(
                        ErrorCode::Location40415,
                        format!("BSON field 'collation.{name}' is an unknown field."),
                    ))
                }
            }
        }
        if locale == "simple" {
            if spec.len() > 1 {
                return Err(MongoError::new(
                    ErrorCode::BadValue,
                    format!(
                        "If locale is 'simple', no other collation fields may be set: {}",
                        render::document(spec)
                    ),
                ));
            }
            return Ok(None);
        }
        if !locales::is_known(&locale) {
            return Err(invalid_locale(&locale));
        }
        Ok(Some(c))
    }

    /// The full spec as mongod lists it (`listIndexes`, `listCollections`, explain).
    pub fn to_document(&self) -> Document {
        doc! {
            "locale": &self.locale,
            "caseLevel": self.case_level,
            "caseFirst": match self.case_first {
                CaseFirst::Off => "off",
                CaseFirst::Upper => "upper",
                CaseFirst::Lower => "lower",
            },
            "strength": i32::from(self.strength),
            "numericOrdering": self.numeric_ordering,
            "alternate": match self.alternate {
                Alternate::NonIgnorable => "non-ignorable",
                Alternate::Shifted => "shifted",
            },
            "maxVariable": match self.max_variable {
                MaxVariable::Punct => "punct",
                MaxVariable::Space => "space",
            },
            "normalization": self.normalization,
            "backwards": self.backwards,
            "version": ICU_VERSION,
        }
    }

    /// The collation key of `s`: a string whose binary order is this collation's order of
    /// the strings (equal keys = equal under the collation).
    pub fn key(&self, s: &str) -> String {
        key::collation_key(self, s)
    }

    /// `a` against `b` under this collation.
    pub fn compare(&self, a: &str, b: &str) -> std::cmp::Ordering {
        self.key(a).cmp(&self.key(b))
    }
}

/// Two optional collations (`None` = simple) are the same collation.
pub fn same(a: Option<&Collation>, b: Option<&Collation>) -> bool {
    a == b
}

fn invalid_locale(locale: &str) -> MongoError {
    MongoError::new(
        ErrorCode::BadValue,
        format!("Field 'locale' is invalid in: {{ locale: \"{locale}\" }}"),
    )
}

fn wrong_type(name: &str, v: &Bson, expected: &str) -> MongoError {
    MongoError::new(
        ErrorCode::TypeMismatch,
        format!(
            "BSON field 'collation.{name}' is the wrong type '{}', expected type '{expected}'",
            render::type_name(v)
        ),
    )
}

fn boolean(name: &str, v: &Bson) -> Result<bool, MongoError> {
    match v {
        Bson::Boolean(b) => Ok(*b),
        other => Err(wrong_type(name, other, "bool")),
    }
}

fn enumeration<'a>(name: &str, v: &'a Bson, allowed: &[&str]) -> Result<&'a str, MongoError> {
    let Bson::String(s) = v else {
        return Err(wrong_type(name, v, "string"));
    };
    if !allowed.contains(&s.as_str()) {
        return Err(MongoError::new(
            ErrorCode::BadValue,
            format!("Enumeration value '{s}' for field 'collation.{name}' is not a valid value."),
        ));
    }
    Ok(s)
}

fn strength(v: &Bson) -> Result<u8, MongoError> {
    let n = match v {
        Bson::Int32(n) => i64::from(*n),
        Bson::Int64(n) => *n,
        Bson::Double(d) if d.fract() == 0.0 && d.is_finite() => *d as i64,
        Bson::Double(_) => {
            return Err(MongoError::new(
                ErrorCode::BadValue,
                "BSON field 'strength' must be a whole number",
            ))
        }
        other => {
            return Err(MongoError::new(
                ErrorCode::TypeMismatch,
                format!(
                    "BSON field 'collation.strength' is the wrong type '{}', expected types '[long, int, decimal, double]'",
                    render::type_name(other)
                ),
            ))
        }
    };
    if n > 5 {
        return Err(MongoError::new(
            ErrorCode::Location51024,
            format!("BSON field 'strength' value must be <= 5, actual value '{n}'"),
        ));
    }
    if n < 1 {
        return Err(MongoError::new(
            ErrorCode::Location51024,
            format!("BSON field 'strength' value must be >= 1, actual value '{n}'"),
        ));
    }
    Ok(n as u8)
}

fn check_version(v: &Bson) -> Result<(), MongoError> {
    match v {
        Bson::String(s) if s == ICU_VERSION => Ok(()),
        Bson::String(s) => Err(MongoError::new(
            ErrorCode::BadValue,
            format!(
                "Field 'version' is invalid in: {{ version: \"{s}\" }}, expected \"{ICU_VERSION}\""
            ),
        )),
        other => Err(wrong_type("version", other, "string")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(d: Document) -> Result<Option<Collation>, MongoError> {
        Collation::parse(&Bson::Document(d), "find")
    }

    #[test]
    fn simple_is_no_collation_and_takes_no_other_field() {
        assert_eq!(parse(doc! {"locale": "simple"}).unwrap(), None);
        let e = parse(doc! {"locale": "simple", "strength": 2}).unwrap_err();
        assert_eq!(e.code, ErrorCode::BadValue);
    }

    #[test]
    fn defaults_are_filled_in_the_listed_spec() {
        let c = parse(doc! {"locale": "en_US", "strength": 2})
            .unwrap()
            .unwrap();
        assert_eq!(
            c.to_document(),
            doc! {"locale": "en_US", "caseLevel": false, "caseFirst": "off", "strength": 2,
            "numericOrdering": false, "alternate": "non-ignorable", "maxVariable": "punct",
            "normalization": false, "backwards": false, "version": "57.1"}
        );
        let fr = parse(doc! {"locale": "fr_CA"}).unwrap().unwrap();
        assert!(fr.backwards);
    }

    #[test]
    fn bad_documents_get_mongod_codes_and_messages() {
        let e = parse(doc! {"locale": "zz_nope"}).unwrap_err();
        assert_eq!(e.code, ErrorCode::BadValue);
        assert_eq!(
            e.message,
            "Field 'locale' is invalid in: { locale: \"zz_nope\" }"
        );
        let e = parse(doc! {"locale": "en", "strength": 6}).unwrap_err();
        assert_eq!(e.code.code(), 51024);
        assert_eq!(
            e.message,
            "BSON field 'strength' value must be <= 5, actual value '6'"
        );
        let e = Collation::parse(&Bson::Document(doc! {}), "create").unwrap_err();
        assert_eq!(e.code.code(), 40414);
        assert_eq!(
            e.message,
            "BSON field 'create.collation.locale' is missing but a required field"
        );
        let e = parse(doc! {"locale": "en", "bogus": 1}).unwrap_err();
        assert_eq!(
            (e.code.code(), e.message.as_str()),
            (40415, "BSON field 'collation.bogus' is an unknown field.")
        );
        let e = parse(doc! {"locale": "en", "caseFirst": "sideways"}).unwrap_err();
        assert_eq!(e.code, ErrorCode::BadValue);
        let e = parse(doc! {"locale": "en", "caseLevel": 1}).unwrap_err();
        assert_eq!(e.code, ErrorCode::TypeMismatch);
        let e = Collation::parse(&Bson::String("en".into()), "find").unwrap_err();
        assert_eq!(e.code, ErrorCode::TypeMismatch);
        let e = parse(doc! {"locale": "EN"}).unwrap_err();
        assert_eq!(e.code, ErrorCode::BadValue);
    }

    #[test]
    fn variants_of_known_locales_are_accepted() {
        assert!(parse(doc! {"locale": "de@collation=phonebook"})
            .unwrap()
            .is_some());
        assert!(parse(doc! {"locale": "en@collation=phonebook"}).is_err());
    }
}
