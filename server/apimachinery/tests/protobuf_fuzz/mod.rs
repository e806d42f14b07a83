//! The mutation loop the protobuf test suites share: truncations, random edits and noise fed
//! to `decode`, which must answer each with a value or an error, never a panic.

use kcp_apimachinery::protobuf;

/// A small deterministic generator (xorshift64*), so failures reproduce.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

/// Decodes every truncation of each body, 2,000 randomly edited copies of it, and noise
/// behind the magic; `seed` picks the edits.
pub fn decode_never_panics(bodies: &[Vec<u8>], seed: u64) {
    let mut rng = Rng(seed);
    let mut decoded_ok = 0usize;
    for body in bodies {
        // Every truncation.
        for len in 0..body.len() {
            let _ = protobuf::decode(&body[..len]);
        }
        // Random byte overwrites, insertions and deletions past the magic.
        for _ in 0..2_000 {
            let mut mutated = body.clone();
            for _ in 0..1 + rng.below(4) {
                let at = 4 + rng.below(mutated.len() - 4);
                match rng.below(3) {
                    0 => mutated[at] = rng.next() as u8,
                    1 => mutated.insert(at, rng.next() as u8),
                    _ => {
                        mutated.remove(at);
                    }
                }
                if mutated.len() <= 4 {
                    break;
                }
            }
            if protobuf::decode(&mutated).is_ok() {
                decoded_ok += 1;
            }
        }
    }
    // Pure noise behind the magic.
    for _ in 0..5_000 {
        let len = rng.below(64);
        let mut noise = b"k8s\0".to_vec();
        noise.extend((0..len).map(|_| rng.next() as u8));
        let _ = protobuf::decode(&noise);
        let _ = protobuf::decode_watch_event(&noise);
    }
    // Many single-byte changes land in string contents and still decode: the loop exercised
    // both the success and the error paths.
    assert!(decoded_ok > 0);
}
