//! The HTTP side: HTTP/1.1 over TLS (rustls), or plain HTTP on loopback for tests; and the
//! plain metrics/readiness listener.

use std::convert::Infallible;
use std::future::Future;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper::service::{service_fn, HttpService};
use hyper::{Request, Response};
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{watch, OwnedSemaphorePermit, Semaphore};
use tokio_rustls::TlsAcceptor;

use crate::http::tls::ReloadingCertificate;
use crate::lookup::reply::Reply;
use crate::lookup::service::Broker;
use crate::telemetry::metrics::{Metrics, CONTENT_TYPE};

/// How long the accept loop rests after an accept error: EMFILE, the usual one, lasts until
/// connections close, and retrying at once would spin a core.
const ACCEPT_BACKOFF: Duration = Duration::from_millis(100);
/// Connections the metrics listener serves at once: probes and a scraper need a few, and the
/// port must not become a way to exhaust the broker's descriptors.
pub const METRICS_CONNECTIONS: u32 = 64;

/// The TLS configuration serving `certificate`, read again while the broker runs (a renewed
/// certificate is served without a restart: [`ReloadingCertificate`]).
pub fn tls_acceptor(certificate: Arc<ReloadingCertificate>) -> TlsAcceptor {
    let config = rustls::ServerConfig::builder()
        .with_no_client_auth()
        .with_cert_resolver(certificate);
    TlsAcceptor::from(Arc::new(config))
}

fn response(answer: Reply, head: bool) -> Response<Full<Bytes>> {
    let length = answer.body.len();
    let body = if head {
        Bytes::new()
    } else {
        Bytes::from(answer.body)
    };
    let mut builder = Response::builder()
        .status(answer.status)
        .header("Content-Length", length.to_string());
    for (name, value) in answer.headers {
        builder = builder.header(name, value);
    }
    builder
        .body(Full::new(body))
        .unwrap_or_else(|_| Response::new(Full::new(Bytes::new())))
}

/// Serves the distribution API on `listener` until `connections` is stopped; then returns,
/// closing the listener, while the connections already open finish their current request.
pub async fn serve(
    listener: TcpListener,
    tls: Option<TlsAcceptor>,
    broker: Arc<Broker>,
    connections: Connections,
) {
    while let Some((stream, held)) = connections.next(&listener).await {
        let _ = stream.set_nodelay(true);
        let (broker, tls, connections) = (broker.clone(), tls.clone(), connections.clone());
        tokio::spawn(async move {
            let _held = held;
            connections.serve_api(stream, tls, broker).await;
        });
    }
}

/// The distribution API's answer to `request`.
async fn answer(broker: &Broker, request: Request<Incoming>) -> Response<Full<Bytes>> {
    let head = request.method() == hyper::Method::HEAD;
    let authorization = request
        .headers()
        .get(hyper::header::AUTHORIZATION)
        .map(|v| v.as_bytes().to_vec());
    let answer = broker
        .handle(
            request.method().as_str(),
            request.uri().path(),
            authorization.as_deref(),
        )
        .await;
    response(answer, head)
}

/// Serves `/metrics`, `/readyz` and `/healthz` on `listener` until `connections` is stopped.
/// The broker never stops it: it serves until the process exits, so that probes see `/readyz`
/// answer 503 while the API drains.
pub async fn serve_metrics(listener: TcpListener, metrics: Arc<Metrics>, connections: Connections) {
    while let Some((stream, held)) = connections.next(&listener).await {
        let (metrics, connections) = (metrics.clone(), connections.clone());
        tokio::spawn(async move {
            let _held = held;
            let service = service_fn(move |request: Request<Incoming>| {
                let answer = metrics_reply(&metrics, request.uri().path());
                async move { Ok::<_, Infallible>(response(answer, false)) }
            });
            let http = connections.http();
            drive(
                http.serve_connection(TokioIo::new(stream), service),
                connections.stopped(),
            )
            .await;
        });
    }
}

fn metrics_reply(metrics: &Metrics, path: &str) -> Reply {
    match path {
        "/metrics" => Reply {
            status: 200,
            headers: vec![("Content-Type", CONTENT_TYPE.into())],
            body: metrics.render().into_bytes(),
        },
        "/readyz" if metrics.is_ready() => text(200, "ready\n"),
        "/readyz" => text(503, "not ready\n"),
        "/healthz" => text(200, "ok\n"),
        _ => text(404, "not found\n"),
    }
}

/// A listener's connections. At most `max` are open at once: each connection's task holds a
/// permit, and the accept loop waits for one before accepting, so a flood of clients meets
/// the kernel's backlog rather than unbounded tasks and descriptors. `stop` ends the accept
/// loop and asks every open connection to close once its current request is answered: the
/// drain of a rollout, which must not cut lookups in flight.
#[derive(Clone)]
pub struct Connections {
    permits: Arc<Semaphore>,
    max: u32,
    open: Arc<AtomicUsize>,
    header_timeout: Duration,
    stopping: Arc<watch::Sender<bool>>,
}

impl Connections {
    /// Up to `max` connections (at least one), each allowed `header_timeout` for its TLS
    /// handshake and for each request's headers (a client that trickles them holds a permit
    /// no longer than that).
    pub fn new(max: u32, header_timeout: Duration) -> Self {
        let max = max.max(1);
        Self {
            permits: Arc::new(Semaphore::new(max as usize)),
            max,
            open: Arc::new(AtomicUsize::new(0)),
            header_timeout,
            stopping: Arc::new(watch::channel(false).0),
        }
    }

    /// Stops accepting, and asks each open connection to close after its current request.
    pub fn stop(&self) {
        self.stopping.send_replace(true);
    }

    /// How many connections are open (after `stop`: how many are still draining).
    pub fn open(&self) -> usize {
        self.open.load(Ordering::SeqCst)
    }

    /// After `stop`: waits until every connection has closed (and the accept loop has let go
    /// of the permit it waits with), or `deadline` has passed; the connections still open
    /// then, those the deadline cuts.
    pub async fn drain(&self, deadline: Duration) -> usize {
        let _ = tokio::time::timeout(deadline, self.permits.acquire_many(self.max)).await;
        self.open()
    }

    /// Resolves once `stop` was called (at once if it already was).
    fn stopped(&self) -> impl Future<Output = ()> + Send + 'static {
        let mut stopping = self.stopping.subscribe();
        async move {
            // an error is the sender gone, which is as final as a stop
            let _ = stopping.wait_for(|stopped| *stopped).await;
        }
    }

    /// The next connection with its hold on the cap (waiting for a free place first); `None`
    /// once stopped. An accept error (EMFILE, ENFILE, ECONNABORTED…) is waited out for
    /// `ACCEPT_BACKOFF`, not retried at once in a hot loop.
    async fn next(&self, listener: &TcpListener) -> Option<(TcpStream, Held)> {
        let stopped = self.stopped();
        tokio::pin!(stopped);
        let permit = tokio::select! {
            biased;
            () = &mut stopped => return None,
            permit = self.permits.clone().acquire_owned() => permit.ok()?,
        };
        loop {
            tokio::select! {
                biased;
                () = &mut stopped => return None,
                accepted = listener.accept() => match accepted {
                    Ok((stream, _peer)) => {
                        self.open.fetch_add(1, Ordering::SeqCst);
                        let open = self.open.clone();
                        return Some((stream, Held { _permit: permit, open }));
                    }
                    Err(_) => tokio::time::sleep(ACCEPT_BACKOFF).await,
                },
            }
        }
    }

    /// HTTP/1.1 with the header time-out.
    fn http(&self) -> http1::Builder {
        let mut http = http1::Builder::new();
        http.timer(TokioTimer::new())
            .header_read_timeout(self.header_timeout);
        http
    }

    /// Serves one API connection: the TLS handshake (given up at the header time-out, or at
    /// once on `stop`: no request has been read yet), then HTTP until the client closes or a
    /// drain closes it.
    async fn serve_api(&self, stream: TcpStream, tls: Option<TlsAcceptor>, broker: Arc<Broker>) {
        let service = service_fn(move |request: Request<Incoming>| {
            let broker = broker.clone();
            async move { Ok::<_, Infallible>(answer(&broker, request).await) }
        });
        let http = self.http();
        let Some(tls) = tls else {
            let connection = http.serve_connection(TokioIo::new(stream), service);
            return drive(connection, self.stopped()).await;
        };
        let handshake = tokio::time::timeout(self.header_timeout, tls.accept(stream));
        let stream = tokio::select! {
            done = handshake => match done {
                Ok(Ok(stream)) => stream,
                _ => return,
            },
            () = self.stopped() => return,
        };
        drive(
            http.serve_connection(TokioIo::new(stream), service),
            self.stopped(),
        )
        .await;
    }
}

/// A connection's hold on its listener's cap, for as long as its task lives: its permit, and
/// its place in the count of open connections.
struct Held {
    _permit: OwnedSemaphorePermit,
    open: Arc<AtomicUsize>,
}

impl Drop for Held {
    fn drop(&mut self) {
        self.open.fetch_sub(1, Ordering::SeqCst);
    }
}

/// Polls `connection` to its end; once `stopped` resolves, asks it to shut down gracefully
/// (hyper answers the request in progress with `Connection: close`, closes an idle one) and
/// polls it on until it has.
async fn drive<I, S, B>(connection: http1::Connection<I, S>, stopped: impl Future<Output = ()>)
where
    I: hyper::rt::Read + hyper::rt::Write + Unpin,
    S: HttpService<Incoming, ResBody = B>,
    S::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
    B: hyper::body::Body + 'static,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    tokio::pin!(connection);
    tokio::select! {
        _ = connection.as_mut() => return,
        () = stopped => {}
    }
    connection.as_mut().graceful_shutdown();
    let _ = connection.await;
}

fn text(status: u16, body: &str) -> Reply {
    Reply {
        status,
        headers: vec![("Content-Type", "text/plain".into())],
        body: body.as_bytes().to_vec(),
    }
}

/// Whether plain HTTP may be served on `address`: loopback only.
pub fn plain_http_allowed(address: &SocketAddr) -> bool {
    address.ip().is_loopback()
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    const GET_HEALTHZ: &[u8] = b"GET /healthz HTTP/1.1\r\nHost: broker\r\n\r\n";

    /// The metrics listener on a kernel-chosen loopback port.
    async fn metrics_listener(
        connections: &Connections,
    ) -> (SocketAddr, tokio::task::JoinHandle<()>) {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let address = listener.local_addr().expect("address");
        let metrics = Arc::new(Metrics::default());
        let task = tokio::spawn(serve_metrics(listener, metrics, connections.clone()));
        (address, task)
    }

    /// One response's head and body (by its Content-Length), or what came before EOF.
    async fn read_response(stream: &mut TcpStream) -> String {
        let mut seen = Vec::new();
        let mut buffer = [0u8; 4096];
        loop {
            let text = String::from_utf8_lossy(&seen).into_owned();
            if let Some(end) = text.find("\r\n\r\n") {
                let length = text
                    .lines()
                    .find_map(|l| {
                        l.to_ascii_lowercase()
                            .strip_prefix("content-length: ")
                            .map(str::to_owned)
                    })
                    .and_then(|l| l.trim().parse::<usize>().ok())
                    .unwrap_or(0);
                if seen.len() >= end + 4 + length {
                    return text;
                }
            }
            match stream.read(&mut buffer).await {
                Ok(0) | Err(_) => return String::from_utf8_lossy(&seen).into_owned(),
                Ok(n) => seen.extend_from_slice(&buffer[..n]),
            }
        }
    }

    /// Whether the server closes `stream` within `within`.
    async fn closed_within(stream: &mut TcpStream, within: Duration) -> bool {
        let mut rest = Vec::new();
        tokio::time::timeout(within, stream.read_to_end(&mut rest))
            .await
            .is_ok()
    }

    #[tokio::test]
    async fn the_metrics_listener_drops_a_client_that_never_finishes_its_headers() {
        let connections = Connections::new(4, Duration::from_millis(300));
        let (address, _task) = metrics_listener(&connections).await;
        let mut stream = TcpStream::connect(address).await.expect("connect");
        stream
            .write_all(b"GET /readyz HTTP/1.1\r\nHost: bro")
            .await
            .expect("write");
        let started = std::time::Instant::now();
        assert!(closed_within(&mut stream, Duration::from_secs(3)).await);
        assert!(started.elapsed() >= Duration::from_millis(250));
        // its task ends (and lets go of its place) just after the socket closes
        let ended = async {
            while connections.open() > 0 {
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        };
        assert!(tokio::time::timeout(Duration::from_secs(1), ended)
            .await
            .is_ok());
    }

    #[tokio::test]
    async fn past_the_cap_a_connection_waits_until_one_closes() {
        let connections = Connections::new(1, Duration::from_secs(5));
        let (address, _task) = metrics_listener(&connections).await;
        let mut first = TcpStream::connect(address).await.expect("connect");
        first.write_all(GET_HEALTHZ).await.expect("write");
        assert!(read_response(&mut first).await.starts_with("HTTP/1.1 200"));
        // the kernel completes the second handshake, nobody serves it
        let mut second = TcpStream::connect(address).await.expect("connect");
        second.write_all(GET_HEALTHZ).await.expect("write");
        let mut byte = [0u8; 1];
        let waited = tokio::time::timeout(Duration::from_millis(300), second.read(&mut byte)).await;
        assert!(waited.is_err(), "served past the cap");
        assert_eq!(connections.open(), 1);
        drop(first);
        let answered =
            tokio::time::timeout(Duration::from_secs(3), read_response(&mut second)).await;
        assert!(answered.is_ok_and(|r| r.starts_with("HTTP/1.1 200")));
    }

    #[tokio::test]
    async fn stop_closes_the_listener_and_idle_connections() {
        let connections = Connections::new(4, Duration::from_secs(5));
        let (address, task) = metrics_listener(&connections).await;
        let mut idle = TcpStream::connect(address).await.expect("connect");
        idle.write_all(GET_HEALTHZ).await.expect("write");
        assert!(read_response(&mut idle).await.starts_with("HTTP/1.1 200"));
        connections.stop();
        assert!(tokio::time::timeout(Duration::from_secs(2), task)
            .await
            .is_ok());
        assert!(closed_within(&mut idle, Duration::from_secs(2)).await);
        assert_eq!(connections.drain(Duration::from_secs(2)).await, 0);
        assert!(
            TcpStream::connect(address).await.is_err(),
            "still listening"
        );
    }

    /// A connection answering every request after `delay`, driven as the listeners drive
    /// theirs.
    async fn slow_connection(connections: &Connections, delay: Duration) -> SocketAddr {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let address = listener.local_addr().expect("address");
        let connections = connections.clone();
        tokio::spawn(async move {
            let Some((stream, _permit)) = connections.next(&listener).await else {
                return;
            };
            let service = service_fn(move |_request: Request<Incoming>| async move {
                tokio::time::sleep(delay).await;
                Ok::<_, Infallible>(response(text(200, "late\n"), false))
            });
            let connection = connections
                .http()
                .serve_connection(TokioIo::new(stream), service);
            drive(connection, connections.stopped()).await;
        });
        address
    }

    #[tokio::test]
    async fn a_stop_lets_the_request_in_flight_finish_then_closes_and_drains() {
        let connections = Connections::new(4, Duration::from_secs(5));
        let address = slow_connection(&connections, Duration::from_millis(400)).await;
        let mut stream = TcpStream::connect(address).await.expect("connect");
        stream.write_all(GET_HEALTHZ).await.expect("write");
        tokio::time::sleep(Duration::from_millis(100)).await;
        connections.stop();
        assert_eq!(connections.open(), 1);
        let answer = read_response(&mut stream).await;
        assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
        assert!(
            answer.to_ascii_lowercase().contains("connection: close"),
            "{answer}"
        );
        assert!(closed_within(&mut stream, Duration::from_secs(2)).await);
        assert_eq!(connections.drain(Duration::from_secs(2)).await, 0);
    }

    #[tokio::test]
    async fn the_drain_deadline_reports_what_it_cut() {
        let connections = Connections::new(4, Duration::from_secs(5));
        let address = slow_connection(&connections, Duration::from_secs(30)).await;
        let mut stream = TcpStream::connect(address).await.expect("connect");
        stream.write_all(GET_HEALTHZ).await.expect("write");
        tokio::time::sleep(Duration::from_millis(100)).await;
        connections.stop();
        let started = std::time::Instant::now();
        assert_eq!(connections.drain(Duration::from_millis(300)).await, 1);
        assert!(started.elapsed() < Duration::from_secs(2));
    }
}
