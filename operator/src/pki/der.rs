//! The little DER this crate writes itself: definite-length elements, and splitting a
//! constructed element's content into its elements. Used to wrap PKCS#1 keys and to write
//! certificate subjects rcgen cannot express.

/// Tag of SEQUENCE (constructed).
pub const SEQUENCE: u8 = 0x30;
/// Tag of SET (constructed).
pub const SET: u8 = 0x31;
pub const OCTET_STRING: u8 = 0x04;
pub const BIT_STRING: u8 = 0x03;
pub const UTF8_STRING: u8 = 0x0c;
pub const OBJECT_IDENTIFIER: u8 = 0x06;

/// The content was not well-formed DER.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error("malformed DER")]
pub struct Malformed;

fn length(len: usize) -> Vec<u8> {
    if len < 0x80 {
        return vec![len as u8];
    }
    let bytes: Vec<u8> = len
        .to_be_bytes()
        .into_iter()
        .skip_while(|byte| *byte == 0)
        .collect();
    let mut encoded = vec![0x80 | bytes.len() as u8];
    encoded.extend(bytes);
    encoded
}

/// One element: tag, length, content.
pub fn element(tag: u8, content: &[u8]) -> Vec<u8> {
    let mut element = vec![tag];
    element.extend(length(content.len()));
    element.extend_from_slice(content);
    element
}

/// Header and content lengths of the first element of `input`.
fn header(input: &[u8]) -> Result<(usize, usize), Malformed> {
    let first_length = *input.get(1).ok_or(Malformed)?;
    if first_length < 0x80 {
        return Ok((2, usize::from(first_length)));
    }
    let count = usize::from(first_length & 0x7f);
    if count == 0 || count > std::mem::size_of::<usize>() {
        return Err(Malformed);
    }
    let bytes = input.get(2..2 + count).ok_or(Malformed)?;
    let content = bytes
        .iter()
        .fold(0usize, |acc, byte| (acc << 8) | usize::from(*byte));
    Ok((2 + count, content))
}

/// The whole first element of `input` and what follows it.
fn split_first(input: &[u8]) -> Result<(&[u8], &[u8]), Malformed> {
    let (header, content) = header(input)?;
    let end = header.checked_add(content).ok_or(Malformed)?;
    if end > input.len() {
        return Err(Malformed);
    }
    Ok(input.split_at(end))
}

/// The content of the single element `input` with tag `tag`.
pub fn content(input: &[u8], tag: u8) -> Result<&[u8], Malformed> {
    let (whole, rest) = split_first(input)?;
    if whole.first() != Some(&tag) || !rest.is_empty() {
        return Err(Malformed);
    }
    let (header, _) = header(whole)?;
    Ok(&whole[header..])
}

/// The elements (each with its tag and length) that make up `content`.
pub fn elements(mut content: &[u8]) -> Result<Vec<&[u8]>, Malformed> {
    let mut elements = Vec::new();
    while !content.is_empty() {
        let (element, rest) = split_first(content)?;
        elements.push(element);
        content = rest;
    }
    Ok(elements)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lengths_use_the_long_form_from_128_bytes() {
        assert_eq!(length(5), vec![5]);
        assert_eq!(length(128), vec![0x81, 0x80]);
        assert_eq!(length(1190), vec![0x82, 0x04, 0xa6]);
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
        assert_eq!(content(&sequence, SET), Err(Malformed));
        assert_eq!(elements(&[0x04, 0x05, 0x01]), Err(Malformed), "truncated");
    }
}
