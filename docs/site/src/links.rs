//! Internal links and anchors of the rendered site: every `href` and `src` of every HTML page
//! that is not external (a scheme such as `https:` or `mailto:`, or `//host`) must name a file of
//! the site, and its `#fragment`, if any, an `id` in that file. What mdBook renders is what
//! readers follow, so the check reads the HTML, not the Markdown: a link to a Markdown file that
//! is not a chapter, or out of the book (`../server/...`), points at nothing in the site and is
//! caught the same way as a misspelt anchor.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Component, Path, PathBuf};
use std::sync::OnceLock;

use regex::Regex;

/// One broken link: the page it is on, the link as written, and what is wrong.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Broken {
    pub page: String,
    pub link: String,
    pub problem: String,
}

fn attributes() -> &'static Regex {
    static RE: OnceLock<Option<Regex>> = OnceLock::new();
    RE.get_or_init(|| Regex::new(r#"\s(href|src|id)\s*=\s*"([^"]*)""#).ok())
        .as_ref()
        .unwrap_or_else(|| unreachable!("the pattern is a valid regex"))
}

fn is_external(link: &str) -> bool {
    link.starts_with("//")
        || link
            .split_once(':')
            .is_some_and(|(scheme, _)| !scheme.contains('/') && !scheme.contains('#'))
}

/// The HTML entities mdBook writes in attribute values.
fn unescape(value: &str) -> String {
    value
        .replace("&amp;", "&")
        .replace("&quot;", "\"")
        .replace("&#39;", "'")
        .replace("&lt;", "<")
        .replace("&gt;", ">")
}

/// `%xx` escapes of a path or fragment (mdBook percent-encodes non-ASCII ids in links).
fn percent_decode(value: &str) -> String {
    let bytes = value.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut index = 0;
    while index < bytes.len() {
        let escaped = (bytes[index] == b'%')
            .then(|| value.get(index + 1..index + 3))
            .flatten()
            .and_then(|hex| u8::from_str_radix(hex, 16).ok());
        match escaped {
            Some(byte) => {
                out.push(byte);
                index += 3;
            }
            None => {
                out.push(bytes[index]);
                index += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// `base`'s directory joined with `relative`, `..` and `.` resolved; `None` when it climbs out
/// of the site.
fn resolve(base: &Path, relative: &str) -> Option<PathBuf> {
    let mut parts: Vec<Component<'_>> = base
        .parent()
        .map_or_else(Vec::new, |dir| dir.components().collect());
    for component in Path::new(relative).components() {
        match component {
            Component::ParentDir => {
                parts.pop()?;
            }
            Component::CurDir => {}
            Component::Normal(_) => parts.push(component),
            Component::RootDir | Component::Prefix(_) => return None,
        }
    }
    Some(parts.iter().collect())
}

/// The links and ids of one page.
struct Page {
    links: Vec<String>,
    ids: BTreeSet<String>,
}

fn parse(html: &str) -> Page {
    let mut page = Page {
        links: Vec::new(),
        ids: BTreeSet::new(),
    };
    for capture in attributes().captures_iter(html) {
        let value = unescape(&capture[2]);
        if &capture[1] == "id" {
            page.ids.insert(value);
        } else {
            page.links.push(value);
        }
    }
    page
}

/// Checks the site whose pages are `pages` (path relative to the site root -> HTML) and whose
/// other files are `files` (paths relative to the root).
pub fn check(pages: &BTreeMap<PathBuf, String>, files: &BTreeSet<PathBuf>) -> Vec<Broken> {
    let parsed: BTreeMap<&PathBuf, Page> = pages
        .iter()
        .map(|(path, html)| (path, parse(html)))
        .collect();
    let mut broken = Vec::new();
    for (path, page) in &parsed {
        for link in &page.links {
            if link.is_empty() || is_external(link) {
                continue;
            }
            let (target, fragment) = link
                .split_once('#')
                .map_or((link.as_str(), None), |(t, f)| (t, Some(f)));
            let target = target.split_once('?').map_or(target, |(t, _)| t);
            let mut problem = |what: String| {
                broken.push(Broken {
                    page: path.display().to_string(),
                    link: link.clone(),
                    problem: what,
                });
            };
            let file = if target.is_empty() {
                Some((*path).clone())
            } else if let Some(absolute) = target.strip_prefix('/') {
                // The site is served at its root (mdBook's default `site-url`, used by 404.html).
                resolve(Path::new("index.html"), &percent_decode(absolute)).map(|file| {
                    if absolute.is_empty() || absolute.ends_with('/') {
                        file.join("index.html")
                    } else {
                        file
                    }
                })
            } else {
                resolve(path, &percent_decode(target)).map(|file| {
                    if target.ends_with('/') || file.as_os_str().is_empty() {
                        file.join("index.html")
                    } else {
                        file
                    }
                })
            };
            let Some(file) = file else {
                problem("leaves the site".into());
                continue;
            };
            if !pages.contains_key(&file) && !files.contains(&file) {
                problem(format!("no file {}", file.display()));
                continue;
            }
            let Some(fragment) = fragment.filter(|f| !f.is_empty()) else {
                continue;
            };
            let fragment = percent_decode(fragment);
            match parsed.get(&file) {
                Some(target) if target.ids.contains(&fragment) => {}
                Some(_) => problem(format!("no id {fragment:?} in {}", file.display())),
                None => problem(format!(
                    "#{fragment} on {}, which is not a page",
                    file.display()
                )),
            }
        }
    }
    broken
}

/// Reads the site in `root` and checks it.
pub fn check_dir(root: &Path) -> std::io::Result<Vec<Broken>> {
    let mut pages = BTreeMap::new();
    let mut files = BTreeSet::new();
    let mut pending = vec![root.to_owned()];
    while let Some(dir) = pending.pop() {
        for entry in std::fs::read_dir(&dir)? {
            let path = entry?.path();
            if path.is_dir() {
                pending.push(path);
                continue;
            }
            let relative = path
                .strip_prefix(root)
                .map(Path::to_owned)
                .unwrap_or_else(|_| path.clone());
            if path.extension().is_some_and(|ext| ext == "html") {
                pages.insert(relative, std::fs::read_to_string(&path)?);
            } else {
                files.insert(relative);
            }
        }
    }
    Ok(check(&pages, &files))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    fn site(pages: &[(&str, &str)], files: &[&str]) -> Vec<Broken> {
        let pages = pages
            .iter()
            .map(|(p, h)| (PathBuf::from(p), (*h).to_owned()))
            .collect();
        let files = files.iter().map(PathBuf::from).collect();
        check(&pages, &files)
    }

    fn problems(broken: &[Broken]) -> Vec<(&str, &str)> {
        broken
            .iter()
            .map(|b| (b.page.as_str(), b.link.as_str()))
            .collect()
    }

    #[test]
    fn good_links_pass() {
        let broken = site(
            &[
                (
                    "index.html",
                    r##"<a href="guide/a.html#setup">a</a> <a href="#top">t</a> <h1 id="top">x</h1> <img src="img/i.svg"> <a href="https://example.com/#x">e</a> <a href="mailto:x@y">m</a> <a href="./">root</a>"##,
                ),
                (
                    "guide/a.html",
                    r#"<h2 id="setup">s</h2><a href="../index.html#top">back</a><a href="a.html">self</a>"#,
                ),
            ],
            &["img/i.svg"],
        );
        assert_eq!(broken, Vec::new());
    }

    #[test]
    fn a_broken_link_is_caught() {
        let broken = site(
            &[
                (
                    "index.html",
                    r#"<a href="missing.html">m</a> <a href="../../server/README.md">out</a> <a href="guide.md">md</a>"#,
                ),
                ("guide.html", ""),
            ],
            &[],
        );
        assert_eq!(
            problems(&broken),
            vec![
                ("index.html", "missing.html"),
                ("index.html", "../../server/README.md"),
                ("index.html", "guide.md")
            ]
        );
        assert_eq!(broken[1].problem, "leaves the site");
    }

    #[test]
    fn a_broken_anchor_is_caught() {
        let broken = site(
            &[
                (
                    "index.html",
                    r##"<a href="a.html#nope">a</a> <a href="#also-nope">b</a> <a href="a.html#there">c</a> <a href="i.svg#x">d</a>"##,
                ),
                ("a.html", r#"<h2 id="there">t</h2>"#),
            ],
            &["i.svg"],
        );
        assert_eq!(
            problems(&broken),
            vec![
                ("index.html", "a.html#nope"),
                ("index.html", "#also-nope"),
                ("index.html", "i.svg#x")
            ]
        );
    }

    #[test]
    fn escapes_are_decoded() {
        let broken = site(
            &[
                (
                    "index.html",
                    r##"<a href="a%20b.html#caf%C3%A9">x</a> <a href="#q&amp;a">y</a> <p id="q&amp;a"></p>"##,
                ),
                ("a b.html", r#"<h1 id="café">c</h1>"#),
            ],
            &[],
        );
        assert_eq!(broken, Vec::new());
    }
}
