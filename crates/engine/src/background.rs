//! The environment's background threads: the flusher, which moves messages down wherever a
//! root's buffers exceed the node size (so writers never flush on their own thread), and the
//! checkpointer, which checkpoints at the configured interval. Both stop when the environment
//! shuts down; both stop working (and log why) once the environment is poisoned.

use crate::env::EnvInner;
use crate::tree::Tree;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// How long the flusher sleeps when nobody wakes it.
const FLUSHER_IDLE: Duration = Duration::from_millis(100);

pub(crate) fn start(env: &Arc<EnvInner>) -> Vec<JoinHandle<()>> {
    let mut threads = Vec::new();
    let e = env.clone();
    threads.push(
        std::thread::Builder::new()
            .name("shale-flusher".into())
            .spawn(move || flusher(&e))
            .expect("spawning the flusher thread"),
    );
    if let Some(interval) = env.options.checkpoint_interval {
        let e = env.clone();
        threads.push(
            std::thread::Builder::new()
                .name("shale-checkpointer".into())
                .spawn(move || checkpointer(&e, interval))
                .expect("spawning the checkpointer thread"),
        );
    }
    threads
}

fn flusher(env: &EnvInner) {
    while !env.shutdown.load(Ordering::SeqCst) {
        let trees: Vec<Arc<Tree>> = env.trees.read().values().cloned().collect();
        let mut worked = false;
        for t in trees.iter().filter(|t| t.needs_flush()) {
            match env.poison_on(t.flush_once()) {
                Ok(w) => worked |= w,
                Err(e) => {
                    tracing::error!(error = %e, tree = t.name(), "flusher stopped");
                    return;
                }
            }
            let _ = env.poison_on(t.evict_if_needed());
        }
        let mut g = env.work.0.lock();
        env.work.1.notify_all();
        if !worked {
            env.work.1.wait_for(&mut g, FLUSHER_IDLE);
        }
    }
}

fn checkpointer(env: &EnvInner, interval: Duration) {
    let mut last = Instant::now();
    while !env.shutdown.load(Ordering::SeqCst) {
        std::thread::sleep(Duration::from_millis(50).min(interval));
        if last.elapsed() < interval {
            continue;
        }
        last = Instant::now();
        if let Err(e) = env.checkpoint() {
            tracing::error!(error = %e, "checkpoint failed; checkpointer stopped");
            return;
        }
    }
}
