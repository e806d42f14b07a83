//! The names kcp gives logical clusters.
//!
//! A new workspace's logical cluster gets a random name that carries no information about its
//! path (workspaces can be renamed in the tree only by moving names, never data), and a user's
//! home workspace gets a name derived from the user name so that every shard and the front proxy
//! find it without a lookup. Both are upstream's base36 renderings of SHA-224 digests
//! (`kcpcrypto.Base36Sha224`): the digest read as a big-endian number in lower-case base36, with
//! one `0` prepended per leading zero byte.

use rand::RngCore;
use sha2::{Digest, Sha224};

/// Length of a generated logical cluster name: 36^16 ≈ 2^82 names.
pub const CLUSTER_NAME_LENGTH: usize = 16;
/// Number of random bytes a cluster name is hashed from.
pub const CLUSTER_NAME_ENTROPY_BYTES: usize = 32;
/// Digest bytes a home cluster name is built from.
const HOME_DIGEST_BYTES: usize = 8;
/// Length of the deprecated shard hash annotation `internal.tenancy.kcp.io/shard`.
const SHARD_HASH_LENGTH: usize = 8;

const BASE36_DIGITS: &[u8] = b"0123456789abcdefghijklmnopqrstuvwxyz";
const BASE62_DIGITS: &[u8] = b"0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ";

/// `bytes` as a big-endian number written with `digits` (their count is the base), without
/// leading zeros (Go's `big.Int.Text`).
fn big_endian_text(bytes: &[u8], digits: &[u8]) -> String {
    let base = u32::try_from(digits.len()).unwrap_or(u32::MAX);
    let mut number: Vec<u8> = bytes.iter().copied().skip_while(|b| *b == 0).collect();
    let mut out = Vec::new();
    while !number.is_empty() {
        let mut remainder = 0u32;
        let mut quotient = Vec::with_capacity(number.len());
        for byte in &number {
            let accumulator = (remainder << 8) | u32::from(*byte);
            let digit = accumulator / base;
            remainder = accumulator % base;
            if !(quotient.is_empty() && digit == 0) {
                quotient.push(digit as u8);
            }
        }
        out.push(digits[remainder as usize]);
        number = quotient;
    }
    out.iter().rev().map(|d| char::from(*d)).collect()
}

/// `bytes` as a big-endian number in base36, one `0` per leading zero byte (`Encoder.BytesPad`).
pub fn base36_pad(bytes: &[u8]) -> String {
    let zeros = bytes.iter().take_while(|b| **b == 0).count();
    "0".repeat(zeros) + &big_endian_text(bytes, BASE36_DIGITS)
}

/// `Base36Sha224.BytesPad`: the padded base36 rendering of SHA-224 of `input`.
pub fn base36_sha224(input: &[u8]) -> String {
    base36_pad(&Sha224::digest(input))
}

/// `Base62Sha224.Bytes`: SHA-224 of `input` in base62 (`0-9a-zA-Z`), leading zero bytes dropped.
pub fn base62_sha224(input: &[u8]) -> String {
    big_endian_text(&Sha224::digest(input), BASE62_DIGITS)
}

/// Longest export-name prefix of a generated APIBinding name: a DNS-1123 subdomain (253) less
/// the dash and the five hash characters.
const API_BINDING_PREFIX_MAX: usize = 253 - 1 - 5;

/// The name of the APIBinding the `system:apibindings` initializer creates in `cluster` for the
/// export `path`:`export` (upstream's `GenerateAPIBindingName`): the export's name, a dash, and
/// five lower-cased characters of the base62 SHA-224 of `<cluster>|<path>|<export>`.
pub fn api_binding_name(cluster: &str, path: &str, export: &str) -> String {
    let prefix: String = export.chars().take(API_BINDING_PREFIX_MAX).collect();
    let hash: String = base62_sha224(format!("{cluster}|{path}|{export}").as_bytes())
        .chars()
        .take(5)
        .collect();
    format!("{prefix}-{}", hash.to_lowercase())
}

/// The logical cluster name for a workspace, from 32 random bytes (deterministic, for tests and
/// for callers with their own randomness).
pub fn cluster_name_from(random: &[u8; CLUSTER_NAME_ENTROPY_BYTES]) -> String {
    let mut name = base36_sha224(random);
    name.truncate(CLUSTER_NAME_LENGTH);
    name
}

/// A fresh random logical cluster name, as the workspace scheduler picks one.
pub fn random_cluster_name() -> String {
    let mut random = [0u8; CLUSTER_NAME_ENTROPY_BYTES];
    rand::rng().fill_bytes(&mut random);
    cluster_name_from(&random)
}

/// The logical cluster name of `username`'s home workspace (`HomeClusterName`): the padded base36
/// of the first 8 bytes of SHA-224 of the user name.
pub fn home_cluster_name(username: &str) -> String {
    let digest = Sha224::digest(username.as_bytes());
    base36_pad(&digest[..HOME_DIGEST_BYTES])
}

/// The value of the deprecated `internal.tenancy.kcp.io/shard` annotation for a shard name.
pub fn shard_hash(shard: &str) -> String {
    let mut hash = base36_sha224(shard.as_bytes());
    hash.truncate(SHARD_HASH_LENGTH);
    hash
}

/// Whether `name` is a logical cluster name (`logicalcluster.Name.IsValid`): a `system:` name, or
/// `^[a-z0-9][a-z0-9-]{0,61}[a-z0-9]$` (at least two characters).
pub fn is_valid_cluster_name(name: &str) -> bool {
    if name.starts_with(crate::paths::SYSTEM_PREFIX) {
        return true;
    }
    let bytes = name.as_bytes();
    let alnum = |b: &u8| b.is_ascii_lowercase() || b.is_ascii_digit();
    (2..=63).contains(&bytes.len())
        && bytes.first().is_some_and(alnum)
        && bytes.last().is_some_and(alnum)
        && bytes.iter().all(|b| alnum(b) || *b == b'-')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base36_sha224_matches_upstream_vectors() {
        // kcp-dev/apimachinery pkg/util/crypto hasher_test.go (BytesPad)
        assert_eq!(
            base36_sha224(b""),
            "2n6a5vwpk9ckyxi5x87i7768t4bpqmp64qi0556ih35b"
        );
        assert_eq!(
            base36_sha224(b"hello"),
            "2yfg0ibsewngbzapgs5fesiord507vsncfiw4jd5c2oj"
        );
        assert_eq!(
            base36_sha224(b"input50"),
            "04xtfzmllsov5334t8xolbc31qfgtl44oza013n6uzk"
        );
    }

    #[test]
    fn base62_sha224_matches_upstream_vectors() {
        // kcp-dev/apimachinery pkg/util/crypto hasher_test.go (Bytes)
        assert_eq!(base62_sha224(b""), "aAkHCkvjglfF66mdhRcVKb0I3FT1lepYlWZNwj");
        assert_eq!(
            base62_sha224(b"hello"),
            "bPWFAjMdldrWYheSsV0t7VkdTNtgGHBplr6qLF"
        );
        assert_eq!(
            base62_sha224(b"input50"),
            "WF7EK9IErgKvTHdcQRzkjJDEJDBOwfQSmzEQ"
        );
    }

    #[test]
    fn api_binding_names_are_the_export_and_five_hash_characters() {
        let name = api_binding_name("2abc", "root:provider", "widgets");
        let (prefix, hash) = name.rsplit_once('-').unwrap();
        assert_eq!(prefix, "widgets");
        assert_eq!(hash.len(), 5);
        assert_eq!(hash, hash.to_lowercase());
        assert_eq!(name, api_binding_name("2abc", "root:provider", "widgets"));
        assert_ne!(name, api_binding_name("2abd", "root:provider", "widgets"));
        let long = "x".repeat(300);
        assert_eq!(api_binding_name("c", "root", &long).len(), 253);
    }

    #[test]
    fn base36_pads_zero_bytes() {
        assert_eq!(base36_pad(&[]), "");
        assert_eq!(base36_pad(&[0, 0]), "00");
        assert_eq!(base36_pad(&[0, 36]), "010");
        assert_eq!(base36_pad(&[1, 0]), "74");
    }

    #[test]
    fn cluster_names_are_sixteen_base36_characters() {
        assert_eq!(cluster_name_from(&[0; 32]), "29i1re38vi3hq4z5");
        let mut sequence = [0u8; 32];
        for (i, byte) in sequence.iter_mut().enumerate() {
            *byte = i as u8;
        }
        assert_eq!(cluster_name_from(&sequence), "1fiaz2nock35eggi");
        let random = random_cluster_name();
        assert_eq!(random.len(), CLUSTER_NAME_LENGTH);
        assert!(is_valid_cluster_name(&random));
        assert_ne!(random, random_cluster_name());
    }

    #[test]
    fn home_cluster_names_hash_the_user_name() {
        assert_eq!(home_cluster_name("alice"), "v1u4alow0iv9");
        assert_eq!(home_cluster_name("kcp-admin"), "kvdk2spgmbix");
        assert_eq!(home_cluster_name("user172"), "0f9mt7goyif7");
    }

    #[test]
    fn shard_hash_is_eight_characters() {
        assert_eq!(shard_hash("root"), "1pfxsevk");
    }

    #[test]
    fn cluster_name_grammar() {
        assert!(is_valid_cluster_name("root"));
        assert!(is_valid_cluster_name("system:admin"));
        assert!(!is_valid_cluster_name("a"));
        assert!(!is_valid_cluster_name("root:org"));
        assert!(!is_valid_cluster_name("Root"));
    }
}
