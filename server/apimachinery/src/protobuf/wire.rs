//! The protobuf wire format at the byte level: varints, field keys and length-delimited records.
//!
//! Only what Kubernetes messages use is interpreted (varints, 64-bit fixed doubles and
//! length-delimited fields), but
//! the reader steps over every wire type, groups included, because a newer client may send
//! fields this server does not know and protobuf requires those to be skipped, not rejected.
//! Every read is bounds-checked so that arbitrary bytes produce an error, never a panic.

use super::ProtobufError;

/// Wire type of varint-encoded scalars (bool, int32, int64).
const VARINT: u8 = 0;
const FIXED64: u8 = 1;
/// Wire type of strings, bytes, embedded messages and map entries.
const LEN: u8 = 2;
const START_GROUP: u8 = 3;
const END_GROUP: u8 = 4;
const FIXED32: u8 = 5;

/// One field as read off the wire, before the schema gives it meaning.
#[derive(Debug, Clone, Copy)]
pub(super) enum WireValue<'a> {
    Varint(u64),
    Len(&'a [u8]),
    /// A 64-bit fixed-width number: a `double` (apiextensions `JSONSchemaProps.maximum`).
    Fixed64(u64),
    /// A 32-bit fixed-width number or a group: never part of a Kubernetes message, only skipped.
    Other {
        wire_type: u8,
    },
}

impl WireValue<'_> {
    pub(super) fn wire_type(&self) -> u8 {
        match self {
            WireValue::Varint(_) => VARINT,
            WireValue::Len(_) => LEN,
            WireValue::Fixed64(_) => FIXED64,
            WireValue::Other { wire_type } => *wire_type,
        }
    }
}

/// Reads the fields of one message in wire order.
pub(super) struct Reader<'a> {
    rest: &'a [u8],
}

impl<'a> Reader<'a> {
    pub(super) fn new(bytes: &'a [u8]) -> Self {
        Reader { rest: bytes }
    }

    fn take(&mut self, n: usize) -> Result<&'a [u8], ProtobufError> {
        if n > self.rest.len() {
            return Err(ProtobufError::Truncated);
        }
        let (head, tail) = self.rest.split_at(n);
        self.rest = tail;
        Ok(head)
    }

    fn varint(&mut self) -> Result<u64, ProtobufError> {
        let mut value = 0u64;
        for shift in (0..64).step_by(7) {
            let &[byte] = self.take(1)? else {
                return Err(ProtobufError::Truncated);
            };
            value |= u64::from(byte & 0x7f) << shift;
            if byte < 0x80 {
                return Ok(value);
            }
        }
        Err(ProtobufError::VarintOverflow)
    }

    fn length_delimited(&mut self) -> Result<&'a [u8], ProtobufError> {
        let len = usize::try_from(self.varint()?).map_err(|_| ProtobufError::Truncated)?;
        self.take(len)
    }

    fn key(&mut self) -> Result<(u32, u8), ProtobufError> {
        let key = self.varint()?;
        let number = u32::try_from(key >> 3).map_err(|_| ProtobufError::InvalidKey(key))?;
        if number == 0 {
            return Err(ProtobufError::InvalidKey(key));
        }
        Ok((number, (key & 7) as u8))
    }

    /// Steps over a group's content up to and including its matching end marker.
    fn skip_group(&mut self) -> Result<(), ProtobufError> {
        let mut depth = 1usize;
        while depth > 0 {
            let (_, wire_type) = self.key()?;
            match wire_type {
                START_GROUP => depth += 1,
                END_GROUP => depth -= 1,
                other => {
                    self.value(other)?;
                }
            }
        }
        Ok(())
    }

    fn value(&mut self, wire_type: u8) -> Result<WireValue<'a>, ProtobufError> {
        match wire_type {
            VARINT => self.varint().map(WireValue::Varint),
            LEN => self.length_delimited().map(WireValue::Len),
            FIXED64 => {
                let bytes = self.take(8)?;
                let mut word = [0u8; 8];
                word.copy_from_slice(bytes);
                Ok(WireValue::Fixed64(u64::from_le_bytes(word)))
            }
            FIXED32 => self.take(4).map(|_| WireValue::Other { wire_type }),
            START_GROUP => self.skip_group().map(|()| WireValue::Other { wire_type }),
            _ => Err(ProtobufError::InvalidWireType(wire_type)),
        }
    }

    /// The next element of a packed repeated number field (unkeyed varints), or `None` at the
    /// end of the field.
    pub(super) fn next_packed_varint(&mut self) -> Result<Option<u64>, ProtobufError> {
        if self.rest.is_empty() {
            return Ok(None);
        }
        self.varint().map(Some)
    }

    /// The next field number and value, or `None` at the end of the message.
    pub(super) fn next_field(&mut self) -> Result<Option<(u32, WireValue<'a>)>, ProtobufError> {
        if self.rest.is_empty() {
            return Ok(None);
        }
        let (number, wire_type) = self.key()?;
        let value = self.value(wire_type)?;
        Ok(Some((number, value)))
    }
}

/// Builds one message; fields are appended in the order the caller writes them.
#[derive(Default)]
pub(super) struct Writer {
    buf: Vec<u8>,
}

impl Writer {
    fn raw_varint(&mut self, mut value: u64) {
        while value >= 0x80 {
            self.buf.push((value & 0x7f) as u8 | 0x80);
            value >>= 7;
        }
        self.buf.push(value as u8);
    }

    fn key(&mut self, number: u32, wire_type: u8) {
        self.raw_varint(u64::from(number) << 3 | u64::from(wire_type));
    }

    /// A varint field; negative int32/int64 values arrive sign-extended, as Go writes them.
    pub(super) fn varint(&mut self, number: u32, value: u64) {
        self.key(number, VARINT);
        self.raw_varint(value);
    }

    /// A 64-bit fixed-width field (a `double`), little-endian as protobuf writes it.
    pub(super) fn fixed64(&mut self, number: u32, value: u64) {
        self.key(number, FIXED64);
        self.buf.extend_from_slice(&value.to_le_bytes());
    }

    /// A length-delimited field (string, bytes, embedded message).
    pub(super) fn bytes(&mut self, number: u32, value: &[u8]) {
        self.key(number, LEN);
        self.raw_varint(value.len() as u64);
        self.buf.extend_from_slice(value);
    }

    /// The key and length of a length-delimited field whose `length` bytes of content are sent
    /// separately (the items of a list sent in pieces).
    pub(super) fn field_header(&mut self, number: u32, length: usize) {
        self.key(number, LEN);
        self.raw_varint(length as u64);
    }

    /// A writer that appends to `buf`, taking it over.
    pub(super) fn appending(buf: Vec<u8>) -> Writer {
        Writer { buf }
    }

    /// A writer that appends to `prefix` (the `k8s\0` magic of a body).
    pub(super) fn with_prefix(prefix: &[u8]) -> Writer {
        Writer {
            buf: prefix.to_vec(),
        }
    }

    /// Starts a length-delimited field whose content the caller writes next, in place (no
    /// buffer of its own to copy from); [`Writer::end_nested`] fills in the length.
    pub(super) fn begin_nested(&mut self, number: u32) -> Nested {
        self.key(number, LEN);
        self.buf.push(0);
        Nested {
            length_at: self.buf.len() - 1,
        }
    }

    /// Ends a field begun with [`Writer::begin_nested`]: its length goes in front of what was
    /// written since, widening the one byte kept for it when the content is 128 bytes or more.
    pub(super) fn end_nested(&mut self, nested: Nested) {
        let start = nested.length_at + 1;
        let mut length = (self.buf.len() - start) as u64;
        let mut prefix = [0u8; 10];
        let mut n = 0;
        while length >= 0x80 {
            prefix[n] = (length & 0x7f) as u8 | 0x80;
            length >>= 7;
            n += 1;
        }
        prefix[n] = length as u8;
        n += 1;
        self.buf[nested.length_at] = prefix[0];
        if n > 1 {
            self.buf.splice(start..start, prefix[1..n].iter().copied());
        }
    }

    pub(super) fn into_bytes(self) -> Vec<u8> {
        self.buf
    }
}

/// How many bytes [`Writer::field_header`] writes for a field `number` of `length` bytes.
pub(super) fn field_header_len(number: u32, length: usize) -> usize {
    varint_len(u64::from(number) << 3 | u64::from(LEN)) + varint_len(length as u64)
}

fn varint_len(value: u64) -> usize {
    (64 - value.max(1).leading_zeros() as usize).div_ceil(7)
}

/// A length-delimited field being written in place: where its length byte is.
#[must_use]
pub(super) struct Nested {
    length_at: usize,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nested_fields_written_in_place_equal_copied_ones() {
        for size in [0usize, 1, 127, 128, 300, 16_383, 16_384, 70_000] {
            let content = vec![7u8; size];
            let mut copied = Writer::default();
            copied.varint(1, 5);
            copied.bytes(2, &content);
            let mut in_place = Writer::default();
            in_place.varint(1, 5);
            let nested = in_place.begin_nested(2);
            in_place.buf.extend_from_slice(&content);
            in_place.end_nested(nested);
            assert_eq!(in_place.into_bytes(), copied.into_bytes(), "{size}");
        }
    }

    #[test]
    fn field_headers_are_as_long_as_written() {
        for (number, length) in [
            (1, 0),
            (2, 127),
            (2, 128),
            (15, 16_383),
            (16, 16_384),
            (2, 1 << 40),
        ] {
            let mut w = Writer::default();
            w.field_header(number, length);
            assert_eq!(
                w.into_bytes().len(),
                field_header_len(number, length),
                "{number} {length}"
            );
        }
    }

    #[test]
    fn varints_round_trip_at_boundaries() {
        for value in [
            0,
            1,
            127,
            128,
            300,
            u64::from(u32::MAX),
            (-1i64) as u64,
            u64::MAX,
        ] {
            let mut w = Writer::default();
            w.varint(1, value);
            let bytes = w.into_bytes();
            let mut r = Reader::new(&bytes);
            match r.next_field().unwrap() {
                Some((1, WireValue::Varint(v))) => assert_eq!(v, value),
                other => panic!("unexpected {other:?}"),
            }
            assert!(r.next_field().unwrap().is_none());
        }
    }

    #[test]
    fn negative_int_takes_ten_bytes() {
        let mut w = Writer::default();
        w.varint(1, (-1i64) as u64);
        assert_eq!(w.into_bytes().len(), 11);
    }

    #[test]
    fn skips_fixed_and_group_fields() {
        // field 2 fixed64, field 3 fixed32, field 4 group holding a varint and a nested group,
        // then field 5 varint 7.
        let bytes = [
            0x11, 1, 2, 3, 4, 5, 6, 7, 8, //
            0x1d, 1, 2, 3, 4, //
            0x23, 0x08, 0x01, 0x2b, 0x2c, 0x24, //
            0x28, 0x07,
        ];
        let mut r = Reader::new(&bytes);
        let mut seen = Vec::new();
        while let Some((number, value)) = r.next_field().unwrap() {
            seen.push((number, value.wire_type()));
        }
        assert_eq!(seen, [(2, 1), (3, 5), (4, 3), (5, 0)]);
    }

    #[test]
    fn rejects_bad_input() {
        let cases: [(&[u8], &str); 5] = [
            (&[0x0a, 0x05, b'a'], "truncated"),
            (&[0x08], "truncated"),
            (
                &[
                    0x08, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01,
                ],
                "64 bits",
            ),
            (&[0x00, 0x00], "key"),
            (&[0x0e], "wire type"),
        ];
        for (bytes, expected) in cases {
            let err = Reader::new(bytes).next_field().unwrap_err();
            assert!(err.to_string().contains(expected), "{bytes:?}: {err}");
        }
    }
}
