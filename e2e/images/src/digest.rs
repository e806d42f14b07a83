//! SHA-256 content addresses (`sha256:<hex>`), computed while bytes are written.
//!
//! Why a writer: a layer is hashed twice (the uncompressed tar for `diff_ids`, the gzip stream for
//! the blob digest) and can be large, so both digests are taken in one streaming pass instead of
//! buffering the layer. ring is the workspace's one crypto provider, so it hashes here too.

use std::io::{self, Write};

use ring::digest::{Context, SHA256};

/// `sha256:<lowercase hex>` of `bytes`.
pub fn sha256(bytes: &[u8]) -> String {
    let mut context = Context::new(&SHA256);
    context.update(bytes);
    format_digest(context)
}

fn format_digest(context: Context) -> String {
    let digest = context.finish();
    let mut out = String::with_capacity(7 + 64);
    out.push_str("sha256:");
    for byte in digest.as_ref() {
        out.push(char::from(HEX[usize::from(byte >> 4)]));
        out.push(char::from(HEX[usize::from(byte & 0xf)]));
    }
    out
}

const HEX: &[u8; 16] = b"0123456789abcdef";

/// The hex part of a `sha256:<hex>` digest (the blob's file name in an image layout).
pub fn hex(digest: &str) -> &str {
    digest.strip_prefix("sha256:").unwrap_or(digest)
}

/// Forwards writes to `inner` and hashes (and counts) exactly the bytes `inner` accepted.
pub struct DigestWriter<W> {
    inner: W,
    context: Context,
    len: u64,
}

impl<W: Write> DigestWriter<W> {
    pub fn new(inner: W) -> Self {
        Self {
            inner,
            context: Context::new(&SHA256),
            len: 0,
        }
    }

    /// The inner writer, the digest of everything written and its length in bytes.
    pub fn finish(self) -> (W, String, u64) {
        (self.inner, format_digest(self.context), self.len)
    }
}

impl<W: Write> Write for DigestWriter<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let n = self.inner.write(buf)?;
        self.context.update(&buf[..n]);
        self.len += n as u64;
        Ok(n)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_digest() {
        assert_eq!(
            sha256(b"abc"),
            "sha256:ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
    }

    #[test]
    fn writer_matches_one_shot() {
        let mut writer = DigestWriter::new(Vec::new());
        writer.write_all(b"ab").unwrap();
        writer.write_all(b"c").unwrap();
        let (bytes, digest, len) = writer.finish();
        assert_eq!(bytes, b"abc");
        assert_eq!(len, 3);
        assert_eq!(digest, sha256(b"abc"));
        assert_eq!(hex(&digest).len(), 64);
    }
}
