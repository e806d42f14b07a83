//! Generated object names and UIDs.
//!
//! `metadata.generateName` asks the server to append a random suffix, and every created object
//! gets a UID. Kubernetes draws the suffix from an alphabet without vowels (no accidental words)
//! and without look-alike characters; we use the same alphabet and length so generated names
//! look and collide exactly as they do upstream.

use rand::Rng;

/// The characters Kubernetes uses for generated name suffixes.
pub const SUFFIX_ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
/// Length of a generated suffix.
pub const SUFFIX_LENGTH: usize = 5;
/// Longest `generateName` prefix kept, so that prefix plus suffix fits a 63-character label.
pub const MAX_GENERATE_NAME_PREFIX: usize = 63 - SUFFIX_LENGTH;

/// A random 5-character suffix, e.g. `x7k2q`.
pub fn generate_name_suffix() -> String {
    let mut rng = rand::rng();
    (0..SUFFIX_LENGTH)
        .map(|_| char::from(SUFFIX_ALPHABET[rng.random_range(0..SUFFIX_ALPHABET.len())]))
        .collect()
}

/// A name for an object created with `generateName: prefix`: the prefix (cut to
/// [`MAX_GENERATE_NAME_PREFIX`] bytes) followed by a random suffix.
pub fn generate_name(prefix: &str) -> String {
    let mut cut = prefix.len().min(MAX_GENERATE_NAME_PREFIX);
    while !prefix.is_char_boundary(cut) {
        cut -= 1;
    }
    format!("{}{}", &prefix[..cut], generate_name_suffix())
}

/// A new random (version 4) UID.
pub fn new_uid() -> String {
    uuid::Uuid::new_v4().to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn suffix_uses_kubernetes_alphabet() {
        for _ in 0..50 {
            let suffix = generate_name_suffix();
            assert_eq!(suffix.len(), SUFFIX_LENGTH);
            assert!(
                suffix.bytes().all(|b| SUFFIX_ALPHABET.contains(&b)),
                "{suffix}"
            );
        }
    }

    #[test]
    fn generated_names_fit_a_label() {
        assert!(generate_name("web-").starts_with("web-"));
        assert_eq!(generate_name("web-").len(), 9);
        let long = "a".repeat(100);
        assert_eq!(generate_name(&long).len(), 63);
        assert_eq!(generate_name(&"é".repeat(40)).len(), 58 + SUFFIX_LENGTH);
    }

    #[test]
    fn uids_are_v4() {
        let uid = new_uid();
        assert_eq!(uid.len(), 36);
        assert_eq!(uid.as_bytes()[14], b'4');
        assert_ne!(uid, new_uid());
    }
}
