//! Bounded text: what the policy quotes (registry errors, images as written) can be arbitrarily
//! long, while Kubernetes keeps only so much of a warning or an annotation.

/// Cuts `text` to at most `max` bytes on a character boundary, marking the cut with `…`.
pub fn truncate(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_owned();
    }
    let ellipsis = '…';
    let mut end = max.saturating_sub(ellipsis.len_utf8());
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}{ellipsis}", &text[..end])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cuts_on_a_character_boundary_and_marks_the_cut() {
        assert_eq!(truncate("short", 10), "short");
        let cut = truncate(&"é".repeat(10), 8);
        assert!(cut.len() <= 8, "{cut}");
        assert_eq!(cut, "éé…");
    }
}
