//! Any bytes through every decoder of the engine's on-disk formats
//! (`shale_engine::decoders`): the first byte picks the decoder — a node block, a node
//! header, a basement's or a buffer's raw bytes, a block file's header slot or translation
//! table, log frames, a log record — and the rest is its input. Errors are fine; panics are
//! not. Seeds (fuzz/seeds/engine_decoders/) are valid encodings written by
//! `cargo test -p shale-engine --lib write_fuzz_seeds -- --ignored`.

#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Some((&pick, bytes)) = data.split_first() {
        let _ = shale_engine::decoders::run(pick, bytes);
    }
});
