//! Go's `encoding/json` rules, as far as decoding a pull secret depends on them: field names
//! match case-insensitively (with Go's Unicode folding), `null` leaves a field unset, and
//! duplicate keys are applied in document order.

use std::fmt;

use serde::de::{self, Deserialize, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};

/// A JSON value as far as Go's decoder distinguishes it here. Objects keep their members in
/// document order, because Go applies duplicate keys one after the other.
pub(super) enum GoJson {
    Null,
    String(String),
    Object(Vec<(String, GoJson)>),
    Other,
}

impl<'de> Deserialize<'de> for GoJson {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(GoJsonVisitor)
    }
}

struct GoJsonVisitor;

impl<'de> Visitor<'de> for GoJsonVisitor {
    type Value = GoJson;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_bool<E: de::Error>(self, _: bool) -> Result<GoJson, E> {
        Ok(GoJson::Other)
    }

    fn visit_i64<E: de::Error>(self, _: i64) -> Result<GoJson, E> {
        Ok(GoJson::Other)
    }

    fn visit_u64<E: de::Error>(self, _: u64) -> Result<GoJson, E> {
        Ok(GoJson::Other)
    }

    fn visit_f64<E: de::Error>(self, _: f64) -> Result<GoJson, E> {
        Ok(GoJson::Other)
    }

    fn visit_str<E: de::Error>(self, value: &str) -> Result<GoJson, E> {
        Ok(GoJson::String(value.to_owned()))
    }

    fn visit_string<E: de::Error>(self, value: String) -> Result<GoJson, E> {
        Ok(GoJson::String(value))
    }

    fn visit_unit<E: de::Error>(self) -> Result<GoJson, E> {
        Ok(GoJson::Null)
    }

    fn visit_none<E: de::Error>(self) -> Result<GoJson, E> {
        Ok(GoJson::Null)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<GoJson, A::Error> {
        while seq.next_element::<IgnoredAny>()?.is_some() {}
        Ok(GoJson::Other)
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<GoJson, A::Error> {
        let mut members = Vec::new();
        while let Some(member) = map.next_entry::<String, GoJson>()? {
            members.push(member);
        }
        Ok(GoJson::Object(members))
    }
}

/// Whether JSON key `key` selects the struct field tagged `field` (lowercase ASCII), by Go's
/// case folding: ASCII case, and the Kelvin sign, long s and Turkish i's, which fold to ASCII.
pub(super) fn go_field_is(key: &str, field: &str) -> bool {
    let folded = key.chars().map(|c| match c {
        '\u{212A}' => 'k',
        '\u{017F}' => 's',
        '\u{0130}' | '\u{0131}' => 'i',
        c => c.to_ascii_lowercase(),
    });
    folded.eq(field.chars())
}

#[cfg(test)]
mod tests {
    use crate::fixtures::{config_json, dockercfg, parse};
    use crate::Credential;

    #[test]
    fn go_json_rules() {
        // Field names match case-insensitively, null leaves a field unset, later duplicates win,
        // unknown fields are ignored, repeated "auths" objects merge and null clears them.
        let payload = r#"{
            "AUTHS": {"a.example.com": {"USERNAME": "u", "Password": "p", "password": null, "extra": [1, {"x": 2}]}},
            "auths": {"b.example.com": null, "c.example.com": {"username": "old"}, "c.example.com": {"username": "new"}},
            "HttpHeaders": {"User-Agent": "x"},
            "credsStore": 5
        }"#;
        let entries = parse(&config_json(payload)).unwrap();
        let expected = vec![
            ("a.example.com".to_owned(), Credential::new("u", "p")),
            ("b.example.com".to_owned(), Credential::new("", "")),
            ("c.example.com".to_owned(), Credential::new("new", "")),
        ];
        assert_eq!(entries, expected);
        let cleared = r#"{"auths": {"a.example.com": {}}, "auths": null}"#;
        assert_eq!(parse(&config_json(cleared)).unwrap(), vec![]);
        assert_eq!(parse(&config_json("null")).unwrap(), vec![]);
        assert_eq!(parse(&config_json("{}")).unwrap(), vec![]);
        assert_eq!(parse(&dockercfg("null")).unwrap(), vec![]);
        // Go folds the Kelvin sign and the long s onto ASCII letters.
        let folded = "{\"auth\u{017F}\": {\"x.io\": {\"u\u{017F}ername\": \"kelvin\"}}}";
        assert_eq!(
            parse(&config_json(folded)).unwrap()[0].1.username(),
            "kelvin"
        );
    }
}
