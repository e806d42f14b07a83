//! The file system of an image and its deterministic gzip layer.
//!
//! Why this shape: a container of a Rust binary needs little beyond the binary and its shared
//! libraries, but several things break without the rest: user lookups need `/etc/passwd` and
//! `/etc/group` (the non-root user 65532 `nonroot`, as in distroless), temporary files need a
//! world-writable sticky `/tmp`, and TLS clients look for the CA bundle at its usual path.
//! Entries are kept in a sorted map and written with fixed owners and mtimes, so the layer's
//! bytes (and thus every digest above it) depend only on the content.

use std::collections::BTreeMap;
use std::fs::File;
use std::io::{BufWriter, Read, Write};
use std::path::{Component, Path, PathBuf};

use flate2::Compression;
use flate2::write::GzEncoder;

use crate::digest::DigestWriter;
use crate::{Error, Result};

/// User and group id of the image's user.
pub const NONROOT_ID: u64 = 65532;
/// Name of that user and group.
pub const NONROOT_NAME: &str = "nonroot";

const PASSWD: &str = "root:x:0:0:root:/root:/sbin/nologin
nobody:x:65534:65534:nobody:/nonexistent:/sbin/nologin
nonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin
";
const GROUP: &str = "root:x:0:
nobody:x:65534:
nonroot:x:65532:
";
/// glibc reads it for host and user lookups; files first, as in distroless.
const NSSWITCH: &str = "passwd: files
group: files
shadow: files
hosts: files dns
networks: files
protocols: files
services: files
";

/// Where an entry's bytes come from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Source {
    /// A directory.
    Directory,
    /// Fixed content.
    Bytes(Vec<u8>),
    /// A file on the build machine (symlinks followed: the image gets the content).
    Host(PathBuf),
    /// A symbolic link to this path inside the image.
    Symlink(String),
}

/// One file or directory of the image.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Entry {
    pub mode: u32,
    pub uid: u64,
    pub gid: u64,
    pub source: Source,
}

/// The image's file system, by normalized relative path (`usr/local/bin/kcp`).
#[derive(Clone, Debug, Default)]
pub struct Rootfs {
    entries: BTreeMap<String, Entry>,
}

impl Rootfs {
    /// The base every image starts from: `/etc/passwd`, `/etc/group`, `/etc/nsswitch.conf`,
    /// `/tmp` (1777) and the user's home `/home/nonroot` (owned by 65532).
    pub fn base() -> Result<Self> {
        let mut fs = Self::default();
        fs.add("/etc/passwd", 0o644, Source::Bytes(PASSWD.into()))?;
        fs.add("/etc/group", 0o644, Source::Bytes(GROUP.into()))?;
        fs.add("/etc/nsswitch.conf", 0o644, Source::Bytes(NSSWITCH.into()))?;
        fs.add("/tmp", 0o1777, Source::Directory)?;
        fs.add(crate::oci::HOME, 0o700, Source::Directory)?;
        if let Some(home) = fs.entries.get_mut(crate::oci::HOME.trim_start_matches('/')) {
            home.uid = NONROOT_ID;
            home.gid = NONROOT_ID;
        }
        Ok(fs)
    }

    /// Adds `path` (absolute, as inside the image) owned by root, creating missing parent
    /// directories (0755). Adding the same path twice is fine only with the same content.
    pub fn add(&mut self, path: &str, mode: u32, source: Source) -> Result<()> {
        let normalized = normalize(path)?;
        let mut parent = String::new();
        let parts: Vec<&str> = normalized.split('/').collect();
        for part in &parts[..parts.len() - 1] {
            if !parent.is_empty() {
                parent.push('/');
            }
            parent.push_str(part);
            let dir = self.entries.entry(parent.clone()).or_insert(Entry {
                mode: 0o755,
                uid: 0,
                gid: 0,
                source: Source::Directory,
            });
            if dir.source != Source::Directory {
                return Err(Error::DuplicatePath { path: parent });
            }
        }
        let entry = Entry {
            mode,
            uid: 0,
            gid: 0,
            source,
        };
        match self.entries.get(&normalized) {
            Some(existing) if *existing == entry => Ok(()),
            // A directory created as a parent may be declared explicitly later.
            Some(existing)
                if existing.source == Source::Directory && entry.source == Source::Directory =>
            {
                self.entries.insert(normalized, entry);
                Ok(())
            }
            Some(_) => Err(Error::DuplicatePath { path: normalized }),
            None => {
                self.entries.insert(normalized, entry);
                Ok(())
            }
        }
    }

    /// The entries in archive order (sorted by path, so parents come before children).
    pub fn entries(&self) -> impl Iterator<Item = (&str, &Entry)> {
        self.entries.iter().map(|(p, e)| (p.as_str(), e))
    }

    /// Writes the layer (gzip-compressed tar) to `out` and returns its digests.
    pub fn write_layer(&self, out: &Path, mtime: u64) -> Result<Layer> {
        let file = File::create(out).map_err(Error::io(out))?;
        let compressed = DigestWriter::new(BufWriter::new(file));
        // GzEncoder::new writes a header without name and with mtime 0: deterministic.
        let gzip = GzEncoder::new(compressed, Compression::default());
        let uncompressed = DigestWriter::new(gzip);
        let mut tar = tar::Builder::new(uncompressed);
        for (path, entry) in self.entries() {
            append(&mut tar, path, entry, mtime)?;
        }
        let write_err = Error::io(out);
        let uncompressed = tar.into_inner().map_err(Error::io(out))?;
        let (gzip, diff_id, _) = uncompressed.finish();
        let compressed = gzip.finish().map_err(Error::io(out))?;
        let (mut file, digest, size) = compressed.finish();
        file.flush().map_err(write_err)?;
        Ok(Layer {
            digest,
            size,
            diff_id,
        })
    }
}

/// Digests of a written layer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Layer {
    /// sha256 of the compressed blob.
    pub digest: String,
    /// Size of the compressed blob.
    pub size: u64,
    /// sha256 of the uncompressed tar (the config's `rootfs.diff_ids`).
    pub diff_id: String,
}

/// Appends one entry with fixed owner and mtime and no user or group names.
pub(crate) fn append<W: Write>(
    tar: &mut tar::Builder<W>,
    path: &str,
    entry: &Entry,
    mtime: u64,
) -> Result<()> {
    let mut header = tar::Header::new_ustar();
    header.set_mode(entry.mode);
    header.set_uid(entry.uid);
    header.set_gid(entry.gid);
    header.set_mtime(mtime);
    match &entry.source {
        Source::Directory => {
            header.set_entry_type(tar::EntryType::Directory);
            header.set_size(0);
            tar.append_data(&mut header, format!("{path}/"), std::io::empty())
                .map_err(Error::io(path))
        }
        Source::Bytes(bytes) => {
            header.set_entry_type(tar::EntryType::Regular);
            header.set_size(bytes.len() as u64);
            tar.append_data(&mut header, path, bytes.as_slice())
                .map_err(Error::io(path))
        }
        Source::Symlink(target) => {
            header.set_entry_type(tar::EntryType::Symlink);
            header.set_size(0);
            tar.append_link(&mut header, path, target)
                .map_err(Error::io(path))
        }
        Source::Host(host) => {
            let file = File::open(host).map_err(Error::io(host))?;
            let size = file.metadata().map_err(Error::io(host))?.len();
            header.set_entry_type(tar::EntryType::Regular);
            header.set_size(size);
            // `take` guards against a file that grows while it is copied.
            tar.append_data(&mut header, path, file.take(size))
                .map_err(Error::io(host))
        }
    }
}

/// `/a/./b` -> `a/b`; rejects relative paths, `..`, and the root itself.
fn normalize(path: &str) -> Result<String> {
    let err = |reason| Error::ImagePath {
        path: path.to_owned(),
        reason,
    };
    let p = Path::new(path);
    if !p.is_absolute() {
        return Err(err("not absolute"));
    }
    let mut parts: Vec<String> = Vec::new();
    for component in p.components() {
        match component {
            Component::RootDir | Component::CurDir => {}
            Component::Normal(part) => match part.to_str() {
                Some(s) => parts.push(s.to_owned()),
                None => return Err(err("not UTF-8")),
            },
            Component::ParentDir => {
                if parts.pop().is_none() {
                    return Err(err("leaves the root"));
                }
            }
            Component::Prefix(_) => return Err(err("has a prefix")),
        }
    }
    if parts.is_empty() {
        return Err(err("is the root"));
    }
    Ok(parts.join("/"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn normalizes_paths() {
        assert_eq!(normalize("/a/./b/../c").unwrap(), "a/c");
        assert!(normalize("a/b").is_err());
        assert!(normalize("/..").is_err());
        assert!(normalize("/").is_err());
    }

    #[test]
    fn parents_are_created_and_sorted_first() {
        let mut fs = Rootfs::default();
        fs.add("/lib64/x", 0o755, Source::Bytes(b"1".to_vec()))
            .unwrap();
        fs.add(
            "/lib/x86_64-linux-gnu/libc.so.6",
            0o755,
            Source::Bytes(b"2".to_vec()),
        )
        .unwrap();
        let paths: Vec<_> = fs.entries().map(|(p, _)| p).collect();
        assert_eq!(
            paths,
            [
                "lib",
                "lib/x86_64-linux-gnu",
                "lib/x86_64-linux-gnu/libc.so.6",
                "lib64",
                "lib64/x"
            ]
        );
    }

    #[test]
    fn conflicting_duplicates_are_rejected() {
        let mut fs = Rootfs::default();
        fs.add("/a/b", 0o644, Source::Bytes(b"1".to_vec())).unwrap();
        fs.add("/a/b", 0o644, Source::Bytes(b"1".to_vec())).unwrap();
        assert!(fs.add("/a/b", 0o644, Source::Bytes(b"2".to_vec())).is_err());
        assert!(
            fs.add("/a/b/c", 0o644, Source::Bytes(b"3".to_vec()))
                .is_err()
        );
        fs.add("/a", 0o700, Source::Directory).unwrap();
    }

    #[test]
    fn base_has_the_nonroot_user_and_sticky_tmp() {
        let fs = Rootfs::base().unwrap();
        let entries: BTreeMap<_, _> = fs.entries().collect();
        assert_eq!(entries["tmp"].mode, 0o1777);
        assert_eq!(entries["home/nonroot"].uid, NONROOT_ID);
        match &entries["etc/passwd"].source {
            Source::Bytes(b) => {
                assert!(String::from_utf8_lossy(b).contains("nonroot:x:65532:65532:"))
            }
            other => panic!("{other:?}"),
        }
    }
}
