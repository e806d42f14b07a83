//! The documentation site: `docs/` is an mdBook whose chapters are the project's Markdown files
//! in place (`docs/book.toml`, `docs/SUMMARY.md`). This crate builds it with the mdBook library
//! (warnings are errors), checks the rendered site's internal links and anchors, renders the
//! operator's field reference from the CRD schemas, and finds the quickstart's runnable commands;
//! its tests do all of that inside `cargo test --workspace`, so the site cannot rot unnoticed.

pub mod book;
pub mod links;
pub mod reference;
pub mod runnable;
