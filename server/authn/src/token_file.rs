//! Static bearer tokens (`--token-auth-file`): CSV lines `token,user,uid[,"group1,group2"]`.
//!
//! The file is read the way kube-apiserver reads it, with Go's CSV rules: quoted fields may hold
//! commas, `""` and newlines; blank lines are skipped; records may have any number of fields beyond
//! the three required ones; a record with an empty token is skipped; a repeated token warns and
//! the later line wins. Errors name the line so an operator can fix the file.
//!
//! Tokens are kept only as SHA-256 digests, so the lookup compares digests, not the secrets
//! themselves, and a memory dump does not reveal them.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use crate::user::UserInfo;

#[derive(Debug, thiserror::Error)]
pub enum TokenFileError {
    #[error("reading token file {path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("token file line {line}: {reason}")]
    Csv { line: usize, reason: &'static str },
    #[error(
        "token file line {line}: needs at least 3 columns (token, user name, user uid), found {found}"
    )]
    TooFewColumns { line: usize, found: usize },
}

type Digest = [u8; 32];

fn digest(token: &str) -> Digest {
    let mut out = [0; 32];
    out.copy_from_slice(ring::digest::digest(&ring::digest::SHA256, token.as_bytes()).as_ref());
    out
}

/// The users of a token file, by token.
#[derive(Debug, Clone, Default)]
pub struct TokenFile {
    users: HashMap<Digest, UserInfo>,
}

impl TokenFile {
    pub fn parse(csv: &str) -> Result<TokenFile, TokenFileError> {
        let mut users = HashMap::new();
        for (line, record) in records(csv)? {
            if record.len() < 3 {
                return Err(TokenFileError::TooFewColumns {
                    line,
                    found: record.len(),
                });
            }
            if record[0].is_empty() {
                tracing::warn!(line, "token file: empty token, record skipped");
                continue;
            }
            let user = UserInfo {
                name: record[1].clone(),
                uid: record[2].clone(),
                groups: record
                    .get(3)
                    .map(|groups| groups.split(',').map(str::to_owned).collect())
                    .unwrap_or_default(),
                ..UserInfo::default()
            };
            if users.insert(digest(&record[0]), user).is_some() {
                tracing::warn!(line, "token file: duplicate token, the later record wins");
            }
        }
        Ok(TokenFile { users })
    }

    pub fn from_file(path: impl AsRef<Path>) -> Result<TokenFile, TokenFileError> {
        let path = path.as_ref();
        let text = std::fs::read_to_string(path).map_err(|source| TokenFileError::Io {
            path: path.to_owned(),
            source,
        })?;
        TokenFile::parse(&text)
    }

    pub fn authenticate(&self, token: &str) -> Option<UserInfo> {
        self.users.get(&digest(token)).cloned()
    }
}

/// CSV records with the line each starts on, following Go's `encoding/csv` (comma separator,
/// no comments, no lazy quotes, variable field count).
fn records(text: &str) -> Result<Vec<(usize, Vec<String>)>, TokenFileError> {
    let bytes = text.as_bytes();
    let mut records = Vec::new();
    let mut pos = 0;
    let mut line = 1;
    let at_line_end = |pos: usize| match bytes.get(pos) {
        Some(b'\n') => Some(1),
        Some(b'\r') if bytes.get(pos + 1) == Some(&b'\n') => Some(2),
        None => Some(0),
        _ => None,
    };
    while pos < bytes.len() {
        if let Some(width) = at_line_end(pos) {
            pos += width;
            line += 1;
            continue;
        }
        let start_line = line;
        let mut fields = Vec::new();
        loop {
            let mut field = Vec::new();
            if bytes.get(pos) == Some(&b'"') {
                pos += 1;
                loop {
                    match bytes.get(pos) {
                        None => {
                            return Err(TokenFileError::Csv {
                                line: start_line,
                                reason: "quoted field is never closed",
                            });
                        }
                        Some(b'"') if bytes.get(pos + 1) == Some(&b'"') => {
                            field.push(b'"');
                            pos += 2;
                        }
                        Some(b'"') => {
                            pos += 1;
                            break;
                        }
                        Some(&byte) => {
                            if byte == b'\n' {
                                line += 1;
                            }
                            field.push(byte);
                            pos += 1;
                        }
                    }
                }
                if bytes.get(pos) != Some(&b',') && at_line_end(pos).is_none() {
                    return Err(TokenFileError::Csv {
                        line,
                        reason: "extraneous or missing \" in quoted field",
                    });
                }
            } else {
                while bytes.get(pos) != Some(&b',') && at_line_end(pos).is_none() {
                    if bytes[pos] == b'"' {
                        return Err(TokenFileError::Csv {
                            line,
                            reason: "bare \" in non-quoted field",
                        });
                    }
                    field.push(bytes[pos]);
                    pos += 1;
                }
            }
            fields.push(String::from_utf8_lossy(&field).into_owned());
            if bytes.get(pos) == Some(&b',') {
                pos += 1;
                continue;
            }
            if let Some(width) = at_line_end(pos) {
                pos += width;
                line += 1;
            }
            break;
        }
        records.push((start_line, fields));
    }
    Ok(records)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_users_groups_and_extra_columns() {
        let file = TokenFile::parse(
            "t1,alice,1,\"devs,ops\"\n\n\r\nt2,bob,2\r\nt3,carol,3,solo,ignored,columns\n",
        )
        .unwrap();
        let alice = file.authenticate("t1").unwrap();
        assert_eq!(alice.name, "alice");
        assert_eq!(alice.uid, "1");
        assert_eq!(alice.groups, vec!["devs", "ops"]);
        assert_eq!(
            file.authenticate("t2").unwrap().groups,
            Vec::<String>::new()
        );
        assert_eq!(file.authenticate("t3").unwrap().groups, vec!["solo"]);
        assert_eq!(file.authenticate("t4"), None);
        assert_eq!(file.authenticate(""), None);
    }

    #[test]
    fn later_duplicates_win_and_empty_tokens_are_skipped() {
        let file = TokenFile::parse("t,first,1\nt,second,2\n,nobody,3").unwrap();
        assert_eq!(file.authenticate("t").unwrap().name, "second");
        assert_eq!(file.authenticate(""), None);
    }

    #[test]
    fn quoted_fields_follow_go_csv() {
        let file = TokenFile::parse("\"a\"\"b\",\"multi\nline\",u\nc,d,e").unwrap();
        assert_eq!(file.authenticate("a\"b").unwrap().name, "multi\nline");
        assert_eq!(file.authenticate("c").unwrap().uid, "e");
    }

    #[test]
    fn errors_name_the_line() {
        let error = |csv: &str| TokenFile::parse(csv).unwrap_err().to_string();
        assert_eq!(
            error("t,a,1\n\nt2,b\n"),
            "token file line 3: needs at least 3 columns (token, user name, user uid), found 2"
        );
        assert_eq!(
            error("t,a,1\nt\"x,b,2"),
            "token file line 2: bare \" in non-quoted field"
        );
        assert_eq!(
            error("t,a,1\n\"t\"x,b,2"),
            "token file line 2: extraneous or missing \" in quoted field"
        );
        assert_eq!(
            error("t,a,1\n\"t,b,2\n"),
            "token file line 2: quoted field is never closed"
        );
    }

    #[test]
    fn reads_files() {
        let path = std::env::temp_dir().join(format!("kcp-authn-tokens-{}", std::process::id()));
        std::fs::write(&path, "t,alice,1\n").unwrap();
        let file = TokenFile::from_file(&path);
        std::fs::remove_file(&path).unwrap();
        assert_eq!(file.unwrap().authenticate("t").unwrap().name, "alice");
        assert!(matches!(
            TokenFile::from_file("/nonexistent/tokens.csv"),
            Err(TokenFileError::Io { .. })
        ));
    }
}
