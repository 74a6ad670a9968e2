//! A helper thread that compresses node partitions beside the thread encoding the node.
//!
//! Compression is most of a node write's CPU (zstd took ~40% of the flusher's time in a
//! random fill, where the flusher is the bottleneck and the second core sat half idle), and a
//! node's partitions are compressed independently, so `compress_in_order` cuts them into
//! runs of about `JOB_BYTES` raw bytes, hands every other run to one process-wide helper
//! thread and compresses the rest itself, one run ahead of the helper, appending each result
//! in order as soon as it is its turn. What it holds is what the plain loop held plus about
//! one run's raw and stored bytes on the helper, and the raw copies of runs taken back (see
//! below) until the helper reaches them in its queue and drops them.
//!
//! Runs, not single partitions: every hand-over costs a channel, a wake-up of the helper and
//! usually a wait for its reply, and with one partition per hand-over a 4 MiB leaf of 4 KiB
//! basements made ~500 of them per write (the fill's context switches rose from 7% to 13%
//! of its CPU between 16 and 4 KiB basements; docs/bench/history/
//! 2026-11-26-engine-mid-size-aligned-reads-shared-lock-installs-compression-runs.md, item 3).
//!
//! The helper is one thread for the process ("shale-compress"), started on first use; if it
//! cannot be started or has gone, every partition is compressed on the calling thread.
//!
//! A run handed over is taken back when the helper has not started it by the time the caller
//! reaches it: the helper is shared by every thread that writes nodes, and a caller that
//! waited for a busy helper to come to its run sat idle while it could have compressed the
//! run itself (two threads evicting at once spent a third of their waits there). So a caller
//! waits only for a run the helper is compressing at that moment.

use crate::codec::compress;
use crate::Compression;
use std::borrow::Cow;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{channel, Receiver, Sender};
use std::sync::{Arc, OnceLock};

/// Raw bytes a hand-over to the helper carries, about (a run of partitions).
pub(crate) const JOB_BYTES: usize = 64 << 10;

/// A compressed partition and its raw length.
type Compressed = (Vec<u8>, usize);

/// A run of partitions to compress and where to send the results. `claimed` is set by
/// whichever of the helper and the caller starts the run first; the other leaves it alone.
struct Job {
    codec: Compression,
    raws: Vec<Vec<u8>>,
    claimed: Arc<AtomicBool>,
    reply: Sender<Vec<Compressed>>,
}

/// The helper's queue; `None` if the thread could not be started.
fn helper() -> Option<&'static Sender<Job>> {
    static HELPER: OnceLock<Option<Sender<Job>>> = OnceLock::new();
    HELPER
        .get_or_init(|| {
            let (tx, rx) = channel::<Job>();
            std::thread::Builder::new()
                .name("shale-compress".into())
                .spawn(move || serve(rx))
                .ok()
                .map(|_| tx)
        })
        .as_ref()
}

fn serve(rx: Receiver<Job>) {
    for job in rx {
        if job.claimed.swap(true, Ordering::AcqRel) {
            // The caller took this run back and compressed it itself.
            continue;
        }
        let out = job
            .raws
            .iter()
            .map(|raw| (compress(job.codec, raw), raw.len()))
            .collect();
        // The encoder may have given up waiting (it never does today); nothing to do then.
        let _ = job.reply.send(out);
    }
}

/// A run handed to the helper, as the caller sees it.
struct Handed {
    claimed: Arc<AtomicBool>,
    result: Receiver<Vec<Compressed>>,
}

/// Compresses partitions `0..n` (`raw(i)` gives partition i's raw bytes, copied when it
/// goes to the helper) and hands each to `emit(stored, raw_len)` in order. Runs of
/// `per_job` partitions alternate between this thread and the helper; the caller picks
/// `per_job` so that a run holds about `JOB_BYTES` (`units_per_job`). A handed run the
/// helper has not started when its turn comes is compressed here (module doc).
pub(crate) fn compress_in_order<'a>(
    codec: Compression,
    n: usize,
    per_job: usize,
    raw: impl Fn(usize) -> Cow<'a, [u8]>,
    mut emit: impl FnMut(Vec<u8>, usize),
) {
    let per_job = per_job.max(1);
    let local = |i: usize| {
        let r = raw(i);
        (compress(codec, &r), r.len())
    };
    let helper = if n > per_job && codec != Compression::None {
        helper()
    } else {
        None
    };
    let Some(helper) = helper else {
        for i in 0..n {
            let (stored, len) = local(i);
            emit(stored, len);
        }
        return;
    };
    // One reply channel per job: if the helper dies on a job, its sender is dropped with the
    // job and the wait below ends with an error instead of blocking for ever.
    let send = |run: std::ops::Range<usize>| -> Option<Handed> {
        let (reply, result) = channel();
        let claimed = Arc::new(AtomicBool::new(false));
        let raws = run.map(|i| raw(i).into_owned()).collect();
        let job = Job {
            codec,
            raws,
            claimed: claimed.clone(),
            reply,
        };
        helper.send(job).ok().map(|()| Handed { claimed, result })
    };
    // Runs in pairs: the helper compresses run r + 1 while this thread compresses run r.
    let runs = n.div_ceil(per_job);
    let run_of = |r: usize| r * per_job..((r + 1) * per_job).min(n);
    let mut r = 0;
    while r < runs {
        let ahead = (r + 1 < runs).then(|| send(run_of(r + 1))).flatten();
        for i in run_of(r) {
            let (stored, len) = local(i);
            emit(stored, len);
        }
        r += 1;
        if r == runs {
            break;
        }
        // The helper's result if it started the run; `None` if it never will (taken back
        // here, never reached, or the helper is gone).
        let done = ahead.and_then(|h| {
            if h.claimed.swap(true, Ordering::AcqRel) {
                h.result.recv().ok()
            } else {
                None
            }
        });
        match done {
            Some(done) if done.len() == run_of(r).len() => {
                done.into_iter().for_each(|(stored, len)| emit(stored, len));
            }
            _ => {
                for i in run_of(r) {
                    let (stored, len) = local(i);
                    emit(stored, len);
                }
            }
        }
        r += 1;
    }
}

/// Partitions per hand-over for units of about `unit_bytes` raw bytes.
pub(crate) fn units_per_job(unit_bytes: usize) -> usize {
    (JOB_BYTES / unit_bytes.max(1)).max(1)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::codec::decompress;

    fn part(i: usize) -> Vec<u8> {
        (0..5000 + 37 * i)
            .map(|j| ((i * 7 + j / 13) % 251) as u8)
            .collect()
    }

    #[test]
    fn partitions_come_back_in_order_and_decompress_to_their_input() {
        for codec in [Compression::Zstd, Compression::Lz4, Compression::None] {
            for (n, per_job) in [
                (0, 1),
                (1, 1),
                (2, 1),
                (3, 1),
                (4, 2),
                (7, 2),
                (16, 3),
                (9, 9),
            ] {
                let mut got = Vec::new();
                compress_in_order(
                    codec,
                    n,
                    per_job,
                    |i| Cow::Owned(part(i)),
                    |stored, len| got.push((stored, len)),
                );
                assert_eq!(got.len(), n, "{codec:?} {n}");
                for (i, (stored, len)) in got.into_iter().enumerate() {
                    assert_eq!(len, part(i).len());
                    let back = decompress(codec, &stored, len).expect("decompress");
                    assert_eq!(back, part(i), "{codec:?} partition {i} of {n}");
                }
            }
        }
    }

    #[test]
    fn the_helper_skips_a_run_its_caller_took_back() {
        let (tx, rx) = channel::<Job>();
        let server = std::thread::spawn(move || serve(rx));
        let mut waits = Vec::new();
        for taken_back in [true, false] {
            let (reply, result) = channel();
            let claimed = Arc::new(AtomicBool::new(taken_back));
            let job = Job {
                codec: Compression::Zstd,
                raws: vec![part(1)],
                claimed: claimed.clone(),
                reply,
            };
            tx.send(job).expect("the helper is running");
            waits.push((taken_back, claimed, result));
        }
        drop(tx);
        server.join().expect("the helper ends with its queue");
        for (taken_back, claimed, result) in waits {
            assert!(claimed.load(Ordering::Acquire));
            match result.recv() {
                Ok(done) => {
                    assert!(!taken_back, "a run taken back was compressed twice");
                    let (stored, len) = &done[0];
                    let back = decompress(Compression::Zstd, stored, *len).expect("back");
                    assert_eq!(back, part(1));
                }
                Err(_) => assert!(taken_back, "a run the helper claimed got no reply"),
            }
        }
    }

    #[test]
    fn encoders_on_many_threads_share_the_helper() {
        std::thread::scope(|s| {
            for t in 0..4 {
                s.spawn(move || {
                    for _ in 0..20 {
                        let mut got = Vec::new();
                        compress_in_order(
                            Compression::Zstd,
                            9,
                            1 + t % 3,
                            |i| Cow::Owned(part(i + t)),
                            |st, l| got.push((st, l)),
                        );
                        for (i, (stored, len)) in got.into_iter().enumerate() {
                            let back = decompress(Compression::Zstd, &stored, len).expect("back");
                            assert_eq!(back, part(i + t));
                        }
                    }
                });
            }
        });
    }
}
