//! loadgen: the load generator of `make bench`'s policy-server tables. Standard library only,
//! so `rustc -O bench/loadgen.rs` builds it in seconds with no crate to fetch.
//!
//! It POSTs AdmissionReviews over HTTP/1.1 keep-alive connections to 127.0.0.1 (nothing else
//! is accepted), to several targets (policy ids) *interleaved*: round after round, each target
//! gets its share of the requests in turn (every other round in reverse order), so that a
//! machine whose load changes during the run slows every target alike and the ratios between
//! them keep their meaning.
//!
//! Per target it prints one JSON line: requests, errors (transport or HTTP status), answers
//! that were not `allowed: true` or carried warnings (a benchmark of wrong answers is
//! worthless: the caller checks),
//! requests per second over the target's own wall time, latency percentiles, and what the
//! server process spent on it: CPU time (all threads, /proc/PID/stat) and minor
//! page faults per request, read around each of the target's rounds; and per round its median
//! latency and CPU per request, so that ratios can be taken round by round.
//!
//! Usage:
//!   loadgen --addr 127.0.0.1:PORT --connections N --rounds R --requests N --max-secs S
//!           [--warmup N] [--server-pid PID] --target NAME=PATH=BODIES.jsonl ...
//! `--requests` and `--max-secs` bound each target (the sum over its rounds); `--warmup`
//! requests per target are sent first and not counted. BODIES.jsonl holds one request body a
//! line, used in order and round robin: for a cold cache give at least warmup + requests lines.

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

struct Target {
    name: String,
    path: String,
    bodies: Vec<Vec<u8>>,
    /// Next body to send: bodies are never reused before the list wraps.
    next: usize,
    latencies_us: Vec<u64>,
    errors: usize,
    not_allowed: usize,
    warned: usize,
    wall: Duration,
    cpu_ticks: u64,
    minflt: u64,
    /// Per round: (median latency in µs, server CPU ns per request), for ratios round by round.
    rounds: Vec<(u64, u64)>,
    first_error: Option<String>,
}

struct Options {
    addr: SocketAddr,
    connections: usize,
    rounds: usize,
    requests: usize,
    max_secs: f64,
    warmup: usize,
    server_pid: Option<u32>,
}

fn main() {
    if let Err(e) = run() {
        eprintln!("loadgen: {e}");
        std::process::exit(2);
    }
}

fn run() -> Result<(), String> {
    let (options, mut targets) = parse_args()?;
    for target in &mut targets {
        warm_up(&options, target)?;
    }
    let per_round = options.requests.div_ceil(options.rounds).max(1);
    let budget = Duration::from_secs_f64(options.max_secs);
    for round in 0..options.rounds {
        // every other round in reverse order: no target always follows the same one
        let mut order: Vec<&mut Target> = targets.iter_mut().collect();
        if round % 2 == 1 {
            order.reverse();
        }
        for target in order {
            one_round(&options, target, per_round, budget)?;
        }
    }
    for target in &mut targets {
        print_result(target);
    }
    Ok(())
}

/// Sends `--warmup` requests of `target`, not counted; any error fails the run.
fn warm_up(options: &Options, target: &mut Target) -> Result<(), String> {
    if options.warmup == 0 {
        return Ok(());
    }
    let bodies = take(target, options.warmup);
    let outcome = batch(options, &target.path, bodies, None);
    if outcome.errors > 0 {
        return Err(format!(
            "{}: warm-up failed: {}",
            target.name,
            outcome.first_error.unwrap_or_default()
        ));
    }
    Ok(())
}

/// One round of `target`: its share of the requests, within what is left of its budget, with
/// the server's CPU and page faults read around it.
fn one_round(
    options: &Options,
    target: &mut Target,
    per_round: usize,
    budget: Duration,
) -> Result<(), String> {
    let sent = target.latencies_us.len() + target.errors;
    if sent >= options.requests || target.wall >= budget {
        return Ok(());
    }
    let n = per_round.min(options.requests - sent);
    let bodies = take(target, n);
    let before = options.server_pid.map(server_usage).transpose()?;
    let deadline = Instant::now() + (budget - target.wall);
    let started = Instant::now();
    let outcome = batch(options, &target.path, bodies, Some(deadline));
    target.wall += started.elapsed();
    let mut cpu_ns = 0;
    if let (Some(pid), Some((ticks, ns, faults))) = (options.server_pid, before) {
        let (ticks_after, ns_after, faults_after) = server_usage(pid)?;
        cpu_ns = ns_after.saturating_sub(ns);
        target.cpu_ticks += ticks_after.saturating_sub(ticks);
        target.minflt += faults_after.saturating_sub(faults);
    }
    let mut round_latencies = outcome.latencies_us.clone();
    round_latencies.sort_unstable();
    if let Some(median) = round_latencies.get(round_latencies.len() / 2) {
        target
            .rounds
            .push((*median, cpu_ns / round_latencies.len() as u64));
    }
    target.latencies_us.extend(outcome.latencies_us);
    target.errors += outcome.errors;
    target.not_allowed += outcome.not_allowed;
    target.warned += outcome.warned;
    if target.first_error.is_none() {
        target.first_error = outcome.first_error;
    }
    Ok(())
}

/// Prints the JSON line of `target`.
fn print_result(target: &mut Target) {
    target.latencies_us.sort_unstable();
    let n = target.latencies_us.len();
    let pct = |p: f64| -> f64 {
        if n == 0 {
            return 0.0;
        }
        let rank = ((p / 100.0) * n as f64).ceil() as usize;
        target.latencies_us[rank.clamp(1, n) - 1] as f64 / 1000.0
    };
    let per_request = |total: f64| if n == 0 { 0.0 } else { total / n as f64 };
    println!(
        "{{\"target\":\"{}\",\"requests\":{},\"errors\":{},\"not_allowed\":{},\"warned\":{},\"wall_s\":{:.3},\"rps\":{:.1},\"p50_ms\":{:.3},\"p90_ms\":{:.3},\"p99_ms\":{:.3},\"max_ms\":{:.3},\"server_cpu_us_per_request\":{:.0},\"server_minflt_per_request\":{:.1},\"rounds\":[{}],\"first_error\":{}}}",
        target.name,
        n,
        target.errors,
        target.not_allowed,
        target.warned,
        target.wall.as_secs_f64(),
        n as f64 / target.wall.as_secs_f64().max(1e-9),
        pct(50.0),
        pct(90.0),
        pct(99.0),
        pct(100.0),
        per_request(target.cpu_ticks as f64 * 1e6 / clock_ticks_per_second()),
        per_request(target.minflt as f64),
        target
            .rounds
            .iter()
            .map(|(p50, cpu)| format!("{{\"p50_us\":{p50},\"cpu_us\":{}}}", cpu / 1000))
            .collect::<Vec<_>>()
            .join(","),
        json_string(target.first_error.as_deref()),
    );
}

/// The next `n` bodies of `target`, round robin.
fn take(target: &mut Target, n: usize) -> Vec<Vec<u8>> {
    let out = (0..n)
        .map(|i| target.bodies[(target.next + i) % target.bodies.len()].clone())
        .collect();
    target.next += n;
    out
}

#[derive(Default)]
struct Outcome {
    latencies_us: Vec<u64>,
    errors: usize,
    not_allowed: usize,
    warned: usize,
    first_error: Option<String>,
}

/// Sends `bodies` to `path` over `connections` keep-alive connections at once, each taking the
/// next body as soon as its previous answer is in; stops early at `deadline`.
fn batch(
    options: &Options,
    path: &str,
    bodies: Vec<Vec<u8>>,
    deadline: Option<Instant>,
) -> Outcome {
    let bodies = Arc::new(bodies);
    let next = Arc::new(AtomicUsize::new(0));
    let total = Arc::new(Mutex::new(Outcome::default()));
    let threads: Vec<_> = (0..options.connections.min(bodies.len()).max(1))
        .map(|_| {
            let (bodies, next, total) = (bodies.clone(), next.clone(), total.clone());
            let (addr, path) = (options.addr, path.to_owned());
            std::thread::spawn(move || {
                let mut mine = Outcome::default();
                let mut conn: Option<Connection> = None;
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    if i >= bodies.len() || deadline.is_some_and(|d| Instant::now() >= d) {
                        break;
                    }
                    let started = Instant::now();
                    let result = match conn.as_mut() {
                        Some(c) => c.post(&path, &bodies[i]),
                        None => Connection::open(addr).and_then(|mut c| {
                            let r = c.post(&path, &bodies[i]);
                            conn = Some(c);
                            r
                        }),
                    };
                    match result {
                        Ok(answer) => {
                            mine.latencies_us.push(started.elapsed().as_micros() as u64);
                            if contains(&answer, b"\"warnings\":[") {
                                mine.warned += 1;
                                mine.first_error.get_or_insert_with(|| {
                                    format!("warned: {}", String::from_utf8_lossy(&answer))
                                });
                            }
                            if !contains(&answer, b"\"allowed\":true") {
                                mine.not_allowed += 1;
                                mine.first_error.get_or_insert_with(|| {
                                    format!("not allowed: {}", String::from_utf8_lossy(&answer))
                                });
                            }
                        }
                        Err(e) => {
                            mine.errors += 1;
                            mine.first_error.get_or_insert(e);
                            conn = None;
                        }
                    }
                }
                let mut total = total.lock().unwrap_or_else(|p| p.into_inner());
                total.latencies_us.extend(mine.latencies_us);
                total.errors += mine.errors;
                total.not_allowed += mine.not_allowed;
                total.warned += mine.warned;
                if total.first_error.is_none() {
                    total.first_error = mine.first_error;
                }
            })
        })
        .collect();
    for t in threads {
        let _ = t.join();
    }
    let mut total = total.lock().unwrap_or_else(|p| p.into_inner());
    std::mem::take(&mut *total)
}

/// Whether an answer (policy-server's compact JSON) holds `needle`, e.g. `"allowed":true`.
fn contains(answer: &[u8], needle: &[u8]) -> bool {
    answer.windows(needle.len()).any(|w| w == needle)
}

/// One HTTP/1.1 keep-alive connection.
struct Connection {
    reader: BufReader<TcpStream>,
    writer: TcpStream,
    host: String,
}

impl Connection {
    fn open(addr: SocketAddr) -> Result<Self, String> {
        let stream = TcpStream::connect_timeout(&addr, Duration::from_secs(5))
            .map_err(|e| format!("connect {addr}: {e}"))?;
        stream.set_nodelay(true).map_err(|e| e.to_string())?;
        stream
            .set_read_timeout(Some(Duration::from_secs(60)))
            .map_err(|e| e.to_string())?;
        let writer = stream.try_clone().map_err(|e| e.to_string())?;
        Ok(Self {
            reader: BufReader::new(stream),
            writer,
            host: addr.to_string(),
        })
    }

    /// POSTs `body` as JSON; the answer's body when the status is 200.
    fn post(&mut self, path: &str, body: &[u8]) -> Result<Vec<u8>, String> {
        let head = format!(
            "POST {path} HTTP/1.1\r\nHost: {}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n",
            self.host,
            body.len()
        );
        let mut request = head.into_bytes();
        request.extend_from_slice(body);
        self.writer
            .write_all(&request)
            .map_err(|e| format!("send: {e}"))?;
        let mut status = String::new();
        self.reader
            .read_line(&mut status)
            .map_err(|e| format!("read status: {e}"))?;
        if status.is_empty() {
            return Err("connection closed by the server".into());
        }
        let mut length = None;
        loop {
            let mut line = String::new();
            self.reader
                .read_line(&mut line)
                .map_err(|e| format!("read header: {e}"))?;
            let line = line.trim_end();
            if line.is_empty() {
                break;
            }
            if let Some((name, value)) = line.split_once(':') {
                if name.eq_ignore_ascii_case("content-length") {
                    length = value.trim().parse::<usize>().ok();
                }
            }
        }
        let length = length.ok_or("answer without Content-Length")?;
        let mut answer = vec![0; length];
        self.reader
            .read_exact(&mut answer)
            .map_err(|e| format!("read body: {e}"))?;
        if !status.starts_with("HTTP/1.1 200") {
            return Err(format!(
                "{}: {}",
                status.trim_end(),
                String::from_utf8_lossy(&answer)
            ));
        }
        Ok(answer)
    }
}

/// The server's CPU time so far, twice: in clock ticks from /proc/PID/stat (user + system,
/// counting threads that have exited, such as the runtime's blocking threads: the totals) and
/// in ns summed over its live threads from /proc/PID/task/*/schedstat (fine enough for a round
/// of a few hundred requests: the per-round figures); and its minor page faults.
fn server_usage(pid: u32) -> Result<(u64, u64, u64), String> {
    let tasks = std::fs::read_dir(format!("/proc/{pid}/task"))
        .map_err(|e| format!("/proc/{pid}/task: {e}"))?;
    let mut ns = 0;
    for task in tasks.flatten() {
        if let Ok(text) = std::fs::read_to_string(task.path().join("schedstat")) {
            ns += text
                .split_whitespace()
                .next()
                .and_then(|v| v.parse::<u64>().ok())
                .unwrap_or(0);
        }
    }
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .map_err(|e| format!("/proc/{pid}/stat: {e}"))?;
    // fields after the command name (which may hold spaces): state is field 3
    let rest = stat.rsplit_once(')').map(|(_, r)| r).unwrap_or("");
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let field = |n: usize| -> u64 { fields.get(n - 3).and_then(|v| v.parse().ok()).unwrap_or(0) };
    Ok((field(14) + field(15), ns, field(10)))
}

/// USER_HZ; 100 on every Linux this runs on (no libc call in a std-only program).
fn clock_ticks_per_second() -> f64 {
    std::env::var("CLK_TCK")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(100.0)
}

fn json_string(s: Option<&str>) -> String {
    match s {
        None => "null".into(),
        Some(s) => {
            let mut out = String::from("\"");
            for c in s.chars().take(400) {
                match c {
                    '"' => out.push_str("\\\""),
                    '\\' => out.push_str("\\\\"),
                    c if (c as u32) < 0x20 => out.push(' '),
                    c => out.push(c),
                }
            }
            out.push('"');
            out
        }
    }
}

/// One `--target NAME=PATH=BODIES.jsonl`, its bodies read.
fn parse_target(value: &str) -> Result<Target, String> {
    let mut parts = value.splitn(3, '=');
    let (Some(name), Some(path), Some(file)) = (parts.next(), parts.next(), parts.next()) else {
        return Err(format!("--target {value}: expected NAME=PATH=BODIES"));
    };
    let text = std::fs::read(file).map_err(|e| format!("{file}: {e}"))?;
    let bodies: Vec<Vec<u8>> = text
        .split(|b| *b == b'\n')
        .filter(|l| !l.is_empty())
        .map(<[u8]>::to_vec)
        .collect();
    if bodies.is_empty() {
        return Err(format!("{file}: no request body"));
    }
    Ok(Target {
        name: name.into(),
        path: path.into(),
        bodies,
        next: 0,
        latencies_us: Vec::new(),
        errors: 0,
        not_allowed: 0,
        warned: 0,
        wall: Duration::ZERO,
        cpu_ticks: 0,
        minflt: 0,
        rounds: Vec::new(),
        first_error: None,
    })
}

fn parse_args() -> Result<(Options, Vec<Target>), String> {
    let mut values: HashMap<String, String> = HashMap::new();
    let mut targets = Vec::new();
    let mut args = std::env::args().skip(1);
    while let Some(flag) = args.next() {
        let value = args.next().ok_or(format!("{flag} needs a value"))?;
        match flag.as_str() {
            "--target" => targets.push(parse_target(&value)?),
            f if f.starts_with("--") => {
                values.insert(f[2..].to_owned(), value);
            }
            other => return Err(format!("unexpected argument {other}")),
        }
    }
    let get = |k: &str, default: Option<&str>| -> Result<String, String> {
        values
            .get(k)
            .cloned()
            .or(default.map(str::to_owned))
            .ok_or(format!("--{k} is required"))
    };
    let num = |k: &str, default: Option<&str>| -> Result<usize, String> {
        get(k, default)?.parse().map_err(|e| format!("--{k}: {e}"))
    };
    let addr: SocketAddr = get("addr", None)?
        .parse()
        .map_err(|e| format!("--addr: {e}"))?;
    if !addr.ip().is_loopback() {
        return Err(format!(
            "--addr {addr}: only loopback addresses are allowed"
        ));
    }
    if targets.is_empty() {
        return Err("no --target".into());
    }
    let options = Options {
        addr,
        connections: num("connections", Some("8"))?.max(1),
        rounds: num("rounds", Some("3"))?.max(1),
        requests: num("requests", Some("1000"))?,
        max_secs: get("max-secs", Some("30"))?
            .parse()
            .map_err(|e| format!("--max-secs: {e}"))?,
        warmup: num("warmup", Some("0"))?,
        server_pid: values
            .get("server-pid")
            .map(|p| p.parse().map_err(|e| format!("--server-pid: {e}")))
            .transpose()?,
    };
    Ok((options, targets))
}
