//! The constant-answer baseline server of the webhook benchmarks
//! (benches/webhook/, benches/admission/): a bench binary re-executed with
//! [`BASELINE_ENV`] set serves, through the webhook's own TLS configuration,
//! HTTP stack, limits and body reading (`webhook::server::serve`), one
//! constant AdmissionReview: allowed, with the patch the webhook gives a pod
//! in an enabled namespace. It neither parses nor decides.
//!
//! Variants, each set by an environment variable in the re-executed process:
//! [`READER_ENV`], the reader, first reads each review with the webhook's own
//! `admission::parse`; [`ECHO_UID_ENV`] copies the request's uid into the
//! answer, as a real API server requires (see [`Constant::handle`]);
//! `BENCH_BASELINE_BUSY_NS=N` keeps the CPU busy N ns before each answer.

use std::ffi::OsString;
use std::io::Write;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use base64::Engine;
use bytes::Bytes;
use clap::Parser;
use hyper::StatusCode;
use linkerd_multus::admission;
use linkerd_multus::webhook::{self, metrics::Metrics, server, tls};
use serde_json::json;

/// Set (to the address to listen on) in the re-executed baseline server.
pub const BASELINE_ENV: &str = "LINKERD_MULTUS_BENCH_BASELINE";
/// Set too (to `1`) in the re-executed server that is the reader: the
/// baseline reading each review before its constant answer.
pub const READER_ENV: &str = "LINKERD_MULTUS_BENCH_READER";
/// Set too (to `1`) when the baseline copies each request's uid into its
/// answer: the API server rejects an answer for another uid.
pub const ECHO_UID_ENV: &str = "LINKERD_MULTUS_BENCH_ECHO_UID";

/// The patch the webhook returns for a pod in an enabled namespace (the last
/// value: the hash of the stand-in API server's NAD config): the baseline
/// answers it too, so both send answers of the same size.
pub const ATTACH_PATCH: &str = r#"[{"op":"add","path":"/metadata/annotations/k8s.v1.cni.cncf.io~1networks","value":"linkerd-cni"},{"op":"add","path":"/metadata/annotations/multus.linkerd.io~1owned","value":"network=created"},{"op":"add","path":"/metadata/annotations/multus.linkerd.io~1config-hash","value":"1f175a8d44f1fc03"}]"#;

/// The uid of the constant answer (the captured review's).
const CONSTANT_UID: &str = "e6ccade7-b1df-410b-9f67-c7462560ec49";

/// The webhook's own flags, parsed for the baseline so it gets the same
/// defaults (limits, paths) as `linkerd-multus webhook`.
#[derive(Parser)]
struct BaselineCli {
    #[command(flatten)]
    args: webhook::Args,
}

/// Answers every review with the same bytes; the reader first reads the
/// review as the webhook does (`admission::parse`), and answers 400 to a body
/// that does not read.
struct Constant {
    answer: Bytes,
    read: bool,
    /// How long the baseline keeps the CPU busy before each answer
    /// (`BENCH_BASELINE_BUSY_NS`, a calibration); zero by default.
    busy: Duration,
    /// With [`ECHO_UID_ENV`]: the answer split around its uid, to put the
    /// request's in between.
    echo_uid: Option<(Bytes, Bytes)>,
}

impl server::Handler for Constant {
    async fn handle(&self, body: Bytes, _: &server::Call<'_>) -> server::Reply {
        if self.read
            && let Err(e) = admission::parse(&body)
        {
            return server::Reply::text(StatusCode::BAD_REQUEST, e.to_string());
        }
        if !self.busy.is_zero() {
            let start = Instant::now();
            while start.elapsed() < self.busy {
                std::hint::spin_loop();
            }
        }
        // The API server checks that `response.uid` is the request's, so a
        // baseline it calls cannot answer the same bytes each time. This one
        // still does the least any webhook must: it finds the uid with a
        // byte search (`"uid":"` after `"request"`, where the API server's
        // encoding puts it first) without parsing the review, and answers the
        // constant review with that uid in place of its own.
        if let Some((before, after)) = &self.echo_uid {
            let Some(uid) = request_uid(&body) else {
                return server::Reply::text(StatusCode::BAD_REQUEST, "no request uid");
            };
            let mut answer = Vec::with_capacity(before.len() + uid.len() + after.len());
            answer.extend_from_slice(before);
            answer.extend_from_slice(uid);
            answer.extend_from_slice(after);
            return server::Reply::json(answer).vouching(true);
        }
        server::Reply::json(self.answer.clone()).vouching(true)
    }
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

/// The raw text of the request's uid: the string after the first `"uid":"`
/// that follows `"request"`. A uid holds no quotes or escapes.
fn request_uid(body: &[u8]) -> Option<&[u8]> {
    let request = find(body, br#""request""#)?;
    let rest = &body[request..];
    let start = find(rest, br#""uid":""#)? + br#""uid":""#.len();
    let len = rest[start..].iter().position(|&b| b == b'"')?;
    Some(&rest[start..start + len])
}

/// `BENCH_BASELINE_BUSY_NS`: how long the baseline keeps the CPU busy before
/// each answer, to show what a handler of that cost does to the throughput.
pub fn baseline_busy() -> Duration {
    std::env::var("BENCH_BASELINE_BUSY_NS")
        .ok()
        .and_then(|v| v.parse().ok())
        .map_or(Duration::ZERO, Duration::from_nanos)
}

/// The constant answer: allowed, for the fixture's uid, with the attach patch.
fn constant_review() -> Bytes {
    let review = json!({
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "response": {
            "uid": CONSTANT_UID,
            "allowed": true,
            "patchType": "JSONPatch",
            "patch": base64::engine::general_purpose::STANDARD.encode(ATTACH_PATCH),
        }
    });
    Bytes::from(serde_json::to_vec(&review).expect("a review serializes"))
}

/// The constant answer split around its uid.
fn split_at_uid(answer: &Bytes) -> (Bytes, Bytes) {
    let at = find(answer, CONSTANT_UID.as_bytes()).expect("the answer holds its uid");
    (answer.slice(..at), answer.slice(at + CONSTANT_UID.len()..))
}

/// In the re-executed process: serves the constant answer on the address in
/// `BASELINE_ENV` with the certificate and key given as `--tls-cert` and
/// `--tls-key`, prints `ready` once listening, and stops when stdin closes.
pub fn baseline(addr: OsString) -> Result<()> {
    let argv = [OsString::from("baseline"), "--listen".into(), addr]
        .into_iter()
        .chain(std::env::args_os().skip(1));
    let args = BaselineCli::try_parse_from(argv)?.args;
    let tls = Arc::new(tls::Tls::load(tls::TlsFiles {
        cert: args.tls_cert.clone(),
        key: args.tls_key.clone(),
        client_ca: None,
    })?);
    let limits = webhook::limits(&args);
    let read = std::env::var_os(READER_ENV).is_some();
    let answer = constant_review();
    let echo_uid = std::env::var_os(ECHO_UID_ENV).map(|_| split_at_uid(&answer));
    let handler = Arc::new(Constant {
        answer,
        read,
        busy: if read {
            Duration::ZERO
        } else {
            baseline_busy()
        },
        echo_uid,
    });
    // The runtime `linkerd-multus webhook` builds.
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?
        .block_on(async move {
            let listener = tokio::net::TcpListener::bind(args.listen)
                .await
                .with_context(|| format!("binding {}", args.listen))?;
            println!("ready");
            std::io::stdout().flush()?;
            // Stops when the bench closes stdin or dies.
            let (closed, stdin_closed) = tokio::sync::oneshot::channel::<()>();
            std::thread::spawn(move || {
                std::io::copy(&mut std::io::stdin(), &mut std::io::sink()).ok();
                closed.send(()).ok();
            });
            let shutdown = async {
                stdin_closed.await.ok();
            };
            server::serve(
                listener,
                tls,
                limits,
                handler,
                Arc::new(Metrics::new()),
                tokio::sync::watch::channel(false).1,
                shutdown,
            )
            .await;
            Ok::<_, anyhow::Error>(())
        })
}
