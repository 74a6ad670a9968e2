//! Helpers shared by the engine's integration tests: the seeds a randomized test runs with,
//! and the tiny configuration that makes every tree path (flush, split, merge, eviction) run,
//! both from `shale-testkit`.

#![allow(
    dead_code,
    unused_imports,
    reason = "every test binary compiles this module and uses only part of it"
)]

pub use shale_testkit::{seeds, tiny_options};

/// An environment opened with a fault injector the test holds (to fail the next write or
/// fsync, or hold one), as the disk-fault tests open theirs.
pub fn open_with_faults(
    dir: &std::path::Path,
    options: shale_engine::EnvOptions,
) -> (
    shale_engine::Env,
    std::sync::Arc<shale_engine::FaultInjector>,
) {
    let faults = std::sync::Arc::new(shale_engine::FaultInjector::default());
    let hooks = shale_engine::EnvHooks {
        faults: Some(faults.clone()),
        ..shale_engine::EnvHooks::default()
    };
    let env = shale_engine::Env::open_with(dir, options, hooks).expect("open");
    (env, faults)
}

/// Bytes of the log files in an environment's directory.
#[allow(dead_code)] // not every test that declares `mod common` reads the log's size
pub fn log_bytes(dir: &std::path::Path) -> u64 {
    std::fs::read_dir(dir.join("wal"))
        .expect("wal dir")
        .map(|e| e.expect("entry").metadata().expect("metadata").len())
        .sum()
}

/// Every key and value of a tree in order, as a cursor from the first key sees them.
#[allow(dead_code)] // only the model tests scan whole trees
pub fn scan_all(t: &shale_engine::TreeHandle) -> Vec<(Vec<u8>, Vec<u8>)> {
    let mut c = t.cursor();
    c.seek_to_first().expect("seek first");
    let mut got = Vec::new();
    while c.valid() {
        got.push((c.key().to_vec(), c.value().to_vec()));
        c.next().expect("next");
    }
    got
}

/// The repository's root, for the tests that check documents and sources against each
/// other (`architecture_matches_tree`, `docs_match_code`, `tidy`).
pub fn repo_root() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// A repository file's text, by its path from the root.
pub fn read_repo(rel: &str) -> String {
    std::fs::read_to_string(repo_root().join(rel)).unwrap_or_else(|e| panic!("{rel}: {e}"))
}

/// Every file and directory under `dir` (whose path from the root is `rel`), as
/// `/`-separated paths from the root, skipping build output and tool state.
pub fn repo_paths(dir: &std::path::Path, rel: &str, out: &mut Vec<String>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        if name.starts_with('.') || name == "target" || name == "node_modules" {
            continue;
        }
        let path = if rel.is_empty() {
            name.clone()
        } else {
            format!("{rel}/{name}")
        };
        if e.path().is_dir() {
            repo_paths(&e.path(), &path, out);
        }
        out.push(path);
    }
}
