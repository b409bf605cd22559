//! A scripted HTTP/1.1 registry on 127.0.0.1 for unit tests of the pooled
//! client: it records every request (method, path, `Authorization`, which
//! connection), counts connections and requests in flight, and answers what
//! the test's script says, after an optional delay (a long one is a hang).
//! TLS handshakes are refused by closing the connection, like a plain-HTTP
//! registry tried over HTTPS.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::{TcpListener, TcpStream};

/// One request as the registry saw it.
#[derive(Debug, Clone)]
pub struct Seen {
    pub method: String,
    pub path: String,
    pub authorization: Option<String>,
    pub connection: usize,
}

/// What to answer, and after how long.
pub struct Reply {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
    pub delay: Duration,
}

impl Reply {
    pub fn new(status: u16) -> Self {
        Reply {
            status,
            headers: Vec::new(),
            body: Vec::new(),
            delay: Duration::ZERO,
        }
    }

    pub fn header(mut self, name: &str, value: &str) -> Self {
        self.headers.push((name.into(), value.into()));
        self
    }

    pub fn body(mut self, body: &[u8]) -> Self {
        self.body = body.to_vec();
        self
    }

    pub fn after(mut self, delay: Duration) -> Self {
        self.delay = delay;
        self
    }
}

type Script = dyn Fn(&Seen, &str) -> Reply + Send + Sync;

#[derive(Default)]
struct Counters {
    seen: Mutex<Vec<Seen>>,
    connections: AtomicUsize,
    in_flight: AtomicUsize,
    max_in_flight: AtomicUsize,
}

/// A running fake registry; it stops with the test's runtime.
pub struct TestRegistry {
    /// `127.0.0.1:PORT`.
    pub addr: String,
    counters: Arc<Counters>,
}

impl TestRegistry {
    /// Listen on a free port; `script(request, addr)` decides each answer.
    pub async fn start(script: impl Fn(&Seen, &str) -> Reply + Send + Sync + 'static) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("addr").to_string();
        let counters = Arc::new(Counters::default());
        let script: Arc<Script> = Arc::new(script);
        let (c, a) = (counters.clone(), addr.clone());
        tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                tokio::spawn(serve(stream, c.clone(), script.clone(), a.clone()));
            }
        });
        TestRegistry { addr, counters }
    }

    /// Every request so far, in arrival order.
    pub fn seen(&self) -> Vec<Seen> {
        self.counters.seen.lock().expect("seen").clone()
    }

    /// Requests matching `method` and a path prefix.
    pub fn count(&self, method: &str, path_prefix: &str) -> usize {
        self.seen()
            .iter()
            .filter(|s| s.method == method && s.path.starts_with(path_prefix))
            .count()
    }

    /// `GET /v2/` requests: pings.
    pub fn pings(&self) -> usize {
        self.seen().iter().filter(|s| s.path == "/v2/").count()
    }

    /// Connections that carried at least one HTTP request.
    pub fn http_connections(&self) -> usize {
        let mut ids: Vec<usize> = self.seen().iter().map(|s| s.connection).collect();
        ids.sort_unstable();
        ids.dedup();
        ids.len()
    }

    /// The most requests that were being answered at the same time.
    pub fn max_in_flight(&self) -> usize {
        self.counters.max_in_flight.load(Ordering::SeqCst)
    }
}

async fn serve(stream: TcpStream, counters: Arc<Counters>, script: Arc<Script>, addr: String) {
    let connection = counters.connections.fetch_add(1, Ordering::SeqCst);
    let mut stream = BufReader::new(stream);
    loop {
        // a TLS ClientHello starts with 0x16: refuse it as a plain-HTTP server would
        match stream.fill_buf().await {
            Ok([first, ..]) if first.is_ascii_uppercase() => {}
            _ => return,
        }
        let mut line = String::new();
        if stream.read_line(&mut line).await.unwrap_or(0) == 0 {
            return;
        }
        let mut parts = line.split_whitespace();
        let (method, path) = (
            parts.next().unwrap_or_default(),
            parts.next().unwrap_or_default(),
        );
        let mut seen = Seen {
            method: method.to_owned(),
            path: path.to_owned(),
            authorization: None,
            connection,
        };
        loop {
            let mut header = String::new();
            if stream.read_line(&mut header).await.unwrap_or(0) == 0 {
                return;
            }
            let header = header.trim_end();
            if header.is_empty() {
                break;
            }
            if let Some((name, value)) = header.split_once(':') {
                if name.eq_ignore_ascii_case("authorization") {
                    seen.authorization = Some(value.trim().to_owned());
                }
            }
        }
        counters.seen.lock().expect("seen").push(seen.clone());
        let now = counters.in_flight.fetch_add(1, Ordering::SeqCst) + 1;
        counters.max_in_flight.fetch_max(now, Ordering::SeqCst);
        let reply = script(&seen, &addr);
        tokio::time::sleep(reply.delay).await;
        counters.in_flight.fetch_sub(1, Ordering::SeqCst);
        let mut head = format!(
            "HTTP/1.1 {} X\r\nContent-Length: {}\r\n",
            reply.status,
            reply.body.len()
        );
        for (name, value) in &reply.headers {
            head.push_str(&format!("{name}: {value}\r\n"));
        }
        head.push_str("\r\n");
        let mut out = head.into_bytes();
        if seen.method != "HEAD" {
            out.extend_from_slice(&reply.body);
        }
        if stream.get_mut().write_all(&out).await.is_err() {
            return;
        }
    }
}
