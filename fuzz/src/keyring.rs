//! The kubelet keyring on fuzzed `auths` keys and image names: building and looking up never
//! panic, and a key equal to a valid image's registry host always matches the image.
//!
//! The property is asserted for hosts that are not bracketed IPv6 literals: the kubelet matches
//! each host label as a glob (Go's `path.Match`), so a key `[::1]` is a character class and
//! does not match the host `[::1]` (with a port, `[::1]:5000`, the brackets are split off and it
//! does).

use arbitrary::{Arbitrary, Unstructured};
use resolvable_images_policy::credentials::{Credential, Keyring};
use resolvable_images_policy::vocabulary::reference::ImageReference;

#[derive(Arbitrary, Debug)]
struct Input {
    entries: Vec<(Key, String)>,
    images: Vec<Image>,
}

/// An image name: any string, or a repository on the host of one of the keys.
#[derive(Arbitrary, Debug)]
enum Image {
    Raw(String),
    OnKeyHost { key: u8, repository: String },
}

/// A key as written in `auths`, often built from a host so that keys and images meet.
#[derive(Arbitrary, Debug)]
enum Key {
    Raw(String),
    /// `scheme host[:port][/path]`, the shapes `docker login` writes.
    Url {
        scheme: Option<bool>,
        host: String,
        port: Option<u16>,
        path: Option<String>,
    },
}

impl Key {
    fn text(&self) -> String {
        match self {
            Key::Raw(text) => text.clone(),
            Key::Url {
                scheme,
                host,
                port,
                path,
            } => {
                let scheme = match scheme {
                    Some(true) => "https://",
                    Some(false) => "http://",
                    None => "",
                };
                let port = port.map(|p| format!(":{p}")).unwrap_or_default();
                let path = path.as_deref().map(|p| format!("/{p}")).unwrap_or_default();
                format!("{scheme}{host}{port}{path}")
            }
        }
    }
}

/// The username of the credential filed under the image's own registry host.
const OWN_HOST: &str = "own-registry-host";

/// One input of the target.
pub fn run(data: &[u8]) {
    // As libfuzzer-sys's `fuzz_target!` builds a typed input.
    let Ok(input) = Input::arbitrary_take_rest(Unstructured::new(data)) else {
        return;
    };
    let mut keyring = Keyring::new();
    for (key, user) in &input.entries {
        keyring.add(&key.text(), Credential::new(user.as_str(), "password"));
    }
    for image in &input.images {
        let image = match image {
            Image::Raw(text) => text.clone(),
            Image::OnKeyHost { key, repository } => {
                let Some((key, _)) = input.entries.get(usize::from(*key)) else {
                    continue;
                };
                let key = key.text();
                let key = key
                    .strip_prefix("https://")
                    .or_else(|| key.strip_prefix("http://"))
                    .unwrap_or(&key);
                let host = key.split('/').next().unwrap_or_default();
                format!("{host}/{repository}")
            }
        };
        // The raw string, as a hostile caller could pass it.
        let _ = keyring.lookup(&image);
        let Ok(reference) = ImageReference::parse(&image) else {
            continue;
        };
        let name = reference.name();
        let _ = keyring.lookup(&name);

        if reference.registry().starts_with('[') {
            continue;
        }
        let mut own = keyring.clone();
        own.add(reference.registry(), Credential::new(OWN_HOST, ""));
        let found = own.lookup(&name);
        assert!(
            found.iter().any(|c| c.username() == OWN_HOST),
            "key {:?} does not match image {name:?}",
            reference.registry()
        );
    }
}
