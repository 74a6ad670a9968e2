//! The format and recovery documents must describe what the code does: every invariant the
//! code cites exists in the documents, and the documents name the formats' magic numbers and
//! versions as the code defines them.

use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn read(p: &str) -> String {
    std::fs::read_to_string(root().join(p)).unwrap_or_else(|e| panic!("{p}: {e}"))
}

fn sources(dir: &Path, out: &mut String) {
    for e in std::fs::read_dir(dir).expect("source dir").flatten() {
        let p = e.path();
        if p.is_dir() {
            sources(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push_str(&std::fs::read_to_string(&p).expect("source"));
        }
    }
}

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

#[test]
fn every_cited_invariant_is_documented() {
    let mut code = String::new();
    sources(&root().join("crates/engine/src"), &mut code);
    let docs = [
        ('R', read("docs/recovery.md")),
        ('W', read("docs/format-wal.md")),
        ('B', read("docs/format-blockfile.md")),
        ('M', read("docs/recovery.md")),
        ('L', read("docs/transactions.md")),
        ('E', read("docs/transactions.md")),
        ('T', read("docs/transactions.md")),
    ];
    for (prefix, doc) in &docs {
        let cites = cited(&code, *prefix);
        assert!(!cites.is_empty(), "the code cites no {prefix}-invariant");
        for label in cites {
            assert!(
                doc.contains(&format!("**{label}."))
                    || doc.contains(&format!("**{label}**"))
                    || doc.contains(&format!("**{label} (")),
                "{label} is cited in the code but not defined in its document"
            );
        }
    }
    let recovery = read("docs/recovery.md");
    for n in 1..=8 {
        assert!(
            recovery.contains(&format!("**R{n}.")),
            "docs/recovery.md lacks R{n}"
        );
    }
}

#[test]
fn format_documents_name_the_magic_numbers_and_versions() {
    let node = read("docs/format-node.md");
    assert!(node.contains("`SHND`") && node.contains("format version = 4"));
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
    let code = read("crates/engine/src/tree/format.rs");
    assert!(code.contains("b\"SHND\"") && code.contains("NODE_FORMAT_VERSION: u8 = 4"));
}
