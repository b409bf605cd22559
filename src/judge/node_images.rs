//! Images the nodes already have. The kubelet pulls an `IfNotPresent` image only when its node
//! lacks it, so a tag deleted from its registry (retention policies do this daily) still starts
//! on nodes that cached it: such an image is not certain to fail. Nodes report what they hold
//! in `status.images[].names` (at most 50 images per node by default, so absence from the list
//! proves nothing); they are read only when an absent image could be saved by them.

use serde_json::Value;

use crate::host::budget::Budget;
use crate::host::{Host, ListAllRequest};
use crate::vocabulary::reference::ImageReference;

/// How many nodes a message names.
const NODES_NAMED: usize = 3;

/// The nodes' image lists, read at most once per request.
pub struct NodeImages<'a, H: Host> {
    host: &'a H,
    budget: &'a Budget,
    nodes: Option<Vec<Node>>,
}

/// One node's name and the images it reports.
struct Node {
    name: String,
    images: Vec<ImageReference>,
}

impl<'a, H: Host> NodeImages<'a, H> {
    /// Nothing is read until [`NodeImages::holding`] is first asked; the listing is not a
    /// lookup, and `budget` does not charge the next lookup for it.
    pub fn new(host: &'a H, budget: &'a Budget) -> Self {
        NodeImages {
            host,
            budget,
            nodes: None,
        }
    }

    /// The names of the nodes that hold `reference` (by digest when it has one, else by tag).
    /// Empty when none does, or when Nodes cannot be read.
    pub fn holding(&mut self, reference: &ImageReference) -> Vec<String> {
        let (host, budget) = (self.host, self.budget);
        self.nodes
            .get_or_insert_with(|| budget.outside(host, || read_nodes(host)))
            .iter()
            .filter(|node| node.images.iter().any(|image| same_image(image, reference)))
            .map(|node| node.name.clone())
            .collect()
    }
}

/// "node-a, node-b, node-c and 4 more"
pub fn name_nodes(nodes: &[String]) -> String {
    let named = nodes
        .iter()
        .take(NODES_NAMED)
        .cloned()
        .collect::<Vec<_>>()
        .join(", ");
    match nodes.len().saturating_sub(NODES_NAMED) {
        0 => named,
        more => format!("{named} and {more} more"),
    }
}

/// True when a node's image name is the image a pod asks for.
fn same_image(held: &ImageReference, wanted: &ImageReference) -> bool {
    if held.name() != wanted.name() {
        return false;
    }
    match wanted.digest() {
        Some(digest) => held.digest() == Some(digest),
        None => held.digest().is_none() && held.tag() == wanted.tag(),
    }
}

/// Every Node's name and parsed image names; none when Nodes cannot be read.
fn read_nodes(host: &impl Host) -> Vec<Node> {
    let request = ListAllRequest {
        api_version: "v1".into(),
        kind: "Node".into(),
        label_selector: None,
        field_selector: None,
        field_masks: Some(vec!["metadata.name".into(), "status.images".into()]),
    };
    let Ok(list) = host.list_resources_all(&request) else {
        return Vec::new();
    };
    list["items"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|node| Node {
            name: node["metadata"]["name"]
                .as_str()
                .unwrap_or("(unnamed)")
                .to_owned(),
            images: node["status"]["images"]
                .as_array()
                .into_iter()
                .flatten()
                .flat_map(|image| image["names"].as_array().into_iter().flatten())
                .filter_map(Value::as_str)
                .filter_map(|name| ImageReference::parse(name).ok())
                .collect(),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::host::InMemoryHost;
    use serde_json::json;

    const SHA: &str = "sha256:aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";

    fn nodes() -> InMemoryHost {
        let node = |name: &str, names: Vec<String>| json!({"metadata": {"name": name}, "status": {"images": [{"names": names, "sizeBytes": 1}]}});
        InMemoryHost::new().with_nodes(json!({"items": [
            node("node-a", vec!["docker.io/library/nginx:1.25".into(), format!("docker.io/library/nginx@{SHA}")]),
            node("node-b", vec!["registry.example.com/team/app:1.0".into()]),
            node("node-c", vec!["nginx:1.25".into(), "not a valid name".into()]),
        ]}))
    }

    fn holding(images: &mut NodeImages<'_, InMemoryHost>, image: &str) -> Vec<String> {
        images.holding(&ImageReference::parse(image).unwrap())
    }

    #[test]
    fn nodes_are_matched_by_normalised_tag_or_digest() {
        let host = nodes();
        let budget = Budget::start(&host, std::time::Duration::from_secs(1));
        let mut images = NodeImages::new(&host, &budget);
        assert_eq!(holding(&mut images, "nginx:1.25"), ["node-a", "node-c"]);
        assert_eq!(
            holding(&mut images, "docker.io/library/nginx:1.25"),
            ["node-a", "node-c"]
        );
        assert_eq!(holding(&mut images, &format!("nginx@{SHA}")), ["node-a"]);
        assert_eq!(
            holding(&mut images, &format!("nginx:1.24@{SHA}")),
            ["node-a"]
        );
        assert!(holding(&mut images, "nginx:1.24").is_empty());
        assert!(holding(&mut images, "registry.example.com/team/app:2.0").is_empty());
        assert_eq!(
            host.calls(),
            ["list Node"],
            "Nodes are listed once per request"
        );
    }

    #[test]
    fn unreadable_nodes_hold_nothing() {
        let host = InMemoryHost::new().with_resource_error(
            "Policy has not been granted access to Kubernetes v1/Node resources.",
        );
        let budget = Budget::start(&host, std::time::Duration::from_secs(1));
        assert!(NodeImages::new(&host, &budget)
            .holding(&ImageReference::parse("nginx:1.25").unwrap())
            .is_empty());
    }

    #[test]
    fn at_most_three_nodes_are_named() {
        let names: Vec<String> = (1..=5).map(|i| format!("n{i}")).collect();
        assert_eq!(name_nodes(&names[..2]), "n1, n2");
        assert_eq!(name_nodes(&names), "n1, n2, n3 and 2 more");
    }
}
