//! Per-collection usage for the `top` command (what `mongotop` polls) and the activity
//! figures of `serverStatus.globalLock`: for every namespace a command named, the time in
//! microseconds and the count of its operations by mongod's event types (`queries`,
//! `getmore`, `insert`, `update`, `remove`, `commands`), each also counted under `readLock`
//! or `writeLock` and `total`. Counted once per command in dispatch; a short mutex, no
//! allocation once a namespace is known (the table is keyed by database, then collection,
//! so a lookup needs no `db.coll` string). Process-wide and reset only by a restart, as on
//! mongod.

use bson::{doc, Document};
use std::collections::HashMap;
use std::sync::atomic::{AtomicI64, Ordering::Relaxed};
use std::sync::{Mutex, MutexGuard, OnceLock};
use std::time::Duration;

/// mongod's event types, in the order `top` lists them after `total`, `readLock`, `writeLock`.
const EVENTS: [&str; 6] = [
    "queries", "getmore", "insert", "update", "remove", "commands",
];

#[derive(Default, Clone, Copy)]
struct Usage {
    time_us: i64,
    count: i64,
}

impl Usage {
    fn add(&mut self, us: i64) {
        self.time_us += us;
        self.count += 1;
    }

    fn document(self) -> Document {
        doc! {"time": self.time_us, "count": self.count}
    }
}

#[derive(Default)]
struct NsUsage {
    read: Usage,
    write: Usage,
    events: [Usage; EVENTS.len()],
}

/// Usage by database, then collection.
type Table = HashMap<String, HashMap<String, NsUsage>>;

fn table() -> MutexGuard<'static, Table> {
    static TOP: OnceLock<Mutex<Table>> = OnceLock::new();
    TOP.get_or_init(Default::default)
        .lock()
        .unwrap_or_else(|p| p.into_inner())
}

/// Commands running now, readers and writers (`globalLock.activeClients`).
static ACTIVE_READERS: AtomicI64 = AtomicI64::new(0);
static ACTIVE_WRITERS: AtomicI64 = AtomicI64::new(0);

/// The event type of command `name` and whether it writes.
fn event_of(name: &str) -> (usize, bool) {
    match name {
        "find" => (0, false),
        "getMore" => (1, false),
        "insert" => (2, true),
        "update" => (3, true),
        "delete" => (4, true),
        "findAndModify" | "findandmodify" | "create" | "drop" | "createIndexes" | "dropIndexes"
        | "deleteIndexes" | "renameCollection" | "collMod" => (5, true),
        _ => (5, false),
    }
}

/// Marks a command on a collection as running until the guard drops.
pub struct Active(bool);

impl Active {
    /// Counts a command `name` as running until the guard drops.
    pub fn start(name: &str) -> Active {
        let writes = event_of(name).1;
        let counter = if writes {
            &ACTIVE_WRITERS
        } else {
            &ACTIVE_READERS
        };
        counter.fetch_add(1, Relaxed);
        Active(writes)
    }
}

impl Drop for Active {
    fn drop(&mut self) {
        let counter = if self.0 {
            &ACTIVE_WRITERS
        } else {
            &ACTIVE_READERS
        };
        counter.fetch_sub(1, Relaxed);
    }
}

/// Counts one command `name` on collection `coll` of database `db` that took `took`.
pub fn record(db: &str, coll: &str, name: &str, took: Duration) {
    let us = i64::try_from(took.as_micros()).unwrap_or(i64::MAX);
    let (event, writes) = event_of(name);
    let mut table = table();
    let colls = match table.get_mut(db) {
        Some(c) => c,
        None => table.entry(db.to_owned()).or_default(),
    };
    let usage = match colls.get_mut(coll) {
        Some(u) => u,
        None => colls.entry(coll.to_owned()).or_default(),
    };
    usage.events[event].add(us);
    if writes {
        usage.write.add(us);
    } else {
        usage.read.add(us);
    }
}

/// The `top` reply's `totals`: `note`, then one document per namespace.
pub fn totals_document() -> Document {
    let table = table();
    let mut names: Vec<(String, &NsUsage)> = table
        .iter()
        .flat_map(|(db, colls)| colls.iter().map(move |(c, u)| (format!("{db}.{c}"), u)))
        .collect();
    names.sort_by(|a, b| a.0.cmp(&b.0));
    let mut totals = doc! {"note": "all times in micros"};
    for (ns, u) in names {
        let total = Usage {
            time_us: u.read.time_us + u.write.time_us,
            count: u.read.count + u.write.count,
        };
        let mut d = doc! {
            "total": total.document(),
            "readLock": u.read.document(),
            "writeLock": u.write.document(),
        };
        for (name, e) in EVENTS.iter().zip(u.events) {
            d.insert(*name, e.document());
        }
        totals.insert(ns, d);
    }
    totals
}

/// `$collStats.latencyStats` for `ns`: `reads` (everything under the read lock), `writes`
/// (insert, update, delete statements' commands) and `commands` (the other writing
/// commands: findAndModify, DDL), each `{latency: total µs, ops}`. Transactions are not
/// counted per collection, so there is no `transactions` section.
pub fn latency_document(db: &str, coll: &str) -> Document {
    let table = table();
    let u = table.get(db).and_then(|c| c.get(coll));
    let pick = |f: &dyn Fn(&NsUsage) -> Usage| u.map(f).unwrap_or_default();
    let reads = pick(&|u| u.read);
    let writes = pick(&|u| {
        let mut w = Usage::default();
        for e in &u.events[2..5] {
            w.time_us += e.time_us;
            w.count += e.count;
        }
        w
    });
    let all_writes = pick(&|u| u.write);
    let commands = Usage {
        time_us: all_writes.time_us - writes.time_us,
        count: all_writes.count - writes.count,
    };
    let section = |u: Usage| doc! {"latency": u.time_us, "ops": u.count};
    doc! {
        "reads": section(reads),
        "writes": section(writes),
        "commands": section(commands),
    }
}

/// `serverStatus.globalLock`: microseconds since start, and the commands running now
/// (`activeClients`; nothing queues behind a global lock here, so `currentQueue` is zeros).
pub fn global_lock_document(uptime: Duration) -> Document {
    let readers = ACTIVE_READERS.load(Relaxed).max(0);
    let writers = ACTIVE_WRITERS.load(Relaxed).max(0);
    doc! {
        "totalTime": i64::try_from(uptime.as_micros()).unwrap_or(i64::MAX),
        "currentQueue": {"total": 0, "readers": 0, "writers": 0},
        "activeClients": {
            "total": (readers + writers) as i32,
            "readers": readers as i32,
            "writers": writers as i32,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commands_count_under_their_event_and_lock() {
        let ns = "toptest.c";
        record("toptest", "c", "find", Duration::from_micros(10));
        record("toptest", "c", "insert", Duration::from_micros(5));
        record("toptest", "c", "findAndModify", Duration::from_micros(7));
        record("toptest", "c", "count", Duration::from_micros(3));
        let totals = totals_document();
        assert_eq!(totals.get_str("note"), Ok("all times in micros"));
        let u = totals.get_document(ns).expect("namespace");
        let pair = |k: &str| {
            let d = u.get_document(k).expect(k);
            (
                d.get_i64("time").expect("time"),
                d.get_i64("count").expect("count"),
            )
        };
        assert_eq!(pair("total"), (25, 4));
        assert_eq!(pair("readLock"), (13, 2));
        assert_eq!(pair("writeLock"), (12, 2));
        assert_eq!(pair("queries"), (10, 1));
        assert_eq!(pair("insert"), (5, 1));
        assert_eq!(pair("commands"), (10, 2));
        assert_eq!(pair("getmore"), (0, 0));
    }

    #[test]
    fn running_commands_show_as_active_clients() {
        let active = |d: &Document| {
            d.get_document("activeClients")
                .expect("active")
                .get_i32("writers")
                .expect("writers")
        };
        let guard = Active::start("update");
        let during = global_lock_document(Duration::from_secs(1));
        assert!(active(&during) >= 1, "{during}");
        drop(guard);
        assert_eq!(during.get_i64("totalTime"), Ok(1_000_000));
    }
}
