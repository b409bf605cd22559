//! The tag listing against a scripted registry on 127.0.0.1: pages followed by their `Link`,
//! on the same registry whatever the link names; bounded in pages and bytes; only a 200 lists.

use std::net::TcpListener;
use std::sync::{Arc, Mutex};

use oci_client::secrets::RegistryAuth;
use oci_client::Reference;
use registry_client::pool::{Pool, TagLimits, TagListError, UrlSlot};
use registry_client::sources::Sources;

use crate::common;
use common::{reply, serve};

const LIMITS: TagLimits = TagLimits {
    page_size: 2,
    max_pages: 10,
    max_bytes: 1 << 20,
};

/// A registry whose `team/app` has `tags`, pages linked on `link_host`, a 403 for anything
/// else; and the heads it saw.
fn registry(tags: Vec<String>, link_host: &'static str) -> (String, Arc<Mutex<Vec<String>>>) {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let address = listener.local_addr().expect("address").to_string();
    let seen = Arc::new(Mutex::new(Vec::new()));
    serve(listener, seen.clone(), move |head| {
        let path = head.split(' ').nth(1).unwrap_or("");
        let Some(query) = path.strip_prefix("/v2/team/app/tags/list?") else {
            return reply(
                "403 Forbidden",
                &[],
                r#"{"errors":[{"code":"DENIED","message":"no"}]}"#,
            );
        };
        let n: usize = query
            .split('&')
            .find_map(|p| p.strip_prefix("n="))
            .and_then(|n| n.parse().ok())
            .unwrap_or(tags.len());
        let start = query
            .split('&')
            .find_map(|p| p.strip_prefix("last="))
            .and_then(|last| tags.iter().position(|t| t == last))
            .map_or(0, |i| i + 1);
        let page: Vec<&String> = tags.iter().skip(start).take(n).collect();
        let mut headers = Vec::new();
        if start + n < tags.len() {
            if let Some(last) = page.last() {
                headers.push(format!(
                    "Link: <{link_host}/v2/team/app/tags/list?last={last}&n={n}>; rel=\"next\""
                ));
            }
        }
        let body = serde_json::json!({"name": "team/app", "tags": page}).to_string();
        reply("200 OK", &headers, &body)
    });
    (address, seen)
}

fn list(address: &str, repository: &str, limits: TagLimits) -> Result<Vec<String>, TagListError> {
    registry_client::install_tls_provider();
    let sources =
        Sources::from_yaml(&format!("insecure_sources: [\"{address}\"]\n")).expect("sources");
    let pool = Pool::new(sources);
    let reference: Reference = format!("{address}/{repository}:x")
        .parse()
        .expect("reference");
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime")
        .block_on(pool.tags(
            &reference,
            &RegistryAuth::Anonymous,
            limits,
            &UrlSlot::default(),
        ))
}

#[test]
fn every_page_is_read_on_the_same_registry_whatever_the_link_names() {
    let tags: Vec<String> = ["v1", "v1.2", "v1.2.3", "v1.2.31", "latest"]
        .map(String::from)
        .to_vec();
    let (address, seen) = registry(tags.clone(), "http://elsewhere.invalid:1");
    assert_eq!(list(&address, "team/app", LIMITS).expect("listed"), tags);
    let heads = seen.lock().expect("seen").clone();
    let pages: Vec<&str> = heads
        .iter()
        .filter_map(|h| h.split(' ').nth(1))
        .filter(|p| p.contains("tags/list"))
        .collect();
    assert_eq!(
        pages,
        [
            "/v2/team/app/tags/list?n=2",
            "/v2/team/app/tags/list?n=2&last=v1.2",
            "/v2/team/app/tags/list?n=2&last=v1.2.31"
        ]
    );
}

#[test]
fn a_listing_is_bounded_in_pages_and_bytes() {
    let tags: Vec<String> = (0..20).map(|i| format!("t{i}")).collect();
    let (address, _) = registry(tags, "");
    let few_pages = TagLimits {
        max_pages: 3,
        ..LIMITS
    };
    assert!(matches!(
        list(&address, "team/app", few_pages),
        Err(TagListError::TooManyPages(3))
    ));
    let few_bytes = TagLimits {
        max_bytes: 100,
        ..LIMITS
    };
    assert!(matches!(
        list(&address, "team/app", few_bytes),
        Err(TagListError::TooLarge(100))
    ));
}

#[test]
fn only_a_200_lists() {
    let (address, _) = registry(vec!["v1".into()], "");
    assert!(matches!(
        list(&address, "team/other", LIMITS),
        Err(TagListError::NotListed { status: 403 })
    ));
}
