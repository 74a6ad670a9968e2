//! `Cursor::take_value` moves the value at the cursor out of its batch (the executor's
//! document scans return each value they pass, and used to copy each one). A value taken is
//! never seen empty afterwards: a seek or a step that lands on a taken entry again reads the
//! leaf anew, forward and backward, and buffered messages above the leaves (unflushed
//! writes, deletes) show in the values taken exactly as in a model.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "an integration test: a failed unwrap or expect is a failed test"
)]

mod common;

use shale_engine::{Env, TreeOptions, WriteBatch};
use std::collections::BTreeMap;

fn key(i: u32) -> Vec<u8> {
    format!("key{i:06}").into_bytes()
}

#[test]
fn taken_values_are_never_seen_empty() {
    let dir = tempfile::tempdir().unwrap();
    let env = Env::open(dir.path(), common::tiny_options(8 << 20)).unwrap();
    let tree = env.create_tree("t", Some(TreeOptions::tiny())).unwrap();
    let mut model = BTreeMap::new();
    let mut rng = shale_testkit::Rng(0x7a6e);
    // Several rounds of puts and deletes, some flushed and checkpointed, the last ones left
    // in the buffers above the leaves.
    for round in 0..4u32 {
        let mut batch = WriteBatch::new();
        for _ in 0..600 {
            let i = rng.below(2_000) as u32;
            if rng.below(5) == 0 {
                batch.delete(&tree, &key(i));
                model.remove(&key(i));
            } else {
                let v = format!("r{round}-{i}-{}", "x".repeat(rng.below(60) as usize));
                batch.put(&tree, &key(i), v.as_bytes());
                model.insert(key(i), v.into_bytes());
            }
        }
        env.write(batch).unwrap();
        if round < 2 {
            env.flush_all().unwrap();
            env.checkpoint().unwrap();
        }
    }

    // Forward: every value taken once, in order, equals the model's.
    let mut c = tree.cursor();
    c.seek_to_first().unwrap();
    let mut got = Vec::new();
    while c.valid() {
        let k = c.key().to_vec();
        got.push((k, c.take_value().unwrap()));
        c.next().unwrap();
    }
    let want: Vec<_> = model.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
    assert_eq!(got, want);

    // Seeks back over taken entries, and steps both ways after takes: each lands on the
    // stored value, never on an emptied one.
    let keys: Vec<_> = model.keys().cloned().collect();
    let mut c = tree.cursor();
    for step in 0..400 {
        let at = &keys[rng.below(keys.len() as u64) as usize];
        c.seek(at).unwrap();
        assert_eq!(c.key(), &at[..]);
        assert_eq!(c.value(), &model[at][..], "seek {step}");
        let taken = c.take_value().unwrap();
        assert_eq!(taken, model[at]);
        let backward = rng.below(2) == 0;
        match backward {
            true => c.prev().unwrap(),
            false => c.next().unwrap(),
        }
        if c.valid() {
            let k = c.key().to_vec();
            assert_eq!(c.value(), &model[&k][..], "step after take {step}");
            // And back onto the entry taken a moment ago.
            match backward {
                true => c.next().unwrap(),
                false => c.prev().unwrap(),
            }
            assert_eq!(c.key(), &at[..]);
            assert_eq!(c.value(), &model[at][..], "back onto a taken entry {step}");
        }
    }
    tree.verify().unwrap();
}
