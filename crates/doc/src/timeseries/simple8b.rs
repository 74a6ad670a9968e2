//! Simple-8b blocks as mongod's BSONColumn writes them (`column.rs` reads the rest of the
//! format): the decoding of a run of 64-bit words into unsigned slots, a slot being a value or
//! a skip. Pure; it never panics on its input: a word mongod's writer cannot produce is an
//! error.
//!
//! Source: mongod's `src/mongo/bson/util/simple8b.cpp` (the selector tables and
//! `Simple8b<T>::Iterator`), read through the stored index of `mongodb/mongo`.
//!
//! Each word is little-endian. Its low 4 bits are the selector `s`, the next 4 the extension
//! `e`:
//!
//! ```text
//! s = 1..14, and s = 7 or 8 with e = 0 (base): n slots of b bits, from bit 4 (bit 8 when s is
//!   7 or 8: their 4 spare bits sit between selector and slots), lowest slot first
//!     s:  1  2  3  4  5  6  7  8  9 10 11 12 13 14
//!     n: 60 30 20 15 12 10  8  7  6  5  4  3  2  1
//!     b:  1  2  3  4  5  6  7  8 10 12 15 20 30 60
//! s = 7, e = 1..9: n slots of b value bits + 4 trailing-zero bits, from bit 8
//!     e:  1  2  3  4  5  6  7  8  9
//!     n:  9  8  7  6  5  4  3  2  1
//!     b:  2  3  4  5  7 10 14 24 52          value = v << z
//! s = 8, e = 1..7: n slots of b value bits + 4 bits z, from bit 8
//!     e:  1  2  3  4  5  6  7
//!     n:  7  6  5  4  3  2  1
//!     b:  4  5  7 10 14 24 52                 value = v << (4 z)
//! s = 8, e = 8..13: n slots of b value bits + 5 bits z, from bit 8
//!     e:  8  9 10 11 12 13
//!     n:  6  5  4  3  2  1
//!     b:  4  6  9 13 23 51                    value = v << (4 z)
//! s = 15 (RLE): (e + 1) * 120 repeats of the run's previous slot (the last slot decoded
//!   before this word, carried over from the decoder's previous run; 0 when there is none)
//! s = 0, s = 7 with e > 9, s = 8 with e > 13: not written by mongod; refused here.
//! ```
//!
//! In an extended slot the low 4 (or 5) bits are the trailing-zero count `z` and the bits
//! above are `v`. A slot whose bits are all ones (trailing-zero bits included) is a skip.

/// One decoded slot: a value, or `None` for a skip.
pub type Slot = Option<u128>;

/// Slots per word and bits per slot of the base selectors 1..=14 (index 0 unused).
const BASE_COUNT: [u8; 15] = [0, 60, 30, 20, 15, 12, 10, 8, 7, 6, 5, 4, 3, 2, 1];
const BASE_BITS: [u8; 15] = [0, 1, 2, 3, 4, 5, 6, 7, 8, 10, 12, 15, 20, 30, 60];
/// Selector 7's extensions 1..=9.
const SEVEN_COUNT: [u8; 10] = [0, 9, 8, 7, 6, 5, 4, 3, 2, 1];
const SEVEN_BITS: [u8; 10] = [0, 2, 3, 4, 5, 7, 10, 14, 24, 52];
/// Selector 8's extensions 1..=13 (1..=7 with a 4-bit nibble count, 8..=13 with a 5-bit one).
const EIGHT_COUNT: [u8; 14] = [0, 7, 6, 5, 4, 3, 2, 1, 6, 5, 4, 3, 2, 1];
const EIGHT_BITS: [u8; 14] = [0, 4, 5, 7, 10, 14, 24, 52, 4, 6, 9, 13, 23, 51];

/// Values one RLE word repeats per unit of its count.
pub const RLE_UNIT: usize = 120;

const RLE_SELECTOR: u64 = 15;

/// How one word's slots are laid out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Layout {
    /// Slots in the word.
    count: u8,
    /// Value bits per slot.
    value_bits: u8,
    /// Trailing-zero count bits per slot (0, 4 or 5).
    zero_bits: u8,
    /// Zeros each unit of the trailing-zero count stands for (1 or 4).
    zero_unit: u8,
    /// Bit where the first slot starts.
    first_bit: u8,
}

// Every layout fits its word.
const _: () = {
    let mut s = 1;
    while s < 15 {
        let first = if s == 7 || s == 8 { 8 } else { 4 };
        assert!(BASE_COUNT[s] as u32 * BASE_BITS[s] as u32 + first <= 64);
        s += 1;
    }
    let mut e = 1;
    while e < 10 {
        assert!(SEVEN_COUNT[e] as u32 * (SEVEN_BITS[e] as u32 + 4) + 8 <= 64);
        e += 1;
    }
    let mut e = 1;
    while e < 14 {
        let zero_bits = if e < 8 { 4 } else { 5 };
        assert!(EIGHT_COUNT[e] as u32 * (EIGHT_BITS[e] as u32 + zero_bits) + 8 <= 64);
        e += 1;
    }
};

/// Why a word was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WordError(pub String);

fn layout(word: u64) -> Result<Layout, WordError> {
    let selector = (word & 0xF) as usize;
    let extension = ((word >> 4) & 0xF) as usize;
    let base = |s: usize| Layout {
        count: BASE_COUNT[s],
        value_bits: BASE_BITS[s],
        zero_bits: 0,
        zero_unit: 0,
        first_bit: if s == 7 || s == 8 { 8 } else { 4 },
    };
    match (selector, extension) {
        (0, _) => Err(WordError("simple-8b selector 0".into())),
        (7 | 8, 0) => Ok(base(selector)),
        (7, 1..=9) => Ok(Layout {
            count: SEVEN_COUNT[extension],
            value_bits: SEVEN_BITS[extension],
            zero_bits: 4,
            zero_unit: 1,
            first_bit: 8,
        }),
        (8, 1..=13) => Ok(Layout {
            count: EIGHT_COUNT[extension],
            value_bits: EIGHT_BITS[extension],
            zero_bits: if extension < 8 { 4 } else { 5 },
            zero_unit: 4,
            first_bit: 8,
        }),
        (7 | 8, _) => Err(WordError(format!(
            "simple-8b selector {selector} with extension {extension}"
        ))),
        (s, _) => Ok(base(s)),
    }
}

/// Decodes the words of one run (`words.len()` a multiple of 8) onto `out`, after `previous`,
/// the slot an RLE word at the start repeats. Returns the run's last slot. At most
/// `room` slots are decoded; a run holding more is an error (mongod's RLE words let 17 bytes
/// stand for 30,720 values, so a bound keeps a hostile column from filling memory).
pub fn decode_run(
    words: &[u8],
    previous: Slot,
    room: usize,
    out: &mut Vec<Slot>,
) -> Result<Slot, WordError> {
    assert!(words.len().is_multiple_of(8), "a run is whole words");
    let start = out.len();
    let mut last = previous;
    for chunk in words.chunks_exact(8) {
        let mut bytes = [0u8; 8];
        bytes.copy_from_slice(chunk);
        let word = u64::from_le_bytes(bytes);
        let added = if word & 0xF == RLE_SELECTOR {
            ((word >> 4) & 0xF) as usize + 1
        } else {
            0
        };
        if added > 0 {
            let n = added * RLE_UNIT;
            if out.len() - start + n > room {
                return Err(too_many(room));
            }
            out.extend(std::iter::repeat_n(last, n));
            continue;
        }
        let l = layout(word)?;
        if out.len() - start + l.count as usize > room {
            return Err(too_many(room));
        }
        for i in 0..l.count {
            last = slot(word, &l, i)?;
            out.push(last);
        }
    }
    Ok(last)
}

fn too_many(room: usize) -> WordError {
    WordError(format!(
        "more values than the {room} the column has room for"
    ))
}

fn slot(word: u64, l: &Layout, i: u8) -> Result<Slot, WordError> {
    let width = u32::from(l.value_bits + l.zero_bits);
    let shift = u32::from(l.first_bit) + width * u32::from(i);
    let mask = (1u64 << width) - 1;
    let bits = (word >> shift) & mask;
    if bits == mask {
        return Ok(None);
    }
    let zeros = u32::from(l.zero_unit) * (bits & ((1u64 << l.zero_bits) - 1)) as u32;
    let v = u128::from(bits >> l.zero_bits);
    if zeros >= 128 || (v << zeros) >> zeros != v {
        return Err(WordError(format!(
            "simple-8b slot shifted past 128 bits ({zeros} trailing zeros)"
        )));
    }
    Ok(Some(v << zeros))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(words: &[u64], previous: Slot) -> Result<Vec<Slot>, WordError> {
        let bytes: Vec<u8> = words.iter().flat_map(|w| w.to_le_bytes()).collect();
        let mut out = Vec::new();
        decode_run(&bytes, previous, 100_000, &mut out)?;
        Ok(out)
    }

    #[test]
    fn base_selectors() {
        // One 60-bit value 1 (selector 14); sixty 1-bit ones, which are skips (mongod's
        // column of every BSON type opens with two such words).
        assert_eq!(run(&[0x1E], None), Ok(vec![Some(1)]));
        assert_eq!(run(&[0xFFFF_FFFF_FFFF_FFF1], None), Ok(vec![None; 60]));
        assert_eq!(run(&[0x01], None), Ok(vec![Some(0); 60]));
        // Selector 12: three 20-bit values 1, 2, 3 from bit 4.
        assert_eq!(
            run(&[0x0000_3000_0200_001C], None),
            Ok(vec![Some(1), Some(2), Some(3)])
        );
        // Selector 8 without extension: seven 8-bit values from bit 8.
        let w = 8 | (0x01 << 8) | (0x02 << 16) | (0xFE << 56);
        assert_eq!(
            run(&[w], None),
            Ok(vec![
                Some(1),
                Some(2),
                Some(0),
                Some(0),
                Some(0),
                Some(0),
                Some(0xFE)
            ])
        );
        // Selector 7 without extension: eight 7-bit values from bit 8, all ones a skip.
        let w = 7 | (5 << 8) | (0x7F << 15);
        let got = run(&[w], None).expect("decodes");
        assert_eq!(&got[..3], &[Some(5), None, Some(0)]);
    }

    #[test]
    fn extended_selectors_shift_trailing_zeros() {
        // Selector 7, extension 1: 2 value bits + 4 zero bits, slot 0 = v 3, z 5 → 3 << 5.
        let slot0 = (3 << 4) | 5;
        let w = 7 | (1 << 4) | (slot0 << 8);
        assert_eq!(run(&[w], None).expect("decodes")[0], Some(3 << 5));
        // Selector 8, extension 1: 4 value bits + 4 bits of nibbles: v 1, z 2 → 1 << 8.
        let w = 8 | (1 << 4) | (((1 << 4) | 2) << 8);
        assert_eq!(run(&[w], None).expect("decodes")[0], Some(1 << 8));
        // Selector 8, extension 13: one 51-bit value + 5 bits of nibbles: z 31 → << 124.
        let w = 8 | (13 << 4) | (((1u64 << 5) | 31) << 8);
        assert_eq!(run(&[w], None), Ok(vec![Some(1u128 << 124)]));
    }

    #[test]
    fn rle_repeats_the_previous_slot() {
        let w = 15 | (1 << 4); // (1 + 1) * 120 repeats
        assert_eq!(run(&[w], Some(9)), Ok(vec![Some(9); 240]));
        assert_eq!(run(&[0x1E, 15], None).expect("decodes").len(), 121);
        assert_eq!(run(&[15], None), Ok(vec![None; 120]));
    }

    #[test]
    fn malformed_words_are_refused() {
        assert!(run(&[0], None).is_err());
        assert!(run(&[7 | (10 << 4)], None).is_err());
        assert!(run(&[8 | (14 << 4)], None).is_err());
        let mut out = Vec::new();
        let rle = (15u64 | (15 << 4)).to_le_bytes();
        assert!(decode_run(&rle, Some(0), 1000, &mut out).is_err());
    }
}
