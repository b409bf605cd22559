//! Globs as operators write them (`exemptImages`, `lookupRegistries`, `notFoundMayMeanDenied`),
//! compiled only for a name that starts with the glob's literal prefix. Policy-server 1.36
//! reads the settings on a fresh instance for every request, so fifty exemption globs that no
//! image of the request can match were fifty compilations for nothing.

use std::borrow::Cow;
use std::cell::OnceCell;
use std::fmt;

/// One glob: `*` (also across `/`), `?` and `[...]`, as the `glob` crate matches them. Its text
/// is borrowed from the settings' when a request reads them, owned when they were validated.
#[derive(Clone)]
pub struct Glob<'a> {
    text: Cow<'a, str>,
    /// How the text after its literal prefix matches, worked out when a name first has that
    /// prefix: most globs of a request are never looked at past their first bytes.
    shape: OnceCell<Shape>,
}

/// What follows a glob's literal prefix.
#[derive(Clone)]
enum Shape {
    /// Single `*`s and literal text (`*.corp.example`, `registry.internal/team/*`): matched
    /// here, without compiling, as the glob crate matches them.
    StarsOnly,
    /// Anything else, compiled by the glob crate; `None` for a text it refuses, which
    /// [`Glob::new`] refuses and [`Glob::unchecked`] matches to no name.
    Compiled(Option<glob::Pattern>),
}

/// Where a glob's literal prefix and a name part ([`walk_literal`]).
enum Walk {
    /// The glob's text ended, the name equal to it so far.
    TextEnd,
    /// A wildcard at this offset, the name equal to the text before it.
    Wildcard(usize),
    /// The name ended first.
    NameEnd,
    /// They differ at some byte.
    Differs,
}

impl Shape {
    /// The shape of `text` after its first `literal` bytes.
    fn of(text: &str, literal: usize) -> Shape {
        let (mut double_star, mut other) = (false, false);
        let mut previous = 0u8;
        for &byte in &text.as_bytes()[literal..] {
            match byte {
                b'*' => double_star |= previous == b'*',
                b'[' | b'?' | b'\\' => other = true,
                _ => {}
            }
            previous = byte;
        }
        if double_star || other {
            Shape::Compiled(glob::Pattern::new(text).ok())
        } else {
            Shape::StarsOnly
        }
    }
}

impl<'a> Glob<'a> {
    /// Checks `text` as the `glob` crate does: it refuses only texts with `[` or `**`, so those
    /// are compiled now, and every other text when a name first needs it.
    pub fn new(text: impl Into<Cow<'a, str>>) -> Result<Self, String> {
        let glob = Glob::unchecked(text);
        let bytes = glob.text.as_bytes();
        let may_fail = bytes
            .iter()
            .zip(bytes.iter().skip(1).chain([&0]))
            .any(|pair| matches!(pair, (b'[', _) | (b'*', b'*')));
        if may_fail {
            let pattern = glob::Pattern::new(&glob.text)
                .map_err(|e| format!("invalid pattern {:?}: {}", glob.text, e.msg))?;
            let _ = glob.shape.set(Shape::Compiled(Some(pattern)));
        }
        Ok(glob)
    }

    /// A glob of settings validated when they were loaded (`validate_settings`): a text the
    /// `glob` crate refuses matches no name instead of failing the request.
    pub fn unchecked(text: impl Into<Cow<'a, str>>) -> Self {
        Glob {
            text: text.into(),
            shape: OnceCell::new(),
        }
    }

    /// True when `name` matches, as `glob::Pattern::matches` says. The literal prefix is
    /// compared as it is walked: a glob and a name usually differ in their first bytes.
    pub fn matches(&self, name: &str) -> bool {
        match walk_literal(&self.text, name) {
            Walk::TextEnd => name.len() == self.text.len(),
            Walk::Wildcard(literal) => {
                match self.shape.get_or_init(|| Shape::of(&self.text, literal)) {
                    Shape::StarsOnly => star_match(&self.text, name),
                    Shape::Compiled(pattern) => pattern.as_ref().is_some_and(|p| p.matches(name)),
                }
            }
            Walk::NameEnd | Walk::Differs => false,
        }
    }

    /// False when no name that starts with `start` can match: the glob's literal prefix and
    /// `start` differ where both have bytes, or the glob is literal and shorter.
    pub fn may_match_from(&self, start: &str) -> bool {
        may_match_from(&self.text, start)
    }

    /// The glob as written.
    pub fn as_str(&self) -> &str {
        &self.text
    }
}

/// [`Glob::may_match_from`] of the glob written `text`, without making a [`Glob`]: a request
/// asks it of every exemption for every image, and most differ from the image at once.
pub fn may_match_from(text: &str, start: &str) -> bool {
    match walk_literal(text, start) {
        Walk::TextEnd => start.len() == text.len(),
        Walk::Wildcard(_) | Walk::NameEnd => true,
        Walk::Differs => false,
    }
}

/// Walks the literal prefix of the glob `text` (its text before the first wildcard) and
/// `name` together, to where they part.
fn walk_literal(text: &str, name: &str) -> Walk {
    let name = name.as_bytes();
    for (i, &byte) in text.as_bytes().iter().enumerate() {
        if matches!(byte, b'*' | b'?' | b'[') {
            return Walk::Wildcard(i);
        }
        match name.get(i) {
            None => return Walk::NameEnd,
            Some(&other) if other != byte => return Walk::Differs,
            Some(_) => {}
        }
    }
    Walk::TextEnd
}

/// A glob whose only wildcards are single `*`s, matched as the glob crate does with its default
/// options: each `*` any run of characters, `/` included; the rest literally.
fn star_match(pattern: &str, name: &str) -> bool {
    let Some((head, tail)) = pattern.split_once('*') else {
        return pattern == name;
    };
    let Some(name) = name.strip_prefix(head) else {
        return false;
    };
    let (middle, last) = tail.rsplit_once('*').unwrap_or(("", tail));
    let Some(mut rest) = name.strip_suffix(last) else {
        return false;
    };
    for part in middle.split('*').filter(|part| !part.is_empty()) {
        match rest.find(part) {
            Some(at) => rest = &rest[at + part.len()..],
            None => return false,
        }
    }
    true
}

/// The glob as written, compiled yet or not.
impl fmt::Debug for Glob<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&self.text, f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matches_as_the_glob_crate_does() {
        let names = [
            "registry.internal/team/app:1",
            "registry.internal",
            "docker.io/library/busybox:1.36",
            "docker.io/library/busybox",
            "ghcr.io/org/x@sha256:00",
            "a",
            "",
            "aa",
            "aba",
            "registry.internal/team/app:1:1",
        ];
        for text in [
            "registry.internal/*",
            "registry.internal",
            "docker.io/library/busybox:*",
            "*.io/*",
            "doc?er.io/*",
            "docker.io/library/[a-c]usybox:*",
            "docker.io/library/[!b]usybox:*",
            "*",
            "a",
            "**",
            "x/**/y",
            "*.internal/*",
            "*/*/*",
            "d*o*r*",
            "*app*",
            "docker.io/*/busybox*",
            "*busybox",
            "a*a",
            "*:1",
        ] {
            let ours = Glob::new(text.to_owned()).unwrap();
            let theirs = glob::Pattern::new(text).unwrap();
            for name in names {
                assert_eq!(ours.matches(name), theirs.matches(name), "{text} on {name}");
            }
        }
    }

    #[test]
    fn what_the_glob_crate_refuses_is_refused_at_once() {
        for text in ["a[", "a***", "a**b", "docker.io/[!"] {
            let error = Glob::new(text.to_owned()).unwrap_err();
            assert!(error.starts_with("invalid pattern"), "{text}: {error}");
            assert!(glob::Pattern::new(text).is_err());
        }
    }

    #[test]
    fn globs_of_single_stars_are_never_compiled() {
        for text in ["*.corp.example", "registry.internal/*/app:*", "*"] {
            let glob = Glob::new(text).unwrap();
            assert!(glob.matches("x.corp.example") || !text.contains("corp"));
            let _ = glob.matches("registry.internal/team/app:1");
            assert!(
                !matches!(glob.shape.get(), Some(Shape::Compiled(_))),
                "{text}"
            );
        }
    }

    #[test]
    fn a_glob_no_name_could_match_is_never_compiled() {
        let glob = Glob::new("registry.internal/?*".to_owned()).unwrap();
        assert!(!glob.matches("docker.io/library/nginx:1"));
        assert!(glob.shape.get().is_none());
        assert!(glob.matches("registry.internal/x:1"));
        assert!(matches!(glob.shape.get(), Some(Shape::Compiled(Some(_)))));
    }

    #[test]
    fn an_unchecked_glob_the_glob_crate_refuses_matches_nothing() {
        for text in ["a[", "a**b", "docker.io/[!"] {
            let glob = Glob::unchecked(text);
            for name in ["a[", "a**b", "ab", "docker.io/[!", "docker.io/x"] {
                assert!(!glob.matches(name), "{text} on {name}");
            }
        }
    }

    #[test]
    fn may_match_from_says_false_only_where_no_name_can_match() {
        let names = [
            "127.0.0.1:5000/a:1",
            "registry.internal/x:1",
            "docker.io/library/b:2",
        ];
        let globs = [
            "registry.internal/*",
            "registry.internal",
            "docker.io/library/tool-?:*",
            "*",
            "127.0.0.1:5000/a:1",
            "127.0.0.1:5000",
            "1*",
            "[0-9]*",
        ];
        for text in globs {
            let glob = Glob::new(text).unwrap();
            for name in names {
                let registry = name.split('/').next().unwrap();
                if glob.matches(name) {
                    assert!(glob.may_match_from(registry), "{text} on {name}");
                }
            }
        }
        let glob = Glob::new("registry.internal/*").unwrap();
        assert!(!glob.may_match_from("127.0.0.1:5000"));
        assert!(!Glob::new("docker.io")
            .unwrap()
            .may_match_from("docker.io:5000"));
        assert!(Glob::new("docker.io").unwrap().may_match_from("docker.io"));
    }
}
