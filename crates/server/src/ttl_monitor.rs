//! The TTL monitor (mongod's `TTLMonitor`): every `ttlMonitorSleepSecs` (60 s unless set at
//! startup) it runs one expiry pass over every TTL index (`Database::expire_ttl`), unless
//! `ttlMonitorEnabled` is off or this server may not write (a `--replSet` member that is not
//! primary) or while `fsync` holds writes. Its passes and deletes are
//! `serverStatus.metrics.ttl`.

use crate::ServerConfig;
use bson::{doc, Document};
use shale_db::Database;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Arc;
use std::time::Duration;

/// mongod's default `ttlMonitorSleepSecs`.
pub const DEFAULT_SLEEP: Duration = Duration::from_secs(60);

static PASSES: AtomicU64 = AtomicU64::new(0);
static DELETED: AtomicU64 = AtomicU64::new(0);

/// Runs passes until the server stops.
pub async fn run(db: Arc<Database>, config: Arc<ServerConfig>) {
    loop {
        tokio::time::sleep(config.ttl_monitor_sleep()).await;
        if config.ttl_monitor_disabled.load(Relaxed) || !may_write(&config) {
            continue;
        }
        let (db, locks) = (db.clone(), config.fsync_lock.clone());
        let pass = tokio::task::spawn_blocking(move || {
            // While `fsync` holds writes the pass is skipped, as mongod's monitor skips it.
            let _write = locks.try_enter_write()?;
            Some(db.expire_ttl(bson::DateTime::now()))
        })
        .await;
        let pass = match pass {
            Ok(None) => continue,
            Ok(Some(p)) => Ok(p),
            Err(e) => Err(e),
        };
        match pass {
            Ok(Ok(pass)) => {
                PASSES.fetch_add(1, Relaxed);
                DELETED.fetch_add(pass.deleted, Relaxed);
                if pass.deleted > 0 {
                    tracing::info!(
                        deleted = pass.deleted,
                        indexes = pass.indexes,
                        "TTL indexes expired documents"
                    );
                }
            }
            Ok(Err(e)) => tracing::warn!(error = %e.message, "a TTL pass failed"),
            Err(e) => tracing::warn!(error = %e, "the TTL monitor failed"),
        }
    }
}

/// A standalone always writes; a replica-set member only as primary.
fn may_write(config: &ServerConfig) -> bool {
    !config.repl.is_replica_set() || config.repl.state() == crate::repl::MemberState::Primary
}

/// `serverStatus.metrics.ttl`.
pub fn metrics_document() -> Document {
    doc! {
        "deletedDocuments": DELETED.load(Relaxed) as i64,
        "passes": PASSES.load(Relaxed) as i64,
    }
}
