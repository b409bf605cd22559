//! Go's `encoding/base64` decoding, which the kubelet applies to a secret's data and to an
//! entry's `auth`: CR and LF skipped, non-zero trailing bits accepted, padding as the encoding
//! demands.

/// Go's `base64.StdEncoding` (`padded`) or `RawStdEncoding` decoding: CR and LF are skipped,
/// non-zero trailing bits are accepted, anything else out of place fails.
pub(super) fn decode_base64(input: &[u8], padded: bool) -> Option<Vec<u8>> {
    let symbols: Vec<u8> = input
        .iter()
        .copied()
        .filter(|&b| b != b'\r' && b != b'\n')
        .collect();
    let data = if padded {
        if !symbols.len().is_multiple_of(4) {
            return None;
        }
        let padding = symbols.iter().rev().take_while(|&&b| b == b'=').count();
        if padding > 2 {
            return None;
        }
        &symbols[..symbols.len() - padding]
    } else {
        &symbols[..]
    };
    if data.len() % 4 == 1 {
        return None;
    }
    let mut out = Vec::with_capacity(data.len() / 4 * 3 + 2);
    let (mut bits, mut count) = (0u32, 0u32);
    for &symbol in data {
        let value = match symbol {
            b'A'..=b'Z' => symbol - b'A',
            b'a'..=b'z' => symbol - b'a' + 26,
            b'0'..=b'9' => symbol - b'0' + 52,
            b'+' => 62,
            b'/' => 63,
            _ => return None,
        };
        bits = (bits << 6) | u32::from(value);
        count += 6;
        if count >= 8 {
            count -= 8;
            out.push((bits >> count) as u8);
            bits &= (1 << count) - 1;
        }
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn go_base64() {
        assert_eq!(decode_base64(b"QUJD", true), Some(b"ABC".to_vec()));
        assert_eq!(decode_base64(b"QUI=", true), Some(b"AB".to_vec()));
        assert_eq!(decode_base64(b"QQ==\r\n", true), Some(b"A".to_vec()));
        assert_eq!(decode_base64(b"QR==", true), Some(b"A".to_vec()));
        assert_eq!(decode_base64(b"", true), Some(vec![]));
        for bad in [
            &b"QQ="[..],
            b"QQ",
            b"Q===",
            b"====",
            b"QQ==QQ==",
            b"Q-==",
            b"QU I=",
        ] {
            assert_eq!(decode_base64(bad, true), None, "{bad:?}");
        }
        assert_eq!(decode_base64(b"QQ", false), Some(b"A".to_vec()));
        assert_eq!(decode_base64(b"QUI", false), Some(b"AB".to_vec()));
        assert_eq!(decode_base64(b"Q", false), None);
        assert_eq!(decode_base64(b"QQ==", false), None);
    }
}
