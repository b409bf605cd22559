//! For tests that run real plugins (this crate's and the broker's): scripts installed so that
//! they can be executed at once.

use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};

/// Writes `text` as an executable at `path`, by a child process, so that no file descriptor
/// of the test process ever has it open for writing: a sibling test's fork could otherwise
/// inherit one and make `exec` of the script fail with ETXTBSY ("Text file busy").
pub fn install_executable(path: &Path, text: &str) {
    let mut child = Command::new("sh")
        .args(["-c", "cat >\"$1\" && chmod 755 \"$1\"", "sh"])
        .arg(path)
        .stdin(Stdio::piped())
        .spawn()
        .expect("sh");
    let mut stdin = child.stdin.take().expect("a pipe");
    stdin.write_all(text.as_bytes()).expect("the script");
    drop(stdin);
    assert!(
        child.wait().expect("sh").success(),
        "{} written",
        path.display()
    );
}
