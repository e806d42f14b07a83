//! The documentation site builds from `docs/` with the mdBook library, with no warning, and
//! no internal link or anchor of the rendered site is broken (external links are not checked:
//! there is no internet here). Every Markdown page of `docs/` is a chapter, so a page added
//! beside the others cannot be left out of the site.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::PathBuf;

fn docs() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

#[test]
fn the_book_builds_without_warnings_and_every_internal_link_resolves() {
    let out = tempfile::Builder::new()
        .prefix("kcp-docs-")
        .tempdir()
        .expect("temporary directory");
    let warnings =
        kcp_docs::book::build(&docs(), out.path()).unwrap_or_else(|error| panic!("{error}"));
    assert!(
        warnings.is_empty(),
        "mdBook warned:\n{}",
        warnings.join("\n")
    );
    assert!(out.path().join("index.html").is_file(), "no index.html");
    let broken = kcp_docs::links::check_dir(out.path()).expect("read the site");
    let report: Vec<String> = broken
        .iter()
        .map(|b| format!("{}: {} ({})", b.page, b.link, b.problem))
        .collect();
    assert!(
        report.is_empty(),
        "broken internal links:\n{}",
        report.join("\n")
    );
}

#[test]
fn every_page_of_docs_is_a_chapter() {
    let summary = std::fs::read_to_string(docs().join("SUMMARY.md")).expect("SUMMARY.md");
    let missing: Vec<String> = std::fs::read_dir(docs())
        .expect("docs/")
        .map(|entry| {
            entry
                .expect("entry")
                .file_name()
                .to_string_lossy()
                .into_owned()
        })
        .filter(|name| name.ends_with(".md") && name != "SUMMARY.md")
        .filter(|name| !summary.contains(&format!("]({name})")))
        .collect();
    assert!(
        missing.is_empty(),
        "pages missing from docs/SUMMARY.md: {missing:?}"
    );
}

/// A book of `pages` (file name, Markdown) in a temporary directory.
fn small_book(pages: &[(&str, &str)]) -> tempfile::TempDir {
    let book = tempfile::Builder::new()
        .prefix("kcp-docs-small-")
        .tempdir()
        .expect("dir");
    std::fs::write(
        book.path().join("book.toml"),
        "[book]\ntitle = \"t\"\nsrc = \".\"\n",
    )
    .unwrap();
    for (name, text) in pages {
        std::fs::write(book.path().join(name), text).unwrap();
    }
    book
}

/// A page with a broken link and a broken anchor makes the check fail (the check is not a
/// no-op on a real mdBook rendering).
#[test]
fn a_broken_link_and_a_broken_anchor_in_a_built_book_are_caught() {
    let book = small_book(&[
        ("SUMMARY.md", "# Summary\n\n- [A](a.md)\n- [B](b.md)\n"),
        (
            "a.md",
            "# A\n\n[to b](b.md#there) [gone](missing.md) [off](b.md#nowhere)\n",
        ),
        ("b.md", "# B\n\n## There\n"),
    ]);
    let out = book.path().join("out");
    let warnings = kcp_docs::book::build(book.path(), &out).expect("builds");
    assert_eq!(warnings, Vec::<String>::new());
    let broken: Vec<(String, String)> = kcp_docs::links::check_dir(&out)
        .expect("read")
        .into_iter()
        .map(|b| (b.page, b.link))
        .collect();
    // mdBook renders a.md as a.html, again as index.html (the first chapter) and in print.html.
    for (page, link) in [("a.html", "missing.html"), ("a.html", "b.html#nowhere")] {
        assert!(
            broken.contains(&(page.to_owned(), link.to_owned())),
            "{page}: {link} not caught in {broken:?}"
        );
    }
    assert!(
        broken
            .iter()
            .all(|(_, link)| link.contains("missing") || link.contains("nowhere")),
        "{broken:?}"
    );
}

/// mdBook's warnings are collected (here the error it logs for an `{{#include}}` of a file that
/// does not exist, after which it still renders the book).
#[test]
fn mdbook_warnings_are_collected() {
    let book = small_book(&[
        ("SUMMARY.md", "# Summary\n\n- [A](a.md)\n"),
        ("a.md", "# A\n\n{{#include nothing-here.md}}\n"),
    ]);
    let warnings = kcp_docs::book::build(book.path(), &book.path().join("out")).expect("builds");
    assert!(!warnings.is_empty(), "no warning for a missing include");
}
