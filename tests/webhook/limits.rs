//! The server under hostile load, for real: the budget of body bytes, the
//! connection limit and its evictions, the HTTP/2 stream cap and idle
//! timeout, and one socket for IPv4 and IPv6. Each waits for conditions
//! (metrics, closed sockets) with generous deadlines and asserts outcomes,
//! never how long something took.

use std::io::Read as _;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio_rustls::client::TlsStream;

use super::*;

const IN_FLIGHT: &str = "linkerd_multus_http_body_bytes_in_flight";

/// Waits past the time a connection is kept before it may make room
/// (`webhook::eviction::GRACE`): a documented threshold, not a synchronisation.
fn past_grace() {
    std::thread::sleep(linkerd_multus::webhook::eviction::GRACE + Duration::from_millis(50));
}
const CONNECTIONS: &str = "linkerd_multus_http_connections";

/// The patch of a pod in an enabled namespace.
fn attached() -> Value {
    json!([
        {"op": "add", "path": "/metadata/annotations/k8s.v1.cni.cncf.io~1networks", "value": "linkerd-cni"},
        {"op": "add", "path": "/metadata/annotations/multus.linkerd.io~1owned", "value": "network=created"},
        {"op": "add", "path": "/metadata/annotations/multus.linkerd.io~1config-hash", "value": NAD_HASH}
    ])
}

/// A POST head announcing `length` bytes; the server closes after answering.
fn head(length: usize) -> String {
    format!(
        "POST /mutate HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: {length}\r\nConnection: close\r\n\r\n"
    )
}

/// The address another pod's connections come from: on Linux all of
/// 127.0.0.0/8 is loopback, so a client bound to it is another peer.
const OTHER_POD: &str = "127.0.0.2";

/// A TLS connection speaking HTTP/1.1 (or HTTP/2 with `h2`).
async fn tls(addr: &str, ca: &Ca, h2: bool) -> TlsStream<TcpStream> {
    tls_from("127.0.0.1", addr, ca, h2).await.unwrap()
}

/// A TLS connection from `source`, or why none was made.
async fn tls_from(
    source: &str,
    addr: &str,
    ca: &Ca,
    h2: bool,
) -> std::io::Result<TlsStream<TcpStream>> {
    let alpn: &[&[u8]] = if h2 { &[b"h2"] } else { &[b"http/1.1"] };
    let socket = tokio::net::TcpSocket::new_v4()?;
    socket.bind(format!("{source}:0").parse().unwrap())?;
    let tcp = socket.connect(addr.parse().unwrap()).await?;
    connector(&ca.pem, None, alpn)
        .connect("127.0.0.1".try_into().unwrap(), tcp)
        .await
}

/// A request from `source` announcing `length` bytes of body and sending none.
async fn stalled(source: &str, addr: &str, ca: &Ca, length: usize) -> TlsStream<TcpStream> {
    let mut stream = tls_from(source, addr, ca, false).await.unwrap();
    stream.write_all(head(length).as_bytes()).await.unwrap();
    stream.flush().await.unwrap();
    stream
}

/// A request in flight: `body` announced, its first half sent.
async fn busy(addr: &str, ca: &Ca, body: &[u8]) -> TlsStream<TcpStream> {
    let mut stream = tls(addr, ca, false).await;
    stream.write_all(head(body.len()).as_bytes()).await.unwrap();
    stream.write_all(&body[..body.len() / 2]).await.unwrap();
    stream.flush().await.unwrap();
    stream
}

/// Everything the server sends until it closes, for up to a minute.
async fn read_to_close(stream: &mut TlsStream<TcpStream>) -> String {
    let mut out = Vec::new();
    let read = tokio::time::timeout(Duration::from_secs(60), stream.read_to_end(&mut out)).await;
    assert!(read.is_ok(), "the server never closed: {out:?}");
    String::from_utf8_lossy(&out).into_owned()
}

/// An HTTP/2 connection, driven by a task of its own: its sender, and the
/// task's result when the connection ends.
async fn h2_connect(
    addr: &str,
    ca: &Ca,
) -> (
    h2::client::SendRequest<Bytes>,
    tokio::task::JoinHandle<Result<(), h2::Error>>,
) {
    h2_connect_from("127.0.0.1", addr, ca).await
}

/// [`h2_connect`] from `source`.
async fn h2_connect_from(
    source: &str,
    addr: &str,
    ca: &Ca,
) -> (
    h2::client::SendRequest<Bytes>,
    tokio::task::JoinHandle<Result<(), h2::Error>>,
) {
    let stream = tls_from(source, addr, ca, true).await.unwrap();
    let (sender, connection) = h2::client::handshake(stream).await.unwrap();
    (sender, tokio::spawn(connection))
}

/// A POST to /mutate announcing `length` bytes, on HTTP/2.
fn h2_request(length: usize) -> hyper::Request<()> {
    hyper::Request::post("https://127.0.0.1/mutate")
        .header("content-type", "application/json")
        .header("content-length", length)
        .body(())
        .unwrap()
}

/// The status and body of an HTTP/2 response.
async fn h2_answer(response: h2::client::ResponseFuture) -> (u16, Vec<u8>) {
    let response = response.await.unwrap();
    let status = response.status().as_u16();
    let mut body = response.into_body();
    let mut out = Vec::new();
    while let Some(data) = body.data().await {
        let data = data.unwrap();
        body.flow_control().release_capacity(data.len()).unwrap();
        out.extend_from_slice(&data);
    }
    (status, out)
}

/// POSTs `review` whole on HTTP/2 once the connection can open a stream.
async fn h2_post(sender: h2::client::SendRequest<Bytes>, review: Bytes) -> (u16, Vec<u8>) {
    let mut sender = sender.ready().await.unwrap();
    let (response, mut send) = sender
        .send_request(h2_request(review.len()), false)
        .unwrap();
    send.send_data(review, true).unwrap();
    h2_answer(response).await
}

#[test]
fn a_body_over_the_budget_gets_a_fast_503_while_ordinary_reviews_are_answered() {
    let c = cluster();
    let ca = Ca::new("CA");
    let webhook = Webhook::start(
        &c.webhook_account(),
        &ca.leaf(&["127.0.0.1"]),
        &[
            "--max-body-bytes",
            "786432",
            "--max-body-bytes-in-flight",
            "1048576",
            "--header-timeout",
            "120s",
            "--body-timeout",
            "120s",
        ],
    );
    // 700,000 bytes: a large body, which may take three quarters of the budget.
    const LARGE: usize = 700_000;
    let rt = runtime();
    // A large body announced and begun, the rest held back: its length is reserved.
    let holder = rt.block_on(busy(&webhook.addr, &ca, &vec![b' '; LARGE]));
    webhook.wait_for_metric(IN_FLIGHT, LARGE as f64, "the body was never reserved");
    // Another: 503 with Retry-After on its head alone (its body is never
    // sent, so an answer proves it was not awaited), and the connection closed.
    let text = rt.block_on(async {
        let mut stream = tls(&webhook.addr, &ca, false).await;
        stream.write_all(head(LARGE).as_bytes()).await.unwrap();
        read_to_close(&mut stream).await
    });
    let lower = text.to_lowercase();
    assert!(text.starts_with("HTTP/1.1 503"), "{text}");
    assert!(lower.contains("\r\nretry-after: 1\r\n"), "{text}");
    assert!(lower.contains("\r\nconnection: close\r\n"), "{text}");
    assert!(text.contains("(--max-body-bytes-in-flight)"), "{text}");
    // An ordinary review still fits, in the quarter large bodies leave.
    let response = post_once(&webhook, &ca, review_in(&c.demo, json!({})));
    assert_eq!(patch_of(&response), attached());
    // On HTTP/2 the refused stream ends and the connection serves the next.
    rt.block_on(async {
        let (mut sender, _connection) = h2_connect(&webhook.addr, &ca).await;
        let (response, _send) = sender.send_request(h2_request(LARGE), false).unwrap();
        let (status, body) = h2_answer(response).await;
        assert_eq!(status, 503, "{}", String::from_utf8_lossy(&body));
        let (status, body) = h2_post(sender, review_in(&c.demo, json!({}))).await;
        assert_eq!(status, 200);
        assert_eq!(patch_of(&response_of(&body)), attached());
    });
    assert_eq!(
        webhook.metric("linkerd_multus_http_refusals_total{reason=\"over_budget\"}"),
        2.0
    );
    drop(holder);
    webhook.wait_for_metric(IN_FLIGHT, 0.0, "the reservation was never given back");
}

/// At the connection limit, connections that answer nothing make room: a
/// stranger before a connection that has had a review answered, and among
/// strangers the one owing its bytes the longest, whatever it owes them for.
#[test]
fn at_the_connection_limit_strangers_make_room_the_longest_owing_first() {
    let c = cluster();
    let ca = Ca::new("CA");
    let webhook = Webhook::start(
        &c.webhook_account(),
        &ca.leaf(&["127.0.0.1"]),
        &[
            "--max-connections",
            "3",
            "--header-timeout",
            "120s",
            "--body-timeout",
            "120s",
            "--body-stall-timeout",
            "300s",
            "--idle-timeout",
            "300s",
        ],
    );
    let review = review_in(&c.demo, json!({}));
    let len = review.len() as f64;
    let rt = runtime();
    let open = |rt: &tokio::runtime::Runtime| {
        rt.block_on(Connection::open(
            &webhook.addr,
            &connector(&ca.pem, None, &[]),
        ))
        .unwrap()
    };
    let evictions = |state: &str| {
        webhook.metric(&format!(
            "linkerd_multus_http_evictions_total{{state=\"{state}\"}}"
        ))
    };
    // A connection that has had a review answered, then a stranger that
    // never says a word, then one whose body is half sent.
    let mut kept = open(&rt);
    answered(&rt, &mut kept, &review);
    let mut silent = std::net::TcpStream::connect(&webhook.addr).unwrap();
    webhook.wait_for_metric(CONNECTIONS, 2.0, "the silent connection never showed");
    let mut half_sent = rt.block_on(busy(&webhook.addr, &ca, &review));
    webhook.wait_for_metric(IN_FLIGHT, len, "the half-sent request never started");
    past_grace();
    // A new client is answered: the silent stranger, owing the longest, made room.
    let mut newer = open(&rt);
    answered(&rt, &mut newer, &review);
    silent
        .set_read_timeout(Some(Duration::from_secs(60)))
        .unwrap();
    assert_eq!(silent.read(&mut [0; 16]).unwrap(), 0, "evicted: closed");
    assert_eq!(evictions("handshake"), 1.0);
    // The next: the half-sent body goes, a stranger's, though its bytes
    // came after the proven connections' last review.
    past_grace();
    let mut third = open(&rt);
    answered(&rt, &mut third, &review);
    assert_eq!(
        rt.block_on(read_to_close(&mut half_sent)),
        "",
        "cut unanswered"
    );
    assert_eq!(evictions("reading"), 1.0);
    assert_eq!(evictions("idle"), 0.0);
    // The proven connections were kept.
    answered(&rt, &mut kept, &review);
    answered(&rt, &mut newer, &review);
    webhook.wait_for_metric(IN_FLIGHT, 0.0, "a reservation was never given back");
}

/// Posts `review` on `conn`: answered with the attach patch.
fn answered(rt: &tokio::runtime::Runtime, conn: &mut Connection, review: &Bytes) {
    let (status, body) = rt.block_on(conn.post("/mutate", review.clone())).unwrap();
    assert_eq!(status, 200);
    assert_eq!(patch_of(&response_of(&body)), attached());
}

/// A review for a namespace the cache does not hold, while its watch is up,
/// waits for the watch without holding a connection's place, and its answer
/// does not rank its connection with the API server's.
#[test]
fn a_review_for_a_namespace_that_does_not_exist_holds_no_place_and_earns_no_rank() {
    let c = cluster();
    let ca = Ca::new("CA");
    let review = review_in(&c.demo, json!({}));
    let forged = review_in("no-such-namespace", json!({}));
    let rt = runtime();
    let start = |live_read_timeout: &str| {
        Webhook::start(
            &c.webhook_account(),
            &ca.leaf(&["127.0.0.1"]),
            &[
                "--max-connections",
                "2",
                "--live-read-timeout",
                live_read_timeout,
                "--header-timeout",
                "120s",
                "--idle-timeout",
                "300s",
            ],
        )
    };
    let open = |rt: &tokio::runtime::Runtime, webhook: &Webhook| {
        rt.block_on(Connection::open(
            &webhook.addr,
            &connector(&ca.pem, None, &[]),
        ))
        .unwrap()
    };
    // Waiting: up to --live-read-timeout, two minutes here.
    let webhook = start("120s");
    let mut kept = open(&rt, &webhook);
    answered(&rt, &mut kept, &review);
    let mut waiting = rt.block_on(busy(&webhook.addr, &ca, &forged));
    rt.block_on(async {
        waiting.write_all(&forged[forged.len() / 2..]).await?;
        waiting.flush().await
    })
    .unwrap();
    webhook.wait_for_metric(
        "linkerd_multus_admission_watch_waits",
        1.0,
        "the forged review never waited for the namespace watch",
    );
    past_grace();
    // At the limit, it makes room for a new client.
    let mut newer = open(&rt, &webhook);
    answered(&rt, &mut newer, &review);
    assert_eq!(
        rt.block_on(read_to_close(&mut waiting)),
        "",
        "cut unanswered"
    );
    assert_eq!(
        webhook.metric("linkerd_multus_http_evictions_total{state=\"waiting\"}"),
        1.0
    );
    answered(&rt, &mut kept, &review);
    drop(webhook);

    // Answered after a short wait: the on-error answer, and its connection
    // stays a stranger's.
    let webhook = start("100ms");
    let mut kept = open(&rt, &webhook);
    answered(&rt, &mut kept, &review);
    let mut stranger = open(&rt, &webhook);
    let (status, body) = rt
        .block_on(stranger.post("/mutate", forged.clone()))
        .unwrap();
    assert_eq!(status, 200);
    let answer = response_of(&body);
    assert_eq!(answer["allowed"], true, "{answer}");
    assert!(
        answer["warnings"][0]
            .as_str()
            .is_some_and(|w| w.contains("namespace no-such-namespace does not exist")),
        "{answer}"
    );
    // The kept connection has been idle the longer, yet the stranger's goes.
    past_grace();
    let mut newer = open(&rt, &webhook);
    answered(&rt, &mut newer, &review);
    assert!(
        rt.block_on(stranger.post("/mutate", forged.clone()))
            .is_err(),
        "the stranger's connection was evicted"
    );
    answered(&rt, &mut kept, &review);
    assert_eq!(
        webhook.metric("linkerd_multus_http_evictions_total{state=\"idle\"}"),
        1.0
    );
}

/// One pod (another source address) holds at most its share: its
/// connections and its requests in flight are capped, over HTTP/1.1 and
/// HTTP/2, making room among its own; a connection that has had no review
/// answered carries one request at a time; and the API server's address is
/// answered meanwhile.
#[test]
fn one_address_holds_at_most_its_connections_and_requests() {
    let c = cluster();
    let ca = Ca::new("CA");
    let webhook = Webhook::start(
        &c.webhook_account(),
        &ca.leaf(&["127.0.0.1"]),
        &[
            "--max-connections-per-peer",
            "3",
            "--max-requests-per-peer",
            "2",
            "--header-timeout",
            "120s",
            "--body-timeout",
            "120s",
            "--body-stall-timeout",
            "300s",
        ],
    );
    let metric = |name: &str, label: &str| {
        webhook.metric(&format!("linkerd_multus_http_{name}_total{{{label}}}"))
    };
    // The runtime has a thread of its own: the HTTP/2 connection is driven
    // while this one waits for the metrics.
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    // A request on HTTP/1.1 and a stream on HTTP/2, their bodies never sent.
    let mut first = rt.block_on(stalled(OTHER_POD, &webhook.addr, &ca, 1));
    let (sender, connection) = rt.block_on(h2_connect_from(OTHER_POD, &webhook.addr, &ca));
    let mut sender = rt.block_on(sender.ready()).unwrap();
    let _held = sender.send_request(h2_request(1), false).unwrap();
    webhook.wait_for_metric(IN_FLIGHT, 2.0, "the two requests never started");
    // A second stream on the HTTP/2 connection, which has had no review
    // answered: it waits for the first, holding nothing.
    let _queued = rt.block_on(async {
        let mut sender = sender.ready().await.unwrap();
        sender.send_request(h2_request(1), false).unwrap()
    });
    // A third request, on a new connection: over the address's requests, so
    // the connection owing the longest, the first, is cut for it.
    past_grace();
    let _third = rt.block_on(stalled(OTHER_POD, &webhook.addr, &ca, 1));
    assert_eq!(
        rt.block_on(read_to_close(&mut first)),
        "",
        "cut for the third"
    );
    webhook.wait_for_metric(IN_FLIGHT, 2.0, "the third request never started");
    assert_eq!(metric("evictions", "state=\"reading\""), 1.0);
    // Two more connections: the second makes room among the address's own,
    // taking the HTTP/2 connection, owing its body longer than the others.
    let fourth = rt.block_on(tls_from(OTHER_POD, &webhook.addr, &ca, false));
    assert!(fourth.is_ok());
    webhook.wait_for_metric(CONNECTIONS, 3.0, "the fourth connection never showed");
    past_grace();
    let fifth = rt.block_on(tls_from(OTHER_POD, &webhook.addr, &ca, false));
    assert!(fifth.is_ok());
    webhook.wait_for_metric(
        "linkerd_multus_http_evictions_total{state=\"reading\"}",
        2.0,
        "the address's fifth connection never made room",
    );
    assert!(
        rt.block_on(connection).is_ok(),
        "the HTTP/2 connection ended"
    );
    // The API server's address is answered meanwhile; nothing was refused.
    let response = post_once(&webhook, &ca, review_in(&c.demo, json!({})));
    assert_eq!(patch_of(&response), attached());
    for reason in [
        "connection_limit",
        "peer_connection_limit",
        "peer_request_limit",
        "unproven_connection",
    ] {
        assert_eq!(metric("refusals", &format!("reason=\"{reason}\"")), 0.0);
    }
}

/// A request whose body makes no progress for --body-stall-timeout is
/// evicted with its connection for a new connection at the limit, and for
/// the body budget; connections that have had reviews answered stay.
#[test]
fn stalled_bodies_make_room_for_connections_and_for_the_budget() {
    let c = cluster();
    let ca = Ca::new("CA");
    let webhook = Webhook::start(
        &c.webhook_account(),
        &ca.leaf(&["127.0.0.1"]),
        &[
            "--max-connections",
            "3",
            "--max-body-bytes",
            "65536",
            "--max-body-bytes-in-flight",
            "65536",
            "--header-timeout",
            "120s",
            "--body-timeout",
            "120s",
            "--idle-timeout",
            "300s",
        ],
    );
    let review = review_in(&c.demo, json!({}));
    let rt = runtime();
    let stalled_evictions =
        || webhook.metric("linkerd_multus_http_evictions_total{state=\"stalled\"}");
    let mut kept = rt
        .block_on(Connection::open(
            &webhook.addr,
            &connector(&ca.pem, None, &[]),
        ))
        .unwrap();
    let post = |rt: &tokio::runtime::Runtime, conn: &mut Connection| {
        let (status, body) = rt.block_on(conn.post("/mutate", review.clone())).unwrap();
        assert_eq!(status, 200);
        assert_eq!(patch_of(&response_of(&body)), attached());
    };
    post(&rt, &mut kept);
    // Two requests from another pod, their bodies never sent: the limit.
    let first = rt.block_on(stalled(OTHER_POD, &webhook.addr, &ca, 1));
    webhook.wait_for_metric(IN_FLIGHT, 1.0, "the first request never started");
    let second = rt.block_on(stalled(OTHER_POD, &webhook.addr, &ca, 1));
    webhook.wait_for_metric(IN_FLIGHT, 2.0, "the second request never started");
    webhook.wait_for_metric(CONNECTIONS, 3.0, "three connections never showed");
    // Past --body-stall-timeout (1s) without a byte, both are stalled.
    std::thread::sleep(Duration::from_millis(1500));
    // A new connection evicts the one stalled the longest, not the kept one.
    let mut newer = rt
        .block_on(Connection::open(
            &webhook.addr,
            &connector(&ca.pem, None, &[]),
        ))
        .unwrap();
    post(&rt, &mut newer);
    let mut first = first;
    assert_eq!(rt.block_on(read_to_close(&mut first)), "", "cut unanswered");
    assert_eq!(stalled_evictions(), 1.0);
    // A body that takes most of the budget, then stalls.
    let third = rt.block_on(stalled(OTHER_POD, &webhook.addr, &ca, 65536 - 1024));
    let mut second = second;
    assert_eq!(
        rt.block_on(read_to_close(&mut second)),
        "",
        "cut for the third"
    );
    assert_eq!(stalled_evictions(), 2.0);
    webhook.wait_for_metric(IN_FLIGHT, 64512.0, "the third request never started");
    std::thread::sleep(Duration::from_millis(1500));
    // The next review does not fit beside it: the stalled body gives its bytes back.
    assert!(
        review.len() > 1024,
        "the review must not fit beside the third body"
    );
    post(&rt, &mut kept);
    let mut third = third;
    assert_eq!(
        rt.block_on(read_to_close(&mut third)),
        "",
        "cut for the budget"
    );
    assert_eq!(stalled_evictions(), 3.0);
    assert_eq!(
        webhook.metric("linkerd_multus_http_refusals_total{reason=\"over_budget\"}"),
        0.0
    );
}

#[test]
fn http2_streams_are_capped_and_an_idle_connection_is_closed_with_goaway() {
    let c = cluster();
    let ca = Ca::new("CA");
    let webhook = Webhook::start(
        &c.webhook_account(),
        &ca.leaf(&["127.0.0.1"]),
        &[
            "--max-concurrent-streams",
            "3",
            "--idle-timeout",
            "2s",
            "--body-timeout",
            "120s",
        ],
    );
    let review = review_in(&c.demo, json!({}));
    let half = review.len() / 2;
    let rt = runtime();
    rt.block_on(async {
        let (sender, ended) = h2_connect(&webhook.addr, &ca).await;
        let (status, body) = h2_post(sender.clone(), review.clone()).await;
        assert_eq!(status, 200);
        assert_eq!(patch_of(&response_of(&body)), attached());
        // The server's SETTINGS came before its answer.
        assert_eq!(sender.current_max_send_streams(), 3);
        // Three streams in flight, their bodies held back; a fourth waits
        // for one of them to end, and is answered then.
        let mut held = Vec::new();
        for _ in 0..3 {
            let mut sender = sender.clone().ready().await.unwrap();
            let (response, mut send) = sender
                .send_request(h2_request(review.len()), false)
                .unwrap();
            send.send_data(review.slice(..half), false).unwrap();
            held.push((response, send));
        }
        let fourth = tokio::spawn(h2_post(sender.clone(), review.clone()));
        for (response, mut send) in held {
            send.send_data(review.slice(half..), true).unwrap();
            let (status, body) = h2_answer(response).await;
            assert_eq!(status, 200, "{}", String::from_utf8_lossy(&body));
        }
        let (status, _) = fourth.await.unwrap();
        assert_eq!(status, 200);
        // Done with it: the client closes this connection itself.
        drop(sender);
        ended.await.unwrap().ok();
    });
    // A connection that stays idle: closed after --idle-timeout, with a
    // GOAWAY saying no error. Read frame by frame, as the server sends them
    // (a client library may write after the close and fail on its own).
    let frames = rt.block_on(async {
        let mut stream = tls(&webhook.addr, &ca, true).await;
        // The preface and an empty SETTINGS frame.
        stream
            .write_all(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\0\0\0\x04\0\0\0\0\0")
            .await
            .unwrap();
        let mut out = Vec::new();
        let read =
            tokio::time::timeout(Duration::from_secs(60), stream.read_to_end(&mut out)).await;
        assert!(read.is_ok(), "the idle connection was never closed");
        h2_frames(&out)
    });
    let goaway = frames
        .iter()
        .find(|(kind, _)| *kind == 0x7)
        .unwrap_or_else(|| panic!("no GOAWAY before the close: {frames:?}"));
    assert_eq!(
        goaway.1.get(4..8),
        Some(&[0u8, 0, 0, 0][..]),
        "the GOAWAY's error code is not NO_ERROR: {goaway:?}"
    );
    // (The first connection was closed by its client.)
    webhook.wait_for_metric(
        "linkerd_multus_http_idle_closes_total",
        1.0,
        "the idle connection was not counted as closed for idleness",
    );
}

/// The frames of an HTTP/2 byte stream: (type, payload).
fn h2_frames(mut bytes: &[u8]) -> Vec<(u8, Vec<u8>)> {
    let mut frames = Vec::new();
    while bytes.len() >= 9 {
        let length =
            usize::from(bytes[0]) << 16 | usize::from(bytes[1]) << 8 | usize::from(bytes[2]);
        let end = (9 + length).min(bytes.len());
        frames.push((bytes[3], bytes[9..end].to_vec()));
        bytes = &bytes[end..];
    }
    frames
}

#[test]
fn one_socket_takes_ipv4_and_ipv6() {
    let c = cluster();
    let ca = Ca::new("CA");
    let webhook = Webhook::spawn_on(
        "[::]",
        &c.webhook_account(),
        &ca.leaf(&["127.0.0.1", "::1"]),
        &[],
        &[],
    );
    webhook.wait_for("/readyz", 200);
    let port = |addr: &str| addr.rsplit_once(':').unwrap().1.to_string();
    let mut hosts = vec!["127.0.0.1"];
    if std::net::TcpListener::bind("[::1]:0").is_ok() {
        hosts.push("[::1]");
    } else {
        eprintln!("this machine has no ::1: IPv6 not tried");
    }
    for host in hosts {
        let addr = format!("{host}:{}", port(&webhook.addr));
        let (status, body) = runtime()
            .block_on(async {
                let mut conn = Connection::open(&addr, &connector(&ca.pem, None, &[]))
                    .await
                    .unwrap();
                conn.post("/mutate", review_in(&c.demo, json!({}))).await
            })
            .unwrap();
        assert_eq!(status, 200, "{addr}");
        assert_eq!(patch_of(&response_of(&body)), attached(), "{addr}");
        let ops = format!("{host}:{}", port(&webhook.ops));
        assert_eq!(
            http_get(&ops, "/healthz").map(|(s, _)| s),
            Some(200),
            "{ops}"
        );
    }
}

/// A plain TCP connection to `addr` from `source` that sends nothing.
fn silent_from(source: &str, addr: &str) -> std::net::TcpStream {
    let stream = runtime().block_on(async {
        let socket = tokio::net::TcpSocket::new_v4().unwrap();
        socket.bind(format!("{source}:0").parse().unwrap()).unwrap();
        socket.connect(addr.parse().unwrap()).await.unwrap()
    });
    let stream = stream.into_std().unwrap();
    stream.set_nonblocking(false).unwrap();
    stream
}

/// Whether the server has closed `stream` (read within 100 ms gives its end).
fn closed(stream: &mut std::net::TcpStream) -> bool {
    stream
        .set_read_timeout(Some(Duration::from_millis(100)))
        .unwrap();
    matches!(stream.read(&mut [0; 1]), Ok(0))
}

/// The operations port keeps limits of its own: one address holds at most 8
/// of its 32 connections, and when silent connections of other addresses
/// fill it, the kubelet's probe (another address) still gets through.
#[test]
fn the_ops_port_is_bounded_and_the_probes_get_through() {
    let c = cluster();
    let ca = Ca::new("CA");
    let webhook = Webhook::start(&c.webhook_account(), &ca.leaf(&["127.0.0.1"]), &[]);
    // Four addresses, each opening ten silent connections: each keeps its
    // newest eight, and the port is full.
    let mut held: Vec<Vec<std::net::TcpStream>> = (2..6)
        .map(|address| {
            (0..10)
                .map(|_| silent_from(&format!("127.0.0.{address}"), &webhook.ops))
                .collect()
        })
        .collect();
    for (address, streams) in held.iter_mut().enumerate() {
        let open: Vec<bool> = streams.iter_mut().map(|s| !closed(s)).collect();
        let want: Vec<bool> = (0..10).map(|i| i >= 2).collect();
        assert_eq!(open, want, "the connections of address {address}");
    }
    // The probe: answered, a silent connection making room for it.
    for path in ["/healthz", "/readyz"] {
        assert_eq!(webhook.ops_get(path).map(|(s, _)| s), Some(200), "{path}");
    }
    assert!(closed(&mut held[0][2]), "the oldest silent one made room");
}
