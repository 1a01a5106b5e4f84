//! The hashing of call paths read from a file, with a key drawn at random once per process,
//! so that a crafted file cannot make its paths collide: with an unkeyed hash (the Fx hash
//! this replaced) a part of 40,000 one-frame paths chosen to share a bucket took seconds to
//! read, and the time grew with the square of their number.
//!
//! The hash is NH, the first layer of UMAC (Black, Halevi, Krawczyk, Krovetz, Rogaway:
//! "UMAC: Fast and Secure Message Authentication", CRYPTO 1999): words taken in pairs, each
//! word plus a key word of its position (mod 2^64), the two sums multiplied into 128 bits,
//! and the products summed (mod 2^128). Two distinct paths of the same length collide with
//! a chance of at most 2^-64 over the key; the length is hashed too. The sum's halves are
//! folded into 64 bits and mixed (SplitMix64's finalizer, a bijection: paths whose sums
//! differ only in a few bits still get unrelated buckets), and the table uses the result as
//! it is ([`Prehashed`]). One multiplication per frame: as fast as the Fx hash was.
//!
//! Keys cover the longest path the reader builds (`MAX_STACK_DEPTH + 1` frames); a longer
//! path (interned by other code) reuses them from the start, so only such paths lose the
//! guarantee.
//!
//! Not async-signal-safe (the key is drawn and allocated once, behind a `OnceLock`).

use crate::Frame;
use crate::MAX_STACK_DEPTH;
use std::hash::{BuildHasher, BuildHasherDefault, Hasher, RandomState};
use std::sync::OnceLock;

/// Key words: a pair for the length, then a pair per frame.
const KEY_PAIRS: usize = MAX_STACK_DEPTH + 2;

/// The process's key: the standard library's randomly keyed SipHash of each position.
fn key() -> &'static [(u64, u64); KEY_PAIRS] {
    static KEY: OnceLock<Box<[(u64, u64); KEY_PAIRS]>> = OnceLock::new();
    KEY.get_or_init(|| {
        let random = RandomState::new();
        let mut key = Box::new([(0, 0); KEY_PAIRS]);
        for (i, pair) in key.iter_mut().enumerate() {
            *pair = (random.hash_one((i, 0)), random.hash_one((i, 1)));
        }
        key
    })
}

fn nh((a, b): (u64, u64), (ka, kb): (u64, u64)) -> u128 {
    u128::from(a.wrapping_add(ka)) * u128::from(b.wrapping_add(kb))
}

/// The keyed hash of a call path.
pub fn path_hash(path: &[Frame]) -> u64 {
    let key = key();
    let mut sum = nh((path.len() as u64, 0), key[0]);
    for (frame, &k) in path.iter().zip(key[1..].iter().cycle()) {
        sum = sum.wrapping_add(nh((frame.offset, u64::from(frame.module)), k));
    }
    let mut h = (sum >> 64) as u64 ^ sum as u64;
    h = (h ^ (h >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    h = (h ^ (h >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    h ^ (h >> 31)
}

/// Hashes a `u64` that is already a keyed hash to itself.
pub type Prehashed = BuildHasherDefault<Identity>;

#[derive(Default)]
pub struct Identity(u64);

impl Hasher for Identity {
    fn write(&mut self, _: &[u8]) {
        unreachable!("only u64 keys, which are hashes already, are hashed to themselves");
    }

    fn write_u64(&mut self, hash: u64) {
        self.0 = hash;
    }

    fn finish(&self) -> u64 {
        self.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    /// Paths built to collide under the Fx hash the reader used before, and paths that
    /// differ only in their high bits (whose products agree in their low bits), land in
    /// as many buckets of a 2^16-bucket table, and take as many control bytes (the top 7
    /// bits), as random values would.
    #[test]
    fn crafted_paths_spread_over_the_buckets() {
        const FX: u64 = 0xf135_7aea_2e62_a9c5;
        let mut inverse = FX; // Newton's iteration for FX^-1 mod 2^64
        for _ in 0..6 {
            inverse = inverse.wrapping_mul(2u64.wrapping_sub(FX.wrapping_mul(inverse)));
        }
        // The Fx state of a one-frame path of module 0, before its offset: ((1 K) + 0) K.
        let before = FX.wrapping_mul(FX);
        let fx_flood = (0..20_000u64).map(|i| {
            // States alike in their bits 31..63: one bucket and one control byte.
            let state = (0x12345 << 38) | (0x55 << 31) | i;
            state.wrapping_mul(inverse).wrapping_sub(before)
        });
        let high_bits = (0..20_000u64).map(|i| i << 40);
        for (name, offsets) in [
            ("fx-colliding", fx_flood.collect::<Vec<_>>()),
            ("high-bit", high_bits.collect()),
        ] {
            let hashes: Vec<u64> = offsets
                .iter()
                .map(|&offset| path_hash(&[Frame { module: 0, offset }]))
                .collect();
            let buckets: HashSet<u64> = hashes.iter().map(|h| h & 0xFFFF).collect();
            // 20,000 random values fill about 17,100 of 65,536 buckets.
            assert!(buckets.len() > 16_000, "{name}: {} buckets", buckets.len());
            let controls: HashSet<u64> = hashes.iter().map(|h| h >> 57).collect();
            assert_eq!(controls.len(), 128, "{name}: control bytes");
        }
    }

    #[test]
    fn equal_paths_hash_alike_and_lengths_count() {
        let f = |offset| Frame { module: 1, offset };
        assert_eq!(path_hash(&[f(1), f(2)]), path_hash(&[f(1), f(2)]));
        assert_ne!(path_hash(&[f(1), f(2)]), path_hash(&[f(2), f(1)]));
        assert_ne!(path_hash(&[]), path_hash(&[Frame::default()]));
        let long: Vec<Frame> = (0..2000).map(f).collect();
        assert_ne!(path_hash(&long[..1500]), path_hash(&long[..1501]));
    }
}
