//! The little DER the key code needs: walking PKCS#1, PKCS#8, SEC1 and SubjectPublicKeyInfo
//! structures, and writing SubjectPublicKeyInfo back.
//!
//! ring consumes and produces raw key material (a PKCS#1 `RSAPublicKey`, an uncompressed EC
//! point), while key files and key ids are defined over the wrapping ASN.1. Writing the SPKI
//! ourselves matters: kube's key id is the SHA-256 of Go's `x509.MarshalPKIXPublicKey` output, so
//! the bytes must be the canonical DER encoding, byte for byte.

pub(crate) const SEQUENCE: u8 = 0x30;
pub(crate) const INTEGER: u8 = 0x02;
pub(crate) const BIT_STRING: u8 = 0x03;
pub(crate) const OCTET_STRING: u8 = 0x04;
pub(crate) const NULL: u8 = 0x05;
pub(crate) const OID: u8 = 0x06;
/// `[0] EXPLICIT` (ECPrivateKey's curve parameters).
pub(crate) const CONTEXT_0: u8 = 0xa0;
/// `[1] EXPLICIT` (ECPrivateKey's public key).
pub(crate) const CONTEXT_1: u8 = 0xa1;

/// DER contents of the OIDs used in key structures.
pub(crate) const OID_RSA_ENCRYPTION: &[u8] =
    &[0x2a, 0x86, 0x48, 0x86, 0xf7, 0x0d, 0x01, 0x01, 0x01];
pub(crate) const OID_EC_PUBLIC_KEY: &[u8] = &[0x2a, 0x86, 0x48, 0xce, 0x3d, 0x02, 0x01];
pub(crate) const OID_P256: &[u8] = &[0x2a, 0x86, 0x48, 0xce, 0x3d, 0x03, 0x01, 0x07];
pub(crate) const OID_P384: &[u8] = &[0x2b, 0x81, 0x04, 0x00, 0x22];

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("malformed DER: {0}")]
pub struct DerError(pub(crate) &'static str);

/// Reads consecutive TLVs from a byte slice.
pub(crate) struct Reader<'a> {
    input: &'a [u8],
}

impl<'a> Reader<'a> {
    pub(crate) fn new(input: &'a [u8]) -> Reader<'a> {
        Reader { input }
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.input.is_empty()
    }

    pub(crate) fn peek_tag(&self) -> Option<u8> {
        self.input.first().copied()
    }

    /// The contents of the next TLV, which must carry `tag`.
    pub(crate) fn read(&mut self, tag: u8) -> Result<&'a [u8], DerError> {
        let (&actual, rest) = self.input.split_first().ok_or(DerError("truncated"))?;
        if actual != tag {
            return Err(DerError("unexpected tag"));
        }
        let (&first, mut rest) = rest.split_first().ok_or(DerError("truncated length"))?;
        let len = if first < 0x80 {
            usize::from(first)
        } else {
            let count = usize::from(first & 0x7f);
            if count == 0 || count > 4 || rest.len() < count {
                return Err(DerError("bad length"));
            }
            let (bytes, after) = rest.split_at(count);
            rest = after;
            bytes
                .iter()
                .fold(0usize, |len, byte| (len << 8) | usize::from(*byte))
        };
        if rest.len() < len {
            return Err(DerError("truncated contents"));
        }
        let (contents, after) = rest.split_at(len);
        self.input = after;
        Ok(contents)
    }

    /// A non-negative INTEGER's big-endian magnitude without leading zero bytes.
    pub(crate) fn read_unsigned(&mut self) -> Result<&'a [u8], DerError> {
        let contents = self.read(INTEGER)?;
        if contents.first().is_some_and(|byte| byte & 0x80 != 0) {
            return Err(DerError("negative integer"));
        }
        Ok(strip_leading_zeros(contents))
    }

    /// A BIT STRING without unused bits (all key material is byte aligned).
    pub(crate) fn read_bit_string(&mut self) -> Result<&'a [u8], DerError> {
        match self.read(BIT_STRING)?.split_first() {
            Some((0, bits)) => Ok(bits),
            _ => Err(DerError("bit string with unused bits")),
        }
    }
}

pub(crate) fn strip_leading_zeros(bytes: &[u8]) -> &[u8] {
    let start = bytes
        .iter()
        .position(|byte| *byte != 0)
        .unwrap_or(bytes.len());
    &bytes[start..]
}

/// One TLV.
pub(crate) fn tlv(tag: u8, contents: &[u8]) -> Vec<u8> {
    let mut out = vec![tag];
    let len = contents.len();
    if len < 0x80 {
        out.push(len as u8);
    } else {
        let bytes = len.to_be_bytes();
        let significant = strip_leading_zeros(&bytes);
        out.push(0x80 | significant.len() as u8);
        out.extend_from_slice(significant);
    }
    out.extend_from_slice(contents);
    out
}

/// A non-negative INTEGER from a big-endian magnitude, minimally encoded.
pub(crate) fn unsigned(magnitude: &[u8]) -> Vec<u8> {
    let magnitude = strip_leading_zeros(magnitude);
    let mut contents = Vec::with_capacity(magnitude.len() + 1);
    if magnitude.first().is_none_or(|byte| byte & 0x80 != 0) {
        contents.push(0);
    }
    contents.extend_from_slice(magnitude);
    tlv(INTEGER, &contents)
}

/// A byte-aligned BIT STRING.
pub(crate) fn bit_string(bytes: &[u8]) -> Vec<u8> {
    let mut contents = vec![0];
    contents.extend_from_slice(bytes);
    tlv(BIT_STRING, &contents)
}

pub(crate) fn sequence(parts: &[&[u8]]) -> Vec<u8> {
    tlv(SEQUENCE, &parts.concat())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn integers_are_minimal() {
        assert_eq!(unsigned(&[0, 0, 0x7f]), vec![INTEGER, 1, 0x7f]);
        assert_eq!(unsigned(&[0x80]), vec![INTEGER, 2, 0, 0x80]);
        assert_eq!(unsigned(&[]), vec![INTEGER, 1, 0]);
        let mut reader = Reader::new(&[INTEGER, 2, 0, 0x80]);
        assert_eq!(reader.read_unsigned().unwrap(), &[0x80]);
        assert!(reader.is_empty());
        assert!(Reader::new(&[INTEGER, 1, 0x80]).read_unsigned().is_err());
    }

    #[test]
    fn long_lengths_round_trip() {
        let contents = vec![7u8; 300];
        let encoded = tlv(OCTET_STRING, &contents);
        assert_eq!(&encoded[..4], &[OCTET_STRING, 0x82, 0x01, 0x2c]);
        let mut reader = Reader::new(&encoded);
        assert_eq!(reader.peek_tag(), Some(OCTET_STRING));
        assert_eq!(reader.read(OCTET_STRING).unwrap(), contents.as_slice());
    }

    #[test]
    fn rejects_truncation_and_wrong_tags() {
        assert!(Reader::new(&[SEQUENCE, 5, 1]).read(SEQUENCE).is_err());
        assert!(Reader::new(&[SEQUENCE, 0]).read(INTEGER).is_err());
        assert!(
            Reader::new(&[SEQUENCE, 0x85, 0, 0, 0, 0, 1])
                .read(SEQUENCE)
                .is_err()
        );
        assert!(
            Reader::new(&[BIT_STRING, 2, 3, 0])
                .read_bit_string()
                .is_err()
        );
        assert_eq!(
            Reader::new(&bit_string(&[9])).read_bit_string().unwrap(),
            &[9]
        );
        assert_eq!(sequence(&[&[NULL, 0]]), vec![SEQUENCE, 2, NULL, 0]);
    }
}
