//! A helper thread that compresses node partitions beside the thread encoding the node.
//!
//! Compression is most of a node write's CPU (zstd took ~40% of the flusher's time in a
//! random fill, where the flusher is the bottleneck and the second core sat half idle), and a
//! node's partitions are compressed independently, so `compress_in_order` hands every other
//! partition to one process-wide helper thread and compresses the rest itself, one ahead of
//! the helper, appending each result in order as soon as it is its turn. What it holds is
//! what the plain loop held plus about one partition's raw and stored bytes on the helper.
//!
//! The helper is one thread for the process ("shale-compress"), started on first use; if it
//! cannot be started or has gone, every partition is compressed on the calling thread.

use crate::codec::compress;
use crate::Compression;
use std::borrow::Cow;
use std::sync::mpsc::{channel, Receiver, Sender};
use std::sync::OnceLock;

/// A compressed partition and its raw length.
type Compressed = (Vec<u8>, usize);

/// A partition to compress and where to send the result.
struct Job {
    codec: Compression,
    raw: Vec<u8>,
    reply: Sender<Compressed>,
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
        let stored = compress(job.codec, &job.raw);
        // The encoder may have given up waiting (it never does today); nothing to do then.
        let _ = job.reply.send((stored, job.raw.len()));
    }
}

/// Compresses partitions `0..n` (`raw(i)` gives partition i's raw bytes, copied when it
/// goes to the helper) and hands each to
/// `emit(stored, raw_len)` in order, compressing odd partitions on the helper thread.
pub(crate) fn compress_in_order<'a>(
    codec: Compression,
    n: usize,
    raw: impl Fn(usize) -> Cow<'a, [u8]>,
    mut emit: impl FnMut(Vec<u8>, usize),
) {
    let local = |i: usize| {
        let r = raw(i);
        (compress(codec, &r), r.len())
    };
    let helper = if n >= 2 && codec != Compression::None {
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
    let send = |i: usize| -> Option<Receiver<Compressed>> {
        let (reply, result) = channel();
        let job = Job {
            codec,
            raw: raw(i).into_owned(),
            reply,
        };
        helper.send(job).ok().map(|()| result)
    };
    // Pairs: the helper compresses partition i + 1 while this thread compresses partition i.
    let mut alive = true;
    let mut pending: Option<(usize, Receiver<Compressed>)> = None;
    for i in 0..n {
        match pending.take() {
            Some((p, result)) if p == i => match result.recv() {
                Ok((stored, len)) => {
                    emit(stored, len);
                    continue;
                }
                // The helper is gone: this partition and the rest are done here.
                Err(_) => alive = false,
            },
            other => pending = other,
        }
        if alive && pending.is_none() && i + 1 < n && i % 2 == 0 {
            pending = send(i + 1).map(|r| (i + 1, r));
            alive = pending.is_some();
        }
        let (stored, len) = local(i);
        emit(stored, len);
    }
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
            for n in [0, 1, 2, 3, 4, 7, 16] {
                let mut got = Vec::new();
                compress_in_order(
                    codec,
                    n,
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
    fn encoders_on_many_threads_share_the_helper() {
        std::thread::scope(|s| {
            for t in 0..4 {
                s.spawn(move || {
                    for _ in 0..20 {
                        let mut got = Vec::new();
                        compress_in_order(
                            Compression::Zstd,
                            9,
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
