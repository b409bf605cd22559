//! One `hosts.toml` as containerd 2 reads it (`parseHostsFile` in
//! core/remotes/docker/config/hosts.go): the `[host."…"]` tables in file order, then the root's
//! `server`. Fields the policy's rules cannot carry are refused here, by line.

use toml::de::{DeTable, DeValue};
use toml::Spanned;

use crate::rules::{line_of, Refusal};

/// What a host may be used for (`capabilities`; all three when the field is not written).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Capabilities {
    /// Fetch manifests and blobs by digest.
    pub pull: bool,
    /// Resolve a tag to a digest.
    pub resolve: bool,
    /// Push.
    pub push: bool,
}

impl Capabilities {
    /// What containerd gives a host whose `capabilities` is not written (or empty).
    pub const ALL: Capabilities = Capabilities {
        pull: true,
        resolve: true,
        push: true,
    };
}

/// The fields of a host table, or of the file's root (which describes `server`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fields {
    /// `capabilities`.
    pub capabilities: Capabilities,
    /// `skip_verify = true`.
    pub skip_verify: bool,
    /// `override_path = true`: the URL's path is the API root as written.
    pub override_path: bool,
}

impl Default for Fields {
    fn default() -> Self {
        Fields {
            capabilities: Capabilities::ALL,
            skip_verify: false,
            override_path: false,
        }
    }
}

/// A `[host."…"]` table or the root's `server`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Endpoint {
    /// The URL as written.
    pub url: String,
    /// The line that writes it.
    pub line: usize,
    /// Its fields.
    pub fields: Fields,
}

/// A parsed `hosts.toml`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HostsFile {
    /// The `[host."…"]` tables, in file order.
    pub hosts: Vec<Endpoint>,
    /// `server` with the root's fields; `None`: the registry's default host.
    pub server: Option<Endpoint>,
    /// Lines about fields that do not change the chain, for the operator.
    pub notes: Vec<String>,
}

/// Reads `text`, the `hosts.toml` at `file`.
pub fn parse(file: &str, text: &str) -> Result<HostsFile, Refusal> {
    let document = DeTable::parse(text).map_err(|e| {
        let offset = e.span().map_or(0, |span| span.start);
        Refusal::at_offset(
            file,
            text,
            offset,
            format!(
                "containerd cannot read this file and would pull from the registry itself: {}",
                e.message()
            ),
        )
    })?;
    let reader = Reader { file, text };
    let mut parsed = HostsFile::default();
    let mut root = Fields::default();
    let mut server = None;
    for (key, value) in document.get_ref() {
        match key.get_ref().as_ref() {
            "server" => {
                let url = reader.string(key, value)?;
                server = Some((url, reader.line(key)));
            }
            "host" => parsed.hosts = reader.hosts(key, value, &mut parsed.notes)?,
            _ => reader.field(key, value, &mut root, &mut parsed.notes)?,
        }
    }
    parsed.server = server.map(|(url, line)| Endpoint {
        url,
        line,
        fields: root,
    });
    Ok(parsed)
}

/// The file being read, for spans and refusals.
struct Reader<'a> {
    file: &'a str,
    text: &'a str,
}

type Key<'i> = Spanned<toml::de::DeString<'i>>;
type Value<'i> = Spanned<DeValue<'i>>;

impl Reader<'_> {
    fn line(&self, key: &Key<'_>) -> usize {
        line_of(self.text, key.span().start)
    }

    fn refuse(&self, key: &Key<'_>, problem: impl Into<String>) -> Refusal {
        Refusal::at_offset(self.file, self.text, key.span().start, problem)
    }

    /// A value of the wrong type: go-toml refuses the file, and containerd then ignores it.
    fn mistyped(&self, key: &Key<'_>, expected: &str) -> Refusal {
        self.refuse(
            key,
            format!(
                "`{}` must be {expected}: containerd cannot read this file and would pull from the registry itself",
                key.get_ref()
            ),
        )
    }

    fn string(&self, key: &Key<'_>, value: &Value<'_>) -> Result<String, Refusal> {
        match value.get_ref() {
            DeValue::String(s) => Ok(s.to_string()),
            _ => Err(self.mistyped(key, "a string")),
        }
    }

    fn boolean(&self, key: &Key<'_>, value: &Value<'_>) -> Result<bool, Refusal> {
        value
            .get_ref()
            .as_bool()
            .ok_or_else(|| self.mistyped(key, "true or false"))
    }

    /// The `[host."…"]` tables, in the order the file writes them.
    fn hosts(
        &self,
        key: &Key<'_>,
        value: &Value<'_>,
        notes: &mut Vec<String>,
    ) -> Result<Vec<Endpoint>, Refusal> {
        let DeValue::Table(table) = value.get_ref() else {
            return Err(self.mistyped(key, "a table of hosts"));
        };
        let mut hosts = Vec::new();
        for (url, host) in table {
            let DeValue::Table(fields_table) = host.get_ref() else {
                return Err(self.mistyped(url, "a table"));
            };
            let mut fields = Fields::default();
            for (field, value) in fields_table {
                if field.get_ref().as_ref() == "server" || field.get_ref().as_ref() == "host" {
                    return Err(self.refuse(field, "not a field of a host table"));
                }
                self.field(field, value, &mut fields, notes)?;
            }
            hosts.push(Endpoint {
                url: url.get_ref().to_string(),
                line: self.line(url),
                fields,
            });
        }
        Ok(hosts)
    }

    /// A field of a host table or of the root.
    fn field(
        &self,
        key: &Key<'_>,
        value: &Value<'_>,
        fields: &mut Fields,
        notes: &mut Vec<String>,
    ) -> Result<(), Refusal> {
        let name = key.get_ref().as_ref();
        match name {
            "capabilities" => fields.capabilities = self.capabilities(key, value)?,
            "skip_verify" => fields.skip_verify = self.boolean(key, value)?,
            "override_path" => fields.override_path = self.boolean(key, value)?,
            "ca" | "dial_timeout" => notes.push(format!(
                "{}:{}: `{name}` is the node's transport; the policy's lookups use the policy server's",
                self.file,
                self.line(key)
            )),
            "client" => {
                return Err(self.refuse(
                    key,
                    "`client` certificates are presented by the node, never by the policy's lookups: a registry that requires them answers the policy otherwise",
                ))
            }
            "header" => {
                return Err(self.refuse(
                    key,
                    "`header` (which may carry credentials; values not shown) is sent by the node, never by the policy's lookups",
                ))
            }
            _ => {
                return Err(self.refuse(
                    key,
                    format!("`{name}` is not a hosts.toml field this translator knows how the node uses"),
                ))
            }
        }
        Ok(())
    }

    fn capabilities(&self, key: &Key<'_>, value: &Value<'_>) -> Result<Capabilities, Refusal> {
        let DeValue::Array(items) = value.get_ref() else {
            return Err(self.mistyped(key, "a list of capabilities"));
        };
        if items.is_empty() {
            return Ok(Capabilities::ALL);
        }
        let mut capabilities = Capabilities {
            pull: false,
            resolve: false,
            push: false,
        };
        for item in items.iter() {
            let Some(name) = item.get_ref().as_str() else {
                return Err(self.mistyped(key, "a list of strings"));
            };
            match name.to_ascii_lowercase().as_str() {
                "pull" => capabilities.pull = true,
                "resolve" => capabilities.resolve = true,
                "push" => capabilities.push = true,
                _ => {
                    return Err(self.refuse(
                        key,
                        format!("unknown capability {name:?}: containerd cannot read this file and would pull from the registry itself"),
                    ))
                }
            }
        }
        Ok(capabilities)
    }
}
