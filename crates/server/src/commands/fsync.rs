//! `fsync` and `fsyncUnlock`, and the write lock they hold. `{fsync: 1}` makes every change
//! so far part of a durable engine checkpoint (`Env::checkpoint`); `{fsync: 1, lock: true}`
//! also stops writes: new write commands wait (they are held, not refused) and the lock is
//! taken once the writes already running have finished, then the checkpoint runs, so the
//! data files hold every acknowledged write and no later one until `fsyncUnlock`. Locks
//! nest (`lockCount`, as mongod); the last `fsyncUnlock` lets the held writes go. The lock
//! belongs to the server, not to the connection that took it.
//!
//! Held writes wait in short steps and stop with `Interrupted` (11601) when `killOp`
//! kills them. The TTL monitor skips its pass while the lock is held, as mongod's does.
//! What this lock cannot stop: the engine's own background work (its interval checkpoint
//! and cache flushes) keeps running; with no writes it has nothing new to write.

use super::{require_admin, CommandResult};
use crate::ConnectionCtx;
use bson::{doc, Bson, Document};
use shale_db::engine_error;
use shale_doc::{ErrorCode, MongoError};
use std::sync::{Condvar, Mutex, MutexGuard};
use std::time::Duration;

/// How often a held write looks at its interrupt flag.
const WAIT_STEP: Duration = Duration::from_millis(50);

/// The server's fsync lock: how many `fsync` locks are held and how many writes run.
#[derive(Debug, Default)]
pub struct FsyncLock {
    state: Mutex<State>,
    changed: Condvar,
}

#[derive(Debug, Default)]
struct State {
    lock_count: u64,
    writers: u64,
}

/// A write in progress: the lock waits for it to end.
pub struct WriteGuard<'a>(&'a FsyncLock);

impl Drop for WriteGuard<'_> {
    fn drop(&mut self) {
        let mut s = self.0.state();
        s.writers -= 1;
        drop(s);
        self.0.changed.notify_all();
    }
}

impl FsyncLock {
    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Enters a write, waiting while the lock is held; `Interrupted` if the operation is
    /// killed meanwhile.
    pub fn enter_write(&self) -> Result<WriteGuard<'_>, MongoError> {
        let mut s = self.state();
        while s.lock_count > 0 {
            shale_db::check_interrupt()?;
            s = self
                .changed
                .wait_timeout(s, WAIT_STEP)
                .unwrap_or_else(|p| p.into_inner())
                .0;
        }
        s.writers += 1;
        Ok(WriteGuard(self))
    }

    /// Enters a write unless the lock is held (background work that may simply skip).
    pub fn try_enter_write(&self) -> Option<WriteGuard<'_>> {
        let mut s = self.state();
        if s.lock_count > 0 {
            return None;
        }
        s.writers += 1;
        Some(WriteGuard(self))
    }

    /// Takes one lock: new writes wait from now, and this returns once the running ones
    /// have finished. The new count.
    fn lock(&self) -> u64 {
        let mut s = self.state();
        s.lock_count += 1;
        let count = s.lock_count;
        while s.writers > 0 {
            s = self.changed.wait(s).unwrap_or_else(|p| p.into_inner());
        }
        count
    }

    /// Releases one lock; `None` when none is held. The new count.
    fn unlock(&self) -> Option<u64> {
        let mut s = self.state();
        if s.lock_count == 0 {
            return None;
        }
        s.lock_count -= 1;
        let count = s.lock_count;
        drop(s);
        self.changed.notify_all();
        Some(count)
    }

    /// How many locks are held, when any is.
    pub fn lock_count(&self) -> Option<u64> {
        let s = self.state();
        (s.lock_count > 0).then_some(s.lock_count)
    }
}

/// Whether command `name` with `body` changes data or the catalog (what the lock holds).
pub fn is_write(name: &str, body: &bson::RawDocument) -> bool {
    crate::repl::concern::is_write(name, body) || matches!(name, "collMod" | "compact")
}

/// `fsync`: a checkpoint; with `lock: true` also the write lock (see the module's header).
pub fn fsync(ctx: &ConnectionCtx, db: &str, body: &Document) -> CommandResult {
    require_admin(db, "fsync")?;
    let lock = flag(body, "lock")?;
    if flag(body, "async")? {
        return Err(MongoError::new(
            ErrorCode::IllegalOperation,
            "fsync: async is not supported",
        ));
    }
    if flag(body, "forBackup")? {
        return Err(MongoError::new(
            ErrorCode::NotImplemented,
            "fsync: forBackup is not supported",
        ));
    }
    if !lock {
        ctx.db.engine().checkpoint().map_err(engine_error)?;
        return Ok(doc! {"numFiles": 1});
    }
    let fsync_lock = &ctx.server.fsync_lock;
    let count = fsync_lock.lock();
    if let Err(e) = ctx.db.engine().checkpoint() {
        fsync_lock.unlock();
        return Err(engine_error(e));
    }
    tracing::info!(lock_count = count, "fsync lock acquired: writes are held");
    Ok(doc! {
        "info": "now locked against writes, use db.fsyncUnlock() to unlock",
        "lockCount": count as i64,
        "seeAlso": "http://dochub.mongodb.org/core/fsynccommand",
    })
}

/// `fsyncUnlock`: releases one lock; `IllegalOperation` when none is held.
pub fn fsync_unlock(ctx: &ConnectionCtx, db: &str, _body: &Document) -> CommandResult {
    require_admin(db, "fsyncUnlock")?;
    match ctx.server.fsync_lock.unlock() {
        Some(count) => {
            tracing::info!(lock_count = count, "fsyncUnlock");
            Ok(doc! {"info": "fsyncUnlock completed", "lockCount": count as i64})
        }
        None => Err(MongoError::new(
            ErrorCode::IllegalOperation,
            "fsyncUnlock called when not locked",
        )),
    }
}

/// A boolean-ish option (numbers count, as mongod's `trueValue`).
fn flag(body: &Document, field: &str) -> Result<bool, MongoError> {
    Ok(match body.get(field) {
        None | Some(Bson::Null) => false,
        Some(Bson::Boolean(b)) => *b,
        Some(Bson::Int32(n)) => *n != 0,
        Some(Bson::Int64(n)) => *n != 0,
        Some(Bson::Double(n)) => *n != 0.0,
        Some(other) => {
            return Err(super::data::wrong_type(
                &format!("fsync.{field}"),
                other,
                "bool",
            ))
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn locks_nest_and_unlock_past_zero_is_refused() {
        let l = FsyncLock::default();
        assert_eq!(l.lock_count(), None);
        assert_eq!(l.lock(), 1);
        assert_eq!(l.lock(), 2);
        assert!(l.try_enter_write().is_none());
        assert_eq!(l.unlock(), Some(1));
        assert_eq!(l.unlock(), Some(0));
        assert_eq!(l.unlock(), None);
        assert!(l.try_enter_write().is_some());
    }

    #[test]
    fn a_write_waits_for_the_unlock_and_the_lock_waits_for_running_writes() {
        let l = Arc::new(FsyncLock::default());
        let running = l.enter_write().expect("unlocked");
        let locker = {
            let l = l.clone();
            std::thread::spawn(move || l.lock())
        };
        std::thread::sleep(Duration::from_millis(100));
        assert!(
            !locker.is_finished(),
            "the lock waits for the running write"
        );
        drop(running);
        assert_eq!(locker.join().expect("lock"), 1);
        let writer = {
            let l = l.clone();
            std::thread::spawn(move || l.enter_write().map(|_| ()).is_ok())
        };
        std::thread::sleep(Duration::from_millis(150));
        assert!(!writer.is_finished(), "the write is held");
        l.unlock();
        assert!(writer.join().expect("writer"));
    }

    #[test]
    fn a_held_write_can_be_killed() {
        let l = FsyncLock::default();
        l.lock();
        let flag = Arc::new(shale_db::Interrupt::default());
        let _scope = shale_db::op_scope(flag.clone());
        flag.kill();
        let e = l.enter_write().err().expect("interrupted");
        assert_eq!(e.code.code(), 11601);
    }
}
