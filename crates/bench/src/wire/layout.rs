//! `--compression`, `--compression-level`, `--page-size` and `--read-page-size`: the tree
//! layout a workload's collections and indexes are created with on ShaleDB, sent as TokuMX's
//! `create`/index options (a peer gets none: mongod refuses them). Unset flags leave the
//! server's defaults, so the figures measure them.

use clap::Args;
use mongodb::bson::{Bson, Document};
use serde::Serialize;

#[derive(Debug, Clone, Default, Args, Serialize)]
pub struct LayoutArgs {
    /// Codec of the collections' and indexes' trees on ShaleDB: zstd, lz4 or none
    #[arg(long, value_name = "CODEC")]
    pub compression: Option<String>,
    /// zstd level (1-19) [server default: 3]
    #[arg(long, value_name = "N")]
    pub compression_level: Option<i32>,
    /// Node size in bytes (TokuMX's pageSize) [server default: 4 MiB, less for small caches]
    #[arg(long, value_name = "BYTES")]
    pub page_size: Option<i64>,
}

impl LayoutArgs {
    /// The `create`/index options these flags give, with `read_page_size` (the basement
    /// size) when the workload sets one.
    pub fn options(&self, read_page_size: Option<i64>) -> Document {
        let mut d = Document::new();
        if let Some(c) = &self.compression {
            d.insert("compression", c.clone());
        }
        if let Some(l) = self.compression_level {
            d.insert("compressionLevel", l);
        }
        if let Some(p) = self.page_size {
            d.insert("pageSize", Bson::Int64(p));
        }
        if let Some(r) = read_page_size {
            d.insert("readPageSize", Bson::Int64(r));
        }
        d
    }

    /// A short label for reports: "zstd-9 page 1048576", or "defaults".
    pub fn label(&self, read_page_size: Option<i64>) -> String {
        let mut parts = Vec::new();
        match (&self.compression, self.compression_level) {
            (Some(c), Some(l)) => parts.push(format!("{c}-{l}")),
            (Some(c), None) => parts.push(c.clone()),
            (None, Some(l)) => parts.push(format!("zstd-{l}")),
            (None, None) => {}
        }
        if let Some(p) = self.page_size {
            parts.push(format!("page {p}"));
        }
        if let Some(r) = read_page_size {
            parts.push(format!("read page {r}"));
        }
        if parts.is_empty() {
            "defaults".into()
        } else {
            parts.join(" ")
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use mongodb::bson::doc;

    #[test]
    fn flags_become_tokumx_options() {
        let none = LayoutArgs::default();
        assert_eq!(none.options(None), doc! {});
        assert_eq!(none.label(None), "defaults");
        let l = LayoutArgs {
            compression: Some("zstd".into()),
            compression_level: Some(9),
            page_size: Some(1 << 20),
        };
        assert_eq!(
            l.options(Some(65536)),
            doc! {"compression": "zstd", "compressionLevel": 9, "pageSize": 1i64 << 20, "readPageSize": 65536i64}
        );
        assert_eq!(l.label(Some(65536)), "zstd-9 page 1048576 read page 65536");
    }
}
