//! Workspace path arithmetic, mirroring `github.com/kcp-dev/logicalcluster/v3` and the
//! argument handling of upstream `kubectl ws` (`cli/pkg/workspace/plugin/use.go`).
//!
//! Kept free of I/O so every rule (`..`, `-`, `~`, `:`, relative and absolute paths) is
//! unit-testable; the commands only feed it the current server URL and the home workspace.

use std::fmt;

use crate::error::Error;

/// A logical-cluster path such as `root:org:team` (colon-separated segments).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ClusterPath(String);

/// The root workspace, the only one that has no parent Workspace object.
pub const ROOT: &str = "root";

impl ClusterPath {
    pub fn new(value: impl Into<String>) -> Self {
        Self(value.into())
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// `<parent>:<name>`; joining onto the empty path yields `name`.
    pub fn join(&self, name: &str) -> Self {
        if self.0.is_empty() {
            Self(name.to_owned())
        } else {
            Self(format!("{}:{name}", self.0))
        }
    }

    /// Splits after the last colon. Like upstream, `system:` paths are names and do not split.
    pub fn split(&self) -> (Self, &str) {
        if self.0.starts_with("system:") {
            return (self.clone(), "");
        }
        match self.0.rfind(':') {
            Some(i) => (Self(self.0[..i].to_owned()), &self.0[i + 1..]),
            None => (Self::default(), &self.0),
        }
    }

    /// The parent path, or `None` for a single-segment path.
    pub fn parent(&self) -> Option<Self> {
        let (parent, name) = self.split();
        (!parent.is_empty() && !name.is_empty()).then_some(parent)
    }

    /// The first ancestor without a parent (`root` for `root:a:b`).
    pub fn top(&self) -> Self {
        let mut current = self.clone();
        while let Some(parent) = current.parent() {
            current = parent;
        }
        current
    }

    /// Plain string prefix test, as upstream `Path.HasPrefix` does.
    pub fn has_prefix(&self, other: &str) -> bool {
        self.0.starts_with(other)
    }

    /// `*` or segments matching `[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?` separated by colons.
    pub fn is_valid(&self) -> bool {
        self.0 == "*" || self.0.split(':').all(valid_segment)
    }

    /// `/clusters/<path>`, the request prefix of the workspace.
    pub fn request_path(&self) -> String {
        format!("/clusters/{}", self.0)
    }
}

impl fmt::Display for ClusterPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

fn valid_segment(segment: &str) -> bool {
    let bytes = segment.as_bytes();
    let alnum = |b: &u8| b.is_ascii_lowercase() || b.is_ascii_digit();
    match bytes {
        [] => false,
        [only] => alnum(only),
        [first, middle @ .., last] => {
            bytes.len() <= 63
                && alnum(first)
                && alnum(last)
                && middle.iter().all(|b| alnum(b) || *b == b'-')
        }
    }
}

/// Resolves `.` and `..` segments of an absolute path (without leading colon).
pub fn resolve_dots(path: &str) -> Result<ClusterPath, Error> {
    let mut ret = ClusterPath::default();
    for part in path.split(':') {
        match part {
            "." => {}
            ".." => {
                if ret.is_empty() {
                    return Err(Error::msg("cannot go up from root"));
                }
                ret = ret.parent().unwrap_or_default();
            }
            _ => ret = ret.join(part),
        }
    }
    Ok(ret)
}

/// A server URL split around its `/clusters/<path>` segment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClusterUrl {
    /// `scheme://authority`, what upstream's cluster client talks to (it drops the URL path).
    pub origin: String,
    /// Whatever path precedes `/clusters/` (kept when writing new server URLs).
    pub prefix: String,
    /// The workspace the URL points to.
    pub path: ClusterPath,
}

impl ClusterUrl {
    /// Upstream `helpers.ParseClusterURL`: `None` when the URL does not address a workspace.
    pub fn parse(host: &str) -> Result<Option<Self>, Error> {
        let (origin, url_path) = split_origin(host)?;
        let Some(index) = url_path.find("/clusters/") else {
            return Ok(None);
        };
        let rest = &url_path[index + "/clusters/".len()..];
        let path = ClusterPath::new(rest.split('/').next().unwrap_or_default());
        if !path.is_valid() {
            return Err(Error::msg(format!(
                "invalid cluster name: {:?}",
                path.as_str()
            )));
        }
        Ok(Some(Self {
            origin: origin.to_owned(),
            prefix: url_path[..index].trim_end_matches('/').to_owned(),
            path,
        }))
    }

    /// The server URL of another workspace on the same server and prefix.
    pub fn with_path(&self, path: &ClusterPath) -> String {
        format!("{}{}{}", self.origin, self.prefix, path.request_path())
    }
}

/// Splits `scheme://authority/path?query` into origin and path (query and fragment dropped).
pub fn split_origin(host: &str) -> Result<(&str, &str), Error> {
    let scheme_end = host
        .find("://")
        .ok_or_else(|| Error::msg(format!("invalid server URL {host:?}")))?;
    let after = &host[scheme_end + 3..];
    let path_start = after
        .find(['/', '?', '#'])
        .map_or(host.len(), |i| scheme_end + 3 + i);
    let path = host[path_start..]
        .split(['?', '#'])
        .next()
        .unwrap_or_default();
    Ok((&host[..path_start], path))
}

/// What a `kubectl ws <arg>` argument asks for, after upstream's string preprocessing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// `-`: swap with the remembered previous workspace.
    Previous,
    /// `.`: print the current workspace.
    Current,
    /// `:`: the top-most ancestor of the current workspace.
    Root,
    /// `~` or `~:rest`: the home workspace, then `rest` (may contain dots).
    Home(String),
    /// An absolute path (leading colon removed), still possibly containing dots.
    Absolute(String),
    /// A path relative to the current workspace, possibly containing dots.
    Relative(String),
}

/// The parsed argument plus the notes upstream prints on stderr.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParsedTarget {
    pub target: Target,
    /// `Note: ...` lines to print (always on stderr).
    pub notes: Vec<&'static str>,
    /// Upstream prints the "cd semantics" note only after a successful switch.
    pub went_home_implicitly: bool,
}

pub const NOTE_LEGACY_ROOT: &str = "Note: Using 'root:' to define an absolute path is no longer supported. Instead, use ':root' to specify an absolute path.";
pub const NOTE_CD_SEMANTICS: &str = "Note: 'kubectl ws' now matches 'cd' semantics: go to home workspace. 'kubectl ws -' to go back. 'kubectl ws .' to print current workspace.";

/// Upstream's preprocessing: a leading `$HOME` becomes `~`, `/` becomes `:`, a bare `root`
/// (or `root:...` unless `--short`) is treated as absolute with a note, and no argument means `~`.
pub fn parse_target(arg: &str, user_home_dir: Option<&str>, short: bool) -> ParsedTarget {
    let mut name = arg.to_owned();
    let mut notes = Vec::new();
    if let Some(home) = user_home_dir.filter(|h| !h.is_empty())
        && let Some(rest) = name.strip_prefix(home)
    {
        name = format!("~{rest}");
    }
    name = name.replace('/', ":");
    if name == ROOT || (name.starts_with("root:") && !short) {
        name = format!(":{name}");
        notes.push(NOTE_LEGACY_ROOT);
    }
    let went_home_implicitly = name.is_empty() && !short;
    if name.is_empty() {
        name = "~".to_owned();
    }
    let target = match name.as_str() {
        "-" => Target::Previous,
        ":" => Target::Root,
        "." => Target::Current,
        "~" => Target::Home(String::new()),
        _ if name.starts_with("~:") => Target::Home(name[1..].to_owned()),
        _ => match name.strip_prefix(':') {
            Some(abs) => Target::Absolute(abs.to_owned()),
            None => Target::Relative(name),
        },
    };
    ParsedTarget {
        target,
        notes,
        went_home_implicitly,
    }
}

/// Turns an absolute or relative (dotted) target into a validated path.
/// `original` is the user's argument, quoted in the error as upstream does.
pub fn resolve(
    target_abs_or_rel: &Target,
    current: &ClusterPath,
    original: &str,
) -> Result<ClusterPath, Error> {
    let joined = match target_abs_or_rel {
        Target::Absolute(abs) => abs.clone(),
        Target::Relative(rel) => current.join(rel).to_string(),
        other => return Err(Error::msg(format!("cannot resolve {other:?} as a path"))),
    };
    let path = resolve_dots(&joined)?;
    if !path.is_valid() {
        return Err(Error::msg(format!("invalid workspace path: {original}")));
    }
    Ok(path)
}

/// The path of the home workspace from its `spec.URL` (`<shard>/clusters/<path>`).
pub fn home_path_from_url(url: &str) -> Result<ClusterPath, Error> {
    let (_, path) =
        split_origin(url).map_err(|_| Error::msg(format!("invalid home workspace URL {url:?}")))?;
    Ok(ClusterPath::new(
        path.strip_prefix("/clusters/").unwrap_or(path),
    ))
}

/// `path:name` of a Workspace type reference, as upstream prints it (`root:universal`).
pub fn type_reference(path: &str, name: &str) -> String {
    ClusterPath::new(path).join(name).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(s: &str) -> ClusterPath {
        ClusterPath::new(s)
    }

    fn resolve_arg(arg: &str, current: &str) -> Result<ClusterPath, Error> {
        let parsed = parse_target(arg, Some("/home/sts"), false);
        resolve(&parsed.target, &p(current), arg)
    }

    #[test]
    fn segments_are_validated_like_logicalcluster() {
        for ok in [
            "root",
            "root:a",
            "a-b:c1",
            "system:admin",
            "*",
            "2cynbfy2m0wtjqcs",
        ] {
            assert!(p(ok).is_valid(), "{ok}");
        }
        for bad in [
            "",
            "Root",
            "root:",
            ":root",
            "a-",
            "-a",
            "ju:nk§",
            "a_b",
            &"a".repeat(64),
        ] {
            assert!(!p(bad).is_valid(), "{bad}");
        }
        assert!(p(&"a".repeat(63)).is_valid());
    }

    #[test]
    fn split_parent_base_and_top() {
        assert_eq!(p("root:a:b").split(), (p("root:a"), "b"));
        assert_eq!(p("root").split(), (p(""), "root"));
        assert_eq!(p("root:a").parent(), Some(p("root")));
        assert_eq!(p("root").parent(), None);
        assert_eq!(p("system:admin").parent(), None);
        assert_eq!(p("root:a:b").top(), p("root"));
        assert_eq!(p("system:admin").top(), p("system:admin"));
    }

    #[test]
    fn relative_paths_join_the_current_workspace() {
        assert_eq!(resolve_arg("bar", "root:foo").ok(), Some(p("root:foo:bar")));
        assert_eq!(
            resolve_arg("bar:baz", "root:foo").ok(),
            Some(p("root:foo:bar:baz"))
        );
        assert_eq!(
            resolve_arg("bar/baz", "root:foo").ok(),
            Some(p("root:foo:bar:baz"))
        );
        assert_eq!(
            resolve_arg("bar:..:bar:baz:..:baz", "root:foo").ok(),
            Some(p("root:foo:bar:baz"))
        );
        assert_eq!(
            resolve_arg(".:bar:.:.:baz:.", "root:foo").ok(),
            Some(p("root:foo:bar:baz"))
        );
    }

    #[test]
    fn dots_go_up() {
        assert_eq!(resolve_arg("..", "root:foo:bar").ok(), Some(p("root:foo")));
        assert_eq!(resolve_arg("..", "root:foo").ok(), Some(p("root")));
        assert_eq!(
            resolve_arg("..:..", "root:foo:bar:baz").ok(),
            Some(p("root:foo"))
        );
        assert_eq!(
            resolve_arg("../..", "root:foo:bar:baz").ok(),
            Some(p("root:foo"))
        );
        // upstream: `..` in root leaves an empty (invalid) path, `:..` cannot go up at all
        let err = resolve_arg("..", "root").err().map(|e| e.to_string());
        assert_eq!(err.as_deref(), Some("invalid workspace path: .."));
        let err = resolve_arg(":..", "root").err().map(|e| e.to_string());
        assert_eq!(err.as_deref(), Some("cannot go up from root"));
    }

    #[test]
    fn absolute_paths_are_used_as_is() {
        assert_eq!(resolve_arg(":root:a:b", "root:x").ok(), Some(p("root:a:b")));
        assert_eq!(
            resolve_arg(":system:admin", "root:x").ok(),
            Some(p("system:admin"))
        );
        let legacy = parse_target("root:a:b", None, false);
        assert_eq!(legacy.target, Target::Absolute("root:a:b".into()));
        assert_eq!(legacy.notes, vec![NOTE_LEGACY_ROOT]);
        let bare_root = parse_target("root", None, true);
        assert_eq!(bare_root.target, Target::Absolute("root".into()));
        // with --short only a bare `root` is rewritten, `root:a` stays relative
        assert_eq!(
            parse_target("root:a", None, true).target,
            Target::Relative("root:a".into())
        );
    }

    #[test]
    fn invalid_paths_are_rejected_with_the_argument() {
        let err = resolve_arg("ju:nk§", "root:foo")
            .err()
            .map(|e| e.to_string());
        assert_eq!(err.as_deref(), Some("invalid workspace path: ju:nk§"));
        assert!(resolve_arg("Upper", "root").is_err());
    }

    #[test]
    fn special_targets() {
        assert_eq!(parse_target("-", None, false).target, Target::Previous);
        assert_eq!(parse_target(".", None, false).target, Target::Current);
        assert_eq!(parse_target(":", None, false).target, Target::Root);
        assert_eq!(
            parse_target("~", None, false).target,
            Target::Home(String::new())
        );
        assert_eq!(
            parse_target("~/bar/baz", None, false).target,
            Target::Home(":bar:baz".into())
        );
        assert_eq!(
            parse_target("/home/sts", Some("/home/sts"), false).target,
            Target::Home(String::new())
        );
        let implicit = parse_target("", None, false);
        assert_eq!(implicit.target, Target::Home(String::new()));
        assert!(implicit.went_home_implicitly);
        assert!(!parse_target("", None, true).went_home_implicitly);
    }

    #[test]
    fn home_then_relative_rest() {
        let home = home_path_from_url("https://shard/clusters/root:users:ab:cd:user-name").ok();
        assert_eq!(home, Some(p("root:users:ab:cd:user-name")));
        let home = p("root:users:ab:cd:user-name");
        let target = Target::Absolute(format!("{home}{}", ":.."));
        assert_eq!(
            resolve(&target, &p("root"), "~/..").ok(),
            Some(p("root:users:ab:cd"))
        );
    }

    #[test]
    fn cluster_urls() {
        let parsed = ClusterUrl::parse("https://h:6443/prefix/clusters/root:a/api?x=1")
            .ok()
            .flatten();
        let Some(u) = parsed else {
            panic!("no cluster URL")
        };
        assert_eq!(u.origin, "https://h:6443");
        assert_eq!(u.prefix, "/prefix");
        assert_eq!(u.path, p("root:a"));
        assert_eq!(
            u.with_path(&p("root:b")),
            "https://h:6443/prefix/clusters/root:b"
        );
        assert_eq!(ClusterUrl::parse("https://test").ok(), Some(None));
        assert_eq!(ClusterUrl::parse("https://test/").ok(), Some(None));
        assert!(ClusterUrl::parse("https://test/clusters/Bad").is_err());
        assert!(ClusterUrl::parse("not a url").is_err());
        assert_eq!(type_reference("root", "universal"), "root:universal");
        assert_eq!(type_reference("", "universal"), "universal");
    }
}
