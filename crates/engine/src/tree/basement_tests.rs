//! Tests of the basement's raw arena against owned entries: reads of canonical and changed
//! arenas, random changes against a model, splits, packing, collection and malformed bytes.

use super::*;
use rand::{rngs::StdRng, Rng, SeedableRng};

/// Applies a committed version (no transaction is live in these tests).
fn commit(b: &mut Basement, key: &[u8], ts: Ts, value: Option<Vec<u8>>, horizon: Ts) {
    b.apply(key, ts, value, horizon, &TxnStatus::default());
}

fn sample() -> Basement {
    let mut b = Basement::new();
    for i in 0..50u32 {
        let key = format!("k{i:03}").into_bytes();
        commit(&mut b, &key, Ts(10), Some(vec![i as u8; i as usize]), Ts(0));
    }
    commit(&mut b, b"k007", Ts(20), None, Ts(0));
    commit(&mut b, b"k008", Ts(20), Some(b"new".to_vec()), Ts(0));
    b
}

#[test]
fn canonical_and_changed_arenas_agree_on_every_read() {
    let map = sample();
    let packed = Basement::decode(map.encode().into_owned()).expect("well formed");
    assert!(packed.is_packed() && !map.is_packed());
    assert_eq!(packed, map);
    assert_eq!(packed.bytes(), map.bytes(), "P2");
    assert_eq!(packed.len(), map.len());
    assert_eq!(packed.first_key(), map.first_key());
    assert_eq!(packed.last_key(), map.last_key());
    assert!(packed
        .iter()
        .rev()
        .map(|e| e.0)
        .eq(map.iter().rev().map(|e| e.0)));
    for i in 0..60u32 {
        let key = format!("k{i:03}").into_bytes();
        for snap in [Ts(5), Ts(10), Ts(20)] {
            let a = packed.get(&key).and_then(|e| e.value_at(snap));
            let b = map.get(&key).and_then(|e| e.value_at(snap));
            assert_eq!(a, b, "key {i} at {snap:?}");
        }
    }
    assert_eq!(
        packed.get(b"k008").and_then(|e| e.newest_value()),
        Some(&b"new"[..])
    );
    assert_eq!(packed.get(b"k007").map(|e| e.version_count()), Some(2));
    assert_eq!(packed.encode(), map.encode());
}

/// Even cuts of a changed (garbage-holding) arena: the pieces hold the entries in order,
/// each canonical with its sums right, and every cut falls before the first entry at or
/// past its share of the weight (or right after a piece of one entry).
#[test]
fn split_evenly_cuts_at_shares_of_the_weight_and_keeps_every_entry() {
    let b = sample();
    assert!(!b.is_packed());
    for pieces in [1, 2, 3, 7, 50, 80] {
        let cut = b.split_evenly(pieces);
        // A cut per entry at most: a heavy entry may pass two shares at once.
        assert!(cut.len() <= pieces, "{pieces} pieces");
        if pieces <= 7 {
            assert_eq!(cut.len(), pieces, "{pieces} pieces");
        }
        let mut before = 0;
        for (k, piece) in cut.iter().enumerate() {
            assert!(piece.is_packed() && piece.len() > 0);
            sums_agree(piece);
            if k > 0 {
                assert!(before >= b.bytes() * k / pieces, "cut {k} too early");
                let last = cut[k - 1].iter().next_back().expect("non-empty");
                let weight = entry_ref_bytes(last.0, last.1);
                let late = before - weight >= b.bytes() * k / pieces;
                assert!(!late || cut[k - 1].len() == 1, "cut {k} too late");
            }
            before += piece.bytes();
        }
        let joined: Vec<(Vec<u8>, Entry)> = cut
            .iter()
            .flat_map(|p| p.iter().map(|(k, e)| (k.to_vec(), e.to_entry())))
            .collect();
        let whole: Vec<(Vec<u8>, Entry)> =
            b.iter().map(|(k, e)| (k.to_vec(), e.to_entry())).collect();
        assert_eq!(joined, whole);
    }
}

/// P2 and P3 hold: `bytes` and `garbage` are what the arena's entries say.
fn sums_agree(b: &Basement) {
    let reached: usize = (0..b.len()).map(|i| b.entry_range(i).len()).sum();
    assert_eq!(b.garbage, b.arena.len() - COUNT_BYTES - reached, "P3");
    let bytes: usize = b.iter().map(|(k, e)| entry_ref_bytes(k, e)).sum();
    assert_eq!(b.bytes, bytes, "P2");
    if b.canonical {
        assert_eq!(check_raw(&b.arena), Ok((b.starts.clone(), b.bytes)), "P3");
    }
}

/// Random changes against a map of owned entries changed by the same rules.
#[test]
fn changes_match_a_model_of_owned_entries() {
    let mut rng = StdRng::seed_from_u64(0x2545_F491_4F6C_DD1D);
    let mut next = move |n: u64| rng.gen_range(0..n);
    let mut b = Basement::new();
    let mut model: BTreeMap<Vec<u8>, Entry> = BTreeMap::new();
    let (mut ts, mut horizon, mut rewrites) = (1u64, 0u64, 0);
    for step in 0..20_000 {
        let key = format!("key{:03}", next(300)).into_bytes();
        ts += next(2);
        horizon = horizon.max(ts.saturating_sub(next(20)));
        let value = (next(5) > 0).then(|| vec![step as u8; next(200) as usize]);
        let garbage = b.garbage;
        commit(&mut b, &key, Ts(ts), value.clone(), Ts(horizon));
        rewrites += usize::from(b.garbage < garbage);
        match model.get_mut(&key) {
            Some(e) => {
                e.push(Ts(ts), value, Ts(horizon));
                if e.is_dead(Ts(horizon)) {
                    model.remove(&key);
                }
            }
            None if value.is_some() || ts > horizon => {
                model.insert(key, Entry::new(Ts(ts), value));
            }
            None => {}
        }
        if step % 1_000 == 0 {
            sums_agree(&b);
            assert_eq!(b, Basement::from_entries(model.clone()), "step {step}");
            if step % 3_000 == 0 {
                b.collect(Ts(horizon), None);
                for e in model.values_mut() {
                    e.collect(Ts(horizon));
                }
                model.retain(|_, e| !e.is_dead(Ts(horizon)));
                sums_agree(&b);
            }
        }
    }
    assert!(rewrites > 0, "garbage must have forced rewrites");
    sums_agree(&b);
    assert_eq!(b, Basement::from_entries(model));
    let spare = b.arena.capacity() - b.arena.len();
    assert!(b.mem_bytes() >= b.arena.len() + spare);
    b.pack();
    sums_agree(&b);
    assert_eq!(b.garbage, 0);
    assert!(b.is_packed());
}

#[test]
fn find_answers_keys_before_at_and_after_the_last_one() {
    let mut b = Basement::new();
    assert_eq!(b.find(b"k"), Err(0));
    for i in (0..40u32).map(|i| i * 2) {
        commit(
            &mut b,
            format!("k{i:03}").as_bytes(),
            Ts(1),
            Some(vec![1]),
            Ts(0),
        );
    }
    assert_eq!(b.find(b"k078"), Ok(39), "the last key");
    assert_eq!(b.find(b"k079"), Err(40), "past the last: an append");
    assert_eq!(b.find(b"k077"), Err(39), "just before the last");
    assert_eq!(b.find(b"k000"), Ok(0));
    assert_eq!(b.find(b"a"), Err(0));
    assert_eq!(b.find(b"k041"), Err(21));
    assert_eq!(b.find(b"k040"), Ok(20));
}

#[test]
fn a_change_appends_and_packing_makes_the_arena_canonical_again() {
    let mut b = Basement::decode(sample().encode().into_owned()).expect("well formed");
    commit(&mut b, b"k100", Ts(30), Some(b"x".to_vec()), Ts(0));
    assert!(!b.is_packed());
    assert_eq!(b.len(), 51);
    let before = b.clone();
    b.pack();
    assert!(b.is_packed());
    assert_eq!(b, before);
    assert_eq!(b.bytes(), before.bytes());
}

#[test]
fn collecting_rewrites_a_basement_only_when_something_can_go() {
    let mut single = Basement::new();
    commit(&mut single, b"a", Ts(1), Some(b"v".to_vec()), Ts(0));
    let mut single = Basement::decode(single.encode().into_owned()).expect("ok");
    assert_eq!(single.collect(Ts(100), None), 0);
    assert!(single.is_packed());

    let mut many = Basement::decode(sample().encode().into_owned()).expect("ok");
    assert_eq!(
        many.collect(Ts(100), None),
        2,
        "k007 and k008 lose their old versions"
    );
    assert!(many.get(b"k007").is_none(), "a tombstone all can see goes");
    assert_eq!(many.len(), 49);
}

#[test]
fn malformed_bytes_are_errors_never_panics() {
    let good = sample().encode().into_owned();
    for cut in 0..good.len() {
        assert!(
            Basement::decode(good[..cut].to_vec()).is_err(),
            "cut at {cut}"
        );
    }
    let mut out_of_order = Basement::new();
    commit(&mut out_of_order, b"b", Ts(1), Some(vec![]), Ts(0));
    let mut raw = out_of_order.encode().into_owned();
    raw[0] = 2;
    raw.extend_from_within(4..);
    assert!(Basement::decode(raw).unwrap_err().contains("out of order"));
    let mut flag = good.clone();
    // The first entry is key "k000" (4 + 4 bytes), a count and a timestamp: its flag.
    flag[4 + 8 + 4 + 8] = 9;
    assert!(Basement::decode(flag).unwrap_err().contains("flag"));
    let mut rng = shale_testkit::Rng(0x9E37_79B9_7F4A_7C15);
    for _ in 0..2_000 {
        let mut raw = good.clone();
        let state = rng.next();
        let at = (state as usize) % raw.len();
        raw[at] ^= 1 << (state >> 61);
        if let Ok(b) = Basement::decode(raw) {
            // Whatever passes the checks must be readable without a panic.
            for (k, e) in b.iter() {
                let _ = (k.len(), e.value_at(Ts(u64::MAX)), e.to_entry());
            }
        }
    }
}
