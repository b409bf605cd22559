//! Which tags of a repository to suggest for a tag it does not have: the pure ranking, with no
//! registry in it. A tag is suggested when it is the asked one in another case, the same
//! version with another patch level or suffix (`1.25` → `1.25.5`, `1.25-alpine`; `v1.2.30` →
//! `v1.2.3`, `v1.2.31`), or a small edit away (`lastest` → `latest`); the closest come first.

/// How many tags are suggested at most.
pub const SUGGESTED: usize = broker_reference::suggested_tags::MAX_TAGS;

/// Why a tag is near the asked one; the earlier, the nearer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Kinship {
    /// The same letters in another case.
    Case,
    /// The same release line (the same leading numbers), another patch level or suffix.
    Version,
    /// A few edits away.
    Spelling,
}

/// The most numbers of a version read: `1.2.3.4.5.6`.
const MAX_NUMBERS: usize = 6;

/// A tag read as a version: `v1.25.5-alpine` → `v`, `[1, 25, 5]` (the suffix is not kept).
#[derive(Debug, PartialEq, Eq)]
struct Version<'t> {
    prefix: &'t str,
    numbers: [u64; MAX_NUMBERS],
    len: usize,
}

impl<'t> Version<'t> {
    /// The version a tag names, read byte by byte: every tag of a listing is read for each
    /// 404, so no allocation.
    fn of(tag: &'t str) -> Option<Self> {
        let bytes = tag.as_bytes();
        let digits_at = bytes.iter().position(u8::is_ascii_digit)?;
        let prefix = &tag[..digits_at];
        // `v1.2`, `release-1.2`, not `abc1`
        if !(prefix.is_empty() || prefix == "v" || prefix == "V" || prefix.ends_with(['-', '_'])) {
            return None;
        }
        let mut version = Version {
            prefix,
            numbers: [0; MAX_NUMBERS],
            len: 0,
        };
        let mut at = digits_at;
        while version.len < MAX_NUMBERS {
            let mut number: u64 = 0;
            while let Some(digit) = bytes.get(at).filter(|b| b.is_ascii_digit()) {
                number = number
                    .checked_mul(10)?
                    .checked_add(u64::from(digit - b'0'))?;
                at += 1;
            }
            version.numbers[version.len] = number;
            version.len += 1;
            // another number only after a dot and a digit
            match (bytes.get(at), bytes.get(at + 1)) {
                (Some(b'.'), Some(next)) if next.is_ascii_digit() => at += 1,
                _ => break,
            }
        }
        Some(version)
    }

    fn numbers(&self) -> &[u64] {
        &self.numbers[..self.len]
    }

    /// The same release line: the same prefix and numbers with another suffix (`1.25`,
    /// `1.25-alpine`), one extending the other (`1.25`, `1.25.5`), or another last number of
    /// three or more (`v1.2.30`, `v1.2.3`); `1.24` and `1.25` are two lines.
    fn same_line(&self, other: &Version) -> bool {
        let (a, b) = (self.numbers(), other.numbers());
        if !self.prefix.eq_ignore_ascii_case(other.prefix) || a.is_empty() || b.is_empty() {
            return false;
        }
        if a == b {
            return true;
        }
        let line = match a.len().min(b.len()) {
            shorter if a.len() != b.len() => shorter,
            same if same >= 3 => same - 1,
            _ => return false,
        };
        a[..line] == b[..line]
    }

    /// How far the first number after the line is: `v1.2.31` is nearer `v1.2.30` than `v1.2.3`.
    fn distance(&self, other: &Version) -> u64 {
        let (a, b) = (self.numbers(), other.numbers());
        let at = a.iter().zip(b).position(|(a, b)| a != b);
        at.map_or(0, |i| a[i].abs_diff(b[i]))
    }
}

/// The edits (insertions, deletions, substitutions) between `a` and `b`, or `None` beyond `max`.
fn edits(a: &str, b: &str, max: usize) -> Option<usize> {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    if a.len().abs_diff(b.len()) > max {
        return None;
    }
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.iter().enumerate() {
        let mut previous = row[0];
        row[0] = i + 1;
        let mut lowest = row[0];
        for (j, cb) in b.iter().enumerate() {
            let substitution = previous + usize::from(ca != cb);
            previous = row[j + 1];
            row[j + 1] = substitution.min(row[j] + 1).min(previous + 1);
            lowest = lowest.min(row[j + 1]);
        }
        if lowest > max {
            return None;
        }
    }
    row.last().copied().filter(|d| *d <= max)
}

/// The most edits a misspelling is allowed: two, or a quarter of a long tag.
fn spelling_allowance(asked: &str) -> usize {
    (asked.len() / 4).max(2)
}

/// The tags of `tags` nearest `asked`, nearest first, at most [`SUGGESTED`]; never `asked`
/// itself, never a name that is not a valid tag.
pub fn nearest<'t>(asked: &str, tags: impl IntoIterator<Item = &'t str>) -> Vec<&'t str> {
    let asked_version = Version::of(asked);
    // edits are counted up to the spelling allowance
    let mut ranked: Vec<(Kinship, usize, u64, &str)> = tags
        .into_iter()
        .filter(|tag| *tag != asked && broker_reference::is_tag(tag))
        .filter_map(|tag| {
            if tag.eq_ignore_ascii_case(asked) {
                return Some((Kinship::Case, 0, 0, tag));
            }
            let version = Version::of(tag);
            match (&asked_version, &version) {
                (Some(a), Some(t)) if a.same_line(t) => {
                    // beyond a misspelling's edits, the numbers alone order them
                    let allowance = spelling_allowance(asked);
                    let edits = edits(asked, tag, allowance).unwrap_or(allowance + 1);
                    Some((Kinship::Version, edits, a.distance(t), tag))
                }
                // two versions of two lines are two releases, however alike they are spelled
                (Some(_), Some(_)) => None,
                _ => {
                    let edits = edits(asked, tag, spelling_allowance(asked))?;
                    Some((Kinship::Spelling, edits, 0, tag))
                }
            }
        })
        .collect();
    ranked.sort_unstable();
    ranked.dedup_by(|a, b| a.3 == b.3);
    ranked.into_iter().take(SUGGESTED).map(|r| r.3).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_same_version_with_another_patch_level_or_suffix() {
        assert_eq!(
            nearest("1.25", ["1.24", "1.25.5", "latest", "1.25-alpine", "2.25"]),
            ["1.25.5", "1.25-alpine"]
        );
        assert_eq!(
            nearest("v1.2.30", ["v1.2.3", "v1.3.0", "v1.2.31", "v2.2.30"]),
            ["v1.2.31", "v1.2.3"]
        );
        // a patch level asked that the line lacks: the nearest patch levels
        assert_eq!(
            nearest("1.25.9", ["1.25.5", "1.25.8", "1.26.9", "1.25.1"]),
            ["1.25.8", "1.25.5", "1.25.1"]
        );
    }

    #[test]
    fn another_case_comes_first() {
        assert_eq!(
            nearest("V1.2.3", ["v1.2.4", "v1.2.3"]),
            ["v1.2.3", "v1.2.4"]
        );
        assert_eq!(nearest("Latest", ["lates", "latest"]), ["latest", "lates"]);
    }

    #[test]
    fn misspellings_within_a_few_edits() {
        assert_eq!(nearest("lastest", ["latest", "stable", "last"]), ["latest"]);
        assert_eq!(
            nearest("stabel", ["stable", "unstable-nightly"]),
            ["stable"]
        );
        assert!(nearest("prod", ["staging", "development"]).is_empty());
    }

    #[test]
    fn never_the_asked_tag_nor_a_name_that_is_not_a_tag_and_at_most_three() {
        assert_eq!(
            nearest("1.25", ["1.25", "-1.25.1", "1.25 .2", "1.25.3"]),
            ["1.25.3"]
        );
        let mut many: Vec<String> = (0..2000).map(|i| format!("build-{i}")).collect();
        many.extend(["v1.2.3".into(), "v1.2.31".into()]);
        assert_eq!(
            nearest("v1.2.30", many.iter().map(String::as_str)),
            ["v1.2.31", "v1.2.3"]
        );
    }

    #[test]
    fn versions_are_read_only_from_version_like_tags() {
        let read = |tag| Version::of(tag).map(|v| (v.prefix, v.numbers().to_vec()));
        assert_eq!(read("v1.25.5-alpine"), Some(("v", vec![1, 25, 5])));
        assert_eq!(read("1.2.").map(|v| v.1), Some(vec![1, 2]));
        assert_eq!(read("1..2").map(|v| v.1), Some(vec![1]));
        assert_eq!(
            read("1.2.3.4.5.6.7").map(|v| v.1),
            Some(vec![1, 2, 3, 4, 5, 6])
        );
        assert!(read("99999999999999999999999").is_none());
        assert!(Version::of("abc1.2").is_none());
        assert!(Version::of("latest").is_none());
        let asked = Version::of("1.25").unwrap_or_else(|| unreachable!());
        let other = Version::of("1.250").unwrap_or_else(|| unreachable!());
        assert!(!asked.same_line(&other));
    }

    #[test]
    fn edits_are_counted_and_bounded() {
        assert_eq!(edits("kitten", "sitting", 5), Some(3));
        assert_eq!(edits("kitten", "sitting", 2), None);
        assert_eq!(edits("a", "abcdef", 3), None);
        assert_eq!(edits("", "ab", 2), Some(2));
    }
}
