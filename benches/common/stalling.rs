//! The clients of the stalled-requests benchmark (benches/stalled.rs): one
//! address's connections whose requests announce a body and never send it,
//! over HTTP/1.1 or HTTP/2, reopened at once when closed; connections that
//! send reviews for namespaces that do not exist, each again as soon as it is
//! answered; and the API server's reviews, on a keep-alive connection or a
//! fresh one each, every one given a deadline to be answered right.
#![allow(dead_code)]

use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use hdrhistogram::Histogram;
use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio_rustls::TlsConnector;

use std::net::IpAddr;

use super::attack::{Outcomes, connect_tls_from, judge};
use super::https::Connection;

/// How long a stalled client waits after a connection could not be made at
/// all, so that a refusing server is not met by a busy loop of connects.
const AFTER_REFUSAL: Duration = Duration::from_millis(50);

/// The most streams one HTTP/2 connection opens, whatever the server allows.
const MAX_STREAMS: usize = 100;

/// The head of a request announcing a 1-byte body, which never comes.
const HEAD: &[u8] =
    b"POST /mutate HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 1\r\n\r\n";

/// One connection after another from `source` until `until`, each sending
/// [`HEAD`] and nothing more, the next opened as soon as the server closes
/// the last.
pub async fn stalled_http1(
    source: IpAddr,
    addr: String,
    tls: TlsConnector,
    until: Instant,
    out: Arc<Outcomes>,
) {
    while Instant::now() < until {
        let Ok(mut stream) = connect_tls_from(source, &addr, &tls).await else {
            out.add("refused");
            tokio::time::sleep(AFTER_REFUSAL).await;
            continue;
        };
        if stream.write_all(HEAD).await.is_err() || stream.flush().await.is_err() {
            out.add("closed before its request");
            continue;
        }
        out.add("request sent");
        let left = until.saturating_duration_since(Instant::now());
        let mut answer = Vec::new();
        match tokio::time::timeout(left, stream.read_to_end(&mut answer)).await {
            Err(_) => return,
            Ok(_) if answer.is_empty() => out.add("closed unanswered"),
            Ok(_) => out.add(format!(
                "answered {}",
                String::from_utf8_lossy(&answer[..answer.len().min(12)])
            )),
        }
    }
}

/// [`stalled_http1`] over HTTP/2: each connection opens as many streams as
/// the server's SETTINGS allow (up to [`MAX_STREAMS`]), each with headers
/// announcing a 1-byte body and no DATA frame, and holds them.
pub async fn stalled_http2(
    source: IpAddr,
    addr: String,
    tls: TlsConnector,
    until: Instant,
    out: Arc<Outcomes>,
) {
    while Instant::now() < until {
        let Ok(stream) = connect_tls_from(source, &addr, &tls).await else {
            out.add("refused");
            tokio::time::sleep(AFTER_REFUSAL).await;
            continue;
        };
        let Ok((sender, connection)) = h2::client::handshake(stream).await else {
            out.add("closed in the HTTP/2 handshake");
            continue;
        };
        let mut connection = tokio::spawn(connection);
        // As many streams as the server's SETTINGS allow, once they came.
        let settled = Instant::now() + Duration::from_secs(1);
        while sender.current_max_send_streams() == usize::MAX && Instant::now() < settled {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        let streams = sender.current_max_send_streams().min(MAX_STREAMS);
        let mut held = Vec::new();
        let mut sender = Some(sender);
        while held.len() < streams
            && let Some(ready) = sender.take()
        {
            let ready = tokio::time::timeout(Duration::from_millis(200), ready.ready());
            let Ok(Ok(mut ready)) = ready.await else {
                break;
            };
            let request = hyper::Request::post("https://127.0.0.1/mutate")
                .header("content-type", "application/json")
                .header("content-length", 1)
                .body(())
                .expect("a request");
            match ready.send_request(request, false) {
                Ok(stream) => held.push(stream),
                Err(_) => break,
            }
            sender = Some(ready);
        }
        out.add(format!("{} streams opened", held.len()));
        tokio::select! {
            _ = &mut connection => out.add("closed by the server"),
            () = tokio::time::sleep_until(until.into()) => {
                connection.abort();
                return;
            }
        }
    }
}

/// One connection after another from `source` until `until`, each a
/// keep-alive connection sending `reviews` (for namespaces that do not exist)
/// in turn, each as soon as the last is answered.
pub async fn forged(
    source: IpAddr,
    addr: String,
    tls: TlsConnector,
    reviews: Arc<Vec<Bytes>>,
    until: Instant,
    out: Arc<Outcomes>,
) {
    let mut k = 0;
    while Instant::now() < until {
        let Ok(mut conn) = Connection::open_from(Some(source), &addr, &tls).await else {
            out.add("refused");
            tokio::time::sleep(AFTER_REFUSAL).await;
            continue;
        };
        loop {
            let left = until.saturating_duration_since(Instant::now());
            let review = reviews[k % reviews.len()].clone();
            k += 1;
            match tokio::time::timeout(left, conn.post("/mutate", review)).await {
                Err(_) => return,
                Ok(Ok((status, _))) => out.add(format!("answered {status}")),
                Ok(Err(_)) => {
                    out.add("cut unanswered");
                    break;
                }
            }
        }
    }
}

/// What the API server's reviews got.
pub struct Timed {
    /// Reviews sent.
    pub sent: u64,
    /// Answered right within the deadline.
    pub in_time: u64,
    /// Answered wrong.
    pub wrong: u64,
    /// From each review's scheduled time to its right answer, µs.
    pub latency: Histogram<u64>,
    pub first_problem: Option<String>,
}

impl Timed {
    fn new() -> Timed {
        Timed {
            sent: 0,
            in_time: 0,
            wrong: 0,
            latency: super::common::histogram(),
            first_problem: None,
        }
    }

    fn add(&mut self, other: Timed) {
        self.sent += other.sent;
        self.in_time += other.in_time;
        self.wrong += other.wrong;
        self.latency.add(&other.latency).expect("same bounds");
        self.first_problem = self.first_problem.take().or(other.first_problem);
    }

    /// The share answered right in time, %.
    pub fn percent(&self) -> f64 {
        100.0 * self.in_time as f64 / self.sent.max(1) as f64
    }
}

/// The API server's reviews, and where they go.
#[derive(Clone)]
pub struct ApiServer {
    pub addr: String,
    pub tls: TlsConnector,
    /// Each review and its uid.
    pub reviews: Arc<Vec<(Bytes, String)>>,
    /// The patch each answer must hold.
    pub patch: Arc<Value>,
    /// How long a review may take, from its scheduled time, to count.
    pub within: Duration,
}

impl ApiServer {
    /// A review every `every` until `until`, all on one keep-alive
    /// connection (opened again when it fails), one after another.
    pub async fn keep_alive(&self, every: Duration, until: Instant) -> Timed {
        let mut timed = Timed::new();
        let mut conn = None;
        let mut ticks = tokio::time::interval(every);
        let mut k = 0;
        while Instant::now() < until {
            ticks.tick().await;
            self.one(&mut conn, k, Instant::now(), &mut timed).await;
            k += 1;
        }
        timed
    }

    /// A review every `every` until `until`, each on a connection of its own.
    pub async fn fresh(&self, every: Duration, until: Instant) -> Timed {
        let mut ticks = tokio::time::interval(every);
        let mut tasks = Vec::new();
        let mut k = 0;
        while Instant::now() < until {
            ticks.tick().await;
            let (me, scheduled) = (self.clone(), Instant::now());
            tasks.push(tokio::spawn(async move {
                let mut timed = Timed::new();
                me.one(&mut None, k, scheduled, &mut timed).await;
                timed
            }));
            k += 1;
        }
        let mut all = Timed::new();
        for task in tasks {
            all.add(task.await.expect("a review's task"));
        }
        all
    }

    /// Sends review `k` until it is answered or its deadline passes; a
    /// connection that fails is opened again and the review sent again, as
    /// the API server retries a reset call.
    async fn one(
        &self,
        conn: &mut Option<Connection>,
        k: usize,
        scheduled: Instant,
        timed: &mut Timed,
    ) {
        let (body, uid) = &self.reviews[k % self.reviews.len()];
        let deadline = tokio::time::Instant::from(scheduled + self.within);
        timed.sent += 1;
        let mut last = String::from("no attempt");
        while tokio::time::Instant::now() < deadline {
            if conn.is_none() {
                match tokio::time::timeout_at(deadline, Connection::open(&self.addr, &self.tls))
                    .await
                {
                    Ok(Ok(open)) => *conn = Some(open),
                    Ok(Err(e)) => {
                        last = format!("connecting: {e}");
                        tokio::time::sleep(Duration::from_millis(10)).await;
                        continue;
                    }
                    Err(_) => break,
                }
            }
            let open = conn.as_mut().expect("opened above");
            match tokio::time::timeout_at(deadline, open.post("/mutate", body.clone())).await {
                Ok(Ok((status, answer))) => {
                    match judge(status, &answer, uid, &self.patch) {
                        Ok(()) => {
                            timed.in_time += 1;
                            let micros = scheduled.elapsed().as_micros() as u64;
                            timed.latency.saturating_record(micros);
                        }
                        Err(e) => {
                            timed.wrong += 1;
                            timed.first_problem.get_or_insert(e);
                        }
                    }
                    return;
                }
                Ok(Err(e)) => {
                    last = format!("posting: {e}");
                    *conn = None;
                }
                Err(_) => {
                    *conn = None;
                    break;
                }
            }
        }
        timed
            .first_problem
            .get_or_insert(format!("no answer within {:?} (last: {last})", self.within));
    }
}
