//! The environment's background threads: the flusher, which moves messages down wherever a
//! root's buffers exceed the node size (writers flush on their own thread only while they
//! wait out backpressure, one per tree: `Tree::help_flush`) and evicts ahead of writers
//! when one finds the cache near its limit (`Cache::evict_ahead`), and the
//! checkpointer, which checkpoints at the configured interval, and — when the binary gave
//! the environment a `HeapProbe` — the heap governor, which keeps the process's heap under
//! the cache budget plus its headroom (`heap.rs`). All stop when the environment shuts down;
//! the first two stop working (and log why) once the environment is poisoned. A panic in
//! any (a bug) poisons the environment, so writers waiting on the flusher's progress get
//! an error instead of waiting forever.

use crate::inner::EnvInner;
use crate::tree::Tree;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// How often the checkpointer looks at the clock and the log's length.
const CHECKPOINTER_TICK: Duration = Duration::from_millis(50);
/// How long the flusher sleeps when nobody wakes it.
const FLUSHER_IDLE: Duration = Duration::from_millis(100);
/// How often the heap governor reads the allocator (`heap.rs`): at a few hundred MB/s of
/// freed pages, 10 ms is a few MiB of overshoot at most. Far from its limit it sleeps
/// longer (`heap.rs`, 4.).
const GOVERNOR_TICK: Duration = Duration::from_millis(10);

#[allow(
    clippy::expect_used,
    reason = "a thread that cannot be spawned at open leaves no engine to run; the panic names which"
)]
pub(crate) fn start(env: &Arc<EnvInner>) -> Vec<JoinHandle<()>> {
    let mut threads = Vec::new();
    let e = env.clone();
    threads.push(
        std::thread::Builder::new()
            .name("shale-flusher".into())
            .spawn(move || guarded(&e, "flusher", flusher))
            .expect("spawning the flusher thread"),
    );
    let o = &env.options;
    if o.checkpoint_interval.is_some()
        || o.checkpoint_log_bytes.is_some()
        || o.recovery_checkpoint_log_bytes.is_some()
    {
        let e = env.clone();
        threads.push(
            std::thread::Builder::new()
                .name("shale-checkpointer".into())
                .spawn(move || guarded(&e, "checkpointer", checkpointer))
                .expect("spawning the checkpointer thread"),
        );
    }
    if let Some(probe) = env.options.heap.clone() {
        let e = env.clone();
        threads.push(
            std::thread::Builder::new()
                .name("shale-heap".into())
                .spawn(move || guarded(&e, "heap governor", |e| governor(e, &*probe)))
                .expect("spawning the heap governor thread"),
        );
    }
    threads
}

/// Runs a background thread's body; a panic poisons the environment with its message.
fn guarded(env: &EnvInner, role: &str, body: impl FnOnce(&EnvInner)) {
    let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| body(env)));
    if let Err(panic) = outcome {
        let message = panic
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| panic.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "no message".into());
        tracing::error!(role, message, "background thread panicked");
        env.poison(format!("the {role} thread panicked: {message}"));
    }
}

fn flusher(env: &EnvInner) {
    while !env.life.is_shut_down() {
        let trees: Vec<Arc<Tree>> = env.trees.read().values().cloned().collect();
        let mut worked = false;
        for t in trees.iter().filter(|t| t.needs_flush()) {
            match env.poison_on(t.flush_once()) {
                Ok(w) => worked |= w,
                Err(e) => {
                    // Writers wait on the flusher under backpressure: it must not stop
                    // without failing the environment, whatever the error.
                    tracing::error!(error = %e, tree = t.name(), "flusher stopped");
                    env.poison(format!("the flusher stopped on tree {}: {e}", t.name()));
                    return;
                }
            }
            let _ = env.poison_on(t.evict_if_needed());
        }
        if let Err(e) = env.poison_on(env.cache.evict_ahead()) {
            // Writers evict on their own thread as before, and see the poison if an I/O
            // failure caused it.
            tracing::warn!(error = %e, "the flusher could not evict ahead of writers");
        }
        env.life.wake_and_wait((!worked).then_some(FLUSHER_IDLE));
    }
}

/// Keeps the heap under the cache budget plus its headroom (`heap.rs`), evicting at once
/// when it lowers the cache's working limit.
fn governor(env: &EnvInner, probe: &dyn crate::HeapProbe) {
    let mut governor = crate::heap::Governor::default();
    let mut skip = 0;
    while !env.life.is_shut_down() {
        std::thread::sleep(GOVERNOR_TICK * (1 + skip));
        let tick = governor.tick(&env.cache, env.options.heap_headroom_bytes, probe);
        skip = tick.skip;
        if !tick.shrink_grew {
            continue;
        }
        let any_tree = env.trees.read().values().next().cloned();
        if let Some(t) = any_tree {
            // Eviction covers every tree of the cache, whichever it starts from. An error
            // here (a dirty node that cannot be written) poisons the environment, as in the
            // flusher.
            let _ = env.poison_on(t.evict_if_needed());
        }
    }
}

/// Checkpoints every `checkpoint_interval`, and sooner when the log since the last
/// checkpoint passes `checkpoint_log_bytes`, and at its first tick when the recovery at
/// open replayed at least `recovery_checkpoint_log_bytes` (R9: the log since the redo point
/// when the thread starts is exactly what recovery replayed).
fn checkpointer(env: &EnvInner) {
    let interval = env.options.checkpoint_interval;
    let log_bytes = env.options.checkpoint_log_bytes;
    let replayed = env.log_since_checkpoint();
    let mut after_recovery = env
        .options
        .recovery_checkpoint_log_bytes
        .is_some_and(|b| replayed >= b);
    if after_recovery {
        tracing::info!(
            replayed_bytes = replayed,
            "recovery replayed a long log; checkpointing now"
        );
    }
    let tick = interval.map_or(CHECKPOINTER_TICK, |i| i.min(CHECKPOINTER_TICK));
    let mut last = Instant::now();
    while !env.life.is_shut_down() {
        std::thread::sleep(tick);
        let due =
            std::mem::take(&mut after_recovery) || interval.is_some_and(|i| last.elapsed() >= i);
        let log_full = log_bytes.is_some_and(|b| env.log_since_checkpoint() >= b);
        if !due && !log_full {
            continue;
        }
        last = Instant::now();
        if let Err(e) = env.checkpoint() {
            tracing::error!(error = %e, "checkpoint failed; checkpointer stopped");
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::{Env, EnvOptions, Error, WriteBatch};

    #[test]
    fn a_panicking_background_thread_poisons_the_environment() {
        let dir = tempfile::tempdir().expect("tempdir");
        let env = Env::open(dir.path(), EnvOptions::default()).expect("open");
        let t = env.create_tree("t", None).expect("create");
        super::guarded(env.inner_for_tests(), "flusher", |_| panic!("boom"));
        let mut b = WriteBatch::new();
        b.put(&t, b"k", b"v");
        match env.write(b) {
            Err(Error::Poisoned(reason)) => {
                assert!(reason.contains("flusher thread panicked: boom"), "{reason}")
            }
            other => panic!("a write after the panic: {other:?}"),
        }
    }
}
