//! resolvable-images-broker: answers the policy server's manifest lookups with a namespace's
//! pull secrets, the kubelet's way, so that the stock Kubewarden policy server can check
//! private images (docs/broker.md; the encoding is crates/broker-reference/src/spec.rs).

// The layers, bottom-up, one folder each: a module names only modules of its own folder or of
// the folders above it in this list. `scripts/import-cycles.py` (`make cycles`) fails on any
// cycle between files or between these folders.

// What the broker tells its operator: logs, metrics and readiness, the reloading of files.
mod telemetry;

// The cluster side: pull secrets, namespaces served, node credential provider plugins.
mod cluster;

// The registries, without the lookup: allowed destinations, tag listings and their ranking.
mod registries;

// What the broker trusts: the caller credential, the sealing keys; why it cannot start.
mod trust;

// A lookup's path from the seal to the answer.
mod lookup;

// The HTTP side: listeners, connections, routes, TLS.
mod http;

// The command line, and the broker each option makes.
mod args;

use std::net::SocketAddr;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use clap::Parser;
use tokio::net::TcpListener;
use tokio::signal::unix::{signal, Signal, SignalKind};

use crate::args::Args;
use crate::http::server;
use crate::http::server::Connections;
use crate::http::tls::ReloadingCertificate;
use crate::lookup::service::Broker;
use crate::telemetry::logs;
use crate::telemetry::metrics::Metrics;
use crate::trust::error::StartupError;

async fn bind(address: SocketAddr) -> Result<(TcpListener, SocketAddr), StartupError> {
    let listen = |source| StartupError::Listen { address, source };
    let listener = TcpListener::bind(address).await.map_err(listen)?;
    let bound = listener.local_addr().map_err(listen)?;
    Ok((listener, bound))
}

async fn run(args: Args) -> Result<(), StartupError> {
    registry_client::install_tls_provider();
    let mut signals = Signals::new()?;
    let metrics = Arc::new(Metrics::default());
    let broker = Arc::new(args.broker(metrics.clone()).await?);
    let certificate = args.certificate(&metrics)?;
    let tls = certificate.clone().map(server::tls_acceptor);
    let (listener, address) = bind(args.listen).await?;
    let (metrics_listener, metrics_address) = bind(args.metrics_listen).await?;
    tracing::info!(
        msg = "listening",
        address = %address,
        metricsAddress = %metrics_address,
        tls = tls.is_some(),
    );
    let header_timeout = Duration::from_millis(args.header_timeout_ms.max(100));
    let api = Connections::new(args.max_connections, header_timeout);
    let accepting = tokio::spawn(server::serve(listener, tls, broker.clone(), api.clone()));
    // the metrics port serves to the end, so that probes see the drain's 503
    let probes = Connections::new(server::METRICS_CONNECTIONS, header_timeout);
    tokio::spawn(server::serve_metrics(
        metrics_listener,
        metrics.clone(),
        probes,
    ));
    tokio::spawn(reload(broker.clone(), certificate, args.reload()));
    metrics.set_ready();
    signals.next().await;
    metrics.set_not_ready();
    let deadline = match grace(Duration::from_millis(args.drain_grace_ms), &mut signals).await {
        Grace::Over => Duration::from_secs(args.drain_seconds),
        // a second signal: nothing more is waited for
        Grace::Interrupted => Duration::ZERO,
    };
    drain(&api, accepting, deadline, &mut signals).await;
    Ok(())
}

/// Reads the keys, caller credentials and certificate again every `every` whether lookups
/// and handshakes come or not, so that a failed reading turns `/readyz` false on time
/// (crate::telemetry::metrics).
async fn reload(
    broker: Arc<Broker>,
    certificate: Option<Arc<ReloadingCertificate>>,
    every: Duration,
) {
    let mut ticks = tokio::time::interval(every);
    loop {
        ticks.tick().await;
        broker.keys.current();
        broker.caller.refresh();
        if let Some(certificate) = &certificate {
            certificate.current();
        }
    }
}

/// How the grace period ended.
#[derive(Debug, PartialEq, Eq)]
enum Grace {
    /// It ran its length.
    Over,
    /// A second signal cut it.
    Interrupted,
}

/// The grace period after the first signal: unready (the caller set it), but still accepting
/// and answering, for `length` or until a second signal; one log line as it starts.
async fn grace(length: Duration, signals: &mut Signals) -> Grace {
    tracing::info!(
        msg = "terminating",
        graceMs = u64::try_from(length.as_millis()).unwrap_or(u64::MAX),
    );
    tokio::select! {
        () = tokio::time::sleep(length) => Grace::Over,
        () = signals.next() => Grace::Interrupted,
    }
}

/// Stops accepting (the API port closes), then waits for the connections open to finish
/// their current request, until `deadline` or a second signal; one log line as it starts
/// and one as it ends.
async fn drain(
    api: &Connections,
    accepting: tokio::task::JoinHandle<()>,
    deadline: Duration,
    signals: &mut Signals,
) {
    api.stop();
    // returns at once: the accept loop watches the stop; after it, no connection is added
    let _ = accepting.await;
    tracing::info!(
        msg = "draining",
        connections = api.open(),
        deadlineSeconds = deadline.as_secs(),
    );
    let unfinished = tokio::select! {
        unfinished = api.drain(deadline) => unfinished,
        () = signals.next() => api.open(),
    };
    tracing::info!(msg = "stopped", unfinished);
}

/// SIGTERM (what the kubelet sends a container's PID 1 on a rollout or an eviction) and
/// SIGINT (ctrl-c): either starts the drain, a second one ends it.
struct Signals {
    terminate: Signal,
    interrupt: Signal,
}

impl Signals {
    /// Listens for both from now on (before the ports open, so none is missed).
    fn new() -> Result<Self, StartupError> {
        let listen = |kind| signal(kind).map_err(StartupError::Signal);
        Ok(Self {
            terminate: listen(SignalKind::terminate())?,
            interrupt: listen(SignalKind::interrupt())?,
        })
    }

    /// The next SIGTERM or SIGINT.
    async fn next(&mut self) {
        tokio::select! {
            _ = self.terminate.recv() => {}
            _ = self.interrupt.recv() => {}
        }
    }
}

fn main() -> ExitCode {
    let args = Args::parse();
    logs::init();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(e) => {
            tracing::error!(msg = "failed", error = %e, "cannot start the runtime");
            eprintln!("resolvable-images-broker: cannot start: {e}");
            return ExitCode::FAILURE;
        }
    };
    let result = runtime.block_on(run(args));
    // what the drain left (connections past its deadline, a DNS lookup on a blocking thread)
    // is dropped, not waited for
    runtime.shutdown_background();
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            // a JSON line for the log pipeline, and the words on stderr for a person
            tracing::error!(msg = "failed", error = %e);
            eprintln!("resolvable-images-broker: {e}");
            ExitCode::FAILURE
        }
    }
}
