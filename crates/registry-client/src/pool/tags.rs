//! A repository's tags (`GET /v2/<name>/tags/list`, the distribution API's listing), page by
//! page (`n`, and the `last` of the `Link` header's next page), bounded in pages and bytes; the
//! caller bounds the time. Only a `200` lists: any other answer (Docker Hub's 401 for a
//! repository that does not exist, a 403 for a credential that may read manifests but not
//! list) is [`TagListError::NotListed`]. The next page is asked of the same registry whatever
//! the `Link` says: only its `last` is read.

use oci_client::secrets::RegistryAuth;
use oci_client::Reference;
use reqwest::{Method, StatusCode};

use super::{body_at_most, body_prefix, Pool, Target, UrlSlot, MAX_ERROR_BYTES};
use crate::RegistryError;

/// How much of a listing is read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TagLimits {
    /// Tags asked per page (`n`).
    pub page_size: usize,
    /// Pages read at most.
    pub max_pages: usize,
    /// Bytes read at most, every page together.
    pub max_bytes: usize,
}

/// Why a repository's tags were not listed.
#[derive(Debug, thiserror::Error)]
pub enum TagListError {
    /// The registry answered another status than 200.
    #[error("the registry answered {status} to the tag listing")]
    NotListed {
        /// Its status.
        status: u16,
    },
    /// More pages than [`TagLimits::max_pages`].
    #[error("the tag listing has more than {0} pages")]
    TooManyPages(usize),
    /// More bytes than [`TagLimits::max_bytes`], or a page without room left.
    #[error("the tag listing is larger than {0} bytes")]
    TooLarge(usize),
    /// A page that is not the listing's JSON.
    #[error("the tag listing is not readable: {0}")]
    Unreadable(#[from] serde_json::Error),
    /// No answer (a connection, TLS or token service failure).
    #[error(transparent)]
    Registry(#[from] RegistryError),
}

/// One page of the listing.
#[derive(serde::Deserialize)]
struct Page {
    #[serde(default)]
    tags: Option<Vec<String>>,
}

impl Pool {
    /// Every tag of `reference`'s repository, in the registry's order, with `auth`.
    pub async fn tags(
        &self,
        reference: &Reference,
        auth: &RegistryAuth,
        limits: TagLimits,
        slot: &UrlSlot,
    ) -> Result<Vec<String>, TagListError> {
        let mut tags = Vec::new();
        let mut left = limits.max_bytes;
        let mut last: Option<String> = None;
        for _ in 0..limits.max_pages {
            let path = page_path(limits.page_size, last.as_deref());
            let (_, response) = self
                .open_at(
                    reference,
                    Target::Path(&path),
                    auth,
                    Method::GET,
                    &["application/json"],
                    slot,
                )
                .await?;
            let status = response.status();
            if status != StatusCode::OK {
                let _ = body_prefix(response, MAX_ERROR_BYTES).await;
                return Err(TagListError::NotListed {
                    status: status.as_u16(),
                });
            }
            let next = response
                .headers()
                .get(reqwest::header::LINK)
                .and_then(|v| v.to_str().ok())
                .and_then(next_last);
            let body = body_at_most(response, left, "a tag listing")
                .await
                .map_err(|_| TagListError::TooLarge(limits.max_bytes))?;
            left -= body.len();
            let page: Page = serde_json::from_slice(&body)?;
            tags.extend(page.tags.unwrap_or_default());
            match next {
                // a registry that names the same page again would never end
                Some(next) if last.as_deref() != Some(next.as_str()) => last = Some(next),
                _ => return Ok(tags),
            }
        }
        Err(TagListError::TooManyPages(limits.max_pages))
    }
}

/// `tags/list?n=N[&last=LAST]`, `last` percent-encoded.
fn page_path(page_size: usize, last: Option<&str>) -> String {
    let mut path = format!("tags/list?n={page_size}");
    if let Some(last) = last {
        path.push_str("&last=");
        for byte in last.bytes() {
            if byte.is_ascii_alphanumeric() || matches!(byte, b'-' | b'.' | b'_') {
                path.push(char::from(byte));
            } else {
                path.push_str(&format!("%{byte:02X}"));
            }
        }
    }
    path
}

/// The `last` of the next page a `Link` header names (`</v2/x/tags/list?n=2&last=b>;
/// rel="next"`), percent-decoded.
fn next_last(link: &str) -> Option<String> {
    let next = link.split(',').find(|l| l.contains("rel=\"next\""))?;
    let target = next.split_once('<')?.1.split_once('>')?.0;
    let query = target.split_once('?')?.1;
    let value = query
        .split('&')
        .find_map(|pair| pair.strip_prefix("last="))?;
    let url = reqwest::Url::parse(&format!("http://x/?last={value}")).ok()?;
    let last = url.query_pairs().find(|(k, _)| k == "last")?.1.into_owned();
    (!last.is_empty()).then_some(last)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_next_page_is_read_from_the_link_header() {
        assert_eq!(
            next_last(r#"</v2/team/app/tags/list?last=v1.2.3&n=100>; rel="next""#).as_deref(),
            Some("v1.2.3")
        );
        assert_eq!(
            next_last(r#"<https://other.example/v2/x/tags/list?n=1&last=a%2Bb>; rel="next""#)
                .as_deref(),
            Some("a+b")
        );
        assert_eq!(
            next_last(r#"</v2/x/tags/list?n=1&last=a>; rel="prev""#),
            None
        );
        assert_eq!(next_last("garbage"), None);
    }

    #[test]
    fn pages_are_asked_of_the_same_repository_with_last_encoded() {
        assert_eq!(page_path(100, None), "tags/list?n=100");
        assert_eq!(page_path(100, Some("v1.2")), "tags/list?n=100&last=v1.2");
        assert_eq!(page_path(5, Some("a&b=c")), "tags/list?n=5&last=a%26b%3Dc");
    }
}
