//! An object of an admission request kept as the JSON the API server sent, and read only as far
//! as the policy needs. Building a `serde_json::Value` of a whole Pod (its metadata, managed
//! fields, every container's env and resources) cost more than every other step of a decision
//! together; the pod spec and the metadata are read straight from the text instead, and a full
//! `Value` is built only where one is needed (custom kinds' JSONPaths, pinning).

use std::collections::BTreeMap;
use std::fmt;

use serde::de::{self, DeserializeOwned, DeserializeSeed, Deserializer, IgnoredAny, Visitor};
use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::Value;

/// An object of the request (`object`, `oldObject`) as JSON; empty when absent or `null`.
#[derive(Debug, Clone, Copy, Default)]
pub struct Object<'a>(Option<&'a RawValue>);

impl<'a> Object<'a> {
    /// The object whose JSON is `raw`.
    pub fn new(raw: Option<&'a RawValue>) -> Self {
        Object(raw)
    }

    /// The value at a JSON pointer of object keys (`/spec/template/spec`): `None` where a
    /// member is missing or its parent is not an object, as `Value::pointer` answers. The
    /// policy's pointers are constants: neither `~` escapes nor array indexes are read.
    pub fn at(&self, pointer: &str) -> Option<&'a RawValue> {
        let mut raw = self.0?;
        for key in pointer.split('/').skip(1) {
            raw = member(raw, key)?;
        }
        Some(raw)
    }

    /// The object's metadata and the value at `pointer`, read in one pass over the object's
    /// members: on a fresh instance every scan of the JSON is paid in full, and reading the
    /// metadata, then the pod spec, scanned the object (its managed fields included) twice.
    /// Answers as [`Object::metadata`] and [`Object::at`] would.
    pub fn metadata_and_at(&self, pointer: Option<&str>) -> (Metadata, Option<&'a RawValue>) {
        let Some(raw) = self.0 else {
            return (Metadata::default(), None);
        };
        let mut keys = pointer.map(|p| p.split('/').skip(1));
        let first = keys.as_mut().and_then(Iterator::next);
        let mut deserializer = serde_json::Deserializer::from_str(raw.get());
        let (metadata, found) = deserializer
            .deserialize_any(MembersOf(first))
            .unwrap_or_default();
        let metadata = metadata
            .and_then(|raw| serde_json::from_str(raw.get()).ok())
            .unwrap_or_default();
        let found = match (found, keys) {
            (Some(mut raw), Some(keys)) => {
                let mut found = Some(raw);
                for key in keys {
                    found = member(raw, key);
                    match found {
                        Some(next) => raw = next,
                        None => break,
                    }
                }
                found
            }
            _ => None,
        };
        (metadata, found)
    }

    /// The whole object as a `Value` (`Null` when there is none).
    pub fn value(&self) -> Value {
        self.0
            .and_then(|raw| serde_json::from_str(raw.get()).ok())
            .unwrap_or(Value::Null)
    }

    /// The object's metadata; fields of the wrong type read as absent.
    pub fn metadata(&self) -> Metadata {
        self.at("/metadata")
            .and_then(|raw| serde_json::from_str(raw.get()).ok())
            .unwrap_or_default()
    }
}

/// What the policy reads of an object's metadata. A field of the wrong type reads as absent,
/// as looking it up in a `Value` would: metadata never fails a request.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct Metadata {
    /// `metadata.name`.
    #[serde(deserialize_with = "lenient")]
    pub name: String,
    /// `metadata.generateName`, the prefix of a server-generated name.
    #[serde(deserialize_with = "lenient")]
    pub generate_name: String,
    /// The annotations' keys.
    #[serde(deserialize_with = "lenient")]
    pub annotations: BTreeMap<String, IgnoredAny>,
    /// `metadata.ownerReferences`; an entry that is not an object reads as an empty one.
    #[serde(deserialize_with = "lenient_entries")]
    pub owner_references: Vec<OwnerReference>,
}

/// An entry of `metadata.ownerReferences`.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct OwnerReference {
    /// `apps/v1`, `v1`, …
    #[serde(deserialize_with = "lenient")]
    pub api_version: String,
    /// The owner's kind.
    #[serde(deserialize_with = "lenient")]
    pub kind: String,
    /// True only for the managing controller.
    #[serde(deserialize_with = "lenient")]
    pub controller: bool,
}

/// A field read as `T`, or `T`'s default when it holds anything else.
fn lenient<'de, D, T>(deserializer: D) -> Result<T, D::Error>
where
    D: Deserializer<'de>,
    T: DeserializeOwned + Default,
{
    // borrowed: the metadata is read from the request's text, never copied
    let raw = <&RawValue>::deserialize(deserializer)?;
    Ok(serde_json::from_str(raw.get()).unwrap_or_default())
}

/// A list read entry by entry with [`lenient`]; anything but a list reads as empty.
fn lenient_entries<'de, D, T>(deserializer: D) -> Result<Vec<T>, D::Error>
where
    D: Deserializer<'de>,
    T: DeserializeOwned + Default,
{
    let raw = <&RawValue>::deserialize(deserializer)?;
    let entries: Vec<&RawValue> = serde_json::from_str(raw.get()).unwrap_or_default();
    Ok(entries
        .iter()
        .map(|raw| serde_json::from_str(raw.get()).unwrap_or_default())
        .collect())
}

/// The member `key` of the JSON object `raw`, without building the rest: `None` when `raw` is
/// not an object or has no such member (of duplicates, the last, as `Value` keeps).
fn member<'a>(raw: &'a RawValue, key: &str) -> Option<&'a RawValue> {
    let mut deserializer = serde_json::Deserializer::from_str(raw.get());
    deserializer.deserialize_any(MemberOf(key)).ok().flatten()
}

struct MemberOf<'k>(&'k str);

impl<'de> Visitor<'de> for MemberOf<'_> {
    type Value = Option<&'de RawValue>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON object")
    }

    fn visit_map<A: de::MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut found = None;
        while let Some(is_key) = map.next_key_seed(KeyIs(self.0))? {
            if is_key {
                found = Some(map.next_value::<&'de RawValue>()?);
            } else {
                map.next_value::<IgnoredAny>()?;
            }
        }
        Ok(found)
    }
}

/// The members `metadata` and `.0` of a JSON object, in one pass (of duplicates, the last).
struct MembersOf<'k>(Option<&'k str>);

/// Which of [`MembersOf`]'s members a key is.
enum Sought {
    Metadata,
    Pointer,
    Both,
    Neither,
}

impl<'de> Visitor<'de> for MembersOf<'_> {
    type Value = (Option<&'de RawValue>, Option<&'de RawValue>);

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON object")
    }

    fn visit_map<A: de::MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let (mut metadata, mut found) = (None, None);
        while let Some(sought) = map.next_key_seed(KeyAmong(self.0))? {
            match sought {
                Sought::Metadata => metadata = Some(map.next_value::<&'de RawValue>()?),
                Sought::Pointer => found = Some(map.next_value::<&'de RawValue>()?),
                Sought::Both => {
                    let raw = map.next_value::<&'de RawValue>()?;
                    (metadata, found) = (Some(raw), Some(raw));
                }
                Sought::Neither => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        Ok((metadata, found))
    }
}

/// Reads a key and tells which of [`MembersOf`]'s it is, without allocating.
struct KeyAmong<'k>(Option<&'k str>);

impl<'de> DeserializeSeed<'de> for KeyAmong<'_> {
    type Value = Sought;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Sought, D::Error> {
        deserializer.deserialize_str(self)
    }
}

impl<'de> Visitor<'de> for KeyAmong<'_> {
    type Value = Sought;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an object key")
    }

    fn visit_str<E: de::Error>(self, key: &str) -> Result<Sought, E> {
        Ok(match (key == "metadata", self.0 == Some(key)) {
            (true, true) => Sought::Both,
            (true, false) => Sought::Metadata,
            (false, true) => Sought::Pointer,
            (false, false) => Sought::Neither,
        })
    }
}

/// Reads a key and tells whether it is the one sought, without allocating when it has no escape.
struct KeyIs<'k>(&'k str);

impl<'de> DeserializeSeed<'de> for KeyIs<'_> {
    type Value = bool;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<bool, D::Error> {
        deserializer.deserialize_str(self)
    }
}

impl<'de> Visitor<'de> for KeyIs<'_> {
    type Value = bool;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an object key")
    }

    fn visit_str<E: de::Error>(self, key: &str) -> Result<bool, E> {
        Ok(key == self.0)
    }
}

/// The object a request is about, as messages name it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Resource {
    /// The kind, as Kubernetes spells it.
    pub kind: String,
    /// Its namespace (empty when unknown).
    pub namespace: String,
    /// Its name.
    pub name: String,
}

impl fmt::Display for Resource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.namespace.is_empty() {
            write!(f, "{} {}", self.kind, self.name)
        } else {
            write!(f, "{} {}/{}", self.kind, self.namespace, self.name)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn raw(value: &Value) -> Box<RawValue> {
        serde_json::value::to_raw_value(value).expect("raw")
    }

    #[test]
    fn pointers_answer_as_a_value_would() {
        let value = json!({"spec": {"template": {"spec": {"containers": []}}, "n": null},
                           "escaped\"key": 1, "list": [1], "s": "x"});
        let json = raw(&value);
        let object = Object::new(Some(&json));
        for pointer in [
            "/spec",
            "/spec/template/spec",
            "/spec/n",
            "/spec/missing",
            "/s/deeper",
            "/list",
            "/escaped\"key",
        ] {
            let expected = value.pointer(pointer).cloned();
            let got = object
                .at(pointer)
                .map(|r| serde_json::from_str::<Value>(r.get()).expect("json"));
            assert_eq!(got, expected, "{pointer}");
        }
        assert!(Object::default().at("/spec").is_none());
        for pointer in [
            "/spec",
            "/spec/template/spec",
            "/metadata",
            "/s/deeper",
            "/none",
        ] {
            let (_, found) = object.metadata_and_at(Some(pointer));
            assert_eq!(
                found.map(RawValue::get),
                object.at(pointer).map(RawValue::get),
                "{pointer}"
            );
        }
        assert!(object.metadata_and_at(None).1.is_none());
        assert_eq!(object.value(), value);
        assert_eq!(Object::default().value(), Value::Null);
    }

    #[test]
    fn the_last_of_duplicate_keys_wins_as_in_a_value() {
        let json: Box<RawValue> =
            serde_json::from_str(r#"{"spec": 1, "spec": {"a": 2}}"#).expect("raw");
        let object = Object::new(Some(&json));
        assert_eq!(object.at("/spec/a").map(RawValue::get), Some("2"));
    }

    #[test]
    fn metadata_of_the_wrong_type_reads_as_absent() {
        let json = raw(&json!({"metadata": {
            "name": 7, "generateName": "web-", "annotations": "none",
            "ownerReferences": [3, {"kind": "ReplicaSet", "apiVersion": "apps/v1", "controller": true},
                                {"kind": "Job", "controller": "yes"}]}}));
        let metadata = Object::new(Some(&json)).metadata();
        let (once, _) = Object::new(Some(&json)).metadata_and_at(Some("/spec"));
        assert_eq!(format!("{once:?}"), format!("{metadata:?}"));
        assert_eq!(metadata.name, "");
        assert_eq!(metadata.generate_name, "web-");
        assert!(metadata.annotations.is_empty());
        let owners: Vec<(&str, &str, bool)> = metadata
            .owner_references
            .iter()
            .map(|o| (o.api_version.as_str(), o.kind.as_str(), o.controller))
            .collect();
        assert_eq!(
            owners,
            [
                ("", "", false),
                ("apps/v1", "ReplicaSet", true),
                ("", "Job", false)
            ]
        );
        let json = raw(&json!({"metadata": "gone"}));
        assert!(Object::new(Some(&json)).metadata().name.is_empty());
        let json = raw(&json!({"metadata": {"ownerReferences": {"kind": "x"}}}));
        assert!(Object::new(Some(&json))
            .metadata()
            .owner_references
            .is_empty());
    }
}
