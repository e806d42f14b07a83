//! Writing files that hold secrets: private keys and kubeconfigs with embedded credentials.
//!
//! Two properties matter and are easy to get subtly wrong in each caller, so they live here once:
//! nobody but the owner may ever read the content (the file is created 0600, inside a directory
//! created 0700, so there is no window with wider permissions), and a crash mid-write never leaves
//! a truncated file that a restart would then try to reuse (write a temporary file, sync, rename).

use std::fs::{self, DirBuilder, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

/// A filesystem operation on a private file failed.
#[derive(Debug, thiserror::Error)]
#[error("{action} {}: {source}", path.display())]
pub struct PrivateFileError {
    action: &'static str,
    path: PathBuf,
    source: io::Error,
}

impl PrivateFileError {
    fn new(action: &'static str, path: &Path) -> impl FnOnce(io::Error) -> Self {
        let path = path.to_owned();
        move |source| PrivateFileError {
            action,
            path,
            source,
        }
    }
}

/// Creates `dir` and missing parents with mode 0700; an existing directory keeps its mode.
pub fn create_dir(dir: &Path) -> Result<(), PrivateFileError> {
    DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .map_err(PrivateFileError::new("creating directory", dir))
}

/// Replaces `path` with `content` atomically, readable and writable by the owner only.
pub fn write(path: &Path, content: &[u8]) -> Result<(), PrivateFileError> {
    if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
        create_dir(parent)?;
    }
    let mut temporary = path.as_os_str().to_owned();
    temporary.push(format!(".tmp-{}", std::process::id()));
    let temporary = PathBuf::from(temporary);
    let written = (|| {
        let mut file = OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o600)
            .open(&temporary)?;
        file.write_all(content)?;
        file.sync_all()
    })();
    if let Err(source) = written.and_then(|()| fs::rename(&temporary, path)) {
        // Best effort: the temporary file holds a secret and is of no use any more.
        let _ = fs::remove_file(&temporary);
        return Err(PrivateFileError::new("writing", path)(source));
    }
    Ok(())
}

/// Reads `path`, or `None` when it does not exist.
pub fn read_if_present(path: &Path) -> Result<Option<String>, PrivateFileError> {
    match fs::read_to_string(path) {
        Ok(content) => Ok(Some(content)),
        Err(err) if err.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(err) => Err(PrivateFileError::new("reading", path)(err)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn mode(path: &Path) -> u32 {
        fs::metadata(path)
            .map(|m| m.permissions().mode() & 0o777)
            .unwrap()
    }

    #[test]
    fn writes_owner_only_files_in_owner_only_directories() {
        let root = tempfile::tempdir().unwrap();
        let path = root.path().join("a/b/secret.key");
        write(&path, b"one").unwrap();
        assert_eq!(fs::read_to_string(&path).unwrap(), "one");
        assert_eq!(mode(&path), 0o600);
        assert_eq!(mode(&root.path().join("a")), 0o700);
        assert_eq!(mode(&root.path().join("a/b")), 0o700);

        write(&path, b"two").unwrap();
        assert_eq!(fs::read_to_string(&path).unwrap(), "two");
        let leftovers: Vec<_> = fs::read_dir(root.path().join("a/b"))
            .unwrap()
            .map(|entry| entry.unwrap().file_name())
            .collect();
        assert_eq!(leftovers, ["secret.key"]);
    }

    #[test]
    fn reading_tells_absent_from_broken() {
        let root = tempfile::tempdir().unwrap();
        assert!(
            read_if_present(&root.path().join("nope"))
                .unwrap()
                .is_none()
        );
        // A directory where a file is expected is an error, not "absent".
        assert!(read_if_present(root.path()).is_err());
    }
}
