//! The database profiler: the `profile` command (mongod's levels 0/1/2 per database, the
//! server-wide `slowms` and `sampleRate`, a per-database `filter`) and the `system.profile`
//! entries it writes after each command, in mongod's shape (`op`, `ns`, `command`,
//! `keysExamined`, `docsExamined`, `nreturned` or the write counts, `millis`, `ts`,
//! `client`, `appName`, `allUsers`, `user`; counts typed as mongod's `appendNumber` types
//! them: int32 when they fit). Level 2 profiles every command; level 1 those
//! at least `slowms` long, sampled at `sampleRate`, or, with a `filter`, those whose entry
//! matches it (mongod's rule: a filter replaces `slowms` and `sampleRate`).
//!
//! `system.profile` is capped at 1 MiB on mongod; ShaleDB has no capped collections, so the
//! profiler bounds it itself: when the entries it wrote pass 1 MiB of BSON, it deletes the
//! oldest (lowest `_id`, which is insertion order) down to 3/4 of that. Entries are skipped
//! while `fsync` holds writes (an entry is a write), and a failed entry write is logged, not
//! reported to the profiled command.

use super::current_op::{namespace, op_type};
use super::data::raw_to_bson;
use super::{CommandResult, Reply};
use crate::command::Command;
use crate::ConnectionCtx;
use bson::{doc, Bson, Document, RawDocumentBuf};
use shale_db::{DeleteOp, FindSpec, Namespace, OpWork};
use shale_doc::append_number as number;
use shale_doc::{ErrorCode, Matcher, MongoError};
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

/// mongod's default `slowms`.
const DEFAULT_SLOW_MS: i32 = 100;

/// mongod's default size of `system.profile` (a 1 MiB capped collection).
const PROFILE_BYTES_MAX: i64 = 1 << 20;

/// The profiler's settings, and what it knows of each `system.profile` it writes.
#[derive(Debug)]
pub struct Profiler {
    dbs: Mutex<HashMap<String, DbProfile>>,
    /// Whether any database's level is above 0 (the command path's only check when none is).
    any_on: AtomicBool,
    slow_ms: AtomicI32,
    sample_rate_bits: AtomicU64,
}

#[derive(Debug, Default)]
struct DbProfile {
    level: i32,
    filter: Option<(Document, Matcher)>,
    /// Bytes of entries in `system.profile` (counted from the collection on first write).
    bytes: Option<i64>,
}

impl Default for Profiler {
    fn default() -> Self {
        Profiler {
            dbs: Mutex::default(),
            any_on: AtomicBool::new(false),
            slow_ms: AtomicI32::new(DEFAULT_SLOW_MS),
            sample_rate_bits: AtomicU64::new(1.0f64.to_bits()),
        }
    }
}

impl Profiler {
    fn dbs(&self) -> MutexGuard<'_, HashMap<String, DbProfile>> {
        self.dbs.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// mongod's `slowMS` is an int.
    pub fn slow_ms(&self) -> i32 {
        self.slow_ms.load(Ordering::Relaxed)
    }

    /// The fraction of slow operations profiled (`sampleRate`).
    pub fn sample_rate(&self) -> f64 {
        f64::from_bits(self.sample_rate_bits.load(Ordering::Relaxed))
    }

    /// Whether the finished command with `entry` is profiled in database `db`.
    fn wants(&self, db: &str, millis: i64, entry: &RawDocumentBuf) -> bool {
        let dbs = self.dbs();
        let Some(p) = dbs.get(db) else {
            return false;
        };
        match (p.level, &p.filter) {
            (2, _) => true,
            (1, Some((_, m))) => m.matches(entry).unwrap_or(false),
            (1, None) => {
                millis >= i64::from(self.slow_ms()) && rand::random::<f64>() < self.sample_rate()
            }
            _ => false,
        }
    }

    /// Whether the command could be profiled at all (cheap: most commands stop here).
    fn may_profile(&self, db: &str, millis: i64) -> bool {
        if !self.any_on.load(Ordering::Relaxed) {
            return false;
        }
        let dbs = self.dbs();
        match dbs.get(db) {
            Some(p) if p.level == 2 || (p.level == 1 && p.filter.is_some()) => true,
            Some(p) if p.level == 1 => millis >= i64::from(self.slow_ms()),
            _ => false,
        }
    }
}

/// `profile`: `{profile: <level>, slowms, sampleRate, filter}`. A level outside 0..=2 (mongod's
/// `-1`) only reads. Replies with the settings as they were (`was`, `slowms`, `sampleRate`,
/// `filter`, and mongod's `note` when a filter is involved).
pub fn profile(ctx: &ConnectionCtx, db: &str, body: &Document) -> CommandResult {
    shale_db::validate_db_name(db)?;
    let level = match body.get("profile") {
        Some(Bson::Int32(n)) => i64::from(*n),
        Some(Bson::Int64(n)) => *n,
        Some(Bson::Double(f)) if f.fract() == 0.0 => *f as i64,
        Some(other) => return Err(super::data::wrong_type("profile.profile", other, "int")),
        None => return Err(super::data::missing("profile.profile")),
    };
    let mut slow_ms = None;
    let mut sample_rate = None;
    let mut filter: Option<Option<Document>> = None;
    for (k, v) in body.iter().skip(1) {
        match (k.as_str(), v) {
            ("slowms", Bson::Int32(n)) => slow_ms = Some(*n),
            ("slowms", Bson::Int64(n)) => slow_ms = Some(clamp_i32(*n)),
            ("slowms", Bson::Double(f)) => slow_ms = Some(clamp_i32(*f as i64)),
            ("sampleRate", Bson::Double(f)) => sample_rate = Some(*f),
            ("sampleRate", Bson::Int32(n)) => sample_rate = Some(f64::from(*n)),
            ("sampleRate", Bson::Int64(n)) => sample_rate = Some(*n as f64),
            ("filter", Bson::Document(d)) => filter = Some(Some(d.clone())),
            ("filter", Bson::String(s)) if s == "unset" => filter = Some(None),
            ("filter", _) => {
                return Err(MongoError::new(
                    ErrorCode::BadValue,
                    "Expected an object, or the string 'unset'.",
                ))
            }
            ("slowms", other) => {
                return Err(super::data::wrong_type("profile.slowms", other, "long"))
            }
            ("sampleRate", other) => {
                return Err(super::data::wrong_type(
                    "profile.sampleRate",
                    other,
                    "double",
                ))
            }
            (k, _) if super::GENERIC_ARGUMENTS.contains(&k) => {}
            (k, _) => {
                return Err(MongoError::new(
                    ErrorCode::Location40415,
                    format!("BSON field 'profile.{k}' is an unknown field."),
                ))
            }
        }
    }
    if sample_rate.is_some_and(|r| !(0.0..=1.0).contains(&r)) {
        return Err(MongoError::new(
            ErrorCode::BadValue,
            "'sampleRate' must be between 0.0 and 1.0 inclusive",
        ));
    }
    let new_filter = match &filter {
        Some(Some(d)) => Some(Some((d.clone(), Matcher::parse(&to_raw(d)?)?))),
        Some(None) => Some(None),
        None => None,
    };
    let p = &ctx.server.profiler;
    let mut dbs = p.dbs();
    let entry = dbs.entry(db.to_owned()).or_default();
    let mut reply = doc! {
        "was": entry.level,
        "slowms": p.slow_ms(),
        "sampleRate": p.sample_rate(),
    };
    if let Some((d, _)) = &entry.filter {
        reply.insert("filter", d.clone());
    }
    if entry.filter.is_some() || matches!(filter, Some(Some(_))) {
        reply.insert(
            "note",
            "When a filter expression is set, slowms and sampleRate are not used for profiling \
             and slow-query log lines.",
        );
    }
    if (0..=2).contains(&level) {
        entry.level = level as i32;
    }
    if let Some(f) = new_filter {
        entry.filter = f;
    }
    let any = dbs.values().any(|d| d.level > 0);
    drop(dbs);
    p.any_on.store(any, Ordering::Relaxed);
    if let Some(ms) = slow_ms {
        p.slow_ms.store(ms, Ordering::Relaxed);
    }
    if let Some(r) = sample_rate {
        p.sample_rate_bits.store(r.to_bits(), Ordering::Relaxed);
    }
    Ok(reply)
}

/// After a command: writes its `system.profile` entry when its database's settings want one.
pub fn record(
    ctx: &ConnectionCtx,
    db: &str,
    cmd: &Command<'_>,
    reply: &Reply,
    elapsed: Duration,
    work: OpWork,
) {
    let millis = i64::try_from(elapsed.as_millis()).unwrap_or(i64::MAX);
    let p = &ctx.server.profiler;
    if !p.may_profile(db, millis) || cmd.name() == "profile" {
        return;
    }
    let entry = match build_entry(ctx, db, cmd, reply, millis, work).and_then(|d| to_raw(&d)) {
        Ok(e) => e,
        Err(e) => {
            tracing::warn!(error = %e.message, "cannot build a profile entry");
            return;
        }
    };
    if !p.wants(db, millis, &entry) {
        return;
    }
    // An entry is a write: none while fsync holds writes.
    let Some(_write) = ctx.server.fsync_lock.try_enter_write() else {
        return;
    };
    if let Err(e) = write_entry(ctx, db, entry) {
        tracing::warn!(db, error = %e.message, "cannot write a system.profile entry");
    }
}

/// The entry mongod writes for a command.
fn build_entry(
    ctx: &ConnectionCtx,
    db: &str,
    cmd: &Command<'_>,
    reply: &Reply,
    millis: i64,
    work: OpWork,
) -> Result<Document, MongoError> {
    let name = cmd.name();
    let mut d = doc! {
        "op": op_type(name),
        "ns": namespace(db, cmd.raw()),
        "command": raw_to_bson(&cmd.raw().to_raw_document_buf())?,
        "keysExamined": number(work.keys_examined as i64),
        "docsExamined": number(work.docs_examined as i64),
    };
    let body = reply_body(reply)?;
    outcome_fields(name, &body, &mut d);
    d.insert("numYield", 0);
    d.insert("locks", Document::new());
    d.insert("flowControl", Document::new());
    let length = match reply {
        Reply::Raw(r) => r.as_bytes().len(),
        Reply::Doc(_) => to_raw(&body)?.as_bytes().len(),
    };
    d.insert("responseLength", number(length as i64));
    d.insert("protocol", "op_msg");
    d.insert("millis", i32::try_from(millis).unwrap_or(i32::MAX));
    d.insert("ts", bson::DateTime::now());
    d.insert("client", ctx.peer.ip().to_string());
    if let Some(app) = ctx
        .app_name
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .clone()
    {
        d.insert("appName", app);
    }
    let users: Vec<_> = crate::auth::gate::lock(ctx)
        .users
        .iter()
        .map(|u| u.name.clone())
        .collect();
    let all: Vec<Bson> = users
        .iter()
        .map(|u| Bson::Document(doc! {"user": &u.user, "db": &u.db}))
        .collect();
    d.insert("allUsers", all);
    d.insert(
        "user",
        users.first().map_or(String::new(), |u| u.to_string()),
    );
    Ok(d)
}

/// The reply as a document (a raw reply decoded: only when profiling).
fn reply_body(reply: &Reply) -> Result<Document, MongoError> {
    match reply {
        Reply::Doc(d) => Ok(d.clone()),
        Reply::Raw(r) => match raw_to_bson(r)? {
            Bson::Document(d) => Ok(d),
            _ => Ok(Document::new()),
        },
    }
}

/// What the command returned or changed, and its error, as mongod's entry names them.
fn outcome_fields(name: &str, reply: &Document, d: &mut Document) {
    let n = reply
        .get("n")
        .and_then(|v| v.as_i32().map(i64::from).or(v.as_i64()))
        .unwrap_or(0);
    match name {
        "insert" => {
            d.insert("ninserted", number(n));
        }
        "update" => {
            d.insert("nMatched", number(n));
            d.insert("nModified", reply.get_i32("nModified").unwrap_or(0));
        }
        "delete" => {
            d.insert("ndeleted", number(n));
        }
        _ => {
            if let Ok(cursor) = reply.get_document("cursor") {
                let batch = cursor
                    .get_array("firstBatch")
                    .or_else(|_| cursor.get_array("nextBatch"));
                if let Ok(b) = batch {
                    d.insert("nreturned", number(b.len() as i64));
                }
                d.insert("cursorExhausted", cursor.get_i64("id").unwrap_or(0) == 0);
            } else if name == "count" {
                d.insert("nreturned", 1);
            }
        }
    }
    let ok = reply.get("ok").is_some_and(|v| match v {
        Bson::Double(f) => *f == 1.0,
        Bson::Int32(i) => *i == 1,
        _ => false,
    });
    if !ok {
        d.insert("ok", 0.0);
        d.insert("errMsg", reply.get_str("errmsg").unwrap_or_default());
        d.insert("errName", reply.get_str("codeName").unwrap_or_default());
        d.insert("errCode", reply.get_i32("code").unwrap_or(0));
    }
}

/// Inserts `entry` into `db.system.profile`, then deletes the oldest entries when the
/// collection passes its bound.
fn write_entry(ctx: &ConnectionCtx, db: &str, entry: RawDocumentBuf) -> Result<(), MongoError> {
    let ns = Namespace::new(db, "system.profile")?;
    let size = entry.as_bytes().len() as i64;
    let doc = shale_db::prepare_for_insert(entry)?;
    let result = ctx.db.insert(&ns, &[doc], true)?;
    if let Some((_, e)) = result.errors.into_iter().next() {
        return Err(e);
    }
    let p = &ctx.server.profiler;
    let known = p.dbs().get(db).and_then(|d| d.bytes);
    let total = match known {
        Some(b) => b + size,
        None => collection_bytes(ctx, &ns)?,
    };
    let total = if total > PROFILE_BYTES_MAX {
        total - trim(ctx, &ns, total - PROFILE_BYTES_MAX * 3 / 4)?
    } else {
        total
    };
    if let Some(d) = p.dbs().get_mut(db) {
        d.bytes = Some(total);
    }
    Ok(())
}

/// The BSON bytes of every entry (read once per database after the server starts).
fn collection_bytes(ctx: &ConnectionCtx, ns: &Namespace) -> Result<i64, MongoError> {
    let mut q = ctx.db.find(ns, &FindSpec::default())?;
    let mut total = 0i64;
    while let Some(d) = q.next_doc()? {
        total += d.as_bytes().len() as i64;
    }
    Ok(total)
}

/// Deletes the oldest entries until at least `bytes` are gone; the bytes deleted.
fn trim(ctx: &ConnectionCtx, ns: &Namespace, bytes: i64) -> Result<i64, MongoError> {
    let spec = FindSpec {
        sort: Some(doc! {"_id": 1}),
        ..FindSpec::default()
    };
    let mut q = ctx.db.find(ns, &spec)?;
    let (mut freed, mut last) = (0i64, None);
    while freed < bytes {
        let Some(d) = q.next_doc()? else { break };
        freed += d.as_bytes().len() as i64;
        last = d.get("_id").ok().flatten().map(|v| v.to_raw_bson());
    }
    let Some(last) = last else {
        return Ok(0);
    };
    let last = raw_to_bson_value(last)?;
    let op = DeleteOp {
        filter: doc! {"_id": {"$lte": last}},
        limit_one: false,
        hint: None,
        vars: Default::default(),
    };
    ctx.db.delete(ns, &[op], true)?;
    Ok(freed)
}

fn clamp_i32(n: i64) -> i32 {
    i32::try_from(n).unwrap_or(if n < 0 { i32::MIN } else { i32::MAX })
}

fn raw_to_bson_value(v: bson::RawBson) -> Result<Bson, MongoError> {
    Bson::try_from(v).map_err(|e| MongoError::new(ErrorCode::InternalError, e.to_string()))
}

fn to_raw(d: &Document) -> Result<RawDocumentBuf, MongoError> {
    RawDocumentBuf::from_document(d)
        .map_err(|e| MongoError::new(ErrorCode::InternalError, e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn level_one_takes_slow_commands_or_the_filters_matches() {
        let p = Profiler::default();
        let entry = to_raw(&doc! {"op": "query", "millis": 5}).expect("raw");
        assert!(!p.may_profile("d", 500), "no database profiled");
        p.dbs().insert(
            "d".into(),
            DbProfile {
                level: 1,
                ..DbProfile::default()
            },
        );
        p.any_on.store(true, Ordering::Relaxed);
        assert!(!p.may_profile("d", 5));
        assert!(p.may_profile("d", 100) && p.wants("d", 100, &entry));
        let f = doc! {"op": "query"};
        let m = Matcher::parse(&to_raw(&f).expect("raw")).expect("filter");
        p.dbs().get_mut("d").expect("d").filter = Some((f, m));
        assert!(p.may_profile("d", 0) && p.wants("d", 0, &entry));
        let other = to_raw(&doc! {"op": "insert"}).expect("raw");
        assert!(!p.wants("d", 500, &other), "a filter replaces slowms");
    }

    #[test]
    fn level_two_takes_every_command_and_zero_none() {
        let p = Profiler::default();
        let entry = to_raw(&doc! {}).expect("raw");
        p.dbs().insert(
            "d".into(),
            DbProfile {
                level: 2,
                ..DbProfile::default()
            },
        );
        p.dbs().insert("z".into(), DbProfile::default());
        p.any_on.store(true, Ordering::Relaxed);
        assert!(p.wants("d", 0, &entry));
        assert!(!p.may_profile("z", 10_000) && !p.wants("z", 10_000, &entry));
    }

    #[test]
    fn outcomes_are_named_as_mongod_names_them() {
        let mut d = Document::new();
        outcome_fields("update", &doc! {"n": 3, "nModified": 2, "ok": 1.0}, &mut d);
        assert_eq!(d, doc! {"nMatched": 3, "nModified": 2});
        let mut d = Document::new();
        let reply = doc! {"cursor": {"firstBatch": [{}, {}], "id": 0_i64}, "ok": 1.0};
        outcome_fields("find", &reply, &mut d);
        assert_eq!(d.get_i32("nreturned"), Ok(2));
        assert_eq!(d.get_bool("cursorExhausted"), Ok(true));
        let mut d = Document::new();
        let err = doc! {"ok": 0.0, "errmsg": "m", "code": 11601, "codeName": "Interrupted"};
        outcome_fields("find", &err, &mut d);
        assert_eq!(d.get_i32("errCode"), Ok(11601));
        assert_eq!(d.get_str("errName"), Ok("Interrupted"));
    }
}
