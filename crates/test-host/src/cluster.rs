//! A directory of manifests standing for the cluster's objects.
//!
//! `kubernetes/get_resource` and the list operations are answered from here
//! instead of an API server. Files ending in `.yaml`, `.yml` or `.json` are
//! read (multi-document YAML and `kind: List` / `kind: *List` allowed), in
//! sorted order, top-level only.

use std::collections::BTreeSet;
use std::path::Path;

use anyhow::{anyhow, Context, Result};
use serde::Deserialize;
use serde_json::{Map, Value};

/// All objects found in the cluster directory.
#[derive(Debug, Default, Clone)]
pub struct ClusterStore {
    objects: Vec<Value>,
}

fn str_at<'a>(v: &'a Value, path: &[&str]) -> Option<&'a str> {
    let mut cur = v;
    for p in path {
        cur = cur.get(*p)?;
    }
    cur.as_str()
}

impl ClusterStore {
    /// Load every manifest file of `dir`.
    pub fn from_dir(dir: &Path) -> Result<Self> {
        let mut paths: Vec<_> = std::fs::read_dir(dir)
            .with_context(|| format!("cannot read cluster dir {}", dir.display()))?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| {
                p.is_file()
                    && matches!(
                        p.extension().and_then(|e| e.to_str()),
                        Some("yaml" | "yml" | "json")
                    )
            })
            .collect();
        paths.sort();
        let mut store = ClusterStore::default();
        for path in paths {
            let text = std::fs::read_to_string(&path)
                .with_context(|| format!("cannot read {}", path.display()))?;
            store
                .add_documents(&text)
                .with_context(|| format!("invalid manifest file {}", path.display()))?;
        }
        Ok(store)
    }

    /// Add the objects of a (multi-document) YAML or JSON text.
    pub fn add_documents(&mut self, text: &str) -> Result<()> {
        for doc in serde_yaml::Deserializer::from_str(text) {
            let value = Value::deserialize(doc)?;
            self.add_object(value)?;
        }
        Ok(())
    }

    fn add_object(&mut self, value: Value) -> Result<()> {
        match &value {
            Value::Null => Ok(()),
            Value::Object(map) => {
                let kind = map.get("kind").and_then(Value::as_str).unwrap_or_default();
                if kind.ends_with("List") {
                    if let Some(Value::Array(items)) = map.get("items") {
                        for item in items.clone() {
                            self.add_object(item)?;
                        }
                        return Ok(());
                    }
                }
                if map.get("apiVersion").and_then(Value::as_str).is_none() || kind.is_empty() {
                    return Err(anyhow!("object without apiVersion/kind: {value}"));
                }
                self.objects.push(value);
                Ok(())
            }
            other => Err(anyhow!("a manifest must be a mapping, got: {other}")),
        }
    }

    fn matches_type(obj: &Value, api_version: &str, kind: &str) -> bool {
        str_at(obj, &["apiVersion"]) == Some(api_version) && str_at(obj, &["kind"]) == Some(kind)
    }

    fn namespace_of(obj: &Value) -> Option<&str> {
        str_at(obj, &["metadata", "namespace"])
    }

    /// Does an object without `metadata.namespace` count as being in `ns`?
    /// Yes for `default`, as `kubectl apply` would put it there.
    fn in_namespace(obj: &Value, ns: &str) -> bool {
        match Self::namespace_of(obj) {
            Some(n) => n == ns,
            None => ns == "default",
        }
    }

    /// `kubernetes/get_resource`. The error text is policy-evaluator's, word for word: the
    /// guest gets it as from a policy server, and the policy reads `Cannot find` as an
    /// absent object (`src/host/error.rs`).
    pub fn get(
        &self,
        api_version: &str,
        kind: &str,
        name: &str,
        namespace: Option<&str>,
    ) -> Result<Value> {
        self.objects
            .iter()
            .find(|o| {
                Self::matches_type(o, api_version, kind)
                    && str_at(o, &["metadata", "name"]) == Some(name)
                    && match namespace {
                        Some(ns) => Self::in_namespace(o, ns),
                        None => Self::namespace_of(o).is_none(),
                    }
            })
            .cloned()
            .ok_or_else(|| {
                anyhow!(
                    "Cannot find {api_version}/{kind} named '{name}' inside of namespace '{:?}'",
                    namespace
                )
            })
    }

    /// `kubernetes/list_resources_by_namespace` (with `Some`) and
    /// `list_resources_all` (with `None`), answered as a `<Kind>List` so that
    /// `k8s_openapi::List<T>` on the guest side accepts it.
    pub fn list(
        &self,
        api_version: &str,
        kind: &str,
        namespace: Option<&str>,
        label_selector: Option<&str>,
        field_selector: Option<&str>,
        field_masks: Option<&BTreeSet<String>>,
    ) -> Result<Value> {
        let labels = parse_selector(label_selector.unwrap_or_default())?;
        let fields = parse_selector(field_selector.unwrap_or_default())?;
        let items: Vec<Value> = self
            .objects
            .iter()
            .filter(|o| Self::matches_type(o, api_version, kind))
            .filter(|o| namespace.is_none_or(|ns| Self::in_namespace(o, ns)))
            .filter(|o| {
                labels.iter().all(|req| {
                    req.matches(
                        o.get("metadata")
                            .and_then(|m| m.get("labels"))
                            .and_then(|l| l.get(&req.key))
                            .and_then(Value::as_str),
                    )
                })
            })
            .filter(|o| {
                fields.iter().all(|req| {
                    let path: Vec<&str> = req.key.split('.').collect();
                    req.matches(str_at(o, &path))
                })
            })
            .map(|o| apply_field_masks(o, field_masks))
            .collect();
        Ok(serde_json::json!({
            "apiVersion": api_version,
            "kind": format!("{kind}List"),
            "metadata": {"resourceVersion": ""},
            "items": items,
        }))
    }
}

/// One requirement of an equality-based selector.
#[derive(Debug, PartialEq)]
struct Requirement {
    key: String,
    op: SelectorOp,
    value: String,
}

#[derive(Debug, PartialEq)]
enum SelectorOp {
    Equals,
    NotEquals,
    Exists,
    NotExists,
}

impl Requirement {
    fn matches(&self, actual: Option<&str>) -> bool {
        match self.op {
            SelectorOp::Equals => actual == Some(self.value.as_str()),
            SelectorOp::NotEquals => actual != Some(self.value.as_str()),
            SelectorOp::Exists => actual.is_some(),
            SelectorOp::NotExists => actual.is_none(),
        }
    }
}

/// Parse `a=b,c==d,e!=f,g,!h`; set-based selectors (`in`, `notin`) are rejected.
fn parse_selector(selector: &str) -> Result<Vec<Requirement>> {
    let mut out = Vec::new();
    for part in selector.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        if part.contains(" in ") || part.contains(" notin ") || part.contains('(') {
            return Err(anyhow!(
                "unsupported selector (only equality is implemented): {part}"
            ));
        }
        let req = if let Some((k, v)) = part.split_once("!=") {
            Requirement {
                key: k.trim().into(),
                op: SelectorOp::NotEquals,
                value: v.trim().into(),
            }
        } else if let Some((k, v)) = part.split_once("==") {
            Requirement {
                key: k.trim().into(),
                op: SelectorOp::Equals,
                value: v.trim().into(),
            }
        } else if let Some((k, v)) = part.split_once('=') {
            Requirement {
                key: k.trim().into(),
                op: SelectorOp::Equals,
                value: v.trim().into(),
            }
        } else if let Some(k) = part.strip_prefix('!') {
            Requirement {
                key: k.trim().into(),
                op: SelectorOp::NotExists,
                value: String::new(),
            }
        } else {
            Requirement {
                key: part.into(),
                op: SelectorOp::Exists,
                value: String::new(),
            }
        };
        out.push(req);
    }
    Ok(out)
}

/// Paths always kept by a field mask, so the object stays identifiable.
const ALWAYS_KEPT: [&str; 4] = ["apiVersion", "kind", "metadata.name", "metadata.namespace"];

/// Prune `obj` to the dot paths in `masks` (plus [`ALWAYS_KEPT`]). Paths go
/// through arrays implicitly: `spec.containers.image` keeps `image` of every
/// container. `None` or an empty set returns the whole object.
pub fn apply_field_masks(obj: &Value, masks: Option<&BTreeSet<String>>) -> Value {
    let Some(masks) = masks.filter(|m| !m.is_empty()) else {
        return obj.clone();
    };
    let paths: Vec<Vec<&str>> = masks
        .iter()
        .map(String::as_str)
        .chain(ALWAYS_KEPT)
        .map(|p| p.split('.').filter(|s| !s.is_empty()).collect())
        .collect();
    let refs: Vec<&[&str]> = paths.iter().map(Vec::as_slice).collect();
    prune(obj, &refs).unwrap_or_else(|| Value::Object(Map::new()))
}

fn prune(value: &Value, paths: &[&[&str]]) -> Option<Value> {
    if paths.iter().any(|p| p.is_empty()) {
        return Some(value.clone());
    }
    match value {
        Value::Object(map) => {
            let mut out = Map::new();
            for (key, child) in map {
                let sub: Vec<&[&str]> = paths
                    .iter()
                    .filter(|p| p.first() == Some(&key.as_str()))
                    .map(|p| &p[1..])
                    .collect();
                if sub.is_empty() {
                    continue;
                }
                if let Some(pruned) = prune(child, &sub) {
                    out.insert(key.clone(), pruned);
                }
            }
            if out.is_empty() {
                None
            } else {
                Some(Value::Object(out))
            }
        }
        Value::Array(items) => Some(Value::Array(
            items.iter().filter_map(|i| prune(i, paths)).collect(),
        )),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const MANIFESTS: &str = r#"
apiVersion: v1
kind: Secret
metadata:
  name: regcred
  namespace: team-a
  labels: {app: web}
type: kubernetes.io/dockerconfigjson
data:
  .dockerconfigjson: e30=
---
apiVersion: v1
kind: List
items:
- apiVersion: v1
  kind: ServiceAccount
  metadata: {name: default, namespace: team-a}
  imagePullSecrets: [{name: regcred}]
- apiVersion: v1
  kind: Secret
  metadata: {name: other, namespace: team-b, labels: {app: db}}
  type: Opaque
---
apiVersion: v1
kind: Namespace
metadata: {name: team-a}
"#;

    fn store() -> ClusterStore {
        let mut s = ClusterStore::default();
        s.add_documents(MANIFESTS).expect("parse");
        s
    }

    #[test]
    fn get_found_and_not_found_text() {
        let s = store();
        let secret = s
            .get("v1", "Secret", "regcred", Some("team-a"))
            .expect("found");
        assert_eq!(secret["type"], "kubernetes.io/dockerconfigjson");
        let sa = s
            .get("v1", "ServiceAccount", "default", Some("team-a"))
            .expect("found in List");
        assert_eq!(sa["imagePullSecrets"][0]["name"], "regcred");
        assert!(s.get("v1", "Namespace", "team-a", None).is_ok());
        let e = s
            .get("v1", "Secret", "regcred", Some("team-b"))
            .expect_err("absent");
        assert_eq!(
            e.to_string(),
            "Cannot find v1/Secret named 'regcred' inside of namespace 'Some(\"team-b\")'"
        );
        let e = s.get("v1", "Namespace", "nope", None).expect_err("absent");
        assert_eq!(
            e.to_string(),
            "Cannot find v1/Namespace named 'nope' inside of namespace 'None'"
        );
    }

    #[test]
    fn directory_loading() {
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::write(dir.path().join("a.yaml"), MANIFESTS).expect("write");
        std::fs::write(
            dir.path().join("b.json"),
            r#"{"apiVersion":"v1","kind":"Secret","metadata":{"name":"j","namespace":"x"}}"#,
        )
        .expect("write");
        std::fs::write(dir.path().join("ignored.txt"), "not yaml: [").expect("write");
        let s = ClusterStore::from_dir(dir.path()).expect("load");
        assert!(s.get("v1", "Secret", "j", Some("x")).is_ok());
        assert!(s.get("v1", "Secret", "regcred", Some("team-a")).is_ok());
    }

    #[test]
    fn list_with_selectors() {
        let s = store();
        let all = s
            .list("v1", "Secret", None, None, None, None)
            .expect("list");
        assert_eq!(all["kind"], "SecretList");
        assert_eq!(all["items"].as_array().map(Vec::len), Some(2));
        let ns = s
            .list("v1", "Secret", Some("team-b"), None, None, None)
            .expect("list");
        assert_eq!(ns["items"][0]["metadata"]["name"], "other");
        let web = s
            .list("v1", "Secret", None, Some("app=web"), None, None)
            .expect("list");
        assert_eq!(web["items"].as_array().map(Vec::len), Some(1));
        let not_web = s
            .list("v1", "Secret", None, Some("app!=web"), None, None)
            .expect("list");
        assert_eq!(not_web["items"][0]["metadata"]["name"], "other");
        let by_field = s
            .list(
                "v1",
                "Secret",
                None,
                None,
                Some("metadata.name=regcred"),
                None,
            )
            .expect("list");
        assert_eq!(by_field["items"].as_array().map(Vec::len), Some(1));
        assert!(s
            .list("v1", "Secret", None, Some("app in (a,b)"), None, None)
            .is_err());
    }

    #[test]
    fn field_masks_prune() {
        let obj = json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "p", "namespace": "n", "labels": {"a": "b"}},
            "spec": {"containers": [{"name": "c", "image": "i1"}, {"name": "d", "image": "i2"}],
                     "nodeName": "x"},
            "status": {"phase": "Running"}
        });
        let masks: BTreeSet<String> = ["spec.containers.image".to_owned()].into();
        let pruned = apply_field_masks(&obj, Some(&masks));
        assert_eq!(
            pruned,
            json!({
                "apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": "p", "namespace": "n"},
                "spec": {"containers": [{"image": "i1"}, {"image": "i2"}]}
            })
        );
        let masks: BTreeSet<String> = ["type".to_owned(), "data".to_owned()].into();
        let secret = json!({"apiVersion":"v1","kind":"Secret","metadata":{"name":"s","uid":"u"},"type":"t","data":{"k":"v"}});
        assert_eq!(
            apply_field_masks(&secret, Some(&masks)),
            json!({"apiVersion":"v1","kind":"Secret","metadata":{"name":"s"},"type":"t","data":{"k":"v"}})
        );
        assert_eq!(apply_field_masks(&obj, None), obj);
        assert_eq!(apply_field_masks(&obj, Some(&BTreeSet::new())), obj);
    }
}
