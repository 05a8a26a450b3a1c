//! Fixed-size integers at an offset of a kernel buffer (fanotify events, proc connector
//! messages, btrfs search results), `None` past the end instead of a panic: these buffers come
//! from the kernel, but their lengths are only as good as the parser that walks them.

macro_rules! reader {
    ($(#[$doc:meta])* $name:ident, $ty:ty, $from:ident) => {
        $(#[$doc])*
        pub fn $name(b: &[u8], at: usize) -> Option<$ty> {
            const N: usize = std::mem::size_of::<$ty>();
            let end = at.checked_add(N)?;
            Some(<$ty>::$from(b.get(at..end)?.try_into().ok()?))
        }
    };
}

reader!(/// Host byte order (kernel ABI structs).
    ne_u16, u16, from_ne_bytes);
reader!(/// Host byte order.
    ne_u32, u32, from_ne_bytes);
reader!(/// Host byte order.
    ne_i32, i32, from_ne_bytes);
reader!(/// Host byte order.
    ne_u64, u64, from_ne_bytes);
reader!(/// Little-endian (on-disk structs).
    le_u16, u16, from_le_bytes);
reader!(/// Little-endian.
    le_u64, u64, from_le_bytes);

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn reads_inside_and_refuses_past_the_end() {
        let b = [1u8, 0, 0, 0, 2, 0, 0, 0];
        assert_eq!(le_u16(&b, 0), Some(1));
        assert_eq!(le_u64(&b, 0), Some(0x2_0000_0001));
        assert_eq!(ne_u32(&b, 5), None);
        assert_eq!(ne_u64(&b, usize::MAX), None);
    }

    proptest! {
        #[test]
        fn never_panics(b in proptest::collection::vec(any::<u8>(), 0..32), at in any::<usize>()) {
            let _ = (ne_u16(&b, at), ne_u32(&b, at), ne_i32(&b, at), ne_u64(&b, at));
            let _ = (le_u16(&b, at), le_u64(&b, at));
        }
    }
}
