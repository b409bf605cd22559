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

use json_extent::{
    list_elements, object_members, string_or_null, struct_members, ExtentError, Scanner,
};

/// The members of an object its readers look up (metadata and pod spec, the audit's status),
/// noted where the request's reader walks the object.
const NOTED: [&str; 3] = ["metadata", "spec", "status"];

/// An object of the request (`object`, `oldObject`) as JSON; empty when absent or `null`.
#[derive(Clone, Copy, Default)]
pub struct Object<'a> {
    text: Option<&'a str>,
    /// Where the [`NOTED`] members are, when the object was walked ([`Object::walk_from`]):
    /// found again, they cost another pass over the object's every byte.
    noted: Option<[Option<&'a str>; NOTED.len()]>,
}

impl fmt::Debug for Object<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // what was noted is where the text's members are, not more of the object
        f.debug_tuple("Object").field(&self.text).finish()
    }
}

impl<'a> Object<'a> {
    /// The object whose JSON is `raw`.
    pub fn new(raw: Option<&'a str>) -> Self {
        Object {
            text: raw,
            noted: None,
        }
    }

    /// The object at `scanner`, which it moves past the object, walked member by member: its
    /// metadata, spec and status are noted on the way, where the object would otherwise be
    /// skipped whole and walked again to find them.
    pub fn walk_from(scanner: &mut Scanner<'a>) -> Result<Self, ExtentError> {
        scanner.next_byte();
        let start = scanner.offset();
        let mut noted = [None; NOTED.len()];
        scanner.members(|key, value, _| {
            if let Some(slot) = NOTED.iter().position(|name| *name == key) {
                // the last of duplicates, as `members` answers
                noted[slot] = Some(value);
            }
            Ok(())
        })?;
        Ok(Object {
            text: Some(scanner.since(start)),
            noted: Some(noted),
        })
    }

    /// The object's JSON text.
    pub fn text(&self) -> Option<&'a str> {
        self.text
    }

    /// The members named in `keys` of the object whose text is `raw`, from what was noted when
    /// every key is one of them.
    fn find<const N: usize>(&self, raw: &'a str, keys: [Option<&str>; N]) -> [Option<&'a str>; N] {
        let noted = self
            .noted
            .filter(|_| keys.iter().flatten().all(|key| NOTED.contains(key)));
        match noted {
            Some(noted) => keys.map(|key| {
                let slot = NOTED.iter().position(|name| Some(*name) == key)?;
                noted[slot]
            }),
            None => members(raw, keys),
        }
    }

    /// The value at a JSON pointer of object keys (`/spec/template/spec`): `None` where a
    /// member is missing or its parent is not an object, as `Value::pointer` answers. The
    /// policy's pointers are constants: neither `~` escapes nor array indexes are read.
    pub fn at(&self, pointer: &str) -> Option<&'a str> {
        let raw = self.text?;
        let mut keys = pointer.split('/').skip(1);
        let Some(first) = keys.next() else {
            return Some(raw);
        };
        let [found] = self.find(raw, [Some(first)]);
        walk(found?, keys)
    }

    /// The object's metadata and the value at `pointer`, read in one pass over the object's
    /// members: on a fresh instance every scan of the JSON is paid in full, and reading the
    /// metadata, then the pod spec, scanned the object (its managed fields included) twice.
    /// Answers as [`Object::metadata`] and [`Object::at`] would.
    pub fn metadata_and_at(&self, pointer: Option<&str>) -> (Metadata, Option<&'a str>) {
        let Some(raw) = self.text else {
            return (Metadata::default(), None);
        };
        let mut keys = pointer.map(|p| p.split('/').skip(1));
        let first = keys.as_mut().and_then(Iterator::next);
        let [metadata, found] = self.find(raw, [Some("metadata"), first]);
        let found = found.zip(keys).and_then(|(raw, rest)| walk(raw, rest));
        (read_metadata(metadata), found)
    }

    /// The whole object as a `Value` (`Null` when there is none).
    pub fn value(&self) -> Value {
        self.text
            .and_then(|raw| serde_json::from_str(raw).ok())
            .unwrap_or(Value::Null)
    }

    /// The object's metadata; fields of the wrong type read as absent.
    pub fn metadata(&self) -> Metadata {
        read_metadata(
            self.text
                .and_then(|raw| self.find(raw, [Some("metadata")])[0]),
        )
    }
}

/// A member's JSON text borrowed from the text serde reads (an explicit `null` is absent): for
/// `deserialize_with`, where a member is kept as text and read later, or never.
pub(crate) fn raw_text<'de, D>(deserializer: D) -> Result<Option<&'de str>, D::Error>
where
    D: Deserializer<'de>,
{
    Option::<&'de RawValue>::deserialize(deserializer).map(|raw| raw.map(RawValue::get))
}

/// `metadata`'s JSON read leniently: a metadata of the wrong shape reads as empty.
fn read_metadata(raw: Option<&str>) -> Metadata {
    raw.map(|raw| Metadata::scan(raw).unwrap_or_else(|| Metadata::read_by_serde(raw)))
        .unwrap_or_default()
}

impl Metadata {
    /// The metadata as serde reads it, its members found by the scanner: serde walked every
    /// byte of it, the managed fields the API server writes into every object included, to
    /// read these few. `None` where serde must read it (a key with an escape, a member
    /// written twice).
    fn scan(raw: &str) -> Option<Self> {
        let mut metadata = Metadata::default();
        struct_members(raw, |key, value| {
            Some(match key {
                "name" => {
                    metadata.name = lenient_string(value);
                    1
                }
                "generateName" => {
                    metadata.generate_name = lenient_string(value);
                    1 << 1
                }
                "annotations" => {
                    metadata.annotations = annotation_keys(value)?;
                    1 << 2
                }
                "ownerReferences" => {
                    metadata.owner_references = OwnerReference::scan_list(value)?;
                    1 << 3
                }
                "resourceVersion" => {
                    metadata.resource_version = lenient_string(value);
                    1 << 4
                }
                _ => 0,
            })
        })?;
        Some(metadata)
    }

    /// Read by serde, out of line.
    #[cold]
    #[inline(never)]
    fn read_by_serde(raw: &str) -> Self {
        serde_json::from_str(raw).unwrap_or_default()
    }
}

impl OwnerReference {
    /// `ownerReferences` as [`lenient_entries`] reads it: anything but a list is empty, an entry
    /// that is not an object is an empty one; `None` where serde must read it.
    fn scan_list(value: &str) -> Option<Vec<Self>> {
        if !value.starts_with('[') {
            return Some(Vec::new());
        }
        let mut entries = Vec::new();
        list_elements(value, |entry| {
            entries.push(Self::scan(entry)?);
            Some(())
        })?;
        Some(entries)
    }

    /// One entry: its fields leniently, an entry that is not an object empty (but a list,
    /// which serde reads as the fields in order).
    fn scan(entry: &str) -> Option<Self> {
        let mut reference = OwnerReference::default();
        match entry.as_bytes().first() {
            Some(b'{') => {}
            Some(b'[') => return None,
            _ => return Some(reference),
        }
        struct_members(entry, |key, value| {
            Some(match key {
                "apiVersion" => {
                    reference.api_version = lenient_string(value);
                    1
                }
                "kind" => {
                    reference.kind = lenient_string(value);
                    1 << 1
                }
                "controller" => {
                    reference.controller = value == "true";
                    1 << 2
                }
                _ => 0,
            })
        })?;
        Some(reference)
    }
}

/// A string field read leniently: anything but a string is empty.
fn lenient_string(value: &str) -> String {
    string_or_null(value).flatten().unwrap_or_default()
}

/// The keys of the annotations leniently (anything but an object has none); `None` for keys
/// serde must decode.
fn annotation_keys(value: &str) -> Option<BTreeMap<String, IgnoredAny>> {
    let mut keys = BTreeMap::new();
    if !value.starts_with('{') {
        return Some(keys);
    }
    object_members(value, |key, _| {
        keys.insert(key.to_owned(), IgnoredAny);
        Some(())
    })?;
    Some(keys)
}

/// The value at `keys` below `raw`, member after member.
fn walk<'a, 'k>(mut raw: &'a str, keys: impl Iterator<Item = &'k str>) -> Option<&'a str> {
    for key in keys {
        raw = members(raw, [Some(key)])[0]?;
    }
    Some(raw)
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
    /// `metadata.resourceVersion`: set on a stored object, refused by the API server on a
    /// CREATE, so a CREATE that carries one is a stored object sent again (background audit).
    #[serde(deserialize_with = "lenient")]
    pub resource_version: String,
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

/// The members named in `keys` of the JSON object `raw`, in one pass and without building the
/// rest: `None` for a key that is `None`, absent, or when `raw` is not an object (of
/// duplicates, the last, as `Value` keeps). A key may be asked for twice.
///
/// Found by [`Scanner`], sixty-four bytes a step (serde's walk cost a tenth of a one-image
/// decision's instructions): the scanner trusts the text to be JSON, and it is (serde's capture
/// of the request's object, or a value within it). A key written with an escape, and anything
/// else the scanner does not follow, is left to serde.
fn members<'a, const N: usize>(raw: &'a str, keys: [Option<&str>; N]) -> [Option<&'a str>; N] {
    let mut found = [None; N];
    let scanned = Scanner::new(raw).members(|key, value, _| {
        for (slot, sought) in found.iter_mut().zip(keys) {
            if sought == Some(key) {
                *slot = Some(value);
            }
        }
        Ok(())
    });
    match scanned {
        Ok(()) => found,
        Err(_) => members_by_serde(raw, keys),
    }
}

/// [`members`] by serde, which decodes keys.
fn members_by_serde<'a, const N: usize>(
    raw: &'a str,
    keys: [Option<&str>; N],
) -> [Option<&'a str>; N] {
    let mut deserializer = serde_json::Deserializer::from_str(raw);
    deserializer
        .deserialize_any(Members(keys))
        .unwrap_or([None; N])
        .map(|found| found.map(RawValue::get))
}

struct Members<'k, const N: usize>([Option<&'k str>; N]);

impl<'de, const N: usize> Visitor<'de> for Members<'_, N> {
    type Value = [Option<&'de RawValue>; N];

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON object")
    }

    fn visit_map<A: de::MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut found = [None; N];
        while let Some(sought) = map.next_key_seed(KeyIn(&self.0))? {
            if sought.contains(&true) {
                let value = map.next_value::<&'de RawValue>()?;
                for (slot, _) in found.iter_mut().zip(sought).filter(|(_, hit)| *hit) {
                    *slot = Some(value);
                }
            } else {
                map.next_value::<IgnoredAny>()?;
            }
        }
        Ok(found)
    }
}

/// Reads a key and tells which of the sought keys it is, without allocating when it has no
/// escape.
struct KeyIn<'s, 'k, const N: usize>(&'s [Option<&'k str>; N]);

impl<'de, const N: usize> DeserializeSeed<'de> for KeyIn<'_, '_, N> {
    type Value = [bool; N];

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<[bool; N], D::Error> {
        deserializer.deserialize_str(self)
    }
}

impl<'de, const N: usize> Visitor<'de> for KeyIn<'_, '_, N> {
    type Value = [bool; N];

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an object key")
    }

    fn visit_str<E: de::Error>(self, key: &str) -> Result<[bool; N], E> {
        Ok(self.0.map(|sought| sought == Some(key)))
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
        let object = Object::new(Some(json.get()));
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
                .map(|r| serde_json::from_str::<Value>(r).expect("json"));
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
            assert_eq!(found, object.at(pointer), "{pointer}");
        }
        assert!(object.metadata_and_at(None).1.is_none());
        assert_eq!(object.value(), value);
        assert_eq!(Object::default().value(), Value::Null);
    }

    #[test]
    fn the_scanner_finds_the_members_serde_finds() {
        let keys = [Some("spec"), Some("metadata"), None, Some("spec")];
        for text in [
            r#"{"metadata": {"name": "a"}, "spec": {"x": [1, {"y": "}]"}]}, "status": null}"#,
            r#"{ "spec" : 1 , "spec" : { "a" : "b\"c" } , "metadata":"m" }"#,
            r#"{"sp\u0065c": 2, "metadata": 3}"#,
            r#"{"a": "\\", "spec": [[[]]], "metadata": {"b": {}}, "z": -1.5e3}"#,
            r#"{"spec": true, "metadata": false, "x": null}"#,
            "{}",
            "[]",
            r#""spec""#,
            "null",
            "7",
        ] {
            assert_eq!(members(text, keys), members_by_serde(text, keys), "{text}");
        }
        // a key written with an escape is decoded, as serde decodes it
        assert_eq!(members(r#"{"sp\u0065c": 2}"#, [Some("spec")]), [Some("2")]);
    }

    #[test]
    fn the_last_of_duplicate_keys_wins_as_in_a_value() {
        let json: Box<RawValue> =
            serde_json::from_str(r#"{"spec": 1, "spec": {"a": 2}}"#).expect("raw");
        let object = Object::new(Some(json.get()));
        assert_eq!(object.at("/spec/a"), Some("2"));
    }

    #[test]
    fn metadata_of_the_wrong_type_reads_as_absent() {
        let json = raw(&json!({"metadata": {
            "name": 7, "generateName": "web-", "annotations": "none",
            "ownerReferences": [3, {"kind": "ReplicaSet", "apiVersion": "apps/v1", "controller": true},
                                {"kind": "Job", "controller": "yes"}]}}));
        let metadata = Object::new(Some(json.get())).metadata();
        let (once, _) = Object::new(Some(json.get())).metadata_and_at(Some("/spec"));
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
        assert!(Object::new(Some(json.get())).metadata().name.is_empty());
        let json = raw(&json!({"metadata": {"ownerReferences": {"kind": "x"}}}));
        assert!(Object::new(Some(json.get()))
            .metadata()
            .owner_references
            .is_empty());
    }

    #[test]
    fn the_scanner_reads_metadata_as_serde_does() {
        let mut texts = Vec::new();
        for value in crate::vocabulary::fixtures::reviews() {
            for object in ["object", "oldObject"] {
                let metadata = &value["request"][object]["metadata"];
                if !metadata.is_null() {
                    texts.push(metadata.to_string());
                }
            }
        }
        let fixtures = texts.len();
        assert!(fixtures >= 14, "{fixtures}");
        for variant in [
            json!(null),
            json!("x"),
            json!(["a", "b"]),
            json!({"name": 7, "generateName": null, "resourceVersion": ["1"]}),
            json!({"name": "a\"b\u{e9}", "managedFields": [{"fieldsV1": {"f:spec": {}}}]}),
            json!({"annotations": null}),
            json!({"annotations": ["a"]}),
            json!({"annotations": {"a": 1, "b": {"c": null}, "": ""}}),
            json!({"ownerReferences": null}),
            json!({"ownerReferences": {"kind": "ReplicaSet"}}),
            json!({"ownerReferences": [null, 7, "x", {}, ["apps/v1", "ReplicaSet", true],
                {"apiVersion": "apps/v1", "kind": "ReplicaSet", "controller": true},
                {"apiVersion": 1, "kind": null, "controller": "true"}]}),
        ] {
            texts.push(variant.to_string());
        }
        for raw in [
            r#"{"name": "a", "name": "b"}"#,
            r#"{"annotations": {"a": 1, "a": 2}}"#,
            r#"{"annotations": {"\u0061": 1}}"#,
            r#"{"n\u0061me": "a"}"#,
            r#"{"ownerReferences": [{"kind": "A", "kind": "B"}, {"kind": "C"}]}"#,
            r#"{"ownerReferences": [{"ki\u006ed": "A"}]}"#,
            r#"{ "name" : "a" , "ownerReferences" : [ { "controller" : false } ] }"#,
        ] {
            texts.push(raw.to_owned());
        }
        let mut scanned = 0;
        for (index, text) in texts.iter().enumerate() {
            let by_serde = format!(
                "{:?}",
                serde_json::from_str::<Metadata>(text).unwrap_or_default()
            );
            match Metadata::scan(text) {
                Some(metadata) => {
                    scanned += 1;
                    assert_eq!(format!("{metadata:?}"), by_serde, "{text}");
                }
                None => assert!(index >= fixtures, "a fixture was left to serde: {text}"),
            }
            assert_eq!(
                format!("{:?}", read_metadata(Some(text))),
                by_serde,
                "{text}"
            );
        }
        assert!(scanned > fixtures + 8, "{scanned}");
    }

    #[test]
    fn a_walked_object_answers_as_its_text_does() {
        let mut texts = Vec::new();
        for value in crate::vocabulary::fixtures::reviews() {
            for object in ["object", "oldObject"] {
                if value["request"][object].is_object() {
                    texts.push(value["request"][object].to_string());
                }
            }
        }
        assert!(texts.len() >= 14, "{}", texts.len());
        for raw in [
            r#"{"spec": 1, "metadata": {"name": "a"}, "spec": {"a": 2}, "metadata": 3}"#,
            r#"{ "status" : { "phase" : "Running" } , "x" : { "y" : [ ] } }"#,
            r#"{}"#,
        ] {
            texts.push(raw.to_owned());
        }
        let pointers = [
            "",
            "/spec",
            "/spec/a",
            "/spec/template/spec",
            "/spec/jobTemplate/spec/template/spec",
            "/status",
            "/metadata",
            "/x/y",
            "/missing",
        ];
        for text in &texts {
            let mut scanner = Scanner::new(text);
            let walked = Object::walk_from(&mut scanner).expect("an object");
            assert!(scanner.at_end(), "{text}");
            assert_eq!(walked.text(), Some(text.as_str()));
            assert!(walked.noted.is_some());
            let plain = Object::new(Some(text));
            for pointer in pointers {
                assert_eq!(walked.at(pointer), plain.at(pointer), "{pointer} of {text}");
                let (a, b) = (
                    walked.metadata_and_at(Some(pointer)),
                    plain.metadata_and_at(Some(pointer)),
                );
                assert_eq!(format!("{a:?}"), format!("{b:?}"), "{pointer} of {text}");
            }
            assert_eq!(
                format!("{:?}", walked.metadata()),
                format!("{:?}", plain.metadata())
            );
        }
    }
}
