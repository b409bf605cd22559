//! JSON text walked sixteen or sixty-four bytes at a time: where a list or object ends, where
//! strings are (all, those starting with given bytes, or one given string), whether text is
//! ASCII. A settings document is mostly short strings (image patterns, namespaces, mirror
//! rules): read token by token it costs a dozen instructions a byte, most of them per token.
//! Here each block of sixteen bytes becomes bit masks (quotes, brackets) by WebAssembly's SIMD
//! comparisons (enabled for the wasm build in `.cargo/config.toml`; the runtimes Kubewarden
//! ships have them, and one without would refuse the module when it loads it, never
//! mid-request), four blocks a chunk where a walk's step would cost more than its comparisons.
//! The masks say which brackets are outside strings, and only a chunk where the nesting could
//! close is looked at bit by bit. Natively the masks are made a byte at a time: the tests run
//! everything but the SIMD comparisons.

// Made a byte at a time in wasm, the masks would cost a request more than reading token by
// token (bench/results/guest-instructions.md): a build without SIMD is refused rather than
// shipped slow.
#[cfg(all(target_arch = "wasm32", not(target_feature = "simd128")))]
compile_error!(
    "the policy's wasm build needs WebAssembly SIMD: .cargo/config.toml enables it; \
     a RUSTFLAGS environment variable replaces that setting, so add -C target-feature=+simd128 to it"
);

#[cfg(target_arch = "wasm32")]
use simd::{
    ends_and_backslashes, has_start_or_backslash, high_bits, marks, quotes_and_backslashes,
    quotes_backslashes_and,
};

#[cfg(not(target_arch = "wasm32"))]
use bytewise::{
    ends_and_backslashes, has_start_or_backslash, high_bits, marks, quotes_and_backslashes,
    quotes_backslashes_and,
};

/// Bytes per block.
const BLOCK: usize = 16;

/// Bytes per chunk: four blocks, the step of the walks that read most of a text (a container's
/// end; the searches, where nothing in a chunk needs a look): a loop's step costs about as much
/// as a block's comparisons.
const CHUNK: usize = 4 * BLOCK;

/// The most bytes a search walks block by block before it tries a chunk again.
const MAX_BACKOFF: usize = 8 * CHUNK;

/// A chunk and the byte after it, which says whether a quote at the chunk's end opens a
/// string or ends an empty one.
type Chunk = [u8; CHUNK + 1];

/// The chunk at `at`, when the byte after it exists.
#[inline(always)]
fn chunk_at(bytes: &[u8], at: usize) -> Option<&Chunk> {
    bytes.get(at..)?.first_chunk()
}

/// One bit a byte of a chunk (bit `i` for byte `i`), and whether it holds a backslash (which
/// ends the chunked walk wherever it is: one test a chunk rather than a mask).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct Marks {
    quote: u64,
    backslash: bool,
    /// `[` or `{`.
    open: u64,
    /// `]` or `}`.
    close: u64,
}

/// The end of a list or object found by [`container_end`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct End {
    /// The offset just past the closing bracket.
    pub at: usize,
    /// An empty string is inside, which the careful reading removes. (A `null` inside is
    /// left to the readers: serde refuses it where the careful reading would remove it, or
    /// reads it as the absent value that removing it gives.)
    pub blanks: bool,
}

/// Why [`container_end`] did not find the end.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Stop {
    /// A backslash: the byte-wise scanner, which follows escapes, takes over.
    Escape,
    /// The text ended inside the value.
    Unterminated,
    /// Nesting deeper than `max_depth`.
    TooDeep,
}

/// The offset of the first `"` or `\\` in `bytes` from `from`.
pub(super) fn quote_or_backslash(bytes: &[u8], from: usize) -> Option<usize> {
    first_marked(bytes, from, |block| {
        let (quotes, backslashes) = quotes_and_backslashes(block);
        quotes | backslashes
    })
}

/// Calls `each` with the start and end (exclusive) of every string's contents in `bytes`, in
/// order; false, having stopped, at the first backslash (an escape the caller must decode) or
/// when a string does not end.
pub(super) fn string_spans(bytes: &[u8], mut each: impl FnMut(usize, usize)) -> bool {
    let mut open = None;
    let mut at = 0;
    let mut tail = [b' '; BLOCK];
    while let Some((block, last)) = block_at(bytes, at, &mut tail) {
        let (mut quotes, backslashes) = quotes_and_backslashes(block);
        if backslashes != 0 {
            return false;
        }
        while quotes != 0 {
            let position = at + quotes.trailing_zeros() as usize;
            quotes &= quotes - 1;
            match open.take() {
                None => open = Some(position + 1),
                Some(start) => each(start, position),
            }
        }
        if last {
            break;
        }
        at += BLOCK;
    }
    open.is_none()
}

/// [`string_spans`] of the strings whose first byte is one of `firsts` alone, found without
/// pairing every quote: in JSON without escapes, a quote followed by a byte that is neither
/// whitespace nor punctuation opens a string (a closing quote is followed by whitespace or
/// punctuation), so a block is one mask, and only the strings asked about are followed to
/// their closing quote. `firsts` must hold neither (the caller checks). False, having
/// stopped, at the first backslash or a string asked about that does not end.
pub(super) fn strings_starting(
    bytes: &[u8],
    firsts: [u8; 4],
    mut each: impl FnMut(usize, usize),
) -> bool {
    let mut at = 0;
    // 1 when the previous block ended with a quote
    let mut quote_before = 0u16;
    // the contents' start of a string asked about whose closing quote is still ahead
    let mut open: Option<usize> = None;
    // where a chunk is next tried: past the blocks of one that could not be skipped, and
    // further each time one could not (text dense with what a chunk cannot skip)
    let (mut next_chunk, mut backoff) = (0, CHUNK);
    let mut tail = [b' '; BLOCK];
    loop {
        if open.is_none() && at >= next_chunk {
            if let Some(chunk) = chunk_at(bytes, at) {
                // a string asked about opened by the previous block's last quote is not in it
                let opened_before = quote_before != 0 && firsts.contains(&chunk[0]);
                if !opened_before && !has_start_or_backslash(chunk, firsts) {
                    // nor a string asked about opening with the chunk's last byte
                    quote_before = 0;
                    at += CHUNK;
                    backoff = CHUNK;
                    continue;
                }
                next_chunk = at + backoff;
                backoff = (2 * backoff).min(MAX_BACKOFF);
            }
        }
        let Some((block, last)) = block_at(bytes, at, &mut tail) else {
            break;
        };
        let (mut quotes, backslashes, first) = quotes_backslashes_and(block, firsts);
        if backslashes != 0 {
            return false;
        }
        // bit i: a string's contents start at byte i with a byte asked about
        let mut starts = ((quotes << 1) | quote_before) & first;
        quote_before = quotes >> (BLOCK - 1);
        loop {
            if let Some(start) = open {
                // its closing quote: the first quote from its contents' start on
                let closing = quotes & (u16::MAX << start.saturating_sub(at));
                if closing == 0 {
                    break;
                }
                let end = closing.trailing_zeros();
                each(start, at + end as usize);
                open = None;
                // what is up to the closing quote is read
                let read = u16::MAX >> (BLOCK as u32 - 1 - end);
                quotes &= !read;
                starts &= !read;
            }
            if starts == 0 {
                break;
            }
            open = Some(at + starts.trailing_zeros() as usize);
            starts &= starts - 1;
        }
        if last {
            break;
        }
        at += BLOCK;
    }
    open.is_none()
}

/// Whether `bytes` hold the string `needle` (between quotes), looked for by its last byte
/// followed by a quote a chunk at a time, then compared: in JSON without escapes every quote
/// is a string's, so `"needle"` is that string. `None` at a backslash, or for a needle that is
/// empty or holds a quote or backslash.
pub(super) fn has_string(bytes: &[u8], needle: &[u8]) -> Option<bool> {
    let (&last, _) = needle.split_last()?;
    if needle.iter().any(|b| matches!(b, b'"' | b'\\')) {
        return None;
    }
    let mut at = 0;
    let mut tail = [b' '; CHUNK + 1];
    loop {
        let Some((chunk, is_last)) = block_at(bytes, at, &mut tail) else {
            return Some(false);
        };
        let (mut ends, backslashes) = ends_and_backslashes(chunk, last);
        if backslashes {
            return None;
        }
        while ends != 0 {
            // the needle's last byte, its closing quote after it
            let end = at + ends.trailing_zeros() as usize;
            ends &= ends - 1;
            let quoted = (end + 1)
                .checked_sub(needle.len() + 1)
                .and_then(|start| bytes.get(start..end + 2));
            let text = quoted
                .and_then(|quoted| quoted.strip_prefix(b"\""))
                .and_then(|quoted| quoted.strip_suffix(b"\""));
            if text == Some(needle) {
                return Some(true);
            }
        }
        if is_last {
            return Some(false);
        }
        at += CHUNK;
    }
}

/// The text of `bytes` when they are all ASCII, checked a block at a time where the standard
/// library's check takes a word; `None` for any other byte, which the standard check then
/// reads.
pub fn ascii_text(bytes: &[u8]) -> Option<&str> {
    let mut high = 0;
    let mut blocks = bytes.chunks_exact(BLOCK);
    for block in &mut blocks {
        if let Some(block) = block.first_chunk() {
            high |= high_bits(block);
        }
    }
    // SAFETY: ASCII is UTF-8 (`from_utf8` would read every byte again).
    (high == 0 && blocks.remainder().is_ascii())
        .then(|| unsafe { std::str::from_utf8_unchecked(bytes) })
}

/// The block of `bytes` at `at`, and whether it is the last: a partial last block is copied
/// into `tail`, padded with spaces (which no mask flags); `None` past the end. Each walk below
/// calls it in a loop of its own rather than taking its step as a closure: the compiler kept
/// such a closure a function of its own, and a call a block cost more than the block.
#[inline(always)]
fn block_at<'b, const N: usize>(
    bytes: &'b [u8],
    at: usize,
    tail: &'b mut [u8; N],
) -> Option<(&'b [u8; N], bool)> {
    let rest = bytes.get(at..).filter(|rest| !rest.is_empty())?;
    Some(match rest.first_chunk() {
        Some(block) => (block, false),
        None => {
            tail[..rest.len()].copy_from_slice(rest);
            (tail, true)
        }
    })
}

/// The offset of the first byte from `from` that `marked` flags in its block.
#[inline(always)]
fn first_marked(bytes: &[u8], from: usize, marked: impl Fn(&[u8; BLOCK]) -> u16) -> Option<usize> {
    let mut at = from;
    let mut tail = [b' '; BLOCK];
    loop {
        let (block, last) = block_at(bytes, at, &mut tail)?;
        let found = marked(block);
        if found != 0 {
            return Some(at + found.trailing_zeros() as usize);
        }
        if last {
            return None;
        }
        at += BLOCK;
    }
}

/// Bit `i` set when an odd number of the bits `0..=i` of `bits` are: with the quotes' mask,
/// the bytes inside strings (an opening quote counted in, a closing one out).
#[inline(always)]
fn prefix_xor(mut bits: u64) -> u64 {
    bits ^= bits << 1;
    bits ^= bits << 2;
    bits ^= bits << 4;
    bits ^= bits << 8;
    bits ^= bits << 16;
    bits ^= bits << 32;
    bits
}

/// The end of the list or object whose opening bracket is at `start`, nesting at most
/// `max_depth` deep, found a chunk of sixty-four bytes at a time. Strings are followed by their
/// quotes alone, so the first backslash hands over to the byte-wise scanner
/// ([`Stop::Escape`]). A chunk without brackets (most of a list of strings) only flips the
/// string state by its number of quotes; the bytes inside strings are worked out only in a
/// chunk with brackets, and its brackets looked at one by one only where the nesting could
/// close.
pub(super) fn container_end(bytes: &[u8], start: usize, max_depth: u32) -> Result<End, Stop> {
    let mut depth = 0u32;
    // all ones when the previous chunk ended inside a string
    let mut in_string = 0u64;
    // 1 when the previous chunk ended with a quote (which may open an empty string)
    let mut quote_before = 0u64;
    let mut blanks = false;
    let mut at = start;
    let mut tail = [b' '; CHUNK];
    loop {
        let (chunk, last) = block_at(bytes, at, &mut tail).ok_or(Stop::Unterminated)?;
        let marks = marks(chunk);
        // two quotes in a row: the closing quote of an empty string (a closing quote followed
        // by an opening one would be invalid JSON); inside a string a quote is escaped, and
        // escapes stop the walk
        let empty_strings = marks.quote & ((marks.quote << 1) | quote_before);
        quote_before = marks.quote >> (CHUNK - 1);
        if (marks.open | marks.close) == 0 && !marks.backslash {
            blanks |= empty_strings != 0;
            in_string ^= 0u64.wrapping_sub(u64::from(marks.quote.count_ones() & 1));
        } else {
            if marks.backslash {
                return Err(Stop::Escape);
            }
            let inside = prefix_xor(marks.quote) ^ in_string;
            in_string = ((inside as i64) >> 63) as u64;
            let open = marks.open & !inside;
            let close = marks.close & !inside;
            if close.count_ones() < depth {
                // the nesting cannot close in this chunk (nor, opening first, pass the limit)
                if depth + open.count_ones() > max_depth {
                    return Err(Stop::TooDeep);
                }
                depth = depth + open.count_ones() - close.count_ones();
                blanks |= empty_strings != 0;
            } else if let Some(end) = closing_bracket(open, close, &mut depth, max_depth)? {
                // what follows the closing bracket is not the container's
                let within = u64::MAX >> (CHUNK - 1 - end);
                return Ok(End {
                    at: at + end + 1,
                    blanks: blanks || empty_strings & within != 0,
                });
            } else {
                blanks |= empty_strings != 0;
            }
        }
        if last {
            return Err(Stop::Unterminated);
        }
        at += CHUNK;
    }
}

/// The brackets of a chunk (outside strings) one by one, from the nesting `depth`: the offset
/// of the one that closes the container, if any.
#[inline(always)]
fn closing_bracket(
    open: u64,
    close: u64,
    depth: &mut u32,
    max_depth: u32,
) -> Result<Option<usize>, Stop> {
    let mut brackets = open | close;
    while brackets != 0 {
        let bit = brackets & brackets.wrapping_neg();
        brackets ^= bit;
        if open & bit != 0 {
            *depth += 1;
            if *depth > max_depth {
                return Err(Stop::TooDeep);
            }
        } else {
            *depth -= 1;
            if *depth == 0 {
                return Ok(Some(bit.trailing_zeros() as usize));
            }
        }
    }
    Ok(None)
}

/// The masks by WebAssembly's SIMD comparisons.
#[cfg(target_arch = "wasm32")]
mod simd {
    use super::{Chunk, Marks, BLOCK, CHUNK};
    use core::arch::wasm32::{
        i8x16_bitmask, i8x16_eq, u8x16_splat, v128, v128_and, v128_any_true, v128_load, v128_or,
    };

    /// A block as a vector.
    #[inline(always)]
    fn load(block: &[u8; BLOCK]) -> v128 {
        // SAFETY: `block` is sixteen readable bytes, and `v128.load` may be unaligned.
        unsafe { v128_load(block.as_ptr().cast::<v128>()) }
    }

    /// The bytes of `v` equal to `byte`.
    #[inline(always)]
    fn mask(v: v128, byte: u8) -> u16 {
        i8x16_bitmask(i8x16_eq(v, u8x16_splat(byte)))
    }

    /// Every mask of a chunk.
    #[inline(always)]
    pub(super) fn marks(chunk: &[u8; CHUNK]) -> Marks {
        let mut marks = Marks::default();
        let mut backslashes = u8x16_splat(0);
        for offset in (0..CHUNK).step_by(BLOCK) {
            let v = block_of(chunk, offset);
            // `[` and `{`, `]` and `}` differ only in the bit 0x20
            let folded = v128_or(v, u8x16_splat(0x20));
            marks.quote |= u64::from(mask(v, b'"')) << offset;
            backslashes = v128_or(backslashes, i8x16_eq(v, u8x16_splat(b'\\')));
            marks.open |= u64::from(mask(folded, b'{')) << offset;
            marks.close |= u64::from(mask(folded, b'}')) << offset;
        }
        marks.backslash = v128_any_true(backslashes);
        marks
    }

    /// The quotes and backslashes of a block.
    #[inline(always)]
    pub(super) fn quotes_and_backslashes(block: &[u8; BLOCK]) -> (u16, u16) {
        let v = load(block);
        (mask(v, b'"'), mask(v, b'\\'))
    }

    /// The quotes, the backslashes and the bytes equal to one of `firsts` of a block.
    #[inline(always)]
    pub(super) fn quotes_backslashes_and(block: &[u8; BLOCK], firsts: [u8; 4]) -> (u16, u16, u16) {
        let v = load(block);
        let [a, b, c, d] = firsts.map(|byte| i8x16_eq(v, u8x16_splat(byte)));
        let any = v128_or(v128_or(a, b), v128_or(c, d));
        (mask(v, b'"'), mask(v, b'\\'), i8x16_bitmask(any))
    }

    /// The block at `offset` of a chunk (with or without the byte after it).
    #[inline(always)]
    fn block_of<const N: usize>(chunk: &[u8; N], offset: usize) -> v128 {
        // the offsets are constants within the chunk: the fallback is never taken
        load(
            chunk
                .get(offset..)
                .and_then(<[u8]>::first_chunk)
                .unwrap_or(&[b' '; BLOCK]),
        )
    }

    /// True when one of a chunk's bytes is a backslash or a quote followed by one of `firsts`.
    #[inline(always)]
    pub(super) fn has_start_or_backslash(chunk: &Chunk, firsts: [u8; 4]) -> bool {
        let mut found = u8x16_splat(0);
        for offset in (0..CHUNK).step_by(BLOCK) {
            let (v, next) = (block_of(chunk, offset), block_of(chunk, offset + 1));
            let [a, b, c, d] = firsts.map(|byte| i8x16_eq(next, u8x16_splat(byte)));
            let start = v128_and(
                i8x16_eq(v, u8x16_splat(b'"')),
                v128_or(v128_or(a, b), v128_or(c, d)),
            );
            found = v128_or(found, v128_or(start, i8x16_eq(v, u8x16_splat(b'\\'))));
        }
        v128_any_true(found)
    }

    /// The bytes of a chunk equal to `last` and followed by a quote, and whether it holds a
    /// backslash.
    #[inline(always)]
    pub(super) fn ends_and_backslashes(chunk: &Chunk, last: u8) -> (u64, bool) {
        let (mut ends, mut backslashes) = (0u64, u8x16_splat(0));
        for offset in (0..CHUNK).step_by(BLOCK) {
            let (v, next) = (block_of(chunk, offset), block_of(chunk, offset + 1));
            let end = v128_and(
                i8x16_eq(v, u8x16_splat(last)),
                i8x16_eq(next, u8x16_splat(b'"')),
            );
            ends |= u64::from(i8x16_bitmask(end)) << offset;
            backslashes = v128_or(backslashes, i8x16_eq(v, u8x16_splat(b'\\')));
        }
        (ends, v128_any_true(backslashes))
    }

    /// The bytes of a block with their high bit set (not ASCII).
    #[inline(always)]
    pub(super) fn high_bits(block: &[u8; BLOCK]) -> u16 {
        i8x16_bitmask(load(block))
    }
}

/// The masks a byte at a time: natively, where the tests run them.
#[cfg(not(target_arch = "wasm32"))]
mod bytewise {
    use super::{Chunk, Marks, BLOCK, CHUNK};

    /// Every mask of a chunk.
    pub(super) fn marks(chunk: &[u8; CHUNK]) -> Marks {
        let mut marks = Marks::default();
        for (i, byte) in chunk.iter().enumerate() {
            let bit = 1u64 << i;
            match byte {
                b'"' => marks.quote |= bit,
                b'\\' => marks.backslash = true,
                b'[' | b'{' => marks.open |= bit,
                b']' | b'}' => marks.close |= bit,
                _ => {}
            }
        }
        marks
    }

    /// The quotes and backslashes of a block.
    pub(super) fn quotes_and_backslashes(block: &[u8; BLOCK]) -> (u16, u16) {
        let (mut quotes, mut backslashes) = (0, 0);
        for (i, byte) in block.iter().enumerate() {
            match byte {
                b'"' => quotes |= 1 << i,
                b'\\' => backslashes |= 1 << i,
                _ => {}
            }
        }
        (quotes, backslashes)
    }

    /// The quotes, the backslashes and the bytes equal to one of `firsts` of a block.
    pub(super) fn quotes_backslashes_and(block: &[u8; BLOCK], firsts: [u8; 4]) -> (u16, u16, u16) {
        let (quotes, backslashes) = quotes_and_backslashes(block);
        let first = (0..BLOCK)
            .filter(|&i| firsts.contains(&block[i]))
            .fold(0, |bits, i| bits | 1 << i);
        (quotes, backslashes, first)
    }

    /// True when one of a chunk's bytes is a backslash or a quote followed by one of `firsts`.
    pub(super) fn has_start_or_backslash(chunk: &Chunk, firsts: [u8; 4]) -> bool {
        chunk.windows(2).any(|pair| match pair {
            [b'\\', _] => true,
            [b'"', next] => firsts.contains(next),
            _ => false,
        })
    }

    /// The bytes of a chunk equal to `last` and followed by a quote, and whether it holds a
    /// backslash.
    pub(super) fn ends_and_backslashes(chunk: &Chunk, last: u8) -> (u64, bool) {
        let ends = (0..CHUNK)
            .filter(|&i| chunk[i] == last && chunk[i + 1] == b'"')
            .fold(0, |bits, i| bits | 1 << i);
        (ends, chunk[..CHUNK].contains(&b'\\'))
    }

    /// The bytes of a block with their high bit set (not ASCII).
    pub(super) fn high_bits(block: &[u8; BLOCK]) -> u16 {
        (0..BLOCK)
            .filter(|&i| !block[i].is_ascii())
            .fold(0, |bits, i| bits | 1 << i)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn end(text: &str) -> Result<End, Stop> {
        container_end(text.as_bytes(), 0, 128)
    }

    #[test]
    fn ends_are_where_serde_says_across_block_boundaries() {
        let values = [
            r#"{"a": [1, 2, {"b": "}]{["}], "c": {}, "d": [], "e": 1}"#,
            r#"["x", "y", "[", "]", 1.5e3, -2, true, false]"#,
            r#"{"k": {"l": {"m": [[], [{}]]}}}"#,
            r#"[{"prefix": "mirror-source-0.example", "mirrors": [{"location": "m:5000/s"}]}]"#,
            "[]",
        ];
        for value in values {
            // shifted so that every byte falls on every position of a block
            for pad in 0..CHUNK + 2 {
                // an empty string after the value is not the value's
                let text = format!("{}{value} , [\"\", \"after\"]", " ".repeat(pad));
                let found = container_end(text.as_bytes(), pad, 128).expect(&text);
                assert_eq!(&text[pad..found.at], value, "{text}");
                assert!(!found.blanks, "{text}");
            }
        }
    }

    #[test]
    fn blanks_are_noticed_across_block_boundaries() {
        for value in [r#"["", "a"]"#, r#"{"a": ""}"#, r#"["a", ""]"#] {
            for pad in 0..CHUNK + 2 {
                let text = format!("{}{value}", " ".repeat(pad));
                let found = container_end(text.as_bytes(), pad, 128).expect(&text);
                assert!(found.blanks, "{text}");
                assert_eq!(found.at, text.len());
            }
        }
        // a `null` is left to the readers; quotes apart are no empty string
        assert!(!end(r#"["nginx", null, "a"]"#).unwrap().blanks);
        assert!(!end(r#"{"a":"b","c":"d"}"#).unwrap().blanks);
    }

    #[test]
    fn what_keeps_a_value_from_ending_stops_the_walk() {
        assert_eq!(end(r#"["a\"b"]"#), Err(Stop::Escape));
        assert_eq!(end(r#"["unterminated]"#), Err(Stop::Unterminated));
        assert_eq!(
            end(&format!("[{}", " ".repeat(40))),
            Err(Stop::Unterminated)
        );
        assert_eq!(end(&"[".repeat(129)), Err(Stop::TooDeep));
        assert_eq!(end(&"[".repeat(128)), Err(Stop::Unterminated));
        // a bracket inside a string does not count
        assert_eq!(end(r#"["]"#), Err(Stop::Unterminated));
    }

    /// Lists of strings long enough to be walked a chunk at a time: every length of string
    /// from 0 to 20, so that quotes, empty strings and the strings asked about fall on every
    /// position of a chunk, with a nested list or an escape now and then.
    fn long_lists() -> Vec<String> {
        let mut lists = Vec::new();
        for variant in 0..6 {
            let strings: Vec<String> = (0..21)
                .map(|len| match (variant, len) {
                    (1, 7) => String::new(),
                    (2, 13) => "a\\\"b".to_owned(),
                    (3, 0) | (4, 20) => "\"\"".to_owned(),
                    _ => format!("{}{}", ["r", "x", "*", "q"][len % 4], "y".repeat(len)),
                })
                .collect();
            let quoted: Vec<String> = strings
                .iter()
                .map(|s| {
                    if s == "\"\"" {
                        "[\"\"]".to_owned()
                    } else {
                        format!("\"{s}\"")
                    }
                })
                .collect();
            lists.push(format!(
                "[{}]",
                quoted.join(if variant == 5 { ", " } else { "," })
            ));
        }
        lists
    }

    #[test]
    fn long_lists_end_and_show_blanks_as_serde_reads_them() {
        for list in long_lists() {
            let value: serde_json::Value = serde_json::from_str(&list).expect(&list);
            let empty = value
                .as_array()
                .into_iter()
                .flatten()
                .any(|v| v == "" || v.get(0).is_some_and(|v| v == ""));
            for pad in 0..CHUNK + 2 {
                let text = format!("{}{list} ,\"after\"]", " ".repeat(pad));
                match container_end(text.as_bytes(), pad, 128) {
                    Ok(end) => {
                        assert_eq!(&text[pad..end.at], list, "{pad}");
                        assert_eq!(end.blanks, empty, "{text}");
                    }
                    Err(stop) => {
                        assert_eq!(stop, Stop::Escape, "{text}");
                        assert!(list.contains('\\'), "{text}");
                    }
                }
            }
        }
    }

    #[test]
    fn strings_asked_about_in_long_lists_are_every_string_so_starting() {
        for list in long_lists() {
            for firsts in [*b"r*?[", *b"qqqq", *b"zzzz", *b"x*x*"] {
                for pad in 0..CHUNK + 2 {
                    let text = format!("{}{list}", " ".repeat(pad));
                    let bytes = text.as_bytes();
                    let (mut all, mut some) = (Vec::new(), Vec::new());
                    let every = string_spans(bytes, |start, end| {
                        if bytes.get(start).is_some_and(|b| firsts.contains(b)) && start < end {
                            all.push((start, end));
                        }
                    });
                    let starting =
                        strings_starting(bytes, firsts, |start, end| some.push((start, end)));
                    assert_eq!(starting, every, "{text} {firsts:?}");
                    if every {
                        assert_eq!(some, all, "{text} {firsts:?}");
                    }
                }
            }
        }
    }

    #[test]
    fn the_masks_mark_what_they_name() {
        // one block's pattern at the chunk's start and end
        let pattern = b"\"\\[{]}n x\"a]]n\"\"";
        let mut chunk = [b' '; CHUNK];
        chunk[..BLOCK].copy_from_slice(pattern);
        chunk[CHUNK - BLOCK..].copy_from_slice(pattern);
        let twice = |bits: u64| bits | bits << (CHUNK - BLOCK);
        let marks = marks(&chunk);
        assert_eq!(marks.quote, twice(1 | 1 << 9 | 1 << 14 | 1 << 15));
        assert!(marks.backslash);
        assert!(!super::marks(&[b' '; CHUNK]).backslash);
        assert_eq!(marks.open, twice(1 << 2 | 1 << 3));
        assert_eq!(marks.close, twice(1 << 4 | 1 << 5 | 1 << 11 | 1 << 12));
        assert_eq!(prefix_xor(0b1001), 0b0111);
        assert_eq!(prefix_xor(1 << 40), u64::MAX << 40);
    }
}
