//! `emu_binary` over an in-memory ESC: every count from 0 to a few hundred with only
//! non-anchors, after compaction's anchors and after cleanup's null anchor, compared with
//! what was inserted.

use super::*;
use crate::qe::memory_esc::MemoryEsc;

const TAG: Token = [1; 32];
const VALUE: Token = [2; 32];

#[test]
fn counts_non_anchors() {
    let mut esc = MemoryEsc::default();
    for n in 0..300u64 {
        assert_eq!(
            current_count(&mut esc, &TAG, &VALUE).unwrap(),
            n,
            "after {n}"
        );
        esc.put(non_anchor_document(&TAG, n + 1));
        // Another value's entries change nothing.
        esc.put(non_anchor_document(&[3; 32], n + 1));
    }
    let p = emu_binary(&mut esc, &TAG, &VALUE).unwrap();
    assert_eq!(
        p,
        Positions {
            cpos: Some(300),
            apos: Some(0)
        }
    );
}

#[test]
fn counts_past_anchors_and_the_null_anchor() {
    let mut esc = MemoryEsc::default();
    for n in 1..=5 {
        esc.put(non_anchor_document(&TAG, n));
    }
    // Compaction: an anchor at 1 recording cpos 5, the non-anchors deleted.
    esc.put(anchor_document(&TAG, &VALUE, 1, (0, 5)));
    esc.0.retain(|_, d| d.get("value").unwrap().is_some());
    assert_eq!(
        emu_binary(&mut esc, &TAG, &VALUE).unwrap(),
        Positions {
            cpos: None,
            apos: Some(1)
        }
    );
    assert_eq!(current_count(&mut esc, &TAG, &VALUE).unwrap(), 5);
    for n in 6..=9 {
        esc.put(non_anchor_document(&TAG, n));
    }
    assert_eq!(current_count(&mut esc, &TAG, &VALUE).unwrap(), 9);
    esc.put(anchor_document(&TAG, &VALUE, 2, (0, 9)));
    // Cleanup: the null anchor records (apos 2, cpos 9); the anchors go.
    esc.0.clear();
    esc.put(anchor_document(&TAG, &VALUE, 0, (2, 9)));
    assert_eq!(
        emu_binary(&mut esc, &TAG, &VALUE).unwrap(),
        Positions {
            cpos: None,
            apos: None
        }
    );
    assert_eq!(current_count(&mut esc, &TAG, &VALUE).unwrap(), 9);
    esc.put(non_anchor_document(&TAG, 10));
    assert_eq!(current_count(&mut esc, &TAG, &VALUE).unwrap(), 10);
    esc.put(anchor_document(&TAG, &VALUE, 3, (0, 10)));
    assert_eq!(
        emu_binary(&mut esc, &TAG, &VALUE).unwrap(),
        Positions {
            cpos: None,
            apos: Some(3)
        }
    );
}

#[test]
fn an_anchor_that_does_not_decrypt_is_an_error() {
    let mut esc = MemoryEsc::default();
    esc.put(bson::doc! {"_id": id_value(&anchor_id(&TAG, 0)), "value": 1});
    assert!(emu_binary(&mut esc, &TAG, &VALUE).is_err());
}
