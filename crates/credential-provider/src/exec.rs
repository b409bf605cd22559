//! Running a plugin once: `BIN_DIR/NAME ARGS...` with the broker's environment plus the
//! provider's `env`, the request on stdin, the response on stdout, as the kubelet runs it. The
//! plugin runs in a process group of its own, and the whole group is killed when the caller
//! stops waiting (its lookup's deadline), so a hanging plugin costs one lookup's time, never a
//! process left behind: not the plugin, nor a child it started (a helper that hangs in turn).

use std::path::Path;
use std::process::{ExitStatus, Stdio};
use std::sync::Arc;

use rustix::process::{kill_process_group, Pid, Signal};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::process::{Child, Command};

use crate::config::Provider;
use crate::protocol::{parse_response, Request, Response, ResponseError};

/// The most bytes of a plugin's stdout read: a response is a few credentials.
const MAX_STDOUT: u64 = 1 << 20;

/// Why one run of a plugin gave no answer: what failed (start, exit status, the answer's
/// shape), never the plugin's output, which may hold credentials. Shared between the lookups
/// that waited for the same run, hence the `Arc`s.
#[derive(Debug, Clone, thiserror::Error)]
pub enum RunError {
    /// The request could not be encoded.
    #[error("cannot encode the request: {0}")]
    Encode(Arc<serde_json::Error>),
    /// The plugin could not be started.
    #[error("cannot start it: {0}")]
    Start(Arc<std::io::Error>),
    /// Its stdout could not be read.
    #[error("cannot read its answer: {0}")]
    Read(Arc<std::io::Error>),
    /// Its exit could not be waited for.
    #[error("cannot wait for it: {0}")]
    Wait(Arc<std::io::Error>),
    /// It exited unsuccessfully.
    #[error("it failed ({0})")]
    Exit(ExitStatus),
    /// Its answer is not a response the kubelet accepts.
    #[error(transparent)]
    Response(#[from] ResponseError),
}

/// Two errors are the same when of the same kind with the same words (an I/O error has no
/// equality of its own).
impl PartialEq for RunError {
    fn eq(&self, other: &Self) -> bool {
        std::mem::discriminant(self) == std::mem::discriminant(other)
            && self.to_string() == other.to_string()
    }
}

impl Eq for RunError {}

/// Runs `provider`'s plugin with `request`.
pub async fn exec(
    bin_dir: &Path,
    provider: &Provider,
    request: &Request<'_>,
) -> Result<Response, RunError> {
    let body = serde_json::to_vec(request).map_err(|e| RunError::Encode(Arc::new(e)))?;
    let child = Command::new(bin_dir.join(&provider.name))
        .args(&provider.args)
        .envs(provider.env.iter().map(|v| (&v.name, &v.value)))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .process_group(0)
        .spawn()
        .map_err(|e| RunError::Start(Arc::new(e)))?;
    let mut run = Run {
        group: child
            .id()
            .and_then(|id| Pid::from_raw(i32::try_from(id).ok()?)),
        child,
        done: false,
    };
    let child = &mut run.child;
    if let Some(mut stdin) = child.stdin.take() {
        // a plugin that exits without reading its request is judged by its answer
        let _ = stdin.write_all(&body).await;
    }
    let mut stdout = Vec::new();
    if let Some(out) = child.stdout.take() {
        out.take(MAX_STDOUT)
            .read_to_end(&mut stdout)
            .await
            .map_err(|e| RunError::Read(Arc::new(e)))?;
    }
    let status = child
        .wait()
        .await
        .map_err(|e| RunError::Wait(Arc::new(e)))?;
    run.done = true;
    if !status.success() {
        return Err(RunError::Exit(status));
    }
    Ok(parse_response(&stdout, &provider.api_version)?)
}

/// A plugin's process and its group (the plugin's own PID: it leads a new group), the group
/// killed when the run is dropped before the plugin was waited for: the caller's deadline
/// passed, or its answer could not be read. The group is killed before the child is dropped,
/// while the plugin is not yet reaped, so its PID, the group's ID, cannot have been reused.
/// After a plugin exited on its own nothing is killed (the kubelet leaves such children too).
struct Run {
    child: Child,
    group: Option<Pid>,
    done: bool,
}

impl Drop for Run {
    fn drop(&mut self) {
        if let (false, Some(group)) = (self.done, self.group) {
            // ESRCH (the group is gone already) is the only failure, and nothing to do
            let _ = kill_process_group(group, Signal::KILL);
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;
    use std::time::Duration;

    use super::*;
    use crate::testing::install_executable;

    /// Whether process `pid` is gone: no such process, or a zombie (killed, not yet reaped
    /// by whoever adopted it).
    fn gone(pid: &str) -> bool {
        match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
            Err(_) => true,
            Ok(stat) => stat
                .rsplit_once(") ")
                .is_some_and(|(_, rest)| rest.starts_with('Z')),
        }
    }

    /// Waits up to 10 s (polling) for `done`.
    async fn eventually(done: impl Fn() -> bool) -> bool {
        for _ in 0..200 {
            if done() {
                return true;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        done()
    }

    /// A plugin that starts a child (which sleeps) and then hangs: when its lookup stops
    /// waiting, the child is killed with it (kill_on_drop alone killed the plugin only).
    #[tokio::test]
    async fn a_hung_plugins_children_die_with_it() {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let pid_file = dir.path().join("child.pid");
        install_executable(
            &dir.path().join("hangs"),
            &format!(
                "#!/bin/sh\nsleep 300 >/dev/null 2>&1 &\necho $! >'{}.tmp'\nmv '{0}.tmp' '{0}'\ncat >/dev/null\nsleep 300\n",
                pid_file.display()
            ),
        );
        let provider = Provider {
            name: "hangs".into(),
            match_images: vec!["*.example.test".into()],
            default_cache_duration: Duration::ZERO,
            api_version: "credentialprovider.kubelet.k8s.io/v1".into(),
            args: Vec::new(),
            env: Vec::new(),
            token_attributes: None,
        };
        let bin_dir = dir.path().to_owned();
        let run = tokio::spawn(async move {
            let request = Request {
                api_version: "credentialprovider.kubelet.k8s.io/v1",
                kind: "CredentialProviderRequest",
                image: "r.example.test/app",
                service_account_token: None,
                service_account_annotations: BTreeMap::new(),
            };
            exec(&bin_dir, &provider, &request).await
        });
        assert!(
            eventually(|| pid_file.exists()).await,
            "the plugin never started its child"
        );
        let child = std::fs::read_to_string(&pid_file).expect("the child's pid");
        let child = child.trim().to_owned();
        assert!(!gone(&child), "the child is running before the kill");
        // the caller stops waiting, as a lookup's deadline does
        run.abort();
        assert!(run.await.is_err_and(|e| e.is_cancelled()));
        assert!(
            eventually(|| gone(&child)).await,
            "the plugin's child {child} outlived the kill"
        );
    }
}
