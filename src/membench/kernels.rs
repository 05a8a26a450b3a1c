//! Memory kernels over a buffer of cache lines: sequential read, write and copy bandwidth, and
//! random-access latency as a chase through a random cyclic permutation of the lines (each
//! load's address depends on the previous load, so neither the CPU's prefetchers nor
//! out-of-order execution can hide the latency).

use std::hint::black_box;
use std::time::{Duration, Instant};

/// One 64-byte cache line; a `Vec<Line>` is line-aligned without any unsafe allocation.
#[derive(Clone, Copy)]
#[repr(C, align(64))]
pub struct Line(pub [u64; 8]);

/// Bytes in one [`Line`] (64).
pub const LINE_BYTES: usize = std::mem::size_of::<Line>();

/// A working set of `bytes` (rounded down to whole lines, at least two), every page written
/// so that no read is served by the kernel's shared zero page.
///
/// The buffer asks for transparent huge pages (`MADV_HUGEPAGE`, honoured when THP is
/// `always` or `madvise`), so a random access costs the memory's latency rather than a page
/// walk on every load, as with the fixed huge-page setups of latency tools.
pub fn buffer(bytes: u64) -> Vec<Line> {
    let lines = (bytes as usize / LINE_BYTES).max(2);
    let mut buf: Vec<Line> = Vec::with_capacity(lines);
    advise_huge_pages(buf.as_mut_ptr().cast(), lines * LINE_BYTES);
    buf.extend((0..lines).map(|i| Line([i as u64; 8])));
    buf
}

/// Best effort: a kernel without THP refuses, and the buffer simply stays in small pages.
fn advise_huge_pages(start: *mut u8, len: usize) {
    const PAGE: usize = 4096;
    let addr = start as usize;
    let first = addr.next_multiple_of(PAGE);
    let end = (addr + len) / PAGE * PAGE;
    if end > first {
        // SAFETY: the range lies inside an allocation this process owns; MADV_HUGEPAGE only
        // changes how the kernel backs it, never its contents or validity.
        unsafe { libc::madvise(first as *mut libc::c_void, end - first, libc::MADV_HUGEPAGE) };
    }
}

/// Reads every word until `runtime` has passed (at least one pass); returns bytes per second.
pub fn read(buf: &[Line], runtime: Duration) -> f64 {
    let bytes = buf.len() * LINE_BYTES;
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx2") {
        return timed_passes(bytes, runtime, || {
            // SAFETY: the CPU supports AVX2, checked just above.
            black_box(unsafe { read_pass_avx2(buf) });
        });
    }
    timed_passes(bytes, runtime, || {
        black_box(read_pass(buf));
    })
}

/// The same loop compiled for 32-byte loads: the baseline x86-64 target has only 16-byte
/// ones, which halves what the L1 cache can deliver and hides L1 behind L2.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
fn read_pass_avx2(buf: &[Line]) -> [u64; 8] {
    read_pass(buf)
}

#[inline(always)]
fn read_pass(buf: &[Line]) -> [u64; 8] {
    // Eight independent sums: no dependency chain limits the loads, and the loop vectorises.
    let mut acc = [0u64; 8];
    for line in black_box(buf) {
        for (a, w) in acc.iter_mut().zip(line.0) {
            *a = a.wrapping_add(w);
        }
    }
    acc
}

/// Writes every word until `runtime` has passed; returns bytes per second.
pub fn write(buf: &mut [Line], runtime: Duration) -> f64 {
    let bytes = buf.len() * LINE_BYTES;
    let mut pass = 0u64;
    #[cfg(target_arch = "x86_64")]
    let avx2 = std::arch::is_x86_feature_detected!("avx2");
    timed_passes(bytes, runtime, || {
        pass += 1;
        let value = black_box(pass);
        #[cfg(target_arch = "x86_64")]
        if avx2 {
            // SAFETY: the CPU supports AVX2, checked above.
            unsafe { write_pass_avx2(buf, value) };
            black_box(&mut *buf);
            return;
        }
        write_pass(buf, value);
        black_box(&mut *buf);
    })
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
fn write_pass_avx2(buf: &mut [Line], value: u64) {
    write_pass(buf, value)
}

#[inline(always)]
fn write_pass(buf: &mut [Line], value: u64) {
    for line in buf.iter_mut() {
        line.0 = [value; 8];
    }
}

/// Copies the first half of the buffer to the second (then back) until `runtime` has passed;
/// returns bytes copied per second (each byte is read once and written once).
pub fn copy(buf: &mut [Line], runtime: Duration) -> f64 {
    let half = buf.len() / 2;
    let mut forward = true;
    timed_passes(half * LINE_BYTES, runtime, || {
        let (a, b) = buf.split_at_mut(half);
        let b = &mut b[..half];
        if forward {
            b.copy_from_slice(a);
        } else {
            a.copy_from_slice(b);
        }
        forward = !forward;
        black_box(&mut *buf);
    })
}

/// Links every line into one random cycle (Sattolo's algorithm): word 0 of each line holds
/// the index of the next. Overwrites what the bandwidth kernels left.
pub fn link_random_cycle(buf: &mut [Line], seed: u64) {
    let n = buf.len();
    let mut order: Vec<usize> = (0..n).collect();
    let mut rng = fastrand::Rng::with_seed(seed);
    for i in (1..n).rev() {
        // j < i (not ≤ i): Sattolo's variant, which yields a single cycle through all lines.
        let j = rng.usize(..i);
        order.swap(i, j);
    }
    for i in 0..n {
        buf[order[i]].0[0] = order[(i + 1) % n] as u64;
    }
}

/// Follows the cycle until `runtime` has passed; returns nanoseconds per load.
pub fn chase(buf: &[Line], runtime: Duration) -> f64 {
    const STEPS: usize = 1 << 14;
    let start = Instant::now();
    let mut idx = 0usize;
    let mut steps = 0u64;
    loop {
        for _ in 0..STEPS {
            // In bounds by construction; a corrupt index would panic, not read wild memory.
            idx = buf[idx].0[0] as usize;
        }
        steps += STEPS as u64;
        if start.elapsed() >= runtime {
            break;
        }
    }
    black_box(idx);
    start.elapsed().as_secs_f64() * 1e9 / steps as f64
}

/// Runs `pass` until `runtime` has passed (at least once); returns `bytes` × passes per second.
/// Small working sets run several passes between clock reads, so reading the clock stays a
/// negligible share of the time even when one pass over L1 takes a few hundred nanoseconds.
fn timed_passes(bytes: usize, runtime: Duration, mut pass: impl FnMut()) -> f64 {
    const BYTES_PER_CHECK: usize = 1 << 20;
    let per_check = (BYTES_PER_CHECK / bytes.max(1)).max(1) as u64;
    let start = Instant::now();
    let mut passes = 0u64;
    loop {
        for _ in 0..per_check {
            pass();
        }
        passes += per_check;
        if start.elapsed() >= runtime {
            break;
        }
    }
    (bytes as u64 * passes) as f64 / start.elapsed().as_secs_f64()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cycle_visits_every_line_once() {
        let mut buf = buffer(64 * 1000);
        link_random_cycle(&mut buf, 42);
        let mut seen = vec![false; buf.len()];
        let mut idx = 0;
        for _ in 0..buf.len() {
            assert!(!seen[idx], "line {idx} visited twice");
            seen[idx] = true;
            idx = buf[idx].0[0] as usize;
        }
        assert_eq!(idx, 0, "the chase must return to the start after n steps");
        assert!(seen.iter().all(|&s| s));
    }

    #[test]
    fn kernels_touch_the_buffer_and_report_rates() {
        let mut buf = buffer(64 << 10);
        let short = Duration::from_millis(1);
        assert!(read(&buf, short) > 0.0);
        assert!(write(&mut buf, short) > 0.0);
        assert!(buf.iter().all(|l| l.0 == buf[0].0 && l.0[0] != 0));
        buf[0].0[3] = 7;
        assert!(copy(&mut buf, short) > 0.0);
        let half = buf.len() / 2;
        assert!(buf[0].0 == buf[half].0, "copy moved the data");
        link_random_cycle(&mut buf, 1);
        assert!(chase(&buf, short) > 0.0);
    }

    #[test]
    fn buffers_are_line_aligned_and_at_least_two_lines() {
        let buf = buffer(1);
        assert_eq!(buf.len(), 2);
        assert_eq!(buf.as_ptr() as usize % 64, 0);
    }
}
