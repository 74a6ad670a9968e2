//! The format and recovery documents must describe what the code does: every invariant the
//! code cites exists in the documents, and the documents name the formats' magic numbers and
//! versions as the code defines them.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "an integration test: a failed unwrap or expect is a failed test"
)]

mod common;

use common::{read_repo as read, repo_root as root};
use std::path::Path;

/// Invariant labels like R4, W1, B3 cited in `text`.
fn cited(text: &str, prefix: char) -> Vec<String> {
    let b = text.as_bytes();
    let mut found = Vec::new();
    for i in 0..b.len() {
        if b[i] == prefix as u8 && (i == 0 || !b[i - 1].is_ascii_alphanumeric()) {
            let digits: String = text[i + 1..]
                .chars()
                .take_while(|c| c.is_ascii_digit())
                .collect();
            let after = text[i + 1 + digits.len()..].chars().next();
            if !digits.is_empty()
                && digits.len() <= 2
                && !after.is_some_and(|c| c.is_ascii_alphanumeric())
            {
                found.push(format!("{prefix}{digits}"));
            }
        }
    }
    found.sort();
    found.dedup();
    found
}

/// Where each invariant family is defined (its home) and where it may be cited: the code
/// and documents under `scope`. A family's labels are defined in its home and nowhere else
/// in its scope, and every label cited in its scope is defined there.
struct Family {
    prefix: char,
    home: &'static str,
    scope: &'static [&'static str],
}

const ENGINE_SCOPE: &[&str] = &[
    "crates/engine/src",
    "ARCHITECTURE.md",
    "docs/design.md",
    "docs/engine-status.md",
    "docs/format.md",
    "docs/format-blockfile.md",
    "docs/format-node.md",
    "docs/format-wal.md",
    "docs/operations.md",
    "docs/recovery.md",
    "docs/transactions.md",
];

const FAMILIES: &[Family] = &[
    Family {
        prefix: 'R',
        home: "docs/recovery.md",
        scope: ENGINE_SCOPE,
    },
    Family {
        prefix: 'M',
        home: "docs/recovery.md",
        scope: ENGINE_SCOPE,
    },
    Family {
        prefix: 'W',
        home: "docs/format-wal.md",
        scope: ENGINE_SCOPE,
    },
    Family {
        prefix: 'B',
        home: "docs/format-blockfile.md",
        scope: ENGINE_SCOPE,
    },
    Family {
        prefix: 'L',
        home: "docs/transactions.md",
        scope: ENGINE_SCOPE,
    },
    Family {
        prefix: 'E',
        home: "docs/transactions.md",
        scope: ENGINE_SCOPE,
    },
    Family {
        prefix: 'T',
        home: "docs/transactions.md",
        scope: ENGINE_SCOPE,
    },
    Family {
        prefix: 'N',
        home: "crates/engine/src/tree/node.rs",
        scope: ENGINE_SCOPE,
    },
    Family {
        prefix: 'P',
        home: "crates/engine/src/tree/basement.rs",
        scope: ENGINE_SCOPE,
    },
    Family {
        prefix: 'Q',
        home: "crates/engine/src/tree/buffer.rs",
        scope: ENGINE_SCOPE,
    },
    Family {
        prefix: 'S',
        home: "crates/engine/src/tree/segment.rs",
        scope: ENGINE_SCOPE,
    },
    Family {
        prefix: 'V',
        home: "crates/engine/src/tree/pivots.rs",
        scope: ENGINE_SCOPE,
    },
    Family {
        prefix: 'A',
        home: "crates/engine/src/tree/promote.rs",
        scope: ENGINE_SCOPE,
    },
    Family {
        prefix: 'K',
        home: "crates/engine/src/tree/writeback.rs",
        scope: ENGINE_SCOPE,
    },
    // The database's own families: hot index builds reuse the letter B inside `shale-db`.
    Family {
        prefix: 'B',
        home: "crates/db/src/index_build.rs",
        scope: &["crates/db/src"],
    },
    Family {
        prefix: 'C',
        home: "docs/format-collections.md",
        scope: &["crates/db/src", "docs/format-collections.md"],
    },
];

/// The `.rs` and `.md` files under `scope` (files or directories, relative to the root), as
/// (path relative to the root, text).
fn scoped_files(scope: &[&str]) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for s in scope {
        walk(&root().join(s), s, &mut out);
    }
    out
}

fn walk(path: &Path, rel: &str, out: &mut Vec<(String, String)>) {
    if path.is_dir() {
        let mut entries: Vec<_> = std::fs::read_dir(path).expect("dir").flatten().collect();
        entries.sort_by_key(|e| e.file_name());
        for e in entries {
            let name = e.file_name().to_string_lossy().into_owned();
            walk(&e.path(), &format!("{rel}/{name}"), out);
        }
    } else if path.extension().is_some_and(|x| x == "rs" || x == "md") {
        let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{rel}: {e}"));
        out.push((rel.to_string(), text));
    }
}

/// Labels of family `prefix` that `text` defines: a line (after comment markers, a list
/// bullet and bold markers) that starts with the label followed by `.`, `**` or ` (`. Only
/// module docs (`//!`) and documents define; other comments cite.
fn defined(text: &str, prefix: char) -> Vec<String> {
    let mut found = Vec::new();
    for line in text.lines() {
        let mut l = line.trim_start();
        if let Some(rest) = l.strip_prefix("//!") {
            l = rest.trim_start();
        } else if l.starts_with("//") {
            continue;
        }
        if let Some(rest) = l.strip_prefix("- ") {
            l = rest.trim_start();
        }
        l = l.strip_prefix("**").unwrap_or(l);
        let Some(rest) = l.strip_prefix(prefix) else {
            continue;
        };
        let digits: String = rest.chars().take_while(|c| c.is_ascii_digit()).collect();
        let after = &rest[digits.len()..];
        if !digits.is_empty()
            && digits.len() <= 2
            && [".", "**", " ("].iter().any(|m| after.starts_with(m))
        {
            found.push(format!("{prefix}{digits}"));
        }
    }
    found.sort();
    found.dedup();
    found
}

#[test]
fn every_cited_invariant_is_defined_in_its_home_only() {
    let mut problems = Vec::new();
    for fam in FAMILIES {
        let home = read(fam.home);
        let defined_at_home = defined(&home, fam.prefix);
        assert!(
            !defined_at_home.is_empty(),
            "{} defines no {}-invariant",
            fam.home,
            fam.prefix
        );
        let files = scoped_files(fam.scope);
        for (path, text) in &files {
            let cites = cited(text, fam.prefix);
            for label in cites {
                if !defined_at_home.contains(&label) {
                    problems.push(format!(
                        "{path} cites {label}, which {} does not define",
                        fam.home
                    ));
                }
            }
            if path != fam.home {
                for label in defined(text, fam.prefix) {
                    if defined_at_home.contains(&label) {
                        problems.push(format!(
                            "{path} defines {label} again; its home is {} (point there instead)",
                            fam.home
                        ));
                    }
                }
            }
        }
    }
    assert!(
        problems.is_empty(),
        "invariant labels out of place:\n  {}",
        problems.join("\n  ")
    );
}

/// A file that defines labels of a family the table above does not know is a new family
/// without a home: add it to `FAMILIES`.
#[test]
fn every_defined_invariant_family_is_known() {
    let mut problems = Vec::new();
    for (path, text) in scoped_files(&["crates", "docs", "ARCHITECTURE.md"]) {
        if path.contains("/tests/") || path.contains("/target/") {
            continue;
        }
        for prefix in 'A'..='Z' {
            let labels = defined(&text, prefix);
            if labels.len() < 2 {
                continue;
            }
            let known = FAMILIES.iter().any(|f| {
                f.prefix == prefix
                    && (f.home == path || f.scope.iter().any(|s| path.starts_with(s)))
            });
            if !known {
                problems.push(format!("{path} defines {}", labels.join(", ")));
            }
        }
    }
    assert!(
        problems.is_empty(),
        "invariant families without an entry in FAMILIES:\n  {}",
        problems.join("\n  ")
    );
}

#[test]
fn format_documents_name_the_magic_numbers_and_versions() {
    let node = read("docs/format-node.md");
    // The version the code writes, as tree/format.rs declares it.
    let code = read("crates/engine/src/tree/format.rs");
    let version = code
        .lines()
        .find_map(|l| l.strip_prefix("pub const NODE_FORMAT_VERSION: u8 = "))
        .and_then(|v| v.strip_suffix(';'))
        .expect("NODE_FORMAT_VERSION in tree/format.rs");
    assert!(node.contains("`SHND`"));
    assert!(
        node.contains(&format!("format version = {version}")),
        "docs/format-node.md does not give node format version {version}"
    );
    let index = read("docs/format.md");
    for doc in [
        "format-blockfile.md",
        "format-node.md",
        "format-wal.md",
        "recovery.md",
        "transactions.md",
    ] {
        assert!(index.contains(doc), "docs/format.md does not link {doc}");
        assert!(
            root().join("docs").join(doc).exists(),
            "docs/{doc} is missing"
        );
    }
    assert!(code.contains("b\"SHND\""));
    let index_version = format!("node blocks are at version {version}");
    assert!(
        index.contains(&index_version),
        "docs/format.md does not say {index_version}"
    );
}
