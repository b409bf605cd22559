//! `parse_pull_secret` on Secret objects of any shape: never panics, and no secret byte
//! reaches an error message or a credential's `Debug` form. Secret values carry [`MARKER`];
//! only an `auths` key may show it (keys are not secret), and never in its `user:password@`.

use arbitrary::{Arbitrary, Unstructured};
use resolvable_images_policy::credentials::{parse_pull_secret, SecretError};
use resolvable_images_policy::testing::{b64, b64_unpadded};
use serde_json::{json, Map, Value};

/// Stands for a password: distinctive, and base64-clean so it also survives as an `auth`.
const MARKER: &str = "Zq7pAsSw0rDMaRkEr";
/// In raw documents, this placeholder is replaced by [`MARKER`].
const PLACEHOLDER: &str = "$M";

/// How the document sits under `data` (the input's second byte).
#[derive(Debug)]
enum DataShape {
    /// Base64 under the type's key, as the API server returns it.
    Base64,
    /// Base64 with CR/LF inserted every `n` characters (Go skips them).
    Wrapped(u8),
    /// The document itself, not base64.
    Raw,
    /// Under the other type's key.
    OtherKey,
    /// `null` under the key.
    Null,
    /// A number under the key.
    Number,
    /// No `data` at all.
    Absent,
}

/// The document (from the third byte on).
#[derive(Debug)]
enum Content {
    /// Any bytes, `$M` replaced by the marker.
    Raw(Vec<u8>),
    /// A well-formed document whose entries carry the marker in their credentials.
    Entries(Entries),
}

#[derive(Arbitrary, Debug)]
struct Entries {
    entries: Vec<Entry>,
    headers: Option<Value2>,
    auths_null_first: bool,
}

#[derive(Arbitrary, Debug)]
struct Entry {
    https: Option<bool>,
    /// Userinfo `user:MARKER@` in front of the host: must be redacted from messages.
    userinfo: bool,
    host: String,
    fields: Vec<(Field, Value2)>,
    not_an_object: Option<Value2>,
}

#[derive(Arbitrary, Debug)]
enum Field {
    Username,
    Password,
    Auth,
    Email,
    /// Go's case folding: `AUTH`, `ſername`, `\u{212A}`…
    Folded(u8),
    Other(String),
}

/// A JSON value for a field; the string variants carry the marker.
#[derive(Arbitrary, Debug)]
enum Value2 {
    Marker,
    /// `base64(user ":" MARKER)`, padded or not.
    Auth {
        user: String,
        padded: bool,
    },
    /// `base64(MARKER)`: no separator.
    AuthNoSeparator,
    /// The marker with a character that is not base64.
    AuthNotBase64(char),
    Null,
    Bool(bool),
    Number(i32),
    Object,
    Array,
}

impl Value2 {
    fn to_json(&self) -> Value {
        let encode = |text: &str, padded: bool| {
            if padded {
                b64(text)
            } else {
                b64_unpadded(text)
            }
        };
        match self {
            Value2::Marker => json!(MARKER),
            Value2::Auth { user, padded } => json!(encode(&format!("{user}:{MARKER}"), *padded)),
            Value2::AuthNoSeparator => json!(encode(MARKER, true)),
            Value2::AuthNotBase64(c) => json!(format!("{MARKER}{c}")),
            Value2::Null => Value::Null,
            Value2::Bool(b) => json!(b),
            Value2::Number(n) => json!(n),
            Value2::Object => json!({"password": MARKER}),
            Value2::Array => json!([MARKER]),
        }
    }
}

impl Field {
    fn name(&self) -> String {
        const FOLDED: [&str; 8] = [
            "USERNAME",
            "PassWord",
            "AUTH",
            "\u{017F}",
            "u\u{017F}ername",
            "Email",
            "auths",
            "",
        ];
        match self {
            Field::Username => "username".into(),
            Field::Password => "password".into(),
            Field::Auth => "auth".into(),
            Field::Email => "email".into(),
            Field::Folded(i) => FOLDED[usize::from(*i) % FOLDED.len()].into(),
            Field::Other(name) => name.clone(),
        }
    }
}

/// One input of the target: a byte for the secret type, one for the shape of `data`, one
/// choosing a raw document (even) or structured entries (odd), then the document or the
/// entries' bytes.
pub fn run(data: &[u8]) {
    let [type_byte, data_byte, mode, rest @ ..] = data else {
        return;
    };
    let (key, other_key) = match type_byte % 5 {
        1 => (".dockercfg", ".dockerconfigjson"),
        _ => (".dockerconfigjson", ".dockercfg"),
    };
    let content = if mode % 2 == 0 {
        Content::Raw(rest.to_vec())
    } else {
        match Unstructured::new(rest).arbitrary() {
            Ok(entries) => Content::Entries(entries),
            Err(_) => return,
        }
    };
    let Some((document, marker_may_show)) = document(&content, key) else {
        return;
    };
    let secret = secret(*type_byte, *data_byte, key, other_key, &document);
    check(&secret, marker_may_show);
}

/// The document under the secret's key, and whether the marker may show in an error (a raw
/// document may put it in an `auths` key); `None` for entries whose host would not end the
/// authority.
fn document(content: &Content, key: &str) -> Option<(Vec<u8>, bool)> {
    let Entries {
        entries,
        headers,
        auths_null_first,
    } = match content {
        Content::Raw(bytes) => {
            let text = String::from_utf8_lossy(bytes);
            return Some((text.replace(PLACEHOLDER, MARKER).into_bytes(), true));
        }
        Content::Entries(entries) => entries,
    };
    let mut auths = Map::new();
    for entry in entries {
        // The host must end the authority, or the marker would not be userinfo.
        if entry.host.contains(['/', '?', '#', '@']) || entry.host.contains(MARKER) {
            return None;
        }
        let scheme = match entry.https {
            Some(true) => "https://",
            Some(false) => "http://",
            None => "",
        };
        let userinfo = if entry.userinfo {
            format!("user:{MARKER}@")
        } else {
            String::new()
        };
        let value = match &entry.not_an_object {
            Some(value) => value.to_json(),
            None => Value::Object(
                entry
                    .fields
                    .iter()
                    .map(|(field, value)| (field.name(), value.to_json()))
                    .collect(),
            ),
        };
        auths.insert(format!("{scheme}{userinfo}{}", entry.host), value);
    }
    let document = if key == ".dockercfg" {
        Value::Object(auths)
    } else {
        let mut document = Map::new();
        if *auths_null_first {
            document.insert("Auths".into(), Value::Null);
        }
        document.insert("auths".into(), Value::Object(auths));
        if let Some(headers) = headers {
            document.insert("HttpHeaders".into(), json!({"X-Token": headers.to_json()}));
        }
        Value::Object(document)
    };
    Some((document.to_string().into_bytes(), false))
}

/// The Secret object: its type from `type_byte`, `document` under `data` as `data_byte`
/// shapes it.
fn secret(type_byte: u8, data_byte: u8, key: &str, other_key: &str, document: &[u8]) -> Value {
    let encoded = b64(document);
    let shape = match data_byte % 7 {
        0 => DataShape::Base64,
        1 => DataShape::Wrapped(data_byte >> 3),
        2 => DataShape::Raw,
        3 => DataShape::OtherKey,
        4 => DataShape::Null,
        5 => DataShape::Number,
        _ => DataShape::Absent,
    };
    let data = match shape {
        DataShape::Base64 => json!({ key: encoded }),
        DataShape::Wrapped(n) => {
            let n = usize::from(n.max(1));
            let wrapped: Vec<String> = encoded
                .as_bytes()
                .chunks(n)
                .map(|chunk| String::from_utf8_lossy(chunk).into_owned())
                .collect();
            json!({ key: wrapped.join("\r\n") })
        }
        DataShape::Raw => json!({ key: String::from_utf8_lossy(document) }),
        DataShape::OtherKey => json!({ other_key: encoded }),
        DataShape::Null => json!({ key: null }),
        DataShape::Number => json!({ key: 1.5 }),
        DataShape::Absent => Value::Null,
    };
    let secret_type = match type_byte % 5 {
        0 => json!("kubernetes.io/dockerconfigjson"),
        1 => json!("kubernetes.io/dockercfg"),
        2 => json!("Opaque"),
        3 => json!(42),
        _ => Value::Null,
    };
    let mut secret = json!({"apiVersion": "v1", "kind": "Secret", "data": data});
    if !secret_type.is_null() {
        secret["type"] = secret_type;
    }
    secret
}

/// The property: no secret byte in a credential's `Debug`, an error's message (but in an
/// `auths` key a raw document wrote) or its `Debug`.
fn check(secret: &Value, marker_may_show: bool) {
    match parse_pull_secret("team-a/regcred", secret) {
        Ok(entries) => {
            for (_, credential) in &entries {
                let debug = format!("{credential:?}");
                assert!(!debug.contains(MARKER), "credential Debug leaks: {debug}");
            }
        }
        Err(error) => {
            let message = error.to_string();
            if message.contains(MARKER) {
                // Only an `auths` key written with the marker in it (not as userinfo) may show it.
                let in_key =
                    matches!(&error, SecretError::BadEntry { entry, .. } if entry.contains(MARKER));
                assert!(
                    marker_may_show && in_key,
                    "secret content in the message: {message}"
                );
            }
            let debug = format!("{error:?}");
            if !marker_may_show {
                assert!(!debug.contains(MARKER), "secret content in Debug: {debug}");
            }
        }
    }
}
