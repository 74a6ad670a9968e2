//! The engine's written-bytes counter agrees with the kernel's `/proc/self/io` (docs/design.md §6:
//! within 2%). One test in this file, so nothing else in the process writes while it runs.
//!
//! The comparison only means something when the engine's files are opened with O_DIRECT:
//! then every counted write reaches the device at once and the kernel charges it to this
//! process, page for page. The directory is under `CARGO_TARGET_TMPDIR` (the build's disk)
//! rather than `/tmp`, which may be a tmpfs, where O_DIRECT is refused; if the filesystem
//! refuses it anyway, the test prints why and skips.
//!
//! The catalog file is written with buffered `std::fs` I/O when a tree is created, and the
//! kernel counts it page-granular while the engine's counters do not see it. The compared
//! window therefore starts after `create_tree`, and the catalog is not written again inside
//! it (only creating or dropping a tree rewrites it). The window ends before `close`, which
//! consumes the environment and its counters. The kernel's bytes outside the window (open +
//! create_tree, with the catalog; close) are printed for reference.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "an integration test: a failed unwrap or expect is a failed test"
)]

use rand::rngs::StdRng;
use rand::{RngCore, SeedableRng};
use shale_engine::{Env, EnvOptions, FsyncPolicy, TreeOptions, WriteBatch};
use shale_io::proc_io;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

const TOLERANCE: f64 = 0.02;

/// Whether `dir`'s filesystem accepts an O_DIRECT open.
fn accepts_o_direct(dir: &Path) -> Result<(), String> {
    let path = dir.join("o_direct_probe");
    let opened = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .custom_flags(libc::O_DIRECT)
        .open(&path);
    let _ = std::fs::remove_file(&path);
    opened.map(drop).map_err(|e| e.to_string())
}

fn written(env: &Env) -> u64 {
    env.counters().io.total().write_bytes
}

#[test]
fn engine_write_bytes_match_proc_self_io() {
    let base = Path::new(env!("CARGO_TARGET_TMPDIR"));
    std::fs::create_dir_all(base).expect("target tmpdir");
    let dir = tempfile::tempdir_in(base).expect("tempdir");
    if let Err(e) = accepts_o_direct(dir.path()) {
        println!(
            "SKIPPED: {} refuses O_DIRECT ({e}); buffered writes reach /proc/self/io \
             only at writeback, so the counters cannot be compared",
            dir.path().display()
        );
        return;
    }
    if proc_io::read_self().is_none() {
        println!("SKIPPED: /proc/self/io is not available");
        return;
    }

    let os_before_open = proc_io::read_self().expect("/proc/self/io");
    let env = Env::open(
        dir.path().join("db"),
        EnvOptions {
            cache_bytes: 1 << 20,
            tree_defaults: TreeOptions {
                node_size_bytes: 64 << 10,
                basement_size_bytes: 8 << 10,
                fanout: 8,
                ..TreeOptions::default()
            },
            fsync: FsyncPolicy::EveryCommit,
            checkpoint_interval: None,
            direct_io: true,
            ..EnvOptions::default()
        },
    )
    .expect("open");
    let tree = env.create_tree("t", None).expect("create tree");
    let engine_before = written(&env);
    let os_before = proc_io::read_self().expect("/proc/self/io");
    let setup_os = os_before.write_bytes - os_before_open.write_bytes;

    // 4,000 puts of 1 KiB values (about 4 MiB logical, half-random so zstd keeps about
    // half) in batches of 50, with a checkpoint every 1,000 puts, then a full flush and a
    // last checkpoint.
    let mut rng = StdRng::seed_from_u64(7);
    let mut value = vec![0u8; 1024];
    for batch_no in 0u64..80 {
        let mut batch = WriteBatch::new();
        for j in 0..50u64 {
            let k = (batch_no * 50 + j).wrapping_mul(0x9E37_79B9_7F4A_7C15);
            rng.fill_bytes(&mut value[..512]);
            value.copy_within(..512, 512);
            batch.put(&tree, &k.to_be_bytes(), &value);
        }
        env.write(batch).expect("write");
        if batch_no % 20 == 19 {
            env.checkpoint().expect("checkpoint");
        }
    }
    env.flush_all().expect("flush_all");
    env.checkpoint().expect("final checkpoint");
    // `close` consumes the environment, so the compared window ends here, after the last
    // explicit checkpoint; what `close` itself writes is printed separately.
    let engine_after = written(&env);
    let os_after = proc_io::read_self().expect("/proc/self/io");
    drop(tree);
    env.close().expect("close");
    let close_os = proc_io::read_self().expect("/proc/self/io").write_bytes - os_after.write_bytes;

    let engine = engine_after - engine_before;
    let os = os_after.write_bytes - os_before.write_bytes;
    let off = (engine as f64 - os as f64).abs() / os.max(1) as f64;
    println!(
        "engine write_bytes {engine}, /proc/self/io write_bytes {os} ({:+.3}%); \
         outside the window: open + create_tree (incl. the buffered catalog) {setup_os} B, \
         close {close_os} B",
        (engine as f64 / os.max(1) as f64 - 1.0) * 100.0
    );
    assert!(engine >= 2 << 20, "the workload wrote only {engine} bytes");
    assert!(
        off <= TOLERANCE,
        "engine counted {engine} bytes written, the kernel {os}: {:.2}% apart (limit {:.0}%)",
        off * 100.0,
        TOLERANCE * 100.0
    );
}
