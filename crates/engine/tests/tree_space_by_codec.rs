//! A tree's raw and stored bytes (`TreeHandle::space`) follow its codec and level: stored
//! equals raw without compression, is smaller with lz4 and zstd on compressible values, and
//! smaller still at a high zstd level; the figures and the level survive a reopen, and data
//! written at any level reads back.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "an integration test: a failed unwrap or expect is a failed test"
)]

mod common;

use common::tiny_options;
use shale_engine::{Compression, Env, TreeOptions};

fn value(i: u32) -> Vec<u8> {
    format!("{{\"name\": \"user{i:06}\", \"city\": \"Springfield\", \"tags\": [\"a\", \"b\"], \"n\": {}}}", i % 97)
        .into_bytes()
}

fn options(compression: Compression) -> TreeOptions {
    TreeOptions {
        node_size_bytes: 64 << 10,
        basement_size_bytes: 4 << 10,
        read_page_bytes: shale_engine::default_read_page(4 << 10),
        fanout: 8,
        compression,
    }
}

#[test]
fn stored_bytes_follow_the_codec_and_survive_reopen() {
    let dir = tempfile::tempdir().expect("tempdir");
    let codecs = [
        ("none", Compression::None),
        ("lz4", Compression::Lz4),
        ("zstd", Compression::Zstd),
        ("zstd19", Compression::zstd(19).expect("a level")),
    ];
    let mut measured = Vec::new();
    {
        let env = Env::open(dir.path(), tiny_options(8 << 20)).expect("open");
        for (name, codec) in codecs {
            let t = env.create_tree(name, Some(options(codec))).expect("create");
            assert_eq!(t.space().expect("space").nodes, 0, "nothing written yet");
            for i in 0..2_000u32 {
                t.put(&i.to_be_bytes(), &value(i)).expect("put");
            }
        }
        env.checkpoint().expect("checkpoint");
        for (name, _) in codecs {
            let t = env.open_tree(name).expect("open tree");
            let s = t.space().expect("space");
            assert!(s.nodes > 1 && s.raw_bytes > 2_000 * 60, "{name}: {s:?}");
            measured.push(s);
        }
        env.close().expect("close");
    }
    let [none, lz4, zstd, zstd19] = [measured[0], measured[1], measured[2], measured[3]];
    assert_eq!(none.raw_bytes, none.stored_bytes, "none stores raw bytes");
    assert!(lz4.ratio() > 1.5, "lz4: {lz4:?}");
    assert!(zstd.ratio() > lz4.ratio(), "zstd {zstd:?} vs lz4 {lz4:?}");
    assert!(
        zstd19.stored_bytes <= zstd.stored_bytes,
        "{zstd19:?} vs {zstd:?}"
    );

    let env = Env::open(dir.path(), tiny_options(8 << 20)).expect("reopen");
    for (i, (name, codec)) in codecs.into_iter().enumerate() {
        let t = env.open_tree(name).expect("open tree");
        assert_eq!(t.options().compression, codec, "{name}: the level is kept");
        let s = t.space().expect("space");
        let m = measured[i];
        assert_eq!(
            (s.nodes, s.raw_bytes, s.stored_bytes),
            (m.nodes, m.raw_bytes, m.stored_bytes),
            "{name}"
        );
        assert!(
            s.file_bytes >= s.stored_bytes && s.file_bytes >= s.free_bytes,
            "{name}: {s:?}"
        );
        for k in [0u32, 1_234, 1_999] {
            assert_eq!(
                t.get(&k.to_be_bytes()).expect("get"),
                Some(value(k)),
                "{name} {k}"
            );
        }
    }
}
