//! Byte comparison eight bytes a step. Every `==` between strings and every ordered map of
//! strings ends in C's `memcmp`, which wasi-libc compares a byte at a time; in the wasm build
//! [`compare`] is the module's `memcmp` instead (the linker takes a symbol the program defines
//! before it looks in libc). Rust exports every `#[no_mangle]` function of a `cdylib`, so the
//! policy's module also exports `memcmp`; no host calls it. It is never inlined: a call with a
//! constant length is one the compiler expands into loads and compares itself.

/// `memcmp` of the first `min(a.len(), b.len())` bytes of `a` and `b`: negative, zero or
/// positive as `a` orders before, with or after `b`, bytes compared as unsigned.
pub fn compare(a: &[u8], b: &[u8]) -> i32 {
    // SAFETY: both slices hold at least that many bytes.
    unsafe { compare_raw(a.as_ptr(), b.as_ptr(), a.len().min(b.len())) }
}

/// [`compare`] of `n` bytes at `a` and `b`. Words are compared whole and only a differing one
/// byte by byte: the first differing byte of two words read little-endian is the lowest set
/// byte of their XOR.
///
/// # Safety
/// `a` and `b` must be valid for reads of `n` bytes.
#[inline(always)]
unsafe fn compare_raw(a: *const u8, b: *const u8, n: usize) -> i32 {
    let mut at = 0;
    while at + 8 <= n {
        // SAFETY: `at + 8 <= n` bytes are readable at each; unaligned reads are allowed.
        let (x, y) = unsafe {
            (
                a.add(at).cast::<u64>().read_unaligned(),
                b.add(at).cast::<u64>().read_unaligned(),
            )
        };
        if x != y {
            let shift = (x ^ y).trailing_zeros() & !7;
            return i32::from((u64::from_le(x) >> shift) as u8)
                - i32::from((u64::from_le(y) >> shift) as u8);
        }
        at += 8;
    }
    while at < n {
        // SAFETY: `at < n`.
        let (x, y) = unsafe { (*a.add(at), *b.add(at)) };
        if x != y {
            return i32::from(x) - i32::from(y);
        }
        at += 1;
    }
    0
}

/// C's `memcmp` for the wasm build.
///
/// # Safety
/// `a` and `b` must be valid for reads of `n` bytes, as C's `memcmp` requires.
#[cfg(target_arch = "wasm32")]
#[no_mangle]
#[inline(never)]
pub unsafe extern "C" fn memcmp(a: *const u8, b: *const u8, n: usize) -> i32 {
    // SAFETY: the caller's guarantee.
    unsafe { compare_raw(a, b, n) }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The sign C's `memcmp` answers, as the slices' order says.
    fn sign(a: &[u8], b: &[u8]) -> i32 {
        match a.cmp(b) {
            std::cmp::Ordering::Less => -1,
            std::cmp::Ordering::Equal => 0,
            std::cmp::Ordering::Greater => 1,
        }
    }

    #[test]
    fn orders_as_slices_order_at_every_length_and_offset() {
        for n in 0..40 {
            let base: Vec<u8> = (0..n).map(|i| (i * 37 % 251) as u8).collect();
            assert_eq!(compare(&base, &base), 0, "{n}");
            for at in 0..n {
                for byte in [0u8, 1, 0x7f, 0x80, 0xff] {
                    let mut other = base.clone();
                    other[at] = byte;
                    assert_eq!(
                        compare(&base, &other).signum(),
                        sign(&base, &other),
                        "{n} {at} {byte}"
                    );
                    assert_eq!(
                        compare(&other, &base).signum(),
                        sign(&other, &base),
                        "{n} {at} {byte}"
                    );
                }
            }
        }
    }

    #[test]
    fn only_the_first_differing_byte_decides() {
        // a later difference in the other direction does not count (a word compared as a
        // number would let the highest byte decide)
        assert!(compare(b"abcdefgh", b"abddefga") < 0);
        // within a word, the next byte's bits must not reach the differing byte's
        assert!(compare(b"\x02\x00xxxxxx", b"\x00\x01xxxxxx") > 0);
        assert!(compare(b"\x00\x01xxxxxx", b"\x02\x00xxxxxx") < 0);
        assert!(compare(b"a\xff", b"b\x00") < 0);
        assert!(compare(b"\x80", b"\x7f") > 0, "bytes are unsigned");
        assert_eq!(compare(b"abc", b"abd") + compare(b"abd", b"abc"), 0);
    }
}
