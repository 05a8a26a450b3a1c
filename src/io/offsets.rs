//! Where the next I/O goes.
//!
//! Random tests visit every block of the region exactly once per pass, in an order that changes
//! each pass, like fio's default random map, but without a bitmap: the order is a keyed
//! permutation (a 4-round Feistel network over the next even power of two, walking cycles until
//! the value falls inside the region). This keeps memory constant for any region size and makes
//! a run repeatable from `--randseed`.

/// Block indices (not bytes) in test order.
#[derive(Clone, Debug)]
pub enum Offsets {
    /// Block 0, 1, 2… to the end of the region, then again from 0.
    Sequential { blocks: u64, next: u64 },
    /// Every block once per pass, in a keyed random order.
    Random(Permutation),
}

impl Offsets {
    /// Blocks in order over a region of `blocks` blocks.
    pub fn sequential(blocks: u64) -> Self {
        Offsets::Sequential { blocks, next: 0 }
    }

    /// Blocks in a random order over a region of `blocks` blocks, repeatable from `seed`.
    pub fn random(blocks: u64, seed: u64) -> Self {
        Offsets::Random(Permutation::new(blocks, seed))
    }

    /// The next block index; wraps to a new pass at the end of the region.
    pub fn next_block(&mut self) -> u64 {
        match self {
            Offsets::Sequential { blocks, next } => {
                let block = *next;
                *next = if block + 1 >= *blocks { 0 } else { block + 1 };
                block
            }
            Offsets::Random(p) => p.next_block(),
        }
    }
}

/// A bijection on `0..blocks`, re-keyed on every pass.
#[derive(Clone, Debug)]
pub struct Permutation {
    blocks: u64,
    half_bits: u32,
    seed: u64,
    pass: u64,
    index: u64,
    keys: [u64; 4],
}

impl Permutation {
    /// A permutation of `0..blocks` (at least one block) keyed by `seed`.
    pub fn new(blocks: u64, seed: u64) -> Self {
        // Smallest even bit count whose domain holds every block (at least 2 bits so both halves
        // are non-empty). The domain is then less than 4× the region, so the cycle walk is short.
        let needed = 64 - blocks.saturating_sub(1).leading_zeros();
        let bits = needed.max(2).next_multiple_of(2);
        let mut p = Permutation {
            blocks: blocks.max(1),
            half_bits: bits / 2,
            seed,
            pass: 0,
            index: 0,
            keys: [0; 4],
        };
        p.rekey();
        p
    }

    fn rekey(&mut self) {
        let mut state = self.seed ^ self.pass.wrapping_mul(0x9E37_79B9_7F4A_7C15);
        for key in &mut self.keys {
            state = splitmix64(state);
            *key = state;
        }
    }

    /// The next block index; a new pass, with new keys, starts after every block was visited.
    pub fn next_block(&mut self) -> u64 {
        if self.index == self.blocks {
            self.index = 0;
            self.pass += 1;
            self.rekey();
        }
        let mut x = self.index;
        self.index += 1;
        // Cycle walking: a permutation of the larger domain, applied until it lands in range,
        // is a permutation of the range.
        loop {
            x = self.permute(x);
            if x < self.blocks {
                return x;
            }
        }
    }

    fn permute(&self, x: u64) -> u64 {
        let mask = (1u64 << self.half_bits) - 1;
        let (mut left, mut right) = (x >> self.half_bits, x & mask);
        for key in self.keys {
            let mixed = splitmix64(right ^ key) & mask;
            (left, right) = (right, left ^ mixed);
        }
        (left << self.half_bits) | right
    }
}

fn splitmix64(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn pass(offsets: &mut Offsets, blocks: u64) -> Vec<u64> {
        (0..blocks).map(|_| offsets.next_block()).collect()
    }

    #[test]
    fn sequential_wraps() {
        let mut o = Offsets::sequential(3);
        assert_eq!(pass(&mut o, 7), vec![0, 1, 2, 0, 1, 2, 0]);
    }

    #[test]
    fn random_is_not_sequential_and_changes_per_pass() {
        let mut o = Offsets::random(1000, 7);
        let first = pass(&mut o, 1000);
        let second = pass(&mut o, 1000);
        assert_ne!(first, (0..1000).collect::<Vec<_>>());
        assert_ne!(first, second);
    }

    #[test]
    fn same_seed_same_order() {
        let a = pass(&mut Offsets::random(5000, 42), 5000);
        let b = pass(&mut Offsets::random(5000, 42), 5000);
        let c = pass(&mut Offsets::random(5000, 43), 5000);
        assert_eq!(a, b);
        assert_ne!(a, c);
    }

    #[test]
    fn one_block_region() {
        let mut o = Offsets::random(1, 1);
        assert_eq!(pass(&mut o, 3), vec![0, 0, 0]);
    }

    #[test]
    fn huge_region_stays_in_range() {
        let blocks = (1u64 << 40) + 12345;
        let mut o = Offsets::random(blocks, 3);
        for _ in 0..10_000 {
            assert!(o.next_block() < blocks);
        }
    }

    proptest! {
        #[test]
        fn every_block_once_per_pass(blocks in 1u64..3000, seed: u64) {
            let mut o = Offsets::random(blocks, seed);
            for _ in 0..2 {
                let mut seen = pass(&mut o, blocks);
                seen.sort_unstable();
                prop_assert_eq!(seen, (0..blocks).collect::<Vec<_>>());
            }
        }
    }
}
