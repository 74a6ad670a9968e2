//! Collation keys: a string turned into a string whose binary (UTF-8) order is the
//! collation's order, built the way the Unicode Collation Algorithm builds sort keys.
//!
//! 1. The string is decomposed (NFD) and each character becomes a *collation element*: a
//!    primary weight (which base character: its group — spaces < punctuation < symbols <
//!    digits < Latin letters < other scripts — then its rank in the group), a secondary
//!    weight (accents: a base letter has the common weight, each combining mark after it
//!    adds its own), a case (lower, upper, or the variant of an expansion such as `ß`) and
//!    whether it is *variable* (spaces and punctuation, or spaces only with
//!    `maxVariable: "space"`).
//! 2. The key is the levels the strength asks for, each a run of fixed-width weights and a
//!    0x01 separator below every weight: primaries (level 1); secondaries (2; reversed
//!    with `backwards`); the case level (`caseLevel`); tertiaries (3: case, ordered by
//!    `caseFirst`); with `alternate: "shifted"` the variable elements leave levels 1-3 and
//!    at strength 4 form the quaternary level; strength 5 appends the code points.
//! 3. The bytes become characters U+0001..U+0100 (one per byte), whose UTF-8 order is the
//!    bytes' order, so a key is a valid BSON string that compares with the binary order.
//!
//! With `numericOrdering` a run of ASCII digits is one element group: its count of
//! significant digits, then the digits, so "9" < "10" and leading zeros are ignored.
//! What this does not do that ICU does (contractions, locale tailorings, the full
//! DUCET ranks of non-Latin scripts) is listed in docs/compat.md.

use unicode_normalization::char::is_combining_mark;
use unicode_normalization::UnicodeNormalization;

use super::{Alternate, CaseFirst, Collation, MaxVariable};

/// Primary groups (the top byte of a primary weight).
const GROUP_SPACE: u32 = 0x03;
const GROUP_PUNCT: u32 = 0x04;
const GROUP_SYMBOL: u32 = 0x05;
const GROUP_DIGIT: u32 = 0x06;
const GROUP_LATIN: u32 = 0x10;
const GROUP_OTHER: u32 = 0x11;

/// Secondary weights.
const SECONDARY_COMMON: u16 = 0x0500;
const SECONDARY_STROKE: u16 = 0x0680;
const SECONDARY_LIGATURE: u16 = 0x0690;

/// The level separator: below the first byte of every weight.
const SEPARATOR: u8 = 0x01;

/// Root order of the ASCII punctuation and symbols (ICU's root collation).
const ASCII_PUNCT: &str = "_-,;:!?.'\"()[]{}@*/\\&#%";
const ASCII_SYMBOLS: &str = "`^+<=>|~$";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Case {
    Lower,
    /// The second part of an expansion (`ß` = "ss" + this), or a ligature.
    Variant,
    Upper,
}

/// One collation element. `primary == 0` is a combining mark (secondary only).
#[derive(Debug, Clone, Copy)]
struct Element {
    primary: u32,
    secondary: u16,
    case: Case,
    variable: bool,
}

impl Element {
    fn base(primary: u32, case: Case, variable: bool) -> Element {
        Element {
            primary,
            secondary: SECONDARY_COMMON,
            case,
            variable,
        }
    }

    fn mark(secondary: u16) -> Element {
        Element {
            primary: 0,
            secondary,
            case: Case::Lower,
            variable: false,
        }
    }
}

/// The collation key of `s` under `c` (see the file header).
#[allow(
    clippy::expect_used,
    reason = "a byte plus one is at most U+0100, a valid char"
)]
pub(super) fn collation_key(c: &Collation, s: &str) -> String {
    let decomposed: Vec<char> = s.nfd().collect();
    let elements = elements(c, &decomposed);
    let bytes = assemble(c, &elements, &decomposed);
    bytes
        .iter()
        .map(|b| char::from_u32(u32::from(*b) + 1).expect("below U+0101"))
        .collect()
}

fn elements(c: &Collation, chars: &[char]) -> Vec<Element> {
    let mut out = Vec::with_capacity(chars.len());
    let mut i = 0;
    while i < chars.len() {
        let ch = chars[i];
        if c.numeric_ordering && ch.is_ascii_digit() {
            let run = chars[i..].iter().take_while(|d| d.is_ascii_digit()).count();
            numeric_run(&chars[i..i + run], &mut out);
            i += run;
            continue;
        }
        char_elements(c, ch, &mut out);
        i += 1;
    }
    out
}

/// A digit run under `numericOrdering`: its significant-digit count, then the digits.
fn numeric_run(digits: &[char], out: &mut Vec<Element>) {
    let first = digits
        .iter()
        .position(|d| *d != '0')
        .unwrap_or(digits.len() - 1);
    let significant = &digits[first..];
    let count = u32::try_from(significant.len())
        .unwrap_or(u32::MAX)
        .min(0xF_FFFF);
    out.push(Element::base(
        (GROUP_DIGIT << 24) | 0x10_0000 | count,
        Case::Lower,
        false,
    ));
    for d in significant {
        out.push(Element::base(digit_primary(*d), Case::Lower, false));
    }
}

fn digit_primary(d: char) -> u32 {
    (GROUP_DIGIT << 24) | (u32::from(d) - u32::from('0'))
}

fn char_elements(c: &Collation, ch: char, out: &mut Vec<Element>) {
    if is_combining_mark(ch) {
        out.push(Element::mark(mark_secondary(ch)));
        return;
    }
    if ch.is_whitespace() {
        out.push(Element::base(
            (GROUP_SPACE << 24) | u32::from(ch),
            Case::Lower,
            true,
        ));
        return;
    }
    if ch.is_ascii_digit() {
        out.push(Element::base(digit_primary(ch), Case::Lower, false));
        return;
    }
    if ch.is_alphabetic() {
        letter_elements(ch, out);
        return;
    }
    let (group, rank) = punct_or_symbol(ch);
    let variable = group == GROUP_PUNCT && c.max_variable == MaxVariable::Punct;
    out.push(Element::base((group << 24) | rank, Case::Lower, variable));
}

#[allow(
    clippy::expect_used,
    reason = "the weight is at most 0x0700 + 0x7FF, below 0x0F00"
)]
fn mark_secondary(ch: char) -> u16 {
    let cp = u32::from(ch);
    let w = if (0x300..0x370).contains(&cp) {
        0x0600 + (cp - 0x300)
    } else {
        0x0700 + (cp & 0x7FF)
    };
    u16::try_from(w).expect("below 0x0F00")
}

fn punct_or_symbol(ch: char) -> (u32, u32) {
    if let Some(i) = ASCII_PUNCT.find(ch) {
        return (GROUP_PUNCT, i as u32);
    }
    if let Some(i) = ASCII_SYMBOLS.find(ch) {
        return (GROUP_SYMBOL, i as u32);
    }
    let cp = u32::from(ch);
    let latin1_punct = matches!(cp, 0xA1 | 0xA7 | 0xAB | 0xB6 | 0xB7 | 0xBB | 0xBF);
    let general_punct = (0x2010..=0x2027).contains(&cp) || (0x2030..=0x205E).contains(&cp);
    let group = if latin1_punct || general_punct {
        GROUP_PUNCT
    } else {
        GROUP_SYMBOL
    };
    (group, 0x1000 + cp)
}

/// A letter (after decomposition): Latin letters by their place in the alphabet, the few
/// Latin letters without a decomposition by the root order's rule for them, other scripts
/// by code point after Latin.
fn letter_elements(ch: char, out: &mut Vec<Element>) {
    let case = if ch.is_uppercase() {
        Case::Upper
    } else {
        Case::Lower
    };
    let lower = single_lowercase(ch);
    let latin =
        |l: char, slot: u32| (GROUP_LATIN << 24) | ((u32::from(l) - u32::from('a')) * 8 + slot);
    match lower {
        'a'..='z' => out.push(Element::base(latin(lower, 0), case, false)),
        // Expansions: two letters at the primary level.
        'ß' => {
            out.push(Element::base(latin('s', 0), case, false));
            out.push(Element::base(latin('s', 0), Case::Variant, false));
        }
        'æ' | 'œ' | 'ĳ' => {
            let (a, b) = match lower {
                'æ' => ('a', 'e'),
                'œ' => ('o', 'e'),
                _ => ('i', 'j'),
            };
            out.push(Element::base(latin(a, 0), case, false));
            out.push(Element::mark(SECONDARY_LIGATURE));
            out.push(Element::base(latin(b, 0), case, false));
        }
        // A letter with a stroke: its base letter and a secondary difference.
        'ø' | 'đ' | 'ł' | 'ħ' | 'ŧ' | 'ƀ' => {
            let base = match lower {
                'ø' => 'o',
                'đ' => 'd',
                'ł' => 'l',
                'ħ' => 'h',
                'ŧ' => 't',
                _ => 'b',
            };
            out.push(Element::base(latin(base, 0), case, false));
            out.push(Element::mark(SECONDARY_STROKE));
        }
        // Letters of their own, right after a base letter.
        'ð' => out.push(Element::base(latin('d', 1), case, false)),
        'ı' => out.push(Element::base(latin('i', 1), case, false)),
        'ŋ' => out.push(Element::base(latin('n', 1), case, false)),
        'þ' => out.push(Element::base(latin('z', 1), case, false)),
        other => out.push(Element::base(
            (GROUP_OTHER << 24) | u32::from(other),
            case,
            false,
        )),
    }
}

fn single_lowercase(ch: char) -> char {
    let mut it = ch.to_lowercase();
    match (it.next(), it.next()) {
        (Some(l), None) => l,
        _ => ch,
    }
}

/// Lays out the levels the collation asks for (see the file header).
fn assemble(c: &Collation, elements: &[Element], decomposed: &[char]) -> Vec<u8> {
    let shifted = c.alternate == Alternate::Shifted;
    // With `shifted`, a variable element and the marks after it leave levels 1-3.
    let mut kept: Vec<&Element> = Vec::with_capacity(elements.len());
    let mut quaternary: Vec<u32> = Vec::new();
    let mut after_variable = false;
    for e in elements {
        if shifted && e.variable {
            quaternary.push(e.primary);
            after_variable = true;
            continue;
        }
        if e.primary == 0 && after_variable {
            continue;
        }
        after_variable = false;
        if e.primary != 0 {
            quaternary.push(0xFE00_0000);
        }
        kept.push(e);
    }

    let mut out = Vec::with_capacity(kept.len() * 8);
    for e in kept.iter().filter(|e| e.primary != 0) {
        out.extend_from_slice(&e.primary.to_be_bytes());
    }
    if c.strength >= 2 {
        out.push(SEPARATOR);
        let mut secondaries: Vec<u16> = kept.iter().map(|e| e.secondary).collect();
        if c.backwards {
            secondaries.reverse();
        }
        for s in secondaries {
            out.extend_from_slice(&s.to_be_bytes());
        }
    }
    if c.case_level {
        out.push(SEPARATOR);
        for e in kept.iter().filter(|e| e.primary != 0) {
            out.push(case_weight(c, e.case));
        }
    }
    if c.strength >= 3 {
        out.push(SEPARATOR);
        for e in kept.iter().filter(|e| e.primary != 0) {
            out.push(tertiary_weight(c, e.case));
        }
    }
    if c.strength >= 4 && shifted {
        out.push(SEPARATOR);
        for q in quaternary {
            out.extend_from_slice(&q.to_be_bytes());
        }
    }
    if c.strength >= 5 {
        out.push(SEPARATOR);
        for ch in decomposed {
            out.extend_from_slice(&(u32::from(*ch) + 0x0200_0000).to_be_bytes());
        }
    }
    out
}

/// The case level: lower before upper, or upper first with `caseFirst: "upper"`.
fn case_weight(c: &Collation, case: Case) -> u8 {
    match (case, c.case_first == CaseFirst::Upper) {
        (Case::Upper, true) => 0x03,
        (Case::Upper, false) => 0x08,
        _ => 0x05,
    }
}

/// The tertiary level: case, with expansions' variants between lower and upper.
fn tertiary_weight(c: &Collation, case: Case) -> u8 {
    match (case, c.case_first == CaseFirst::Upper) {
        (Case::Upper, true) => 0x03,
        (Case::Upper, false) => 0x08,
        (Case::Variant, _) => 0x06,
        (Case::Lower, _) => 0x05,
    }
}

#[cfg(test)]
mod tests {
    use super::super::Collation;
    use super::*;
    use bson::{doc, Bson};
    use proptest::prelude::*;
    use std::cmp::Ordering;

    fn coll(spec: bson::Document) -> Collation {
        Collation::parse(&Bson::Document(spec), "find")
            .expect("valid")
            .expect("not simple")
    }

    /// Asserts `words` are in strictly ascending order under `c`.
    fn ascending(c: &Collation, words: &[&str]) {
        for pair in words.windows(2) {
            assert_eq!(
                c.compare(pair[0], pair[1]),
                Ordering::Less,
                "{:?} < {:?} under {c:?}",
                pair[0],
                pair[1]
            );
        }
    }

    fn equal(c: &Collation, a: &str, b: &str) {
        assert_eq!(
            c.compare(a, b),
            Ordering::Equal,
            "{a:?} == {b:?} under {c:?}"
        );
    }

    #[test]
    fn strength_one_ignores_case_and_accents() {
        let c = coll(doc! {"locale": "en", "strength": 1});
        equal(&c, "cafe", "Café");
        equal(&c, "PING", "ping");
        ascending(&c, &["a", "b", "c"]);
    }

    #[test]
    fn strength_two_ignores_case_only() {
        let c = coll(doc! {"locale": "en_US", "strength": 2});
        equal(&c, "PING", "ping");
        ascending(&c, &["cafe", "café"]);
        ascending(&c, &["aá", "áa"]);
    }

    #[test]
    fn strength_three_orders_lower_before_upper_after_accents() {
        let c = coll(doc! {"locale": "en"});
        ascending(&c, &["a", "A", "á", "Á", "b", "B"]);
        ascending(&c, &["cote", "coté", "côte", "côté"]);
    }

    #[test]
    fn groups_order_spaces_punctuation_symbols_digits_letters() {
        let c = coll(doc! {"locale": "en"});
        ascending(
            &c,
            &[
                " ", "_", "-", ",", "!", "'", "@", "&", "%", "`", "+", "$", "0", "9", "a", "z",
                "α", "я",
            ],
        );
        ascending(&c, &["ss", "ß", "st"]);
        ascending(&c, &["ae", "æ", "af"]);
        ascending(&c, &["o", "ø", "p"]);
    }

    #[test]
    fn case_first_upper_puts_upper_case_first() {
        let c = coll(doc! {"locale": "en", "caseFirst": "upper"});
        ascending(&c, &["A", "a", "B", "b"]);
        let c = coll(doc! {"locale": "en", "caseFirst": "lower"});
        ascending(&c, &["a", "A", "b", "B"]);
    }

    #[test]
    fn case_level_adds_case_below_strength_three() {
        let c = coll(doc! {"locale": "en", "strength": 1, "caseLevel": true});
        equal(&c, "cafe", "café");
        ascending(&c, &["cafe", "Cafe"]);
        let c = coll(doc! {"locale": "en", "strength": 2, "caseLevel": true});
        ascending(&c, &["cafe", "Cafe", "café"]);
    }

    #[test]
    fn numeric_ordering_compares_digit_runs_as_numbers() {
        let plain = coll(doc! {"locale": "en"});
        ascending(&plain, &["10", "2"]);
        let c = coll(doc! {"locale": "en", "numericOrdering": true});
        ascending(&c, &["2", "10", "100"]);
        ascending(&c, &["a2", "a10", "b1"]);
        equal(&c, "007", "7");
        ascending(&c, &["0", "1"]);
    }

    #[test]
    fn shifted_ignores_spaces_and_punctuation_below_quaternary() {
        let c = coll(doc! {"locale": "en", "alternate": "shifted"});
        equal(&c, "black-bird", "blackbird");
        equal(&c, "black bird", "blackbird");
        ascending(&c, &["blackbird", "blackbirds"]);
        let c4 = coll(doc! {"locale": "en", "alternate": "shifted", "strength": 4});
        assert_ne!(c4.compare("black-bird", "blackbird"), Ordering::Equal);
        let space = coll(doc! {"locale": "en", "alternate": "shifted", "maxVariable": "space"});
        equal(&space, "black bird", "blackbird");
        assert_ne!(space.compare("black-bird", "blackbird"), Ordering::Equal);
        let plain = coll(doc! {"locale": "en"});
        assert_ne!(plain.compare("black-bird", "blackbird"), Ordering::Equal);
    }

    #[test]
    fn backwards_orders_accents_from_the_end() {
        let c = coll(doc! {"locale": "fr_CA"});
        ascending(&c, &["cote", "côte", "coté", "côté"]);
        let c = coll(doc! {"locale": "fr", "backwards": true});
        ascending(&c, &["cote", "côte", "coté", "côté"]);
    }

    #[test]
    fn identical_strength_separates_canonically_equal_forms_only_by_code_points() {
        let c = coll(doc! {"locale": "en", "strength": 5});
        // Precomposed and decomposed é are canonically equivalent: identical keys.
        equal(&c, "caf\u{e9}", "cafe\u{301}");
        assert_ne!(c.compare("a", "A"), Ordering::Equal);
    }

    #[test]
    fn keys_are_valid_strings_without_nul() {
        let c = coll(doc! {"locale": "en", "strength": 5, "alternate": "shifted"});
        let k = c.key("Straße 12, Zürich");
        assert!(!k.contains('\0'));
        assert!(k.chars().all(|ch| u32::from(ch) <= 0x100));
    }

    fn strategy_collation() -> impl Strategy<Value = Collation> {
        (
            1u8..=5,
            any::<bool>(),
            0u8..3,
            any::<bool>(),
            any::<bool>(),
            any::<bool>(),
            any::<bool>(),
        )
            .prop_map(
                |(strength, case_level, case_first, numeric, shifted, space, backwards)| {
                    Collation {
                        locale: "en".into(),
                        strength,
                        case_level,
                        case_first: [CaseFirst::Off, CaseFirst::Upper, CaseFirst::Lower]
                            [usize::from(case_first)],
                        numeric_ordering: numeric,
                        alternate: if shifted {
                            Alternate::Shifted
                        } else {
                            Alternate::NonIgnorable
                        },
                        max_variable: if space {
                            MaxVariable::Space
                        } else {
                            MaxVariable::Punct
                        },
                        normalization: false,
                        backwards,
                    }
                },
            )
    }

    proptest! {
        /// The comparison is a total order: antisymmetric and transitive, on random strings
        /// mixing cases, accents, digits, punctuation and other scripts.
        #[test]
        fn comparison_is_a_total_order(
            c in strategy_collation(),
            a in "[aAbBéÉ0-9 ,._ßøя\u{301}]{0,6}",
            b in "[aAbBéÉ0-9 ,._ßøя\u{301}]{0,6}",
            d in "[aAbBéÉ0-9 ,._ßøя\u{301}]{0,6}",
        ) {
            let ab = c.compare(&a, &b);
            prop_assert_eq!(ab, c.compare(&b, &a).reverse());
            let bd = c.compare(&b, &d);
            if ab != Ordering::Greater && bd != Ordering::Greater {
                prop_assert_ne!(c.compare(&a, &d), Ordering::Greater);
            }
            if ab == Ordering::Equal && bd == Ordering::Equal {
                prop_assert_eq!(c.compare(&a, &d), Ordering::Equal);
            }
        }

        /// A higher strength only refines a lower one: strings different at strength n are
        /// ordered the same way at every higher strength.
        #[test]
        fn higher_strengths_refine_lower_ones(
            a in "[aAbBéÉ0-9 ,.]{0,6}",
            b in "[aAbBéÉ0-9 ,.]{0,6}",
        ) {
            for s in 1..5u8 {
                let low = Collation { strength: s, ..Collation::defaults("en") };
                let high = Collation { strength: s + 1, ..Collation::defaults("en") };
                let o = low.compare(&a, &b);
                if o != Ordering::Equal {
                    prop_assert_eq!(o, high.compare(&a, &b));
                }
            }
        }
    }
}
