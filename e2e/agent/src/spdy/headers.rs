//! SPDY/3 header blocks: `count (32) | (name length (32) | name | value length (32) | value)*`,
//! compressed with zlib primed with the dictionary of the SPDY/3 draft (section 2.6.10.1), one
//! compression context per direction for the whole connection, each block ending with a sync
//! flush. Names are lower case; a value may hold several values separated by NUL.

use flate2::{Compress, Compression, Decompress, FlushCompress, FlushDecompress, Status};

/// Name/value pairs of a header block, in order.
pub type Headers = Vec<(String, String)>;

/// The largest decompressed header block accepted.
const MAX_BLOCK: usize = 1 << 20;

#[derive(Debug, thiserror::Error)]
pub enum HeaderError {
    #[error("compressing: {0}")]
    Compress(#[from] flate2::CompressError),
    #[error("decompressing: {0}")]
    Decompress(#[from] flate2::DecompressError),
    #[error("malformed header block")]
    Malformed,
    #[error("header block larger than {MAX_BLOCK} bytes")]
    TooLarge,
}

/// The header names of the dictionary, each stored as a 32-bit length and the name.
const DICTIONARY_WORDS: [&str; 65] = [
    "options",
    "head",
    "post",
    "put",
    "delete",
    "trace",
    "accept",
    "accept-charset",
    "accept-encoding",
    "accept-language",
    "accept-ranges",
    "age",
    "allow",
    "authorization",
    "cache-control",
    "connection",
    "content-base",
    "content-encoding",
    "content-language",
    "content-length",
    "content-location",
    "content-md5",
    "content-range",
    "content-type",
    "date",
    "etag",
    "expect",
    "expires",
    "from",
    "host",
    "if-match",
    "if-modified-since",
    "if-none-match",
    "if-range",
    "if-unmodified-since",
    "last-modified",
    "location",
    "max-forwards",
    "pragma",
    "proxy-authenticate",
    "proxy-authorization",
    "range",
    "referer",
    "retry-after",
    "server",
    "te",
    "trailer",
    "transfer-encoding",
    "upgrade",
    "user-agent",
    "vary",
    "via",
    "warning",
    "www-authenticate",
    "method",
    "get",
    "status",
    "200 OK",
    "version",
    "HTTP/1.1",
    "url",
    "public",
    "set-cookie",
    "keep-alive",
    "origin",
];

/// The text that ends the dictionary, stored as it is.
const DICTIONARY_TEXT: &str = concat!(
    "100101201202205206300302303304305306307402405406407408409410411412413414415416417502504505",
    "203 Non-Authoritative Information204 No Content301 Moved Permanently400 Bad Request",
    "401 Unauthorized403 Forbidden404 Not Found500 Internal Server Error501 Not Implemented",
    "503 Service UnavailableJan Feb Mar Apr May Jun Jul Aug Sept Oct Nov Dec 00:00:00 ",
    "Mon, Tue, Wed, Thu, Fri, Sat, Sun, GMTchunked,text/html,image/png,image/jpg,image/gif,",
    "application/xml,application/xhtml+xml,text/plain,text/javascript,publicprivatemax-age=",
    "gzip,deflate,sdchcharset=utf-8charset=iso-8859-1,utf-,*,enq=0.",
);

/// The SPDY/3 zlib dictionary (1423 bytes).
pub fn dictionary() -> Vec<u8> {
    let mut out = Vec::with_capacity(1423);
    for word in DICTIONARY_WORDS {
        out.extend_from_slice(&(word.len() as u32).to_be_bytes());
        out.extend_from_slice(word.as_bytes());
    }
    out.extend_from_slice(DICTIONARY_TEXT.as_bytes());
    out
}

/// The uncompressed form of a header block.
fn serialize(headers: &Headers) -> Vec<u8> {
    let mut out = (headers.len() as u32).to_be_bytes().to_vec();
    for (name, value) in headers {
        for text in [name, value] {
            out.extend_from_slice(&(text.len() as u32).to_be_bytes());
            out.extend_from_slice(text.as_bytes());
        }
    }
    out
}

fn parse(block: &[u8]) -> Result<Headers, HeaderError> {
    let mut at = 0;
    let mut take = |length: usize| -> Result<&[u8], HeaderError> {
        let piece = block.get(at..at + length).ok_or(HeaderError::Malformed)?;
        at += length;
        Ok(piece)
    };
    let number =
        |bytes: &[u8]| u32::from_be_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]) as usize;
    let count = number(take(4)?);
    let mut headers = Vec::with_capacity(count.min(64));
    for _ in 0..count {
        let name_length = number(take(4)?);
        let name = String::from_utf8_lossy(take(name_length)?).to_lowercase();
        let value_length = number(take(4)?);
        let value = String::from_utf8_lossy(take(value_length)?).into_owned();
        headers.push((name, value));
    }
    Ok(headers)
}

/// Compresses the header blocks of one direction.
pub struct Compressor(Compress);

impl Compressor {
    pub fn new() -> Result<Compressor, HeaderError> {
        let mut compress = Compress::new(Compression::default(), true);
        compress.set_dictionary(&dictionary())?;
        Ok(Compressor(compress))
    }

    pub fn encode(&mut self, headers: &Headers) -> Result<Vec<u8>, HeaderError> {
        let input = serialize(headers);
        let mut out = Vec::with_capacity(input.len() + 64);
        let mut consumed = 0;
        loop {
            out.reserve(256);
            let before = self.0.total_in();
            self.0
                .compress_vec(&input[consumed..], &mut out, FlushCompress::Sync)?;
            consumed += (self.0.total_in() - before) as usize;
            // Done once everything is in and the flush left spare room in the output.
            if consumed == input.len() && out.len() < out.capacity() {
                return Ok(out);
            }
        }
    }
}

/// Decompresses the header blocks of one direction.
pub struct Decompressor(Decompress);

impl Default for Decompressor {
    fn default() -> Self {
        Decompressor::new()
    }
}

impl Decompressor {
    pub fn new() -> Decompressor {
        Decompressor(Decompress::new(true))
    }

    pub fn decode(&mut self, compressed: &[u8]) -> Result<Headers, HeaderError> {
        let mut out = Vec::with_capacity(compressed.len() * 4 + 64);
        let mut consumed = 0;
        loop {
            out.reserve(1024);
            let before = self.0.total_in();
            match self
                .0
                .decompress_vec(&compressed[consumed..], &mut out, FlushDecompress::Sync)
            {
                Ok(Status::Ok | Status::BufError | Status::StreamEnd) => {}
                Err(error) if error.needs_dictionary().is_some() => {
                    self.0.set_dictionary(&dictionary())?;
                }
                Err(error) => return Err(error.into()),
            }
            consumed += (self.0.total_in() - before) as usize;
            if out.len() > MAX_BLOCK {
                return Err(HeaderError::TooLarge);
            }
            if consumed == compressed.len() && out.len() < out.capacity() {
                return parse(&out);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_dictionary_is_the_drafts() {
        let dictionary = dictionary();
        assert_eq!(dictionary.len(), 1423);
        assert_eq!(&dictionary[..11], b"\0\0\0\x07options");
        assert!(dictionary.ends_with(b",*,enq=0."));
    }

    #[test]
    fn a_hand_made_block_parses() {
        let block = [
            0, 0, 0, 1, // one pair
            0, 0, 0, 10, b's', b't', b'r', b'e', b'a', b'm', b'T', b'y', b'p', b'e', //
            0, 0, 0, 5, b'e', b'r', b'r', b'o', b'r',
        ];
        assert_eq!(
            parse(&block).unwrap(),
            vec![("streamtype".to_owned(), "error".to_owned())]
        );
        assert!(parse(&block[..12]).is_err());
        assert_eq!(serialize(&parse(&block).unwrap())[..4], [0, 0, 0, 1]);
    }

    #[test]
    fn blocks_round_trip_through_one_context() {
        let mut compressor = Compressor::new().unwrap();
        let mut decompressor = Decompressor::new();
        for round in 0..3 {
            let headers: Headers = vec![
                ("streamtype".into(), "data".into()),
                ("port".into(), format!("80{round}")),
                ("requestid".into(), round.to_string()),
            ];
            let compressed = compressor.encode(&headers).unwrap();
            assert_eq!(decompressor.decode(&compressed).unwrap(), headers);
        }
        let empty = compressor.encode(&Vec::new()).unwrap();
        assert!(decompressor.decode(&empty).unwrap().is_empty());
    }

    #[test]
    fn the_stream_names_the_dictionary() {
        // zlib's header carries the dictionary's Adler-32 (FDICT), which peers check.
        let compressed = Compressor::new().unwrap().encode(&Vec::new()).unwrap();
        assert_eq!(compressed[1] & 0x20, 0x20, "FDICT set");
        let id = u32::from_be_bytes([compressed[2], compressed[3], compressed[4], compressed[5]]);
        let (mut a, mut b) = (1u32, 0u32);
        for byte in dictionary() {
            a = (a + u32::from(byte)) % 65521;
            b = (b + a) % 65521;
        }
        assert_eq!(id, (b << 16) | a);
    }
}
