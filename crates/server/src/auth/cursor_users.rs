//! Which users opened each cursor, so that under `--auth` only they may continue or kill it
//! (mongod's `isCoauthorizedWith`: the connection shares at least one user with the
//! cursor). The cursor table in `shale_db` knows sessions, not users; this map sits beside
//! it in the server, filled after a command opens a cursor and emptied when the cursor is
//! exhausted, killed, or found closed (timed out) when the map grows.

use super::UserName;
use bson::RawDocumentBuf;
use std::collections::HashMap;
use std::sync::Mutex;

/// Entries kept before closed cursors are pruned.
const PRUNE_AT_MIN: usize = 1024;

/// Cursor id → the users logged in on the connection that opened it.
#[derive(Debug, Default)]
pub struct CursorUsers {
    inner: Mutex<Inner>,
}

#[derive(Debug, Default)]
struct Inner {
    by_id: HashMap<i64, Vec<UserName>>,
    prune_at: usize,
}

/// Whether a connection with `users` may use a cursor opened by `owners`.
pub fn coauthorized(owners: &[UserName], users: &[UserName]) -> bool {
    (owners.is_empty() && users.is_empty()) || owners.iter().any(|o| users.contains(o))
}

impl CursorUsers {
    /// Records that `users` opened cursor `id`; `is_open` tells which recorded cursors
    /// still exist when the map needs pruning.
    pub fn record(&self, id: i64, users: Vec<UserName>, is_open: impl Fn(i64) -> bool) {
        let mut inner = self.lock();
        inner.by_id.insert(id, users);
        if inner.by_id.len() >= inner.prune_at.max(PRUNE_AT_MIN) {
            inner.by_id.retain(|id, _| is_open(*id));
            inner.prune_at = inner.by_id.len() * 2;
        }
    }

    /// The users that opened cursor `id`, if it was recorded.
    pub fn owners(&self, id: i64) -> Option<Vec<UserName>> {
        self.lock().by_id.get(&id).cloned()
    }

    /// Forgets cursor `id` (exhausted or killed).
    pub fn forget(&self, id: i64) {
        self.lock().by_id.remove(&id);
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// The cursor id of a cursor reply (`cursor.id`), if the reply has one.
pub fn reply_cursor_id(reply: &RawDocumentBuf) -> Option<i64> {
    let cursor = reply.get_document("cursor").ok()?;
    cursor.get_i64("id").ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_shared_user_may_use_a_cursor_and_closed_cursors_are_pruned() {
        let ann = UserName::new("ann", "app");
        let bob = UserName::new("bob", "app");
        let (just_ann, just_bob) = (vec![ann.clone()], vec![bob.clone()]);
        assert!(coauthorized(&just_ann, &[bob.clone(), ann.clone()]));
        assert!(!coauthorized(&just_ann, &just_bob));
        assert!(!coauthorized(&just_ann, &[]));
        assert!(coauthorized(&[], &[]));
        let users = CursorUsers::default();
        for id in 0..PRUNE_AT_MIN as i64 {
            users.record(id, vec![ann.clone()], |id| id < 10);
        }
        assert_eq!(users.owners(5), Some(vec![ann.clone()]));
        assert_eq!(users.owners(500), None, "closed cursors were pruned");
        users.forget(5);
        assert_eq!(users.owners(5), None);
    }
}
