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
    /// Length of the text before its first wildcard: every match starts with it.
    literal: usize,
    /// No wildcard but single `*`s (`*.corp.example`, `registry.internal/team/*`): matched
    /// here, without compiling, as the glob crate matches them.
    stars_only: bool,
    /// Compiled on first use; `None` only for a text `glob` refuses, which [`Glob::new`]
    /// has already refused.
    compiled: OnceCell<Option<glob::Pattern>>,
}

impl<'a> Glob<'a> {
    /// Checks `text` as the `glob` crate does. It refuses only texts with `[` or `**`, so those
    /// are compiled now and every other text when a name first needs it.
    pub fn new(text: impl Into<Cow<'a, str>>) -> Result<Self, String> {
        let text = text.into();
        let bytes = text.as_bytes();
        let literal = bytes
            .iter()
            .position(|b| matches!(b, b'*' | b'?' | b'['))
            .unwrap_or(bytes.len());
        // one pass over what follows the literal prefix, usually a lone `*`
        let (mut double_star, mut bracket, mut other) = (false, false, false);
        let mut previous = 0u8;
        for &byte in &bytes[literal..] {
            match byte {
                b'*' => double_star |= previous == b'*',
                b'[' => bracket = true,
                b'?' | b'\\' => other = true,
                _ => {}
            }
            previous = byte;
        }
        let may_fail = bracket || double_star;
        let stars_only = !double_star && !bracket && !other;
        let compiled = OnceCell::new();
        if may_fail {
            let pattern = glob::Pattern::new(&text)
                .map_err(|e| format!("invalid pattern {text:?}: {}", e.msg))?;
            let _ = compiled.set(Some(pattern));
        }
        Ok(Glob {
            text,
            literal,
            stars_only,
            compiled,
        })
    }

    /// True when `name` matches, as `glob::Pattern::matches` says.
    pub fn matches(&self, name: &str) -> bool {
        if !name.starts_with(&self.text[..self.literal]) {
            return false;
        }
        if self.literal == self.text.len() {
            return name == self.text;
        }
        if self.stars_only {
            return star_match(&self.text, name);
        }
        self.compiled
            .get_or_init(|| glob::Pattern::new(&self.text).ok())
            .as_ref()
            .is_some_and(|pattern| pattern.matches(name))
    }

    /// The glob as written.
    pub fn as_str(&self) -> &str {
        &self.text
    }
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
            assert!(glob.compiled.get().is_none(), "{text}");
        }
    }

    #[test]
    fn a_glob_no_name_could_match_is_never_compiled() {
        let glob = Glob::new("registry.internal/?*".to_owned()).unwrap();
        assert!(!glob.matches("docker.io/library/nginx:1"));
        assert!(glob.compiled.get().is_none());
        assert!(glob.matches("registry.internal/x:1"));
        assert!(glob.compiled.get().is_some());
    }
}
