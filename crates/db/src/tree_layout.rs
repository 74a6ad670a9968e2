//! A tree's layout from the options of `create` and of an index spec: TokuMX's names at the
//! top level (`compression`, `pageSize`, `readPageSize`, plus `compressionLevel` for zstd)
//! and ShaleDB's own under `storageEngine.shale` (`compression`, `compressionLevel`,
//! `nodeSizeBytes`/`pageSize`, `readPageSizeBytes`/`readPageSize`, `fanout`). Refusals carry
//! mongod's codes: a wrong type `TypeMismatch` (14), a value out of range or an unknown codec
//! `BadValue` (2), an unknown `storageEngine.shale` field or one setting given twice with
//! different values `InvalidOptions` (72). Nothing here is accepted and ignored: every option
//! read changes the tree it creates. Also renders a layout and its on-disk figures for
//! `collStats`.

use bson::{doc, Bson, Document};
use shale_doc::{ErrorCode, MongoError};
use shale_engine::{Compression, TreeOptions, TreeSpace, MAX_ZSTD_LEVEL, MIN_ZSTD_LEVEL};

/// Layout options a `create` command or an index spec may carry at its top level.
pub const TOP_LEVEL_OPTIONS: &[&str] = &[
    "compression",
    "compressionLevel",
    "pageSize",
    "readPageSize",
];

/// Largest node (`pageSize`) a tree may take: the engine records sizes in 32 bits and holds a
/// node whole in memory to write it.
pub const MAX_PAGE_BYTES: usize = 64 << 20;
/// Smallest node and read unit the engine takes (`validate_tree_options`).
pub const MIN_PAGE_BYTES: usize = 1024;
pub const MIN_READ_PAGE_BYTES: usize = 128;

/// TokuMX's codec names, read as the nearest codec here: quicklz (fast, light) as lz4, zlib
/// (TokuMX's default) as zstd at the default level, lzma (slow, small) as zstd at 19.
fn tokumx_codec(name: &str) -> Option<Compression> {
    match name {
        "quicklz" => Some(Compression::Lz4),
        "zlib" => Some(Compression::default()),
        "lzma" => Compression::zstd(19),
        _ => None,
    }
}

/// The settings one options document gives; each `None` when not given.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
struct Settings {
    codec: Option<Compression>,
    level: Option<i32>,
    page_bytes: Option<usize>,
    read_page_bytes: Option<usize>,
    fanout: Option<usize>,
}

/// The layout `options` give over `base`: its top-level options and `storageEngine.shale`.
#[allow(
    clippy::expect_used,
    reason = "the level was range-checked when the options were read"
)]
pub fn tree_options(base: TreeOptions, options: &Document) -> Result<TreeOptions, MongoError> {
    let s = settings(options)?;
    let mut t = base;
    if let Some(codec) = s.codec {
        t.compression = codec;
    }
    if let Some(level) = s.level {
        if t.compression.zstd_level().is_none() {
            return Err(bad_value(format!(
                "compressionLevel applies to zstd only, not to {}",
                t.compression.name()
            )));
        }
        t.compression = Compression::zstd(level).expect("level checked when read");
    }
    if let Some(n) = s.page_bytes {
        t.node_size_bytes = n;
        if s.read_page_bytes.is_none() {
            t.basement_size_bytes = t.basement_size_bytes.min(n);
        }
    }
    if let Some(n) = s.read_page_bytes {
        t.basement_size_bytes = n;
    }
    if let Some(n) = s.fanout {
        t.fanout = n;
    }
    if t.basement_size_bytes > t.node_size_bytes {
        return Err(bad_value(format!(
            "readPageSize {} is larger than pageSize {}",
            t.basement_size_bytes, t.node_size_bytes
        )));
    }
    Ok(t)
}

/// Checks the layout options of `options` without a base (an index spec before its
/// collection's layout is known): types, names and ranges.
pub fn check(options: &Document) -> Result<(), MongoError> {
    let s = settings(options)?;
    if let (Some(codec), Some(_)) = (s.codec, s.level) {
        if codec.zstd_level().is_none() {
            return Err(bad_value(format!(
                "compressionLevel applies to zstd only, not to {}",
                codec.name()
            )));
        }
    }
    if let (Some(page), Some(read)) = (s.page_bytes, s.read_page_bytes) {
        if read > page {
            return Err(bad_value(format!(
                "readPageSize {read} is larger than pageSize {page}"
            )));
        }
    }
    Ok(())
}

/// The layout of a tree as `collStats` shows it, with its on-disk figures (bytes divided by
/// `scale`).
pub fn describe(tree: &str, o: &TreeOptions, space: &TreeSpace, scale: i64) -> Document {
    let mut d = doc! { "tree": tree, "compression": o.compression.name() };
    if let Some(level) = o.compression.zstd_level() {
        d.insert("compressionLevel", level);
    }
    d.insert("pageSize", o.node_size_bytes as i64);
    d.insert("readPageSize", o.basement_size_bytes as i64);
    d.insert("fanout", o.fanout as i64);
    d.extend(figures(space, scale));
    d
}

/// `nodes`, `bytesRaw`, `bytesStored`, `compressionRatio`, `fileBytes` and `fileBytesFree`
/// of `space` (bytes divided by `scale`).
pub fn figures(space: &TreeSpace, scale: i64) -> Document {
    let scale = scale.max(1);
    doc! {
        "nodes": space.nodes as i64,
        "bytesRaw": space.raw_bytes as i64 / scale,
        "bytesStored": space.stored_bytes as i64 / scale,
        "compressionRatio": space.ratio(),
        "fileBytes": space.file_bytes as i64 / scale,
        "fileBytesFree": space.free_bytes as i64 / scale,
    }
}

fn settings(options: &Document) -> Result<Settings, MongoError> {
    let mut top = Settings::default();
    for &k in TOP_LEVEL_OPTIONS {
        if let Some(v) = options.get(k) {
            read_setting(&mut top, k, k, v)?;
        }
    }
    let shale = match options.get("storageEngine") {
        None => None,
        Some(Bson::Document(se)) => match se.get("shale") {
            None => None,
            Some(Bson::Document(d)) => Some(d),
            Some(other) => return Err(wrong_type("storageEngine.shale", other, "object")),
        },
        Some(other) => return Err(wrong_type("storageEngine", other, "object")),
    };
    let Some(shale) = shale else {
        return Ok(top);
    };
    let mut engine = Settings::default();
    for (k, v) in shale {
        let setting = match k.as_str() {
            "nodeSizeBytes" => "pageSize",
            "readPageSizeBytes" | "basementSizeBytes" => "readPageSize",
            "pageSize" | "readPageSize" | "compression" | "compressionLevel" | "fanout" => k,
            other => {
                return Err(MongoError::new(
                    ErrorCode::InvalidOptions,
                    format!("unknown storageEngine.shale option '{other}'"),
                ))
            }
        };
        read_setting(&mut engine, setting, &format!("storageEngine.shale.{k}"), v)?;
    }
    merge(top, engine)
}

/// `top` with `engine`'s settings added; one given in both with different values is refused.
fn merge(top: Settings, engine: Settings) -> Result<Settings, MongoError> {
    fn one<T: PartialEq + Copy>(
        a: Option<T>,
        b: Option<T>,
        name: &str,
    ) -> Result<Option<T>, MongoError> {
        match (a, b) {
            (Some(x), Some(y)) if x != y => Err(MongoError::new(
                ErrorCode::InvalidOptions,
                format!("{name} is given at the top level and in storageEngine.shale with different values"),
            )),
            (x, y) => Ok(x.or(y)),
        }
    }
    Ok(Settings {
        codec: one(top.codec, engine.codec, "compression")?,
        level: one(top.level, engine.level, "compressionLevel")?,
        page_bytes: one(top.page_bytes, engine.page_bytes, "pageSize")?,
        read_page_bytes: one(top.read_page_bytes, engine.read_page_bytes, "readPageSize")?,
        fanout: one(top.fanout, engine.fanout, "fanout")?,
    })
}

fn read_setting(s: &mut Settings, setting: &str, field: &str, v: &Bson) -> Result<(), MongoError> {
    match setting {
        "compression" => s.codec = Some(codec(field, v)?),
        "compressionLevel" => {
            let n = integer(field, v)?;
            if !(i64::from(MIN_ZSTD_LEVEL)..=i64::from(MAX_ZSTD_LEVEL)).contains(&n) {
                return Err(bad_value(format!(
                    "{field} must be between {MIN_ZSTD_LEVEL} and {MAX_ZSTD_LEVEL}, not {n}"
                )));
            }
            s.level = Some(n as i32);
        }
        "pageSize" => s.page_bytes = Some(size(field, v, MIN_PAGE_BYTES)?),
        "readPageSize" => s.read_page_bytes = Some(size(field, v, MIN_READ_PAGE_BYTES)?),
        "fanout" => {
            let n = integer(field, v)?;
            if !(3..=1024).contains(&n) {
                return Err(bad_value(format!(
                    "{field} must be between 3 and 1024, not {n}"
                )));
            }
            s.fanout = Some(n as usize);
        }
        other => unreachable!("no setting {other}"),
    }
    Ok(())
}

/// A codec name: ours ("zstd", "lz4", "none") or TokuMX's ("zlib", "quicklz", "lzma").
fn codec(field: &str, v: &Bson) -> Result<Compression, MongoError> {
    let Bson::String(name) = v else {
        return Err(wrong_type(field, v, "string"));
    };
    match name.as_str() {
        "zstd" => Ok(Compression::default()),
        "lz4" => Ok(Compression::Lz4),
        "none" => Ok(Compression::None),
        other => tokumx_codec(other).ok_or_else(|| {
                bad_value(format!(
                    "{field} must be one of \"zstd\", \"lz4\", \"none\" (or TokuMX's \"zlib\", \"quicklz\", \"lzma\"), not \"{other}\""
                ))
            }),
    }
}

/// A whole number of any numeric BSON type.
fn integer(field: &str, v: &Bson) -> Result<i64, MongoError> {
    match v {
        Bson::Int32(n) => Ok(i64::from(*n)),
        Bson::Int64(n) => Ok(*n),
        Bson::Double(n) if n.fract() == 0.0 && n.abs() < 1e15 => Ok(*n as i64),
        Bson::Double(n) => Err(bad_value(format!(
            "{field} must be a whole number, not {n}"
        ))),
        other => Err(wrong_type(field, other, "number")),
    }
}

/// A size in bytes: a number, or a string with a unit as TokuMX took them ("16KB", "4MB",
/// "1GB"; K, M, G are powers of 1024; "B" or no unit is bytes).
fn size(field: &str, v: &Bson, min: usize) -> Result<usize, MongoError> {
    let n = match v {
        Bson::String(s) => parse_size(s).ok_or_else(|| {
            bad_value(format!(
                "{field} \"{s}\" is not a size like 65536, \"64KB\" or \"4MB\""
            ))
        })?,
        other => integer(field, other)?,
    };
    if n < min as i64 || n > MAX_PAGE_BYTES as i64 {
        return Err(bad_value(format!(
            "{field} must be between {min} and {MAX_PAGE_BYTES} bytes, not {n}"
        )));
    }
    Ok(n as usize)
}

fn parse_size(s: &str) -> Option<i64> {
    let s = s.trim();
    let digits = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
    let (num, unit) = s.split_at(digits);
    let n: i64 = num.parse().ok()?;
    let shift = match unit.trim().to_ascii_uppercase().as_str() {
        "" | "B" => 0,
        "K" | "KB" | "KIB" => 10,
        "M" | "MB" | "MIB" => 20,
        "G" | "GB" | "GIB" => 30,
        _ => return None,
    };
    n.checked_mul(1 << shift)
}

fn wrong_type(field: &str, v: &Bson, expected: &str) -> MongoError {
    MongoError::new(
        ErrorCode::TypeMismatch,
        format!(
            "{field} must be of type {expected}, not {:?}",
            v.element_type()
        ),
    )
}

fn bad_value(message: impl Into<String>) -> MongoError {
    MongoError::new(ErrorCode::BadValue, message)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn base() -> TreeOptions {
        TreeOptions::default()
    }

    fn code(r: Result<TreeOptions, MongoError>) -> ErrorCode {
        r.expect_err("refused").code
    }

    #[test]
    fn top_level_names_set_the_layout() {
        let t = tree_options(
            base(),
            &doc! { "compression": "zstd", "compressionLevel": 9, "pageSize": "1MB", "readPageSize": 8192 },
        )
        .expect("valid");
        assert_eq!(t.compression, Compression::zstd(9).expect("level"));
        assert_eq!((t.node_size_bytes, t.basement_size_bytes), (1 << 20, 8192));
        let t = tree_options(base(), &doc! { "compression": "lz4" }).expect("lz4");
        assert_eq!(t.compression, Compression::Lz4);
        assert_eq!(
            t.node_size_bytes,
            base().node_size_bytes,
            "the rest is the base"
        );
        let t = tree_options(base(), &doc! { "compressionLevel": 3.0 }).expect("a whole double");
        assert_eq!(t.compression, Compression::Zstd);
        let t = tree_options(base(), &doc! { "compression": "zstd" }).expect("zstd");
        assert_eq!(t.compression, Compression::default(), "the default level");
    }

    #[test]
    fn tokumx_codec_names_map_to_ours() {
        for (name, want) in [
            ("quicklz", Compression::Lz4),
            ("zlib", Compression::default()),
            ("lzma", Compression::zstd(19).expect("level")),
        ] {
            let t = tree_options(base(), &doc! { "compression": name }).expect(name);
            assert_eq!(t.compression, want, "{name}");
        }
    }

    #[test]
    fn storage_engine_forms_agree_with_the_top_level() {
        let t = tree_options(
            base(),
            &doc! { "storageEngine": { "shale": {
            "compression": "zstd", "compressionLevel": 1,
            "nodeSizeBytes": 262144, "readPageSizeBytes": 4096, "fanout": 8 } } },
        )
        .expect("valid");
        assert_eq!(t.compression, Compression::zstd(1).expect("level"));
        assert_eq!(
            (t.node_size_bytes, t.basement_size_bytes, t.fanout),
            (262144, 4096, 8)
        );
        let same =
            doc! { "pageSize": 262144, "storageEngine": { "shale": { "nodeSizeBytes": 262144 } } };
        assert!(
            tree_options(base(), &same).is_ok(),
            "the same value twice is fine"
        );
        let differ =
            doc! { "pageSize": 262144, "storageEngine": { "shale": { "pageSize": "512KB" } } };
        assert_eq!(
            code(tree_options(base(), &differ)),
            ErrorCode::InvalidOptions
        );
        let other_engine = doc! { "storageEngine": { "wiredTiger": { "configString": "" } } };
        assert_eq!(
            tree_options(base(), &other_engine).expect("ignored engine"),
            base()
        );
    }

    #[test]
    fn bad_values_are_refused_with_mongod_codes() {
        let bad = ErrorCode::BadValue;
        let ty = ErrorCode::TypeMismatch;
        assert_eq!(
            code(tree_options(base(), &doc! { "compression": "snappy" })),
            bad
        );
        assert_eq!(code(tree_options(base(), &doc! { "compression": 1 })), ty);
        assert_eq!(
            code(tree_options(base(), &doc! { "compressionLevel": 0 })),
            bad
        );
        assert_eq!(
            code(tree_options(base(), &doc! { "compressionLevel": 20 })),
            bad
        );
        assert_eq!(
            code(tree_options(base(), &doc! { "compressionLevel": "3" })),
            ty
        );
        assert_eq!(
            code(tree_options(base(), &doc! { "compressionLevel": 2.5 })),
            bad
        );
        assert_eq!(
            code(tree_options(
                base(),
                &doc! { "compression": "lz4", "compressionLevel": 3 }
            )),
            bad
        );
        assert_eq!(code(tree_options(base(), &doc! { "pageSize": 512 })), bad);
        assert_eq!(
            code(tree_options(base(), &doc! { "pageSize": "4 parsecs" })),
            bad
        );
        assert_eq!(
            code(tree_options(base(), &doc! { "pageSize": "128MB" })),
            bad
        );
        assert_eq!(
            code(tree_options(base(), &doc! { "readPageSize": true })),
            ty
        );
        assert_eq!(
            code(tree_options(
                base(),
                &doc! { "pageSize": 65536, "readPageSize": 131072 }
            )),
            bad
        );
        assert_eq!(
            code(tree_options(
                base(),
                &doc! { "storageEngine": { "shale": { "blockSize": 1 } } }
            )),
            ErrorCode::InvalidOptions
        );
        assert_eq!(code(tree_options(base(), &doc! { "storageEngine": 1 })), ty);
        assert!(check(&doc! { "compression": "none", "compressionLevel": 2 }).is_err());
        assert!(
            check(&doc! { "readPageSize": "8MB" }).is_ok(),
            "the base decides later"
        );
    }

    #[test]
    fn a_page_size_alone_keeps_the_read_page_inside_it() {
        let t = tree_options(base(), &doc! { "pageSize": 4096 }).expect("valid");
        assert_eq!((t.node_size_bytes, t.basement_size_bytes), (4096, 4096));
    }

    #[test]
    fn sizes_take_tokumx_units() {
        assert_eq!(parse_size("16KB"), Some(16 << 10));
        assert_eq!(parse_size("4MB"), Some(4 << 20));
        assert_eq!(parse_size("4 mib"), Some(4 << 20));
        assert_eq!(parse_size("65536"), Some(65536));
        assert_eq!(parse_size("KB"), None);
        assert_eq!(parse_size("-4KB"), None);
        assert_eq!(parse_size("99999999999999999999GB"), None);
    }
}
