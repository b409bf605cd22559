//! Every fuzz target over its corpus and a fixed set of mutations of it, as a plain test: the
//! regression half of fuzzing on every `cargo test`, with no instrumented build. The search
//! itself (coverage-guided, minutes per target) is `make fuzz`.
//!
//! The corpus is what `fuzz/seed.sh` makes from the fixtures, plus whatever earlier `make fuzz`
//! runs left in `fuzz/corpus/<target>/`. Each input runs as it is and in
//! `FUZZ_REPLAY_MUTATIONS` (default 24) mutated forms drawn from a fixed seed, so a run is
//! reproducible. A failing input is saved to `fuzz/artifacts/<target>/replay-<n>` and named,
//! so that `cargo fuzz run <target> <file>` (CONTRIBUTING.md, Fuzzing) replays it.

use std::panic::{self, AssertUnwindSafe};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use resolvable_images_policy_fuzz::TARGETS;

fn fuzz_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Runs `fuzz/seed.sh` once per test process (it is idempotent; the tests share it).
fn seeded() -> &'static Result<(), String> {
    static SEEDED: OnceLock<Result<(), String>> = OnceLock::new();
    SEEDED.get_or_init(|| {
        let script = fuzz_dir().join("seed.sh");
        let output = Command::new("bash")
            .arg(&script)
            .output()
            .map_err(|e| format!("running {}: {e}", script.display()))?;
        if output.status.success() {
            Ok(())
        } else {
            Err(format!(
                "{} failed ({}; it needs bash and jq): {}",
                script.display(),
                output.status,
                String::from_utf8_lossy(&output.stderr)
            ))
        }
    })
}

/// The corpus of `target`, in a stable order.
fn corpus(target: &str) -> Vec<(PathBuf, Vec<u8>)> {
    if let Err(error) = seeded() {
        panic!("{error}");
    }
    let dir = fuzz_dir().join("corpus").join(target);
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("reading {}: {e}", dir.display()))
        .filter_map(|entry| entry.ok().map(|e| e.path()))
        .filter(|path| path.is_file())
        .collect();
    files.sort();
    files
        .into_iter()
        .map(|path| {
            let bytes =
                std::fs::read(&path).unwrap_or_else(|e| panic!("reading {}: {e}", path.display()));
            (path, bytes)
        })
        .collect()
}

/// xorshift64*: a fixed sequence, so every run mutates alike.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    fn below(&mut self, n: usize) -> usize {
        if n == 0 {
            0
        } else {
            (self.next() % n as u64) as usize
        }
    }
}

/// Bytes a parser treats specially: JSON's structure, escapes, separators of references and
/// keys, and the edges of UTF-8.
const INTERESTING: &[u8] = b"{}[]\":,\\/@.-_*?\n\0\x7f\xc3\xa9\xff";

/// One of libFuzzer's basic mutations of `input`, `other` being another input of the corpus.
fn mutate(input: &[u8], other: &[u8], rng: &mut Rng) -> Vec<u8> {
    let mut out = input.to_vec();
    let at = rng.below(out.len() + 1);
    match rng.below(7) {
        0 if !out.is_empty() => {
            let i = rng.below(out.len());
            out[i] ^= 1 << rng.below(8);
        }
        1 if !out.is_empty() => {
            let i = rng.below(out.len());
            out[i] = INTERESTING[rng.below(INTERESTING.len())];
        }
        2 => {
            let byte = INTERESTING[rng.below(INTERESTING.len())];
            out.insert(at, byte);
        }
        3 => {
            let end = (at + 1 + rng.below(16)).min(out.len());
            out.drain(at.min(end)..end);
        }
        4 => {
            let start = rng.below(out.len() + 1);
            let end = (start + rng.below(32)).min(out.len());
            let copy = out[start..end].to_vec();
            out.splice(at..at, copy);
        }
        5 => out.truncate(at),
        _ => {
            let start = rng.below(other.len() + 1);
            out.truncate(at);
            out.extend_from_slice(&other[start..]);
        }
    }
    out
}

fn mutations() -> usize {
    std::env::var("FUZZ_REPLAY_MUTATIONS")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(24)
}

/// Runs `target` on `input`; on a panic, saves the input and says where.
fn run_one(name: &str, run: fn(&[u8]), input: &[u8], origin: &str) -> Result<(), String> {
    if panic::catch_unwind(AssertUnwindSafe(|| run(input))).is_ok() {
        return Ok(());
    }
    let dir = fuzz_dir().join("artifacts").join(name);
    let saved = std::fs::create_dir_all(&dir).and_then(|()| {
        let path = dir.join(format!("replay-{:016x}", fnv(input)));
        std::fs::write(&path, input).map(|()| path)
    });
    Err(match saved {
        Ok(path) => format!("{name}: {origin} failed; input saved to {}", path.display()),
        Err(e) => format!("{name}: {origin} failed; input not saved ({e})"),
    })
}

fn fnv(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |hash, &b| {
        (hash ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

fn replay(name: &str) {
    let (_, run) = TARGETS
        .iter()
        .find(|(target, _)| *target == name)
        .unwrap_or_else(|| panic!("no target {name}"));
    let corpus = corpus(name);
    assert!(
        !corpus.is_empty(),
        "fuzz/corpus/{name} is empty after fuzz/seed.sh"
    );
    let mut rng = Rng(0x5EED_0000 ^ fnv(name.as_bytes()));
    let mut failures = Vec::new();
    for (path, input) in &corpus {
        let origin = |what: String| format!("{what} of {}", file_name(path));
        failures.extend(run_one(name, *run, input, &origin("the input".into())).err());
        for n in 0..mutations() {
            let other = &corpus[rng.below(corpus.len())].1;
            let mutated = mutate(input, other, &mut rng);
            let what = origin(format!("mutation {n}"));
            failures.extend(run_one(name, *run, &mutated, &what).err());
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

fn file_name(path: &Path) -> String {
    path.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
}

#[test]
fn reference() {
    replay("reference");
}

#[test]
fn docker_config() {
    replay("docker_config");
}

#[test]
fn keyring() {
    replay("keyring");
}

#[test]
fn settings() {
    replay("settings");
}

#[test]
fn validate() {
    replay("validate");
}

/// The mutator itself: the same seed gives the same inputs, and it changes them.
#[test]
fn mutations_are_reproducible_and_change_the_input() {
    let seed = b"{\"image\":\"registry.example.com/team/app:1.4.2\"}";
    let draw = || {
        let mut rng = Rng(42);
        (0..64)
            .map(|_| mutate(seed, b"other", &mut rng))
            .collect::<Vec<_>>()
    };
    let first = draw();
    assert_eq!(first, draw());
    assert!(first.iter().filter(|m| m.as_slice() != seed).count() > 48);
}

/// A panicking target is reported with the input saved where the message says.
#[test]
fn a_failure_names_and_saves_its_input() {
    fn panics_on_x(data: &[u8]) {
        assert!(!data.contains(&b'x'), "found x");
    }
    let hook = panic::take_hook();
    panic::set_hook(Box::new(|_| {}));
    let result = run_one("self-test", panics_on_x, b"an x", "the input of seed-1");
    panic::set_hook(hook);
    let message = result.expect_err("the panic is reported");
    assert!(message.contains("the input of seed-1"), "{message}");
    let path = message
        .rsplit("saved to ")
        .next()
        .expect("a path in the message");
    assert_eq!(std::fs::read(path).expect("the saved input"), b"an x");
    std::fs::remove_dir_all(fuzz_dir().join("artifacts").join("self-test")).ok();
    assert_eq!(run_one("self-test", panics_on_x, b"fine", "y"), Ok(()));
}

#[test]
fn json_extent() {
    replay("json_extent");
}
