//! The little DER kcp reads and writes itself: definite-length TLV elements, minimal non-negative
//! INTEGERs, byte-aligned BIT STRINGs and the OIDs of RSA and EC keys.
//!
//! Two unrelated crates need exactly these bytes. kcp-authn walks PKCS#1, PKCS#8, SEC1 and
//! SubjectPublicKeyInfo structures (ring consumes and produces raw key material, while key files
//! and key ids are defined over the wrapping ASN.1) and writes SPKI back: kube's key id is the
//! SHA-256 of Go's `x509.MarshalPKIXPublicKey` output, so the encoding must be canonical, byte for
//! byte. The operator wraps PKCS#1 keys into PKCS#8 (rcgen on ring reads only PKCS#8) and rewrites
//! certificate subjects rcgen cannot express. The primitives are a crate of their own rather than
//! part of either user: kcp-authn does I/O and brings an HTTP client, the operator is a binary, and
//! neither should depend on the other for forty lines of ASN.1. Only what is needed is here: no
//! indefinite lengths, no multi-byte tags, no BER.

/// Tag of INTEGER.
pub const INTEGER: u8 = 0x02;
/// Tag of BIT STRING.
pub const BIT_STRING: u8 = 0x03;
/// Tag of OCTET STRING.
pub const OCTET_STRING: u8 = 0x04;
/// Tag of NULL.
pub const NULL: u8 = 0x05;
/// Tag of OBJECT IDENTIFIER.
pub const OID: u8 = 0x06;
/// Tag of UTF8String.
pub const UTF8_STRING: u8 = 0x0c;
/// Tag of SEQUENCE (constructed).
pub const SEQUENCE: u8 = 0x30;
/// Tag of SET (constructed).
pub const SET: u8 = 0x31;
/// `[0] EXPLICIT` (e.g. ECPrivateKey's curve parameters).
pub const CONTEXT_0: u8 = 0xa0;
/// `[1] EXPLICIT` (e.g. ECPrivateKey's public key).
pub const CONTEXT_1: u8 = 0xa1;

/// DER contents of `rsaEncryption` (1.2.840.113549.1.1.1).
pub const OID_RSA_ENCRYPTION: &[u8] = &[0x2a, 0x86, 0x48, 0x86, 0xf7, 0x0d, 0x01, 0x01, 0x01];
/// DER contents of `id-ecPublicKey` (1.2.840.10045.2.1).
pub const OID_EC_PUBLIC_KEY: &[u8] = &[0x2a, 0x86, 0x48, 0xce, 0x3d, 0x02, 0x01];
/// DER contents of `prime256v1` (1.2.840.10045.3.1.7).
pub const OID_P256: &[u8] = &[0x2a, 0x86, 0x48, 0xce, 0x3d, 0x03, 0x01, 0x07];
/// DER contents of `secp384r1` (1.3.132.0.34).
pub const OID_P384: &[u8] = &[0x2b, 0x81, 0x04, 0x00, 0x22];

/// Why the input is not the DER expected.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum DerError {
    #[error("malformed DER: truncated")]
    Truncated,
    #[error("malformed DER: truncated length")]
    TruncatedLength,
    #[error("malformed DER: bad length")]
    BadLength,
    #[error("malformed DER: truncated contents")]
    TruncatedContents,
    #[error("malformed DER: unexpected tag")]
    UnexpectedTag,
    #[error("malformed DER: data after the element")]
    TrailingData,
    #[error("malformed DER: negative integer")]
    NegativeInteger,
    #[error("malformed DER: bit string with unused bits")]
    UnusedBits,
    /// Well-formed DER, but not the structure the caller reads (e.g. a field out of place).
    #[error("malformed DER: {0}")]
    Structure(&'static str),
}

/// Reads consecutive TLVs from a byte slice.
#[derive(Debug, Clone)]
pub struct Reader<'a> {
    input: &'a [u8],
}

impl<'a> Reader<'a> {
    pub fn new(input: &'a [u8]) -> Reader<'a> {
        Reader { input }
    }

    /// Whether every element has been read.
    pub fn is_empty(&self) -> bool {
        self.input.is_empty()
    }

    /// The tag of the next element, if any.
    pub fn peek_tag(&self) -> Option<u8> {
        self.input.first().copied()
    }

    /// The next element whole (tag, length and contents) and where its contents start in it.
    fn next(&mut self) -> Result<(&'a [u8], usize), DerError> {
        let input = self.input;
        let (_, rest) = input.split_first().ok_or(DerError::Truncated)?;
        let (&first, rest) = rest.split_first().ok_or(DerError::TruncatedLength)?;
        let (header, len) = if first < 0x80 {
            (2, usize::from(first))
        } else {
            let count = usize::from(first & 0x7f);
            if count == 0 || count > std::mem::size_of::<usize>() || rest.len() < count {
                return Err(DerError::BadLength);
            }
            let len = rest[..count]
                .iter()
                .fold(0usize, |len, byte| (len << 8) | usize::from(*byte));
            (2 + count, len)
        };
        let end = header
            .checked_add(len)
            .filter(|end| *end <= input.len())
            .ok_or(DerError::TruncatedContents)?;
        let (element, after) = input.split_at(end);
        self.input = after;
        Ok((element, header))
    }

    /// The contents of the next element, which must carry `tag`.
    pub fn read(&mut self, tag: u8) -> Result<&'a [u8], DerError> {
        if self.peek_tag().is_some_and(|actual| actual != tag) {
            return Err(DerError::UnexpectedTag);
        }
        let (element, header) = self.next()?;
        Ok(&element[header..])
    }

    /// The next element whole: tag, length and contents, whatever its tag.
    pub fn read_element(&mut self) -> Result<&'a [u8], DerError> {
        self.next().map(|(element, _)| element)
    }

    /// A non-negative INTEGER's big-endian magnitude without leading zero bytes.
    pub fn read_unsigned(&mut self) -> Result<&'a [u8], DerError> {
        let contents = self.read(INTEGER)?;
        if contents.first().is_some_and(|byte| byte & 0x80 != 0) {
            return Err(DerError::NegativeInteger);
        }
        Ok(strip_leading_zeros(contents))
    }

    /// A BIT STRING without unused bits (all key material is byte aligned).
    pub fn read_bit_string(&mut self) -> Result<&'a [u8], DerError> {
        match self.read(BIT_STRING)?.split_first() {
            Some((0, bits)) => Ok(bits),
            _ => Err(DerError::UnusedBits),
        }
    }
}

/// The contents of `input`, which must be exactly one element with tag `tag`.
pub fn content(input: &[u8], tag: u8) -> Result<&[u8], DerError> {
    let mut reader = Reader::new(input);
    let contents = reader.read(tag)?;
    if !reader.is_empty() {
        return Err(DerError::TrailingData);
    }
    Ok(contents)
}

/// The elements (each with its tag and length) that make up a constructed element's `content`.
pub fn elements(content: &[u8]) -> Result<Vec<&[u8]>, DerError> {
    let mut reader = Reader::new(content);
    let mut elements = Vec::new();
    while !reader.is_empty() {
        elements.push(reader.read_element()?);
    }
    Ok(elements)
}

/// `bytes` without its leading zero bytes.
pub fn strip_leading_zeros(bytes: &[u8]) -> &[u8] {
    let start = bytes
        .iter()
        .position(|byte| *byte != 0)
        .unwrap_or(bytes.len());
    &bytes[start..]
}

/// One element: tag, length (short form below 128 bytes, else long form), contents.
pub fn element(tag: u8, contents: &[u8]) -> Vec<u8> {
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
pub fn unsigned(magnitude: &[u8]) -> Vec<u8> {
    let magnitude = strip_leading_zeros(magnitude);
    let mut contents = Vec::with_capacity(magnitude.len() + 1);
    if magnitude.first().is_none_or(|byte| byte & 0x80 != 0) {
        contents.push(0);
    }
    contents.extend_from_slice(magnitude);
    element(INTEGER, &contents)
}

/// A byte-aligned BIT STRING.
pub fn bit_string(bytes: &[u8]) -> Vec<u8> {
    let mut contents = vec![0];
    contents.extend_from_slice(bytes);
    element(BIT_STRING, &contents)
}

/// A SEQUENCE of already encoded elements.
pub fn sequence(parts: &[&[u8]]) -> Vec<u8> {
    element(SEQUENCE, &parts.concat())
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
    fn lengths_use_the_long_form_from_128_bytes() {
        let header = |len: usize| {
            let encoded = element(OCTET_STRING, &vec![0; len]);
            encoded[1..encoded.len() - len].to_vec()
        };
        assert_eq!(header(5), vec![5]);
        assert_eq!(header(128), vec![0x81, 0x80]);
        assert_eq!(header(1190), vec![0x82, 0x04, 0xa6]);
    }

    #[test]
    fn long_lengths_round_trip() {
        let contents = vec![7u8; 300];
        let encoded = element(OCTET_STRING, &contents);
        assert_eq!(&encoded[..4], &[OCTET_STRING, 0x82, 0x01, 0x2c]);
        let mut reader = Reader::new(&encoded);
        assert_eq!(reader.peek_tag(), Some(OCTET_STRING));
        assert_eq!(reader.read(OCTET_STRING).unwrap(), contents.as_slice());
    }

    #[test]
    fn elements_split_and_join_back() {
        let long = vec![0xab; 300];
        let joined = [element(OCTET_STRING, &[1, 2]), element(OCTET_STRING, &long)].concat();
        let sequence = element(SEQUENCE, &joined);
        let inner = content(&sequence, SEQUENCE).expect("sequence");
        let parts = elements(inner).expect("elements");
        assert_eq!(parts.len(), 2);
        assert_eq!(content(parts[1], OCTET_STRING).expect("octets"), &long[..]);
        assert_eq!(content(&sequence, SET), Err(DerError::UnexpectedTag));
        assert!(elements(&[0x04, 0x05, 0x01]).is_err(), "truncated");
        let trailing = [sequence.as_slice(), &[NULL, 0]].concat();
        assert_eq!(content(&trailing, SEQUENCE), Err(DerError::TrailingData));
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
        assert!(Reader::new(&[]).read(SEQUENCE).is_err());
        assert!(Reader::new(&[SEQUENCE]).read(SEQUENCE).is_err());
    }
}
