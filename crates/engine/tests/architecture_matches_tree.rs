//! `ARCHITECTURE.md` must describe the tree as it is: every file path it names exists, and
//! every module file of every crate is named in it (by file name, or by a directory it sits
//! in). A renamed, removed or added module fails here until the map is brought up to date.
//! It reads files only and never changes them.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "an integration test: a failed unwrap or expect is a failed test"
)]

mod common;

use common::{repo_paths as tree, repo_root as root};

/// The crate directory a line of `ARCHITECTURE.md` talks about: a crate table row
/// (`| \`shale-db\` | ...`) or the "Inside the engine" section; `None` elsewhere.
fn context(line: &str, section: &str) -> Option<String> {
    if let Some(rest) = line.strip_prefix("| `shale-") {
        return rest.split('`').next().map(|c| c.to_string());
    }
    (section == "## Inside the engine").then(|| "engine".to_string())
}

/// Backticked tokens of `line` that look like file paths: only path characters, and a `/`
/// or a `.rs`/`.md` ending. Also `docs/…` paths written without backticks.
fn named_paths(line: &str) -> Vec<String> {
    let is_path_char = |c: char| c.is_ascii_alphanumeric() || "_./-".contains(c);
    let mut out = Vec::new();
    for (i, tok) in line.split('`').enumerate() {
        if i % 2 == 1
            && !tok.is_empty()
            && !tok.starts_with('/')
            && !tok.starts_with('-')
            && tok.chars().all(is_path_char)
            && (tok.contains('/') || tok.ends_with(".rs") || tok.ends_with(".md"))
        {
            out.push(tok.to_string());
        }
    }
    let mut rest = line;
    while let Some(at) = rest.find("docs/") {
        let before = rest[..at].chars().next_back();
        let tok: String = rest[at..]
            .chars()
            .take_while(|c| is_path_char(*c))
            .collect();
        rest = &rest[at + 5..];
        if before.is_some_and(|c| c.is_ascii_alphanumeric() || c == '/' || c == '`') {
            continue;
        }
        let tok = tok.trim_end_matches('.').to_string();
        if tok.ends_with(".md") {
            out.push(tok);
        }
    }
    out
}

/// The first word of each line of the "Inside the engine" map that names a file or
/// directory (`env.rs`, `tree/`, `mod.rs`).
fn engine_map_paths(line: &str) -> Option<String> {
    let word = line.split_whitespace().next()?;
    (line.starts_with(' ') && (word.ends_with(".rs") || word.ends_with('/')))
        .then(|| word.to_string())
}

/// True when `name` (relative, maybe ending in `/`) is a file or directory under
/// `crates/<krate>/` (or under any crate when `krate` is `None`), under `docs/`, or at the
/// root; `crate/path` also resolves as `crates/crate/src/path`.
fn exists(name: &str, krate: Option<&str>, all: &[String]) -> bool {
    let name = name.trim_end_matches('/');
    if name.starts_with("../") || name.contains("/../") {
        return false;
    }
    if root().join(name).exists() || root().join("docs").join(name).exists() {
        return true;
    }
    if let Some((first, rest)) = name.split_once('/') {
        if root()
            .join("crates")
            .join(first)
            .join("src")
            .join(rest)
            .exists()
        {
            return true;
        }
    }
    let under = match krate {
        Some(k) => format!("crates/{k}/"),
        None => "crates/".to_string(),
    };
    let suffix = format!("/{name}");
    all.iter()
        .any(|p| p.starts_with(&under) && p.ends_with(&suffix))
}

#[test]
fn every_path_architecture_names_exists() {
    let arch = std::fs::read_to_string(root().join("ARCHITECTURE.md")).expect("ARCHITECTURE.md");
    let mut all = Vec::new();
    tree(&root(), "", &mut all);
    let mut missing = Vec::new();
    let mut checked = 0;
    let mut section = String::new();
    for (n, line) in arch.lines().enumerate() {
        if line.starts_with("## ") {
            section = line.to_string();
        }
        let krate = context(line, &section);
        let mut names = named_paths(line);
        if section == "## Inside the engine" {
            names.extend(engine_map_paths(line));
        }
        for name in names {
            checked += 1;
            if !exists(&name, krate.as_deref(), &all) {
                let at = krate.as_deref().unwrap_or("the repository");
                missing.push(format!("line {}: `{name}` (looked in {at})", n + 1));
            }
        }
    }
    // A guard on the parsing itself: the map names a few hundred paths.
    assert!(
        checked >= 150,
        "only {checked} paths found in ARCHITECTURE.md"
    );
    assert!(
        missing.is_empty(),
        "ARCHITECTURE.md names paths that do not exist:\n  {}",
        missing.join("\n  ")
    );
}

/// True when `text` holds `word` with no path or word character right before it.
fn mentions(text: &str, word: &str) -> bool {
    text.match_indices(word).any(|(at, _)| {
        !text[..at]
            .chars()
            .next_back()
            .is_some_and(|c| c.is_ascii_alphanumeric() || c == '_')
    })
}

#[test]
fn architecture_names_every_module() {
    let arch = std::fs::read_to_string(root().join("ARCHITECTURE.md")).expect("ARCHITECTURE.md");
    let mut files = Vec::new();
    tree(&root().join("crates"), "crates", &mut files);
    files.sort();
    let mut unnamed = Vec::new();
    for path in &files {
        let Some((krate, in_src)) = path
            .strip_prefix("crates/")
            .and_then(|p| p.split_once("/src/"))
        else {
            continue;
        };
        let file = in_src.rsplit('/').next().unwrap_or(in_src);
        let dirs: Vec<&str> = in_src.split('/').collect();
        let dirs = &dirs[..dirs.len() - 1];
        if !file.ends_with(".rs")
            || ["main.rs", "lib.rs", "mod.rs", "tests.rs"].contains(&file)
            || file.ends_with("_tests.rs")
            || dirs.contains(&"tests")
        {
            continue;
        }
        let named = mentions(&arch, file) || dirs.iter().any(|d| mentions(&arch, &format!("{d}/")));
        if !named {
            unnamed.push(format!("crates/{krate}/src/{in_src}"));
        }
    }
    assert!(
        unnamed.is_empty(),
        "ARCHITECTURE.md never names these modules (add each with a few words from its //! \
         header):\n  {}",
        unnamed.join("\n  ")
    );
}
