//! A transaction's write set lives in memory until commit, so it is charged to the cache
//! while the transaction lives and bounded by `EnvOptions::txn_limit`: a write past the
//! limit fails with `TransactionTooLarge` and leaves the transaction as it was, overwrites
//! of one key do not add up, and the default limit still takes a 16 MiB value with a tiny
//! cache.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "an integration test: a failed unwrap or expect is a failed test"
)]

mod common;

use shale_engine::{Env, EnvOptions, Error, MIN_TXN_MAX_BYTES};

const LIMIT: usize = 1 << 20;

fn used(env: &Env) -> u64 {
    env.counters().cache_used_bytes
}

#[test]
fn the_write_set_is_charged_to_the_cache_until_the_transaction_ends() {
    let dir = tempfile::tempdir().expect("tempdir");
    let env = Env::open(dir.path(), common::tiny_options(4 << 20)).expect("open");
    let t = env.create_tree("t", None).expect("create");
    let before = used(&env);
    let mut txn = env.begin();
    for i in 0..100u32 {
        txn.put(&t, format!("k{i:03}").as_bytes(), &[1u8; 2000])
            .expect("put");
    }
    let during = used(&env);
    assert!(
        during >= before + 100 * 2000,
        "write set of 200,000 bytes not charged: {before} -> {during}"
    );
    txn.abort();
    assert!(
        used(&env) + 100 * 2000 <= during,
        "abort kept the charge: {during} -> {}",
        used(&env)
    );
    assert_eq!(t.get(b"k000").expect("get"), None, "abort wrote nothing");
}

#[test]
fn a_write_past_the_limit_fails_and_the_transaction_keeps_what_it_had() {
    let dir = tempfile::tempdir().expect("tempdir");
    let options = EnvOptions {
        txn_max_bytes: Some(LIMIT),
        ..common::tiny_options(4 << 20)
    };
    let env = Env::open(dir.path(), options).expect("open");
    let t = env.create_tree("t", None).expect("create");
    let mut txn = env.begin();
    let value = vec![9u8; 10_000];
    let mut written = 0u32;
    let refused = loop {
        match txn.put(&t, format!("k{written:04}").as_bytes(), &value) {
            Ok(()) => written += 1,
            Err(e) => break e,
        }
        assert!(
            written < 1000,
            "no limit met after {written} puts of 10,000 bytes"
        );
    };
    match refused {
        Error::TransactionTooLarge { bytes, limit } => {
            assert_eq!(limit, LIMIT);
            assert!(bytes > LIMIT && bytes < LIMIT + 11_000, "bytes {bytes}");
        }
        e => panic!("expected TransactionTooLarge, got {e}"),
    }
    // 10,000-byte values under a 1 MiB limit: about a hundred fit, not more.
    assert!((95..=104).contains(&written), "{written} puts fit");
    // Overwriting a key it holds does not grow the write set; nor does a delete of one.
    for _ in 0..50 {
        txn.put(&t, b"k0000", &value).expect("overwrite");
    }
    txn.delete(&t, b"k0001").expect("delete replaces the put");
    txn.commit().expect("commit what fitted");
    assert_eq!(t.get(b"k0000").expect("get"), Some(value.clone()));
    assert_eq!(t.get(b"k0001").expect("get"), None);
    let last = format!("k{:04}", written - 1);
    assert_eq!(t.get(last.as_bytes()).expect("get"), Some(value));
    let refused_key = format!("k{written:04}");
    assert_eq!(t.get(refused_key.as_bytes()).expect("get"), None);
    t.verify().expect("verify");
}

#[test]
fn the_default_limit_takes_a_16_mib_value_with_its_index_entries_in_a_tiny_cache() {
    let dir = tempfile::tempdir().expect("tempdir");
    let options = common::tiny_options(1 << 20);
    assert_eq!(options.txn_limit(), MIN_TXN_MAX_BYTES);
    let env = Env::open(dir.path(), options).expect("open");
    let docs = env.create_tree("docs", None).expect("create");
    let index = env.create_tree("index", None).expect("create");
    let big = vec![b'x'; 16 << 20];
    let mut txn = env.begin();
    txn.put(&docs, b"doc1", &big).expect("16 MiB value");
    txn.put(&index, &big[..1 << 20], b"doc1")
        .expect("1 MiB key");
    txn.put(&index, b"small", b"doc1").expect("index entry");
    txn.commit().expect("commit");
    assert_eq!(
        docs.get(b"doc1").expect("get").map(|v| v.len()),
        Some(16 << 20)
    );
    assert_eq!(
        index.get(&big[..1 << 20]).expect("get"),
        Some(b"doc1".to_vec())
    );
    let after = used(&env);
    assert!(
        after <= (1 << 20) + (20 << 20),
        "the write set's charge outlived its commit: {after} bytes used"
    );
    docs.verify().expect("verify");
    index.verify().expect("verify");
}
