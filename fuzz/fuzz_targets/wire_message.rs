//! Any bytes as one wire message (the length field is set to the input's length so framing
//! passes and the decoders are reached), run through the server's real message handler on
//! a real database in a temporary directory: decoding, decompression, dispatch and the
//! commands themselves must answer with a reply or an error, never panic.

#![no_main]

use libfuzzer_sys::fuzz_target;
use shale_db::{Database, DbOptions};
use shale_server::{handle_message, ConnectionCtx};
use std::sync::{Arc, OnceLock};

fn ctx() -> &'static ConnectionCtx {
    static CTX: OnceLock<(tempfile::TempDir, ConnectionCtx)> = OnceLock::new();
    &CTX.get_or_init(|| {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut options = DbOptions::default();
        options.engine.cache_bytes = 8 << 20;
        options.engine.fsync = shale_engine::FsyncPolicy::EveryMillis(1000);
        options.engine.direct_io = false;
        let db = Database::open(dir.path(), options).expect("open");
        (dir, ConnectionCtx::detached(Arc::new(db)))
    })
    .1
}

fuzz_target!(|data: &[u8]| {
    let mut whole = data.to_vec();
    if whole.len() >= 4 {
        let len = whole.len() as i32;
        whole[..4].copy_from_slice(&len.to_le_bytes());
    }
    let _ = handle_message(ctx(), &whole);
});
