//! The HTTP side: HTTP/1.1 over TLS (rustls), or plain HTTP on loopback for tests; and the
//! plain metrics/readiness listener.

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;

use bytes::Bytes;
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use tokio::net::TcpListener;
use tokio_rustls::TlsAcceptor;

use crate::error::StartupError;
use crate::metrics::Metrics;
use crate::service::{Answer, Broker};

/// How long a client may take to send its request headers.
const HEADER_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

/// The TLS configuration for `cert` and `key` (PEM files).
pub fn tls_acceptor(cert: &Path, key: &Path) -> Result<TlsAcceptor, StartupError> {
    let pem = |path: &Path| {
        let path = path.to_owned();
        move |source| StartupError::Pem { path, source }
    };
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(cert)
        .and_then(|certs| certs.collect())
        .map_err(pem(cert))?;
    let key = PrivateKeyDer::from_pem_file(key).map_err(pem(key))?;
    let config = rustls::ServerConfig::builder()
        .with_no_client_auth()
        .with_single_cert(certs, key)
        .map_err(StartupError::Tls)?;
    Ok(TlsAcceptor::from(Arc::new(config)))
}

fn response(answer: Answer, head: bool) -> Response<Full<Bytes>> {
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

/// Serves the distribution API on `listener` until the process ends.
pub async fn serve(listener: TcpListener, tls: Option<TlsAcceptor>, broker: Arc<Broker>) {
    loop {
        let Ok((stream, _peer)) = listener.accept().await else {
            continue;
        };
        let _ = stream.set_nodelay(true);
        let broker = broker.clone();
        let tls = tls.clone();
        tokio::spawn(async move {
            let service = service_fn(move |request: Request<Incoming>| {
                let broker = broker.clone();
                async move {
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
                    Ok::<_, std::convert::Infallible>(response(answer, head))
                }
            });
            let mut http = http1::Builder::new();
            http.timer(hyper_util::rt::TokioTimer::new())
                .header_read_timeout(HEADER_TIMEOUT);
            match tls {
                Some(tls) => {
                    let Ok(Ok(stream)) =
                        tokio::time::timeout(HEADER_TIMEOUT, tls.accept(stream)).await
                    else {
                        return;
                    };
                    let _ = http.serve_connection(TokioIo::new(stream), service).await;
                }
                None => {
                    let _ = http.serve_connection(TokioIo::new(stream), service).await;
                }
            }
        });
    }
}

/// Serves `/metrics`, `/readyz` and `/healthz` on `listener`.
pub async fn serve_metrics(listener: TcpListener, metrics: Arc<Metrics>) {
    loop {
        let Ok((stream, _)) = listener.accept().await else {
            continue;
        };
        let metrics = metrics.clone();
        tokio::spawn(async move {
            let service = service_fn(move |request: Request<Incoming>| {
                let metrics = metrics.clone();
                async move {
                    let answer = match request.uri().path() {
                        "/metrics" => Answer {
                            status: 200,
                            headers: vec![("Content-Type", "text/plain; version=0.0.4".into())],
                            body: metrics.render().into_bytes(),
                        },
                        "/readyz" if metrics.is_ready() => text(200, "ready\n"),
                        "/readyz" => text(503, "not ready\n"),
                        "/healthz" => text(200, "ok\n"),
                        _ => text(404, "not found\n"),
                    };
                    Ok::<_, std::convert::Infallible>(response(answer, false))
                }
            });
            let _ = http1::Builder::new()
                .serve_connection(TokioIo::new(stream), service)
                .await;
        });
    }
}

fn text(status: u16, body: &str) -> Answer {
    Answer {
        status,
        headers: vec![("Content-Type", "text/plain".into())],
        body: body.as_bytes().to_vec(),
    }
}

/// Whether plain HTTP may be served on `address`: loopback only.
pub fn plain_http_allowed(address: &SocketAddr) -> bool {
    address.ip().is_loopback()
}
