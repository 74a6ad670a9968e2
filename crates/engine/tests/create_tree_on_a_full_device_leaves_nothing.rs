//! A tree whose file cannot be written (ENOSPC) is not created and leaves no file behind:
//! the next tree, which gets the same id, is created, and a reopen agrees (R7). Before,
//! the leftover file made every later `create_tree` fail with "File exists".

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "an integration test: a failed unwrap or expect is a failed test"
)]

mod common;

use shale_engine::{Env, EnvOptions};

fn options() -> EnvOptions {
    EnvOptions {
        cache_bytes: 16 << 20,
        checkpoint_interval: None,
        checkpoint_log_bytes: None,
        ..EnvOptions::default()
    }
}

#[test]
fn a_tree_whose_file_write_failed_leaves_no_file_and_the_next_one_is_made() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (env, faults) = common::open_with_faults(dir.path(), options());
    let kept = env.create_tree("kept", None).expect("create");
    kept.put(b"k", b"v").expect("put");
    let files = || std::fs::read_dir(dir.path()).expect("dir").count();
    let before = files();

    faults.no_space_on_next_write(0);
    let Err(e) = env.create_tree("failed", None) else {
        panic!("created on a full device");
    };
    assert!(e.is_out_of_space(), "{e}");
    assert_eq!(files(), before, "no file is left behind");
    assert!(!env.list_trees().contains(&"failed".to_owned()));

    let next = env
        .create_tree("next", None)
        .expect("the next tree is made");
    next.put(b"n", b"1").expect("put");
    drop((kept, next));
    env.close().expect("close");

    let env = Env::open(dir.path(), options()).expect("reopen");
    let mut trees = env.list_trees();
    trees.sort();
    assert_eq!(trees, vec!["kept".to_owned(), "next".to_owned()]);
    let next = env.open_tree("next").expect("next");
    assert_eq!(next.get(b"n").expect("get"), Some(b"1".to_vec()));
    drop(next);
    env.close().expect("close");
}
