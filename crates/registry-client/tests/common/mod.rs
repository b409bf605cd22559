//! A scripted registry on 127.0.0.1 for the pool's integration tests.

use std::io::{BufRead, BufReader, Write};
use std::net::TcpListener;
use std::sync::{Arc, Mutex};

/// Serves every connection of `listener`, each request answered by `answer` from its head;
/// the heads are recorded in `seen`.
pub fn serve(
    listener: TcpListener,
    seen: Arc<Mutex<Vec<String>>>,
    answer: impl Fn(&str) -> String + Send + Sync + 'static,
) {
    let answer = Arc::new(answer);
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            let (seen, answer) = (seen.clone(), answer.clone());
            std::thread::spawn(move || {
                let mut reader = BufReader::new(stream);
                loop {
                    let mut head = String::new();
                    loop {
                        let mut line = String::new();
                        match reader.read_line(&mut line) {
                            Ok(0) | Err(_) => return,
                            Ok(_) if line == "\r\n" => break,
                            Ok(_) => head.push_str(&line),
                        }
                    }
                    let reply = answer(&head);
                    if let Ok(mut seen) = seen.lock() {
                        seen.push(head);
                    }
                    if reader.get_mut().write_all(reply.as_bytes()).is_err() {
                        return;
                    }
                }
            });
        }
    });
}

pub fn reply(status: &str, headers: &[String], body: &str) -> String {
    let mut text = format!("HTTP/1.1 {status}\r\nContent-Length: {}\r\n", body.len());
    for header in headers {
        text.push_str(header);
        text.push_str("\r\n");
    }
    format!("{text}\r\n{body}")
}
