//! A credential provider plugin of the kubelet's exec protocol, for the broker's end-to-end
//! tests: it reads a `CredentialProviderRequest` on stdin and, as its arguments (from the
//! `args` of the CredentialProviderConfig the test writes) say:
//!
//! - `--record FILE`: appends the request, one JSON line, to FILE (the token included: the
//!   tests' fake API server issues fake tokens);
//! - `--fail`: exits 1 without an answer; `--hang`: sleeps for an hour;
//! - `--slow-image TEXT` with `--slow-ms MS`: for an image containing TEXT, sleeps MS (an hour
//!   without `--slow-ms`) before answering (`--slow-image ''`: every image);
//! - otherwise answers `--username` and the password in `$TEST_PROVIDER_PASSWORD` (from the
//!   config's `env`, so that it is not in a process list) under the key `--key` (default: the
//!   image's registry), with `--cache-key-type` (default `Registry`) and `--cache-duration`
//!   (default: none, the provider's `defaultCacheDuration`).

use std::io::{Read, Write};
use std::process::ExitCode;
use std::time::Duration;

use serde_json::{json, Value};

/// Why the plugin gives no answer (on stderr, which the broker never reads).
#[derive(Debug, thiserror::Error)]
enum PluginFailure {
    #[error("{0} needs a value")]
    MissingValue(String),
    #[error("--slow-ms {0}")]
    NotMilliseconds(String),
    #[error("unknown argument {0}")]
    UnknownArgument(String),
    #[error("stdin: {0}")]
    Stdin(#[source] std::io::Error),
    #[error("request: {0}")]
    Request(#[source] serde_json::Error),
    #[error("{path}: {source}")]
    Record {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("failing as asked")]
    AskedTo,
    #[error("the request has no image")]
    NoImage,
}

/// What the arguments ask for.
#[derive(Default)]
struct Options {
    record: Option<String>,
    fail: bool,
    hang: bool,
    slow_image: Option<String>,
    slow_ms: Option<u64>,
    username: String,
    key: Option<String>,
    cache_key_type: Option<String>,
    cache_duration: Option<String>,
}

fn options() -> Result<Options, PluginFailure> {
    let mut options = Options::default();
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        let mut value = || {
            args.next()
                .ok_or_else(|| PluginFailure::MissingValue(arg.clone()))
        };
        match arg.as_str() {
            "--record" => options.record = Some(value()?),
            "--fail" => options.fail = true,
            "--hang" => options.hang = true,
            "--slow-image" => options.slow_image = Some(value()?),
            "--slow-ms" => {
                let ms = value()?;
                options.slow_ms = Some(ms.parse().map_err(|_| PluginFailure::NotMilliseconds(ms))?);
            }
            "--username" => options.username = value()?,
            "--key" => options.key = Some(value()?),
            "--cache-key-type" => options.cache_key_type = Some(value()?),
            "--cache-duration" => options.cache_duration = Some(value()?),
            other => return Err(PluginFailure::UnknownArgument(other.to_owned())),
        }
    }
    Ok(options)
}

fn run() -> Result<(), PluginFailure> {
    let options = options()?;
    let mut input = String::new();
    std::io::stdin()
        .read_to_string(&mut input)
        .map_err(PluginFailure::Stdin)?;
    let request: Value = serde_json::from_str(&input).map_err(PluginFailure::Request)?;
    if let Some(path) = &options.record {
        let mut file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .map_err(|source| record(path, source))?;
        writeln!(file, "{request}").map_err(|source| record(path, source))?;
    }
    let image = request["image"].as_str().unwrap_or_default();
    let slow = options
        .slow_image
        .as_deref()
        .is_some_and(|text| image.contains(text));
    if options.hang || slow {
        let ms = options
            .slow_ms
            .filter(|_| !options.hang)
            .unwrap_or(3_600_000);
        std::thread::sleep(Duration::from_millis(ms));
    }
    if options.fail {
        return Err(PluginFailure::AskedTo);
    }
    let image = request["image"].as_str().ok_or(PluginFailure::NoImage)?;
    let key = options
        .key
        .unwrap_or_else(|| image.split('/').next().unwrap_or(image).to_owned());
    let password = std::env::var("TEST_PROVIDER_PASSWORD").unwrap_or_default();
    let mut answer = json!({
        "apiVersion": request["apiVersion"],
        "kind": "CredentialProviderResponse",
        "cacheKeyType": options.cache_key_type.as_deref().unwrap_or("Registry"),
        "auth": {key: {"username": options.username, "password": password}},
    });
    if let Some(duration) = options.cache_duration {
        answer["cacheDuration"] = json!(duration);
    }
    println!("{answer}");
    Ok(())
}

fn record(path: &str, source: std::io::Error) -> PluginFailure {
    PluginFailure::Record {
        path: path.to_owned(),
        source,
    }
}

fn main() -> ExitCode {
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(problem) => {
            eprintln!("test-credential-provider: {problem}");
            ExitCode::FAILURE
        }
    }
}
