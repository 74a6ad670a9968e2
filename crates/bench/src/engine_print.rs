//! What `shale-bench engine` prints: the report's tables (each phase's rate, CPU, I/O,
//! bytes on disk and memory) and the summary's lines, from the `EngineReport` it also
//! writes as JSON.

use super::*;

/// A byte count in MiB with one decimal.
pub(super) fn mib(n: u64) -> String {
    format!("{:.1} MiB", n as f64 / MIB as f64)
}

pub(super) fn opt<T>(v: Option<T>, f: impl Fn(T) -> String) -> String {
    v.map_or_else(|| "-".to_owned(), f)
}

pub(super) fn print_report(r: &EngineReport) {
    let p = &r.params;
    println!(
        "engine: {} keys ({} B keys, {} B values), data {} per fill, cache {} (data/cache {}), {} reader thread(s)",
        p.keys,
        p.key_bytes,
        p.value_bytes,
        mib(p.data_bytes),
        mib(p.cache_bytes),
        num(p.data_to_cache_ratio),
        p.read_threads
    );
    println!(
        "machine: {} cores, {} on {} ({}), O_DIRECT {}",
        r.machine.cores,
        r.machine.filesystem,
        r.machine.device,
        r.machine.mount_point,
        if r.machine.direct_io { "yes" } else { "no" }
    );
    println!();
    let mut t = Table::new([
        "phase",
        "ops",
        "secs",
        "ops/s",
        "cpu us/op",
        "user us/op",
        "reads/op",
        "B/read",
        "engine wr",
        "os wr",
        "eng/os",
        "logical",
        "on disk",
        "rss peak",
        "rss-base",
    ]);
    for ph in &r.phases {
        t.row([
            ph.name.to_owned(),
            ph.ops.to_string(),
            num(ph.seconds),
            num(ph.ops_per_sec),
            opt(ph.cpu_us_per_op, num),
            opt(ph.user_cpu_us_per_op, num),
            num(ph.reads_per_op),
            opt(ph.bytes_per_read, num),
            mib(ph.engine_bytes_written),
            opt(ph.os_write_bytes, mib),
            opt(ph.write_ratio_engine_to_os, |v| format!("{v:.3}")),
            mib(ph.logical_bytes),
            mib(ph.db_bytes_on_disk),
            opt(ph.rss_peak_bytes, mib),
            opt(ph.rss_peak_over_baseline_bytes, mib),
        ]);
    }
    print!("{}", t.render());
    for p in &r.phases {
        read_probe::print(p.name, p.device_probe, p.fraction_of_device_reads);
        if let Some(mix) = &p.cache_mix {
            println!("{}: {}", p.name, mix.line());
        }
    }
    println!();
    print_memory(&r.phases);
    crate::engine_txn::print(&r.txn);
    #[cfg(feature = "rocksdb")]
    peer_rocksdb::print(&r.peer);
    #[cfg(feature = "sqlite")]
    peer_sqlite::print(&r.btree_peer);
    println!();
    let s = &r.summary;
    println!(
        "median basement: {} B raw, {} B compressed ({} B rounded up to 4 KiB); \
         expected basement read (rounded, weighted by entries): {} B; \
         read-random: {} B per basement read ({} of the expected read), \
         {} basement + {} buffer + {} header reads per get; {} buffered messages per entry",
        s.median_raw_basement_bytes,
        s.median_compressed_basement_bytes,
        s.median_compressed_basement_rounded_bytes,
        s.expected_basement_read_bytes,
        opt(s.read_random_bytes_per_basement_read, num),
        opt(s.basement_read_to_expected_read, |v| format!("{v:.3}")),
        num(s.read_random_basement_reads_per_op),
        num(s.read_random_buffer_reads_per_op),
        num(s.read_random_header_reads_per_op),
        num(s.buffered_messages_per_entry),
    );
    if r.summary.warnings.is_empty() {
        println!("warnings: none");
    } else {
        println!("warnings:");
        for w in &r.summary.warnings {
            println!("  - {w}");
        }
    }
}

/// Each phase's sampled memory peaks against the cache charge.
fn print_memory(phases: &[Phase]) {
    let mut t = Table::new([
        "phase",
        "alloc peak",
        "resident peak",
        "rss peak",
        "uncharged peak",
        "charge then",
        "charge at end",
        "alloc at end",
        "overhead peak",
        "of it dirty",
        "shrink at end",
        "releases",
    ]);
    for ph in phases {
        let m = &ph.memory;
        t.row([
            ph.name.to_owned(),
            opt(m.allocated_peak_bytes, mib),
            opt(m.resident_peak_bytes, mib),
            opt(m.rss_peak_bytes, mib),
            opt(m.uncharged_peak_bytes, mib),
            opt(m.charge_at_uncharged_peak_bytes, mib),
            mib(ph.cache_used_bytes),
            opt(ph.allocated_bytes, mib),
            opt(m.overhead_peak_bytes, mib),
            opt(m.dirty_at_overhead_peak_bytes, mib),
            mib(ph.cache_shrink_bytes),
            format!("{} ({})", ph.heap_releases, mib(ph.heap_released_bytes)),
        ]);
    }
    print!("{}", t.render());
    println!();
}
