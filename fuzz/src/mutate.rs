//! Byte-level mutations, shared by every target: truncations, bit flips,
//! interesting bytes, chunk deletion, duplication and insertion. Each picks
//! its positions from the seeded stream, so a run is reproducible from its
//! seed.

use rand::Rng;
use rand_chacha::ChaCha8Rng;

/// Values that sit on boundaries: zero, all ones, sign bits, small ints.
const INTERESTING: [u8; 8] = [0x00, 0xff, 0x7f, 0x80, 0x01, b'0', b'9', b'"'];

/// One to four random byte mutations of `input`, in place.
pub fn bytes(rng: &mut ChaCha8Rng, input: &mut Vec<u8>) {
    for _ in 0..rng.random_range(1..=4) {
        let len = input.len();
        match rng.random_range(0..7) {
            0 if len > 0 => input.truncate(rng.random_range(0..len)),
            1 if len > 0 => {
                let i = rng.random_range(0..len);
                input[i] ^= 1 << rng.random_range(0..8);
            }
            2 if len > 0 => {
                let i = rng.random_range(0..len);
                input[i] = INTERESTING[rng.random_range(0..INTERESTING.len())];
            }
            3 if len > 1 => {
                let start = rng.random_range(0..len);
                let end = rng.random_range(start..=len.min(start + 64));
                input.drain(start..end);
            }
            4 if len > 0 => {
                let start = rng.random_range(0..len);
                let end = rng.random_range(start..=len.min(start + 64));
                let chunk = input[start..end].to_vec();
                let at = rng.random_range(0..=len);
                input.splice(at..at, chunk);
            }
            5 => {
                let at = rng.random_range(0..=len);
                let n = rng.random_range(1..=16);
                let fill: Vec<u8> = (0..n).map(|_| rng.random()).collect();
                input.splice(at..at, fill);
            }
            _ if len >= 8 => {
                // A little-endian word (a length prefix, an f32) set to an
                // edge value.
                let i = rng.random_range(0..=len - 8);
                let v: u64 = match rng.random_range(0..4) {
                    0 => 0,
                    1 => u64::MAX,
                    2 => 1 << rng.random_range(0..64),
                    _ => rng.random(),
                };
                input[i..i + 8].copy_from_slice(&v.to_le_bytes());
            }
            _ => input.push(rng.random()),
        }
    }
}
