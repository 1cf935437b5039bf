//! The clients of the hostile-load benchmark (benches/hostile.rs): slow
//! large bodies over HTTP/1.1, silent TCP connections, HTTP/2 connections
//! with many streams, and the ordinary reviews sent at a fixed rate, whose
//! answers are checked. Every loop stops at its deadline. The hostile
//! clients connect from [`ATTACKER`], another address than the ordinary
//! reviews' (another pod than the API server).
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use base64::Engine;
use bytes::Bytes;
use hdrhistogram::Histogram;
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;

use super::https::Connection;

/// Where the hostile clients connect from: on Linux all of 127.0.0.0/8 is
/// loopback, so this is another peer than the ordinary reviews' 127.0.0.1.
pub const ATTACKER: IpAddr = IpAddr::V4(Ipv4Addr::new(127, 0, 0, 2));

/// A TCP connection to `addr` from [`ATTACKER`].
pub async fn connect_from_attacker(addr: &str) -> std::io::Result<TcpStream> {
    connect_from(ATTACKER, addr).await
}

/// A TCP connection to `addr` from `source`, an IPv4 address of this host.
pub async fn connect_from(source: IpAddr, addr: &str) -> std::io::Result<TcpStream> {
    let addr: SocketAddr = addr.parse().map_err(std::io::Error::other)?;
    let socket = tokio::net::TcpSocket::new_v4()?;
    socket.bind(SocketAddr::new(source, 0))?;
    let tcp = socket.connect(addr).await?;
    tcp.set_nodelay(true)?;
    Ok(tcp)
}

/// How long a hostile client waits before trying again (the 503's Retry-After).
const PAUSE: Duration = Duration::from_secs(1);
/// Attempts of an ordinary review whose connection fails, as the API server
/// retries a webhook call on a reset connection.
const ATTEMPTS: usize = 5;

/// Outcomes counted by name.
#[derive(Default)]
pub struct Outcomes(Mutex<BTreeMap<String, u64>>);

impl Outcomes {
    pub fn add(&self, what: impl Into<String>) {
        *self.0.lock().unwrap().entry(what.into()).or_default() += 1;
    }

    /// `name count, ...`.
    pub fn show(&self) -> String {
        let counts = self.0.lock().unwrap();
        let parts: Vec<String> = counts.iter().map(|(k, n)| format!("{k} {n}")).collect();
        if parts.is_empty() {
            "none".into()
        } else {
            parts.join(", ")
        }
    }
}

/// The captured review in `namespace` with `uid`, padded with an annotation
/// to `bytes` bytes when given.
pub fn review(fixture: &Value, namespace: &str, uid: &str, bytes: Option<usize>) -> Bytes {
    let mut review = fixture.clone();
    review["request"]["uid"] = json!(uid);
    review["request"]["namespace"] = json!(namespace);
    review["request"]["object"]["metadata"]["namespace"] = json!(namespace);
    let Some(bytes) = bytes else {
        return Bytes::from(review.to_string());
    };
    let padding = "bench.linkerd-multus.io/padding";
    review["request"]["object"]["metadata"]["annotations"][padding] = json!("");
    let short = review.to_string().len();
    review["request"]["object"]["metadata"]["annotations"][padding] =
        json!("x".repeat(bytes.saturating_sub(short)));
    Bytes::from(review.to_string())
}

pub async fn connect_tls(
    addr: &str,
    tls: &TlsConnector,
) -> std::io::Result<tokio_rustls::client::TlsStream<TcpStream>> {
    connect_tls_from(ATTACKER, addr, tls).await
}

/// [`connect_tls`] from `source`.
pub async fn connect_tls_from(
    source: IpAddr,
    addr: &str,
    tls: &TlsConnector,
) -> std::io::Result<tokio_rustls::client::TlsStream<TcpStream>> {
    let tcp = connect_from(source, addr).await?;
    tls.connect("127.0.0.1".try_into().expect("a name"), tcp)
        .await
}

/// The status of an HTTP/1 response head read from `reader`, or what went wrong.
async fn status(reader: &mut (impl AsyncReadExt + Unpin)) -> String {
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        match reader.read(&mut byte).await {
            Ok(1) => head.push(byte[0]),
            _ => return "closed without an answer".into(),
        }
    }
    let text = String::from_utf8_lossy(&head);
    text.split(' ')
        .nth(1)
        .map_or("garbled".into(), |s| format!("HTTP {s}"))
}

/// One client sending `body` slowly over HTTP/1.1, spread over `send_time`,
/// again and again until `until`; counts each answer and how long a 503 took.
pub async fn slow_body(
    addr: String,
    tls: TlsConnector,
    body: Bytes,
    send_time: Duration,
    until: Instant,
    out: Arc<Outcomes>,
    refused_in: Arc<Mutex<Histogram<u64>>>,
) {
    const CHUNKS: usize = 100;
    while Instant::now() < until {
        let Ok(stream) = connect_tls(&addr, &tls).await else {
            out.add("connection failed");
            tokio::time::sleep(PAUSE).await;
            continue;
        };
        let (mut reader, mut writer) = tokio::io::split(stream);
        let head = format!(
            "POST /mutate HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n",
            body.len()
        );
        let started = Instant::now();
        let send = async {
            writer.write_all(head.as_bytes()).await?;
            for chunk in body.chunks(body.len().div_ceil(CHUNKS)) {
                writer.write_all(chunk).await?;
                tokio::time::sleep(send_time / CHUNKS as u32).await;
            }
            writer.flush().await?;
            // Sent: wait for the answer.
            std::future::pending::<std::io::Result<()>>().await
        };
        let answer = tokio::select! {
            answer = status(&mut reader) => answer,
            sent = send => format!("send failed: {}", sent.err().map_or_else(String::new, |e| e.kind().to_string())),
        };
        if answer == "HTTP 503" {
            let micros = started.elapsed().as_micros() as u64;
            refused_in.lock().unwrap().saturating_record(micros);
        }
        out.add(answer);
        tokio::time::sleep(PAUSE).await;
    }
}

/// A TCP connection that never sends a byte, opened again a second after
/// the server closes it, until `until`.
pub async fn silent(addr: String, until: Instant, out: Arc<Outcomes>) {
    while Instant::now() < until {
        let Ok(mut tcp) = connect_from_attacker(&addr).await else {
            out.add("connect failed");
            tokio::time::sleep(PAUSE).await;
            continue;
        };
        out.add("opened");
        let left = until.saturating_duration_since(Instant::now());
        match tokio::time::timeout(left, tcp.read(&mut [0u8; 1])).await {
            Err(_) => break,
            Ok(_) => out.add("closed by the server"),
        }
        tokio::time::sleep(PAUSE).await;
    }
}

/// An HTTP/2 connection opening `streams` streams at once, each sending
/// `body` spread over `send_time`, again and again until `until`.
pub async fn h2_streams(
    addr: String,
    tls: TlsConnector,
    streams: usize,
    body: Bytes,
    send_time: Duration,
    until: Instant,
    out: Arc<Outcomes>,
) {
    while Instant::now() < until {
        let Ok(stream) = connect_tls(&addr, &tls).await else {
            out.add("connection failed");
            tokio::time::sleep(PAUSE).await;
            continue;
        };
        let Ok((sender, connection)) = h2::client::handshake(stream).await else {
            out.add("handshake failed");
            tokio::time::sleep(PAUSE).await;
            continue;
        };
        let connection = tokio::spawn(connection);
        let tasks: Vec<_> = (0..streams)
            .map(|_| {
                let (sender, body, out) = (sender.clone(), body.clone(), out.clone());
                tokio::spawn(async move {
                    while Instant::now() < until {
                        let answer = h2_stream(sender.clone(), body.clone(), send_time).await;
                        let stop = answer.starts_with("error");
                        out.add(answer);
                        if stop {
                            return;
                        }
                        tokio::time::sleep(PAUSE).await;
                    }
                })
            })
            .collect();
        for task in tasks {
            task.await.ok();
        }
        drop(sender);
        connection.abort();
    }
}

/// One stream: the request, its body sent slowly until the answer comes.
async fn h2_stream(
    sender: h2::client::SendRequest<Bytes>,
    body: Bytes,
    send_time: Duration,
) -> String {
    const CHUNKS: usize = 50;
    let Ok(mut sender) = sender.ready().await else {
        return "error: connection gone".into();
    };
    let request = hyper::Request::post("https://127.0.0.1/mutate")
        .header("content-type", "application/json")
        .header("content-length", body.len())
        .body(())
        .expect("a request");
    let Ok((response, mut send)) = sender.send_request(request, false) else {
        return "error: connection gone".into();
    };
    let sending = async {
        let chunk = body.len().div_ceil(CHUNKS);
        for at in (0..body.len()).step_by(chunk) {
            let end = (at + chunk).min(body.len());
            let last = end == body.len();
            if send.send_data(body.slice(at..end), last).is_err() || last {
                break;
            }
            tokio::time::sleep(send_time / CHUNKS as u32).await;
        }
        std::future::pending::<()>().await
    };
    tokio::select! {
        response = response => match response {
            Ok(response) => format!("HTTP {}", response.status().as_u16()),
            Err(e) => format!("stream {}", e.reason().map_or("failed".into(), |r| r.to_string())),
        },
        () = sending => unreachable!("sending never ends by itself"),
    }
}

/// What the ordinary reviews got.
pub struct Ordinary {
    /// From each review's scheduled time to its right answer, µs.
    pub latency: Histogram<u64>,
    pub answered: u64,
    /// Attempts again after a connection failed.
    pub retried: u64,
    /// No answer after every attempt.
    pub missing: u64,
    pub wrong: u64,
    pub first_problem: Option<String>,
}

/// The ordinary reviews, and where they go.
#[derive(Clone)]
pub struct Reviews {
    pub addr: String,
    pub tls: TlsConnector,
    /// Each review and its uid.
    pub reviews: Arc<Vec<(Bytes, String)>>,
    /// The patch each answer must hold.
    pub patch: Value,
    /// Reviews a second.
    pub rate: f64,
    /// Keep-alive connections they are spread over.
    pub connections: usize,
}

impl Reviews {
    /// Sends them at the rate until `until`, each answer checked (the uid
    /// echoed, allowed, exactly the patch); a failed connection is opened
    /// again and the review retried, as the API server does.
    pub async fn send_until(&self, until: Instant) -> Ordinary {
        let patch = Arc::new(self.patch.clone());
        let mut queues = Vec::new();
        let mut tasks = Vec::new();
        for _ in 0..self.connections {
            let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<(Instant, usize)>();
            queues.push(tx);
            let (addr, tls) = (self.addr.clone(), self.tls.clone());
            let (reviews, patch) = (self.reviews.clone(), patch.clone());
            tasks.push(tokio::spawn(async move {
                let mut tally = Ordinary::new();
                let mut conn = None;
                while let Some((scheduled, i)) = rx.recv().await {
                    let (body, uid) = &reviews[i % reviews.len()];
                    let sent = (body, uid.as_str(), &*patch, scheduled);
                    tally.one(&addr, &tls, &mut conn, sent).await;
                }
                tally
            }));
        }
        let mut ticks = tokio::time::interval(Duration::from_secs_f64(1.0 / self.rate));
        ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Burst);
        let mut k = 0;
        while Instant::now() < until {
            ticks.tick().await;
            queues[k % queues.len()].send((Instant::now(), k)).ok();
            k += 1;
        }
        drop(queues);
        let mut all = Ordinary::new();
        for task in tasks {
            let tally = task.await.expect("a load task");
            all.latency.add(&tally.latency).expect("same bounds");
            all.answered += tally.answered;
            all.retried += tally.retried;
            all.missing += tally.missing;
            all.wrong += tally.wrong;
            all.first_problem = all.first_problem.or(tally.first_problem);
        }
        all
    }
}

impl Ordinary {
    fn new() -> Ordinary {
        Ordinary {
            latency: super::common::histogram(),
            answered: 0,
            retried: 0,
            missing: 0,
            wrong: 0,
            first_problem: None,
        }
    }

    /// Sends one review (its body, uid, patch wanted and scheduled time).
    async fn one(
        &mut self,
        addr: &str,
        tls: &TlsConnector,
        conn: &mut Option<Connection>,
        (body, uid, patch, scheduled): (&Bytes, &str, &Value, Instant),
    ) {
        for attempt in 0..ATTEMPTS {
            if attempt > 0 {
                self.retried += 1;
            }
            if conn.is_none() {
                *conn = Connection::open(addr, tls).await.ok();
            }
            let Some(open) = conn.as_mut() else { continue };
            match open.post("/mutate", body.clone()).await {
                Ok((status, answer)) => {
                    match judge(status, &answer, uid, patch) {
                        Ok(()) => {
                            self.answered += 1;
                            let micros = scheduled.elapsed().as_micros() as u64;
                            self.latency.saturating_record(micros);
                        }
                        Err(e) => {
                            self.wrong += 1;
                            self.first_problem.get_or_insert(e);
                        }
                    }
                    return;
                }
                Err(_) => *conn = None,
            }
        }
        self.missing += 1;
        self.first_problem
            .get_or_insert(format!("no answer after {ATTEMPTS} attempts"));
    }
}

/// Whether an ordinary review's answer is right.
pub fn judge(status: u16, body: &[u8], uid: &str, patch: &Value) -> Result<(), String> {
    let show = || String::from_utf8_lossy(&body[..body.len().min(300)]).into_owned();
    if status != 200 {
        return Err(format!("status {status}: {}", show()));
    }
    let review: Value = serde_json::from_slice(body).map_err(|e| format!("{e}: {}", show()))?;
    let response = &review["response"];
    let got = response["patch"]
        .as_str()
        .and_then(|p| base64::engine::general_purpose::STANDARD.decode(p).ok())
        .and_then(|p| serde_json::from_slice::<Value>(&p).ok());
    if response["uid"] != uid || response["allowed"] != true || got.as_ref() != Some(patch) {
        return Err(format!("wrong answer: {}", show()));
    }
    Ok(())
}
