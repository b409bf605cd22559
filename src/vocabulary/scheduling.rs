//! Which nodes a pod can land on, as the scheduler's filters decide it: `nodeSelector`,
//! required node affinity (`In`, `NotIn`, `Exists`, `DoesNotExist`, `Gt`, `Lt`), the node's
//! `NoSchedule` / `NoExecute` taints the pod does not tolerate, and cordoned nodes. Only the
//! platforms of nodes a pod can reach are required of its images: an arm64 pool tainted
//! `NoSchedule` (as GKE taints Arm pools) never runs a pod that does not tolerate it.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::OnceLock;

use serde_json::Value;

use crate::vocabulary::platform::Platform;

/// The taint a cordoned node (`spec.unschedulable`) carries for the scheduler.
const UNSCHEDULABLE_TAINT: &str = "node.kubernetes.io/unschedulable";

/// What the scheduler knows of a node, and its platform.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Node {
    /// `metadata.name`.
    pub name: String,
    /// `metadata.labels`.
    pub labels: BTreeMap<String, String>,
    /// `spec.taints` with effect `NoSchedule` or `NoExecute`.
    pub taints: Vec<Taint>,
    /// The platform its kubelet runs: `kubernetes.io/os` / `arch` (or `status.nodeInfo`), and
    /// the Windows build of `node.kubernetes.io/windows-build`.
    pub platform: Platform,
}

/// A taint that keeps pods off a node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Taint {
    /// The taint's key.
    pub key: String,
    /// Its value (empty when none).
    pub value: String,
    /// `NoSchedule` or `NoExecute`.
    pub effect: String,
}

/// The field masks a Node list needs for [`nodes_of`]: nothing else crosses the boundary.
pub const NODE_FIELDS: [&str; 5] = [
    "metadata.name",
    "metadata.labels",
    "spec.taints",
    "spec.unschedulable",
    "status.nodeInfo",
];

/// The nodes of a `NodeList` whose platform is known.
pub fn nodes_of(list: &Value) -> Vec<Node> {
    list["items"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(node_of)
        .collect()
}

fn node_of(node: &Value) -> Option<Node> {
    let labels: BTreeMap<String, String> = node["metadata"]["labels"]
        .as_object()
        .into_iter()
        .flatten()
        .filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_owned())))
        .collect();
    let info = &node["status"]["nodeInfo"];
    let os = labels
        .get("kubernetes.io/os")
        .map(String::as_str)
        .or(info["operatingSystem"].as_str())?;
    let arch = labels
        .get("kubernetes.io/arch")
        .map(String::as_str)
        .or(info["architecture"].as_str())?;
    let build = labels
        .get("node.kubernetes.io/windows-build")
        .map(String::as_str);
    let mut taints: Vec<Taint> = node["spec"]["taints"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|taint| {
            let effect = taint["effect"].as_str()?;
            matches!(effect, "NoSchedule" | "NoExecute").then(|| Taint {
                key: taint["key"].as_str().unwrap_or_default().to_owned(),
                value: taint["value"].as_str().unwrap_or_default().to_owned(),
                effect: effect.to_owned(),
            })
        })
        .collect();
    if node["spec"]["unschedulable"] == Value::Bool(true) {
        taints.push(Taint {
            key: UNSCHEDULABLE_TAINT.to_owned(),
            value: String::new(),
            effect: "NoSchedule".to_owned(),
        });
    }
    Some(Node {
        name: node["metadata"]["name"]
            .as_str()
            .unwrap_or_default()
            .to_owned(),
        platform: Platform::new(os, arch, None, build),
        labels,
        taints,
    })
}

/// A member of a pod spec (`affinity`, `tolerations`) kept as the JSON text the request holds
/// and parsed when a rule first reads it: only a check of an image's platforms against the
/// nodes reads them, and building their values cost every request. Compared by value.
#[derive(Clone, Default)]
pub struct LazyJson {
    text: Option<Box<str>>,
    value: OnceLock<Value>,
}

impl LazyJson {
    /// The member whose JSON text is `text` (the scanner found it in a request's text, which
    /// the host serialised: text that does not parse reads as `null`).
    pub fn from_text(text: &str) -> Self {
        LazyJson {
            text: Some(text.into()),
            value: OnceLock::new(),
        }
    }

    /// The member's value, parsed on first use.
    pub fn get(&self) -> &Value {
        self.value.get_or_init(|| {
            self.text
                .as_deref()
                .and_then(|text| serde_json::from_str(text).ok())
                .unwrap_or(Value::Null)
        })
    }
}

impl From<Value> for LazyJson {
    fn from(value: Value) -> Self {
        LazyJson {
            text: None,
            value: OnceLock::from(value),
        }
    }
}

impl PartialEq for LazyJson {
    fn eq(&self, other: &Self) -> bool {
        self.get() == other.get()
    }
}

impl Eq for LazyJson {}

impl fmt::Debug for LazyJson {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.get().fmt(f)
    }
}

/// What in a pod spec narrows the nodes it lands on.
#[derive(Debug, Clone, Copy)]
pub struct Placement<'a> {
    /// `nodeSelector`.
    pub node_selector: &'a BTreeMap<String, String>,
    /// `affinity`, as written.
    pub affinity: &'a LazyJson,
    /// `tolerations`, as written.
    pub tolerations: &'a LazyJson,
    /// Pods of a DaemonSet get the tolerations its controller adds (not-ready, unreachable,
    /// pressure conditions, unschedulable).
    pub daemon_set: bool,
}

/// The placement of images outside any pod spec (a custom kind's bare image fields).
static NO_SELECTOR: BTreeMap<String, String> = BTreeMap::new();
static NOTHING: LazyJson = LazyJson {
    text: None,
    value: OnceLock::new(),
};

impl Placement<'static> {
    /// A pod that may land anywhere: no selector, no affinity, no tolerations.
    pub fn anywhere() -> Self {
        Placement {
            node_selector: &NO_SELECTOR,
            affinity: &NOTHING,
            tolerations: &NOTHING,
            daemon_set: false,
        }
    }
}

/// Tolerations the DaemonSet controller adds to every pod it creates.
const DAEMON_SET_TOLERATIONS: [(&str, &str); 6] = [
    ("node.kubernetes.io/not-ready", "NoExecute"),
    ("node.kubernetes.io/unreachable", "NoExecute"),
    ("node.kubernetes.io/disk-pressure", "NoSchedule"),
    ("node.kubernetes.io/memory-pressure", "NoSchedule"),
    ("node.kubernetes.io/pid-pressure", "NoSchedule"),
    (UNSCHEDULABLE_TAINT, "NoSchedule"),
];

impl Placement<'_> {
    /// True when the scheduler may place the pod on `node`.
    pub fn fits(&self, node: &Node) -> bool {
        self.matches_labels(&node.labels, false)
            && node.taints.iter().all(|taint| self.tolerates(taint))
    }

    /// True when a node with just these `labels` may take the pod, judging only the
    /// requirements on labels it has: for a platform named in the settings, which stands for
    /// nodes whose other labels are unknown.
    pub fn may_fit_labels(&self, labels: &BTreeMap<String, String>) -> bool {
        self.matches_labels(labels, true)
    }

    fn matches_labels(&self, labels: &BTreeMap<String, String>, partial: bool) -> bool {
        let selector_ok = self
            .node_selector
            .iter()
            .all(|(key, value)| match labels.get(key) {
                Some(actual) => actual == value,
                None => partial,
            });
        let terms = self.affinity.get()["nodeAffinity"]
            ["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
            .as_array();
        // No terms (or an empty list, which the API server refuses) constrain nothing; terms are
        // ORed, the expressions of a term ANDed.
        let affinity_ok = match terms {
            Some(terms) if !terms.is_empty() => terms.iter().any(|term| {
                term["matchExpressions"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .all(|expression| expression_matches(expression, labels, partial))
            }),
            _ => true,
        };
        selector_ok && affinity_ok
    }

    /// The scheduler's `TolerationsTolerateTaint`, with the DaemonSet controller's additions.
    fn tolerates(&self, taint: &Taint) -> bool {
        let daemon = self.daemon_set
            && DAEMON_SET_TOLERATIONS
                .iter()
                .any(|(key, effect)| *key == taint.key && *effect == taint.effect);
        daemon
            || self
                .tolerations
                .get()
                .as_array()
                .into_iter()
                .flatten()
                .any(|toleration| toleration_matches(toleration, taint))
    }
}

/// One `matchExpressions` entry against a node's labels; with `partial`, a key the labels do not
/// have is not judged.
fn expression_matches(
    expression: &Value,
    labels: &BTreeMap<String, String>,
    partial: bool,
) -> bool {
    let key = expression["key"].as_str().unwrap_or_default();
    let values: Vec<&str> = expression["values"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .collect();
    let value = labels.get(key);
    if value.is_none() && partial {
        return true;
    }
    let number = |text: &str| text.parse::<i64>().ok();
    match expression["operator"].as_str().unwrap_or_default() {
        "In" => value.is_some_and(|v| values.contains(&v.as_str())),
        "NotIn" => value.is_none_or(|v| !values.contains(&v.as_str())),
        "Exists" => value.is_some(),
        "DoesNotExist" => value.is_none(),
        "Gt" => {
            matches!((value.and_then(|v| number(v)), values.first().and_then(|v| number(v))), (Some(a), Some(b)) if a > b)
        }
        "Lt" => {
            matches!((value.and_then(|v| number(v)), values.first().and_then(|v| number(v))), (Some(a), Some(b)) if a < b)
        }
        // An operator the API server would refuse: the scheduler matches nothing with it.
        _ => false,
    }
}

/// Kubernetes' `Toleration.ToleratesTaint`.
fn toleration_matches(toleration: &Value, taint: &Taint) -> bool {
    let effect = toleration["effect"].as_str().unwrap_or_default();
    if !effect.is_empty() && effect != taint.effect {
        return false;
    }
    let key = toleration["key"].as_str().unwrap_or_default();
    let operator = toleration["operator"].as_str().unwrap_or("Equal");
    if key.is_empty() {
        return operator == "Exists";
    }
    key == taint.key
        && match operator {
            "Exists" => true,
            "Equal" | "" => toleration["value"].as_str().unwrap_or_default() == taint.value,
            _ => false,
        }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn node(name: &str, arch: &str, taints: Value, unschedulable: bool) -> Value {
        json!({"metadata": {"name": name, "labels": {
                 "kubernetes.io/os": "linux", "kubernetes.io/arch": arch, "pool": name}},
               "spec": {"taints": taints, "unschedulable": unschedulable}})
    }

    fn fitting(placement: &Placement<'_>, nodes: &[Node]) -> Vec<String> {
        nodes
            .iter()
            .filter(|n| placement.fits(n))
            .map(|n| n.name.clone())
            .collect()
    }

    fn cluster() -> Vec<Node> {
        nodes_of(&json!({"items": [
            node("amd", "amd64", json!([]), false),
            node("arm", "arm64", json!([{"key": "kubernetes.io/arch", "value": "arm64", "effect": "NoSchedule"}]), false),
            node("cordoned", "amd64", json!([]), true),
            node("soft", "amd64", json!([{"key": "x", "effect": "PreferNoSchedule"}]), false),
            {"metadata": {"name": "unknown"}},
        ]}))
    }

    #[test]
    fn nodes_carry_their_platform_and_hard_taints() {
        let nodes = cluster();
        assert_eq!(nodes.len(), 4, "a node without a platform is left out");
        assert_eq!(nodes[1].platform, Platform::parse("linux/arm64").unwrap());
        assert!(
            nodes[3].taints.is_empty(),
            "PreferNoSchedule never keeps a pod off"
        );
        assert_eq!(nodes[2].taints[0].key, UNSCHEDULABLE_TAINT);
    }

    /// The cases of kubernetes `pkg/scheduler/framework/plugins/tainttoleration` and
    /// `component-helpers/scheduling/corev1` `TestTolerationsTolerateTaint`, condensed.
    #[test]
    fn tolerations_match_as_the_scheduler_matches_them() {
        let taint = Taint {
            key: "k".into(),
            value: "v".into(),
            effect: "NoSchedule".into(),
        };
        for (toleration, expected) in [
            (
                json!({"key": "k", "operator": "Equal", "value": "v", "effect": "NoSchedule"}),
                true,
            ),
            (json!({"key": "k", "value": "v"}), true),
            (json!({"key": "k", "operator": "Exists"}), true),
            (json!({"operator": "Exists"}), true),
            (json!({"operator": "Exists", "effect": "NoExecute"}), false),
            (json!({"key": "k", "value": "w"}), false),
            (json!({"key": "other", "operator": "Exists"}), false),
            (json!({"key": "", "operator": "Equal"}), false),
        ] {
            assert_eq!(
                toleration_matches(&toleration, &taint),
                expected,
                "{toleration}"
            );
        }
    }

    #[test]
    fn taints_affinity_and_selectors_narrow_the_nodes() {
        let nodes = cluster();
        let empty = BTreeMap::new();
        let none = LazyJson::from(json!(null));
        let plain = Placement {
            node_selector: &empty,
            affinity: &none,
            tolerations: &none,
            daemon_set: false,
        };
        assert_eq!(fitting(&plain, &nodes), ["amd", "soft"]);
        let tolerations =
            LazyJson::from(json!([{"key": "kubernetes.io/arch", "operator": "Exists"}]));
        let tolerant = Placement {
            tolerations: &tolerations,
            ..plain
        };
        assert_eq!(fitting(&tolerant, &nodes), ["amd", "arm", "soft"]);
        let affinity = json!({"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [{"matchExpressions": [
                {"key": "kubernetes.io/arch", "operator": "In", "values": ["arm64"]}]}]}}});
        let arm_only = Placement {
            affinity: &LazyJson::from(affinity.clone()),
            ..tolerant
        };
        assert_eq!(fitting(&arm_only, &nodes), ["arm"]);
        let daemon = Placement {
            daemon_set: true,
            ..plain
        };
        assert_eq!(
            fitting(&daemon, &nodes),
            ["amd", "cordoned", "soft"],
            "DaemonSets run on cordoned nodes"
        );
        let selector = BTreeMap::from([("pool".to_owned(), "soft".to_owned())]);
        let selected = Placement {
            node_selector: &selector,
            ..plain
        };
        assert_eq!(fitting(&selected, &nodes), ["soft"]);
    }

    #[test]
    fn affinity_operators() {
        let labels = BTreeMap::from([
            ("a".to_owned(), "1".to_owned()),
            ("n".to_owned(), "5".to_owned()),
        ]);
        for (expression, expected) in [
            (
                json!({"key": "a", "operator": "In", "values": ["1", "2"]}),
                true,
            ),
            (
                json!({"key": "a", "operator": "NotIn", "values": ["1"]}),
                false,
            ),
            (
                json!({"key": "b", "operator": "NotIn", "values": ["1"]}),
                true,
            ),
            (json!({"key": "a", "operator": "Exists"}), true),
            (json!({"key": "b", "operator": "DoesNotExist"}), true),
            (json!({"key": "n", "operator": "Gt", "values": ["4"]}), true),
            (
                json!({"key": "n", "operator": "Lt", "values": ["4"]}),
                false,
            ),
            (
                json!({"key": "n", "operator": "Gt", "values": ["x"]}),
                false,
            ),
            (
                json!({"key": "a", "operator": "Like", "values": ["1"]}),
                false,
            ),
        ] {
            assert_eq!(
                expression_matches(&expression, &labels, false),
                expected,
                "{expression}"
            );
        }
        let unknown = json!({"key": "pool", "operator": "In", "values": ["gpu"]});
        assert!(
            expression_matches(&unknown, &labels, true),
            "partial: unknown keys are not judged"
        );
    }
}
