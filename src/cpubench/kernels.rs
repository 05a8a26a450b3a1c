//! The CPU kernels. Each takes its inputs through `black_box` and hands its result to
//! `black_box`, so the compiler can neither precompute the work nor drop it as unused (the
//! flaw of benchmarks whose loops an optimiser deletes). Each "op" is a fixed, documented
//! amount of work.

use crate::choice::Choice;
use std::hash::{DefaultHasher, Hasher};
use std::hint::black_box;

/// Upper bound of the prime count, as sysbench cpu's default `--cpu-max-prime=10000`.
pub const MAX_PRIME: u64 = 10_000;

/// Bytes hashed per op of the hash kernel.
pub const HASH_BLOCK: usize = 4096;

/// A CPU benchmark kernel.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KernelName {
    /// Prime counting by trial division up to 10000 (one op = one sysbench cpu event).
    Primes,
    /// 64-bit integer multiply, add, xor and rotate.
    Integer,
    /// Double-precision multiply-add and division.
    Float,
    /// SipHash over 4 KiB blocks.
    Hash,
}

impl Choice for KernelName {
    const ALL: &'static [Self] = &[
        KernelName::Primes,
        KernelName::Integer,
        KernelName::Float,
        KernelName::Hash,
    ];

    fn word(self) -> &'static str {
        self.id()
    }

    fn help(self) -> Option<&'static str> {
        Some(match self {
            KernelName::Primes => {
                "Prime counting by trial division up to 10000 (one op = one sysbench cpu event)"
            }
            KernelName::Integer => "64-bit integer multiply, add, xor and rotate",
            KernelName::Float => "Double-precision multiply-add and division",
            KernelName::Hash => "SipHash over 4 KiB blocks",
        })
    }
}

impl KernelName {
    /// Every kernel, in the order a default run measures them.
    pub fn all() -> [KernelName; 4] {
        [
            KernelName::Primes,
            KernelName::Integer,
            KernelName::Float,
            KernelName::Hash,
        ]
    }

    /// The kernel's name in `--kernel`, JSON and stored runs; stable across versions.
    pub fn id(self) -> &'static str {
        match self {
            KernelName::Primes => "primes",
            KernelName::Integer => "integer",
            KernelName::Float => "float",
            KernelName::Hash => "hash",
        }
    }

    /// What one op is, for reports.
    pub fn op(self) -> &'static str {
        match self {
            KernelName::Primes => {
                "count the primes up to 10000 by trial division (one sysbench cpu event)"
            }
            KernelName::Integer => "one round of 4 lanes of 64-bit multiply, add, xor, rotate",
            KernelName::Float => "one round of 4 lanes of the logistic map (f64 mul, sub, mul)",
            KernelName::Hash => "SipHash-1-3 of a 4 KiB block",
        }
    }

    /// Ops per call of [`Kernel::batch`]: enough work (tens of µs to about a millisecond)
    /// that reading the clock between batches costs nothing measurable.
    pub fn batch_ops(self) -> u64 {
        match self {
            KernelName::Primes => 1,
            KernelName::Integer | KernelName::Float => 1 << 15,
            KernelName::Hash => 16,
        }
    }
}

/// A kernel with its per-thread state (the hash kernel's block).
pub struct Kernel {
    name: KernelName,
    block: Vec<u8>,
    counter: u64,
}

impl Kernel {
    /// A kernel ready to run on this thread (the hash kernel's block filled from a fixed seed).
    pub fn new(name: KernelName) -> Kernel {
        let block = if name == KernelName::Hash {
            let mut rng = fastrand::Rng::with_seed(0x7ac0);
            (0..HASH_BLOCK).map(|_| rng.u8(..)).collect()
        } else {
            Vec::new()
        };
        Kernel {
            name,
            block,
            counter: 0,
        }
    }

    /// Runs one batch ([`KernelName::batch_ops`] ops) and returns a value derived from all
    /// of it.
    pub fn batch(&mut self) -> u64 {
        self.counter = self.counter.wrapping_add(1);
        let n = self.name.batch_ops();
        match self.name {
            KernelName::Primes => count_primes(black_box(MAX_PRIME)),
            KernelName::Integer => integer_rounds(black_box(self.counter), n),
            KernelName::Float => float_rounds(black_box(self.counter), n),
            KernelName::Hash => {
                let mut acc = 0u64;
                for i in 0..n {
                    let mut h = DefaultHasher::new();
                    h.write_u64(self.counter.wrapping_mul(n).wrapping_add(i));
                    h.write(black_box(&self.block));
                    acc ^= h.finish();
                }
                acc
            }
        }
    }
}

/// Primes in 3..=max by trial division up to the square root, with 64-bit division as
/// sysbench does (its events/s is then directly comparable).
pub fn count_primes(max: u64) -> u64 {
    let mut count = 0;
    for c in 3..=max {
        let limit = (c as f64).sqrt() as u64;
        let mut l = 2;
        while l <= limit {
            if c % l == 0 {
                break;
            }
            l += 1;
        }
        if l > limit {
            count += 1;
        }
    }
    black_box(count)
}

/// Four independent lanes of a nonlinear integer mix (no closed form, so no shortcut).
fn integer_rounds(seed: u64, rounds: u64) -> u64 {
    const K1: u64 = 0x9e37_79b9_7f4a_7c15;
    const K2: u64 = 0xbf58_476d_1ce4_e5b9;
    let (mut a, mut b, mut c, mut d) = (seed, seed ^ K1, seed.rotate_left(13), !seed);
    for _ in 0..rounds {
        a = a.wrapping_mul(K1).wrapping_add(b) ^ (a >> 29);
        b = b.rotate_left(17) ^ c;
        c = c.wrapping_add(d.wrapping_mul(K2));
        d ^= a >> 7;
    }
    black_box(a ^ b ^ c ^ d)
}

/// Four lanes of the logistic map at r = 3.99, chaotic and bounded in (0, 1).
fn float_rounds(seed: u64, rounds: u64) -> u64 {
    let r = black_box(3.99f64);
    let start = 0.1 + (seed % 1000) as f64 * 1e-4;
    let mut x = [start, start + 0.1, start + 0.2, start + 0.3];
    for _ in 0..rounds {
        for v in &mut x {
            *v = r * *v * (1.0 - *v);
        }
    }
    black_box(x.iter().map(|v| v.to_bits()).fold(0, |a, b| a ^ b))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prime_count_is_right() {
        // π(10000) = 1229; the kernel starts at 3, so 2 is not counted.
        assert_eq!(count_primes(10_000), 1228);
        assert_eq!(count_primes(10), 3);
    }

    #[test]
    fn kernels_depend_on_their_input() {
        for name in KernelName::all() {
            let mut k = Kernel::new(name);
            let (first, second) = (k.batch(), k.batch());
            if name != KernelName::Primes {
                assert_ne!(first, second, "{name:?} ignores its input");
            }
        }
        assert_ne!(integer_rounds(1, 8), integer_rounds(2, 8));
        assert_ne!(float_rounds(1, 8), float_rounds(2, 8));
    }
}
