//! The slice of Kubewarden's validation payload the policy reads. Our own types rather than the
//! SDK's `KubernetesAdmissionRequest`, which types `requestResource` as a kind and refuses
//! explicit `null`s that real API servers send; here every field is optional and tolerant, so
//! a malformed request is reported precisely instead of failing as a whole.

use serde::{Deserialize, Deserializer};

use crate::settings::{Settings, SettingsError};
use json_extent::{
    ascii_text, string_field, string_or_default, struct_members, struct_members_at, ExtentError,
    Scanner,
};

use crate::vocabulary::object::{Metadata, Object};

/// What the host passes to `validate`: the policy's settings and the admission request.
#[derive(Debug)]
pub struct ValidationPayload<'a> {
    /// The settings, validated by the host when it loaded the policy, read as the request
    /// needs them ([`Settings::read_from`]); the defaults when absent.
    pub settings: Settings<'a>,
    /// The Kubernetes admission request.
    pub request: AdmissionRequest<'a>,
}

impl<'a> ValidationPayload<'a> {
    /// Reads the payload in one pass: the request's members are delimited by the scanner
    /// ([`AdmissionRequest::read_from`]), its objects kept as text; of the settings only their
    /// members are delimited, at a few instructions a byte where serde would spend a dozen on
    /// text most requests never read.
    pub fn parse(payload: &'a [u8]) -> Result<Self, PayloadError> {
        let text = match ascii_text(payload) {
            Some(text) => text,
            None => std::str::from_utf8(payload).map_err(|_| PayloadError::NotUtf8)?,
        };
        let mut scanner = Scanner::new(text);
        scanner.enter_object()?;
        let (mut settings, mut request) = (None, None);
        let mut first = true;
        // keys decoded: `"r\u0065quest"` is the request too, as serde reads it
        while let Some(key) = scanner.next_decoded_key(std::mem::take(&mut first))? {
            match key.as_ref() {
                "request" => {
                    if request.is_some() {
                        return Err(PayloadError::Duplicate("request"));
                    }
                    request = Some(AdmissionRequest::read_from(&mut scanner)?);
                }
                "settings" => {
                    if settings.is_some() {
                        return Err(PayloadError::Duplicate("settings"));
                    }
                    settings = Some(Settings::read_from(&mut scanner)?);
                }
                _ => {
                    scanner.value()?;
                }
            }
        }
        if !scanner.at_end() {
            return Err(PayloadError::Trailing);
        }
        Ok(ValidationPayload {
            settings: settings.unwrap_or_default(),
            request: request.ok_or(PayloadError::MissingRequest)?,
        })
    }
}

/// Why the `validate` payload could not be read.
#[derive(Debug, thiserror::Error)]
pub enum PayloadError {
    /// JSON is UTF-8.
    #[error("the payload is not UTF-8")]
    NotUtf8,
    /// The payload's own structure is broken.
    #[error(transparent)]
    Structure(#[from] ExtentError),
    /// `request` is not an admission request.
    #[error(transparent)]
    Request(serde_json::Error),
    /// No `request` member.
    #[error("missing field `request`")]
    MissingRequest,
    /// A member written twice.
    #[error("duplicate field `{0}`")]
    Duplicate(&'static str),
    /// Settings that cannot be read.
    #[error(transparent)]
    Settings(#[from] SettingsError),
    /// Text after the payload's object.
    #[error("trailing characters after the payload")]
    Trailing,
}

/// A Kubernetes `AdmissionRequest`, reduced to what decides and explains a decision.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct AdmissionRequest<'a> {
    /// Correlates the answer with the request.
    #[serde(deserialize_with = "null_as_default")]
    pub uid: String,
    /// The kind of `object`, which selects where the pod spec is.
    #[serde(deserialize_with = "null_as_default")]
    pub kind: GroupVersionKind,
    /// Set for subresource requests such as `pods/ephemeralcontainers`.
    #[serde(deserialize_with = "null_as_default")]
    pub sub_resource: String,
    /// The object name; empty when the client asked the server to generate one.
    #[serde(deserialize_with = "null_as_default")]
    pub name: String,
    /// The namespace of the object; empty for cluster-scoped objects.
    #[serde(deserialize_with = "null_as_default")]
    pub namespace: String,
    /// CREATE, UPDATE, DELETE or CONNECT.
    #[serde(deserialize_with = "null_as_default")]
    pub operation: Operation,
    /// The object as it would be stored, as JSON ([`AdmissionRequest::object`] reads it).
    #[serde(borrow, deserialize_with = "raw_object")]
    pub object: Object<'a>,
    /// The object before an UPDATE, as JSON.
    #[serde(borrow, deserialize_with = "raw_object")]
    pub old_object: Object<'a>,
    /// Who asked: the API server always says; Kubewarden's audit scanner sends none.
    #[serde(deserialize_with = "null_as_default")]
    pub user_info: UserInfo,
}

/// The requesting user, reduced to what tells an API server's request from an audit
/// scanner's.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct UserInfo {
    /// The user name; the API server sends one even for anonymous requests
    /// (`system:anonymous`).
    #[serde(deserialize_with = "null_as_default")]
    pub username: String,
}

/// The group, version and kind of the request's object.
#[derive(Debug, Clone, Default, Deserialize, PartialEq, Eq)]
#[serde(default)]
pub struct GroupVersionKind {
    /// API group: empty for core objects, `apps`, `batch`, …
    #[serde(deserialize_with = "null_as_default")]
    pub group: String,
    /// API version such as `v1`.
    #[serde(deserialize_with = "null_as_default")]
    pub version: String,
    /// Kind such as `Deployment`.
    #[serde(deserialize_with = "null_as_default")]
    pub kind: String,
}

/// The admission operation; only CREATE and UPDATE can introduce images.
#[derive(Debug, Clone, Copy, Default, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "UPPERCASE")]
pub enum Operation {
    /// A new object.
    Create,
    /// A change to an existing object.
    Update,
    /// A deletion.
    Delete,
    /// A connect (exec, attach, port-forward).
    Connect,
    /// Anything this version does not know.
    #[default]
    #[serde(other)]
    Other,
}

impl<'a> AdmissionRequest<'a> {
    /// The request at `scanner`, which it moves past the request. Its members are found by the
    /// scanner and its objects kept as their text, unread: serde, capturing them, walked every
    /// byte of the object (its managed fields, every container's env) for a third of a fresh
    /// evaluation's instructions, and the object's members are found by the scanner anyway
    /// ([`Object`]). A request the scanner's reading does not cover (a member of the wrong
    /// type, a duplicate, a key with an escape) is read by serde, whose error names it.
    pub fn read_from(scanner: &mut Scanner<'a>) -> Result<Self, PayloadError> {
        let mut probe = scanner.clone();
        if let Some(request) = Self::scan(&mut probe) {
            *scanner = probe;
            return Ok(request);
        }
        Self::read_by_serde(scanner)
    }

    /// The request at `scanner` read by serde, for what the scanner's reading does not cover.
    /// Kept out of line, as the other readers' serde fallbacks are: inlined, it spread the
    /// code every request runs over more instruction-cache lines.
    #[cold]
    #[inline(never)]
    fn read_by_serde(scanner: &mut Scanner<'a>) -> Result<Self, PayloadError> {
        let mut stream = serde_json::Deserializer::from_str(scanner.rest()).into_iter();
        let read = stream.next().ok_or(PayloadError::MissingRequest)?;
        let request = read.map_err(PayloadError::Request)?;
        scanner.advance(stream.byte_offset());
        Ok(request)
    }

    /// The request at `scanner` as serde would read it, or `None` where serde must say why
    /// not (or could, for a member whose type the scanner's reading does not check).
    fn scan(scanner: &mut Scanner<'a>) -> Option<Self> {
        let mut request = AdmissionRequest::default();
        struct_members_at(scanner, |key, scanner| match key {
            // walked into, not skipped whole and walked again for its members
            "object" => {
                request.object = Self::object_at(scanner)?;
                Some(1 << 6)
            }
            "oldObject" => {
                request.old_object = Self::object_at(scanner)?;
                Some(1 << 7)
            }
            _ => request.take(key, scanner.value().ok()?),
        })?;
        Some(request)
    }

    /// The object at `scanner` as serde's `Option<&RawValue>` captures it (`null` is absent),
    /// an object walked member by member ([`Object::walk_from`]); `None` for a number or
    /// literal, which serde checks.
    fn object_at(scanner: &mut Scanner<'a>) -> Option<Object<'a>> {
        if scanner.next_byte() == Some(b'{') {
            return Object::walk_from(scanner).ok();
        }
        object_text(scanner.value().ok()?).map(Object::new)
    }

    /// Sets the field named `key` from its value's text: the field's bit (none for a member
    /// the policy does not read); `None` for text serde must read.
    fn take(&mut self, key: &str, value: &'a str) -> Option<u32> {
        Some(match key {
            "uid" => {
                self.uid = string_or_default(value)?;
                1
            }
            "kind" => {
                self.kind = GroupVersionKind::scan(value)?;
                1 << 1
            }
            "subResource" => {
                self.sub_resource = string_or_default(value)?;
                1 << 2
            }
            "name" => {
                self.name = string_or_default(value)?;
                1 << 3
            }
            "namespace" => {
                self.namespace = string_or_default(value)?;
                1 << 4
            }
            "operation" => {
                self.operation = Operation::named(&string_or_default(value)?);
                1 << 5
            }
            "userInfo" => {
                self.user_info = UserInfo::scan(value)?;
                1 << 8
            }
            _ => 0,
        })
    }

    /// The object as it would be stored.
    pub fn object(&self) -> Object<'a> {
        self.object
    }

    /// The object before an UPDATE.
    pub fn old_object(&self) -> Object<'a> {
        self.old_object
    }

    /// The object's name as people know it: the request name, else `metadata.name`, else the
    /// server-side `generateName` prefix followed by `*`.
    pub fn display_name(&self, metadata: &Metadata) -> String {
        if !self.name.is_empty() {
            return self.name.clone();
        }
        if !metadata.name.is_empty() {
            return metadata.name.clone();
        }
        match metadata.generate_name.as_str() {
            "" => "(unnamed)".to_owned(),
            prefix => format!("{prefix}*"),
        }
    }
}

/// An object member's text as serde's `Option<&RawValue>` captures it: `null` is absent. Only a
/// list, object or string is taken from the scanner, whose trust covers where they end; a
/// number or literal serde checks.
fn object_text(value: &str) -> Option<Option<&str>> {
    match value.as_bytes().first()? {
        b'n' if value == "null" => Some(None),
        b'{' | b'[' | b'"' => Some(Some(value)),
        _ => None,
    }
}

impl GroupVersionKind {
    /// The kind at `value`, as serde reads it (unknown members ignored).
    fn scan(value: &str) -> Option<Self> {
        let mut kind = GroupVersionKind::default();
        struct_members(value, |key, value| {
            let (field, bit) = match key {
                "group" => (&mut kind.group, 1),
                "version" => (&mut kind.version, 1 << 1),
                "kind" => (&mut kind.kind, 1 << 2),
                _ => return Some(0),
            };
            *field = string_or_default(value)?;
            Some(bit)
        })?;
        Some(kind)
    }
}

impl UserInfo {
    /// The user at `value`, as serde reads it (unknown members ignored).
    fn scan(value: &str) -> Option<Self> {
        Some(UserInfo {
            username: string_field(value, "username")?,
        })
    }
}

impl Operation {
    /// The operation named `name`, as serde reads it.
    fn named(name: &str) -> Self {
        match name {
            "CREATE" => Operation::Create,
            "UPDATE" => Operation::Update,
            "DELETE" => Operation::Delete,
            "CONNECT" => Operation::Connect,
            _ => Operation::Other,
        }
    }
}

/// An object member kept as its JSON text, borrowed from the payload (`null` is absent).
fn raw_object<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Object<'de>, D::Error> {
    crate::vocabulary::object::raw_text(deserializer).map(Object::new)
}

/// Treats an explicit JSON `null` like an absent field.
fn null_as_default<'de, D, T>(deserializer: D) -> Result<T, D::Error>
where
    D: Deserializer<'de>,
    T: Default + Deserialize<'de>,
{
    Option::<T>::deserialize(deserializer).map(Option::unwrap_or_default)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{json, Value};

    fn payload(value: Value) -> Result<ValidationPayload<'static>, PayloadError> {
        // the text lives for the test: a payload borrows its settings from it
        let text: &'static str = Box::leak(value.to_string().into_boxed_str());
        ValidationPayload::parse(text.as_bytes())
    }

    #[test]
    fn tolerates_nulls_and_unknown_operations() {
        let payload = payload(json!({
            "settings": null,
            "request": {"uid": null, "kind": null, "namespace": null, "operation": "PATCH",
                        "object": null, "requestResource": {"group": "", "resource": "pods"}}
        }))
        .unwrap();
        assert!(payload.request.object().text().is_none());
        assert_eq!(payload.request.operation, Operation::Other);
        assert_eq!(payload.request.kind, GroupVersionKind::default());
        assert!(payload.request.namespace.is_empty());
    }

    #[test]
    fn display_name_falls_back_to_generate_name() {
        let name = |object: Value| {
            let request = payload(json!({"request": {"object": object}}))
                .unwrap()
                .request;
            request.display_name(&request.object().metadata())
        };
        assert_eq!(
            name(json!({"metadata": {"generateName": "web-7d9f-"}})),
            "web-7d9f-*"
        );
        assert_eq!(name(json!({"metadata": {"name": "web"}})), "web");
        assert_eq!(name(json!({"metadata": {"name": ""}})), "(unnamed)");
        assert_eq!(name(json!(null)), "(unnamed)");
    }

    /// The payload's own keys are read as serde reads them, escapes decoded, blanks and all.
    #[test]
    fn payload_keys_written_with_escapes_name_their_members() {
        let text = br#"{"s\u0065ttings" : {"pinDigests": true}, "r\u0065quest"	: {"operation": "CREATE"}}"#;
        let read = ValidationPayload::parse(text).expect("an escaped key is still its name");
        assert_eq!(read.request.operation, Operation::Create);
        assert!(read.settings.pin_digests(), "the settings were read");
        let twice = br#"{"request": {}, "r\u0065quest": {}}"#;
        assert!(matches!(
            ValidationPayload::parse(twice),
            Err(PayloadError::Duplicate("request"))
        ));
        let broken = br#"{"r\u00zzquest": {}}"#;
        let error = ValidationPayload::parse(broken).expect_err("a broken escape");
        assert!(error.to_string().contains("valid string escape"), "{error}");
    }

    #[test]
    fn wrong_types_are_errors_not_panics() {
        let result = payload(json!({"request": {"kind": 7}}));
        assert!(result.is_err());
        let result = payload(json!({"settings": {}}));
        assert!(result.unwrap_err().to_string().contains("request"));
    }

    #[test]
    fn the_scanner_reads_requests_as_serde_does() {
        let mut texts: Vec<String> = crate::vocabulary::fixtures::reviews()
            .iter()
            .map(|review| review["request"].to_string())
            .collect();
        let fixtures = texts.len();
        for variant in [
            json!({"uid": null, "kind": null, "operation": null, "userInfo": null}),
            json!({"kind": {"group": null, "version": "v1", "kind": "Pod", "x": [1]}}),
            json!({"kind": {"kind": 7}}),
            json!({"kind": "Pod"}),
            json!({"operation": "PATCH", "subResource": "ephemeralcontainers"}),
            json!({"operation": 1}),
            json!({"name": "a\"b\u{e9}", "namespace": ""}),
            json!({"object": 7, "oldObject": "x"}),
            json!({"object": [1], "oldObject": {"a": ""}}),
            json!({"object": true}),
            json!({"userInfo": {"username": "system:serviceaccount:kubewarden:audit", "groups": []}}),
            json!({"userInfo": {"username": 7}}),
            json!({"userInfo": []}),
            json!({"dryRun": false, "options": null, "resource": {"resource": "pods"}}),
            json!([]),
            json!(null),
        ] {
            texts.push(variant.to_string());
        }
        // what a tree cannot hold: duplicates, escapes, whitespace
        for raw in [
            r#"{"uid": "a", "uid": "b"}"#,
            r#"{"kind": {"kind": "Pod", "kind": "Job"}}"#,
            r#"{"userInfo": {"username": "a", "username": "b"}}"#,
            r#"{"u\u0069d": "a"}"#,
            r#"{"uid": "\u0061\/b"}"#,
            r#"{ "uid" : "a" , "object" : { "spec" : { } } , "oldObject" : null }"#,
        ] {
            texts.push(raw.to_owned());
        }
        let mut scanned = 0;
        for (index, text) in texts.iter().enumerate() {
            let by_serde = serde_json::from_str::<AdmissionRequest>(text)
                .map(|request| format!("{request:?}"))
                .map_err(|e| e.to_string());
            match AdmissionRequest::scan(&mut Scanner::new(text)) {
                Some(request) => {
                    scanned += 1;
                    assert_eq!(Ok(format!("{request:?}")), by_serde, "{text}");
                }
                // serde reads what the scanner leaves, so only the fixtures must be scanned
                None => assert!(index >= fixtures, "a fixture was left to serde: {text}"),
            }
            // and the payload's reader answers as serde, whichever read it
            let mut scanner = Scanner::new(text);
            let read = AdmissionRequest::read_from(&mut scanner)
                .map(|request| format!("{request:?}"))
                .map_err(|e| e.to_string());
            assert_eq!(read, by_serde, "{text}");
            assert!(read.is_err() || scanner.at_end(), "{text}");
        }
        assert!(scanned > fixtures + 8, "{scanned}");
    }
}
