//! Kubernetes' `$(VAR)` expansion of environment values, `command` and `args`.
//!
//! Manifests written for a real cluster rely on it (the operator's etcd StatefulSet passes
//! `--name=$(POD_NAME)`), so the agent reproduces kubelet's rules exactly rather than a shell's:
//! `$(NAME)` is replaced when `NAME` is defined and left as written when it is not, `$$` is an
//! escaped `$`, a `$` before anything else stays, and an unterminated `$(` is copied literally.
//! This is a port of `third_party/forked/golang/expansion` in kubernetes/kubernetes.

/// Expands `$(NAME)` references in `input` with `lookup`; undefined names stay literal.
pub fn expand(input: &str, lookup: impl Fn(&str) -> Option<String>) -> String {
    let bytes = input.as_bytes();
    let mut out = String::with_capacity(input.len());
    let mut checkpoint = 0;
    let mut cursor = 0;
    while cursor < bytes.len() {
        if bytes[cursor] == b'$' && cursor + 1 < bytes.len() {
            out.push_str(&input[checkpoint..cursor]);
            let rest = &input[cursor + 1..];
            let advance = match rest.as_bytes()[0] {
                b'$' => {
                    out.push('$');
                    1
                }
                b'(' => match rest[1..].find(')') {
                    Some(end) => {
                        let name = &rest[1..1 + end];
                        match lookup(name) {
                            Some(value) => out.push_str(&value),
                            None => {
                                out.push_str("$(");
                                out.push_str(name);
                                out.push(')');
                            }
                        }
                        end + 2
                    }
                    None => {
                        out.push('$');
                        out.push_str(rest);
                        rest.len()
                    }
                },
                _ => {
                    // Not an expression: the operator and the next character are copied.
                    let width = rest.chars().next().map_or(1, char::len_utf8);
                    out.push('$');
                    out.push_str(&rest[..width]);
                    width
                }
            };
            cursor += advance;
            checkpoint = cursor + 1;
        }
        cursor += 1;
    }
    if checkpoint < input.len() {
        out.push_str(&input[checkpoint..]);
    }
    out
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::expand;

    fn with(vars: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let map: HashMap<String, String> = vars
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        move |name| map.get(name).cloned()
    }

    /// The cases of kubernetes' `expand_test.go` (`TestMapReference` / `TestMapping`).
    #[test]
    fn kubernetes_expansion_cases() {
        let vars = with(&[
            ("VAR_A", "A"),
            ("VAR_B", "B"),
            ("VAR_C", "C"),
            ("VAR_REF", "$(VAR_A)"),
            ("VAR_EMPTY", ""),
            ("BLOCK_A", "$(VAR_A)"),
        ]);
        let cases = [
            ("$(VAR_A)", "A"),
            ("___$(VAR_B)___", "___B___"),
            ("$(VAR_C)$(VAR_A)", "CA"),
            ("$(VAR_A)-$(VAR_B)", "A-B"),
            ("f000-$$VAR_A", "f000-$VAR_A"),
            ("foo\\$(VAR_C)bar", "foo\\Cbar"),
            ("foo\\\\$(VAR_C)bar", "foo\\\\Cbar"),
            ("foo\\\\\\\\$(VAR_A)bar", "foo\\\\\\\\Abar"),
            ("$(VAR_A$(VAR_B))", "$(VAR_A$(VAR_B))"),
            ("$(VAR_A$(VAR_B)", "$(VAR_A$(VAR_B)"),
            ("$(VAR_REF)", "$(VAR_A)"),
            ("foo$(VAR_EMPTY)bar", "foobar"),
            ("$(VAR_A)_$(VAR_EMPTY)_$(VAR_B)", "A__B"),
            ("$(VAR_DNE)", "$(VAR_DNE)"),
            ("$VAR_A", "$VAR_A"),
            ("$(VAR_A", "$(VAR_A"),
            ("$$(VAR_A)", "$(VAR_A)"),
            ("$$$(VAR_A)", "$A"),
            ("$$$$(VAR_A)", "$$(VAR_A)"),
            ("$$$$$(VAR_A)", "$$A"),
            ("$$$$$$(VAR_A)", "$$$(VAR_A)"),
            ("$$$$$$$(VAR_A)", "$$$A"),
            ("$$$$$$$$(VAR_A)", "$$$$(VAR_A)"),
            ("$$$$$$$$$(VAR_A)", "$$$$A"),
            ("$(VAR_A)$$", "A$"),
            ("$(VAR_A)$", "A$"),
            ("$", "$"),
            ("$$", "$"),
            ("$$$", "$$"),
            ("$()", "$()"),
            ("$(", "$("),
            ("$(_)", "$(_)"),
            ("$(VAR_A) $(VAR_B)", "A B"),
            ("$(BLOCK_A)", "$(VAR_A)"),
            ("hello $(VAR_A)", "hello A"),
        ];
        for (input, expected) in cases {
            assert_eq!(expand(input, &vars), expected, "expanding {input:?}");
        }
    }

    /// Go copies the byte after a lone `$` as if it were a character; here the whole character is
    /// kept, so non-ASCII text survives.
    #[test]
    fn non_ascii_after_operator() {
        let vars = with(&[("VAR_A", "A")]);
        assert_eq!(expand("\u{e9}$\u{e9}$(VAR_A)", &vars), "\u{e9}$\u{e9}A");
    }

    /// The example of "Define Dependent Environment Variables" in the Kubernetes documentation.
    #[test]
    fn documented_dependent_variables() {
        let vars = with(&[
            ("SERVICE_PORT", "80"),
            ("SERVICE_IP", "172.17.0.1"),
            ("PROTOCOL", "https"),
        ]);
        assert_eq!(
            expand("$(PROTOCOL)://$(SERVICE_IP):$(SERVICE_PORT)", &vars),
            "https://172.17.0.1:80"
        );
        assert_eq!(expand("$$(PROTOCOL)", &vars), "$(PROTOCOL)");
        let before = with(&[("SERVICE_IP", "172.17.0.1"), ("SERVICE_PORT", "80")]);
        assert_eq!(
            expand("$(PROTOCOL)://$(SERVICE_IP):$(SERVICE_PORT)", &before),
            "$(PROTOCOL)://172.17.0.1:80"
        );
    }
}
