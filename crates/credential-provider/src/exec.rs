//! Running a plugin once: `BIN_DIR/NAME ARGS...` with the broker's environment plus the
//! provider's `env`, the request on stdin, the response on stdout, as the kubelet runs it. The
//! process is killed when the caller stops waiting (its lookup's deadline), so a hanging plugin
//! costs one lookup's time, never a process left behind.

use std::path::Path;
use std::process::Stdio;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::process::Command;

use crate::config::Provider;
use crate::protocol::{parse_response, Request, Response};

/// The most bytes of a plugin's stdout read: a response is a few credentials.
const MAX_STDOUT: u64 = 1 << 20;

/// Runs `provider`'s plugin with `request`. The error names what failed (start, exit status,
/// the answer's shape), never the plugin's output, which may hold credentials.
pub async fn exec(
    bin_dir: &Path,
    provider: &Provider,
    request: &Request<'_>,
) -> Result<Response, String> {
    let body =
        serde_json::to_vec(request).map_err(|e| format!("cannot encode the request: {e}"))?;
    let mut child = Command::new(bin_dir.join(&provider.name))
        .args(&provider.args)
        .envs(provider.env.iter().map(|v| (&v.name, &v.value)))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .map_err(|e| format!("cannot start it: {e}"))?;
    if let Some(mut stdin) = child.stdin.take() {
        // a plugin that exits without reading its request is judged by its answer
        let _ = stdin.write_all(&body).await;
    }
    let mut stdout = Vec::new();
    if let Some(out) = child.stdout.take() {
        out.take(MAX_STDOUT)
            .read_to_end(&mut stdout)
            .await
            .map_err(|e| format!("cannot read its answer: {e}"))?;
    }
    let status = child
        .wait()
        .await
        .map_err(|e| format!("cannot wait for it: {e}"))?;
    if !status.success() {
        return Err(format!("it failed ({status})"));
    }
    parse_response(&stdout, &provider.api_version)
}
