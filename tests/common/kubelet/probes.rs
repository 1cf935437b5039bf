//! Readiness and liveness probes, polled as the kubelet polls them: the
//! first after `initialDelaySeconds`, then every `periodSeconds`, each with
//! `timeoutSeconds`; `successThreshold` passes in a row make it pass,
//! `failureThreshold` failures in a row make it fail. An HTTP probe passes on
//! a status from 200 to 399.

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{Container, Probe};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

/// One probe of a running container.
pub struct Prober {
    probe: Option<Probe>,
    kind: &'static str,
    started: Instant,
    next: Instant,
    successes: i32,
    failures: i32,
    /// The probe's state: readiness starts failing, liveness passing.
    pub passing: bool,
    /// The last failure, for the pod's description.
    pub last_failure: Option<String>,
}

impl Prober {
    pub fn readiness(container: &Container) -> Prober {
        Prober::new(container.readiness_probe.clone(), "readiness", false)
    }

    pub fn liveness(container: &Container) -> Prober {
        Prober::new(container.liveness_probe.clone(), "liveness", true)
    }

    fn new(probe: Option<Probe>, kind: &'static str, passing: bool) -> Prober {
        let now = Instant::now();
        let delay = probe
            .as_ref()
            .and_then(|p| p.initial_delay_seconds)
            .unwrap_or(0);
        Prober {
            // No readiness probe: ready as soon as it runs.
            passing: passing || probe.is_none(),
            probe,
            kind,
            started: now,
            next: now + Duration::from_secs(delay as u64),
            successes: 0,
            failures: 0,
            last_failure: None,
        }
    }

    /// Probes when due; returns the new state when it changed.
    pub fn tick(
        &mut self,
        container: &Container,
        ip: &str,
        ports: &BTreeMap<i32, u16>,
    ) -> Option<bool> {
        let probe = self.probe.clone()?;
        let now = Instant::now();
        if now < self.next {
            return None;
        }
        let period = Duration::from_secs(probe.period_seconds.unwrap_or(10) as u64);
        let outcome = run(&probe, container, ip, ports);
        self.next = Instant::now().max(now + period);
        match outcome {
            Ok(()) => {
                self.failures = 0;
                self.successes += 1;
                if !self.passing && self.successes >= probe.success_threshold.unwrap_or(1) {
                    self.passing = true;
                    return Some(true);
                }
            }
            Err(why) => {
                self.successes = 0;
                self.failures += 1;
                self.last_failure = Some(format!(
                    "{} probe failed {}s after start: {why}",
                    self.kind,
                    self.started.elapsed().as_secs()
                ));
                if self.passing && self.failures >= probe.failure_threshold.unwrap_or(3) {
                    self.passing = false;
                    return Some(false);
                }
            }
        }
        None
    }
}

/// The container's port `port` names (a number or a port's name), as the
/// node maps it.
pub fn mapped_port(
    port: &IntOrString,
    container: &Container,
    ports: &BTreeMap<i32, u16>,
) -> Result<u16, String> {
    let number = match port {
        IntOrString::Int(n) => *n,
        IntOrString::String(name) => container
            .ports
            .iter()
            .flatten()
            .find(|p| p.name.as_deref() == Some(name))
            .map(|p| p.container_port)
            .ok_or_else(|| format!("the container has no port named {name}"))?,
    };
    Ok(ports.get(&number).copied().unwrap_or(number as u16))
}

fn run(
    probe: &Probe,
    container: &Container,
    ip: &str,
    ports: &BTreeMap<i32, u16>,
) -> Result<(), String> {
    let timeout = Duration::from_secs(probe.timeout_seconds.unwrap_or(1) as u64);
    if let Some(get) = &probe.http_get {
        let scheme = get.scheme.as_deref().unwrap_or("HTTP");
        assert_eq!(scheme, "HTTP", "the harness probes HTTP only");
        let port = mapped_port(&get.port, container, ports)?;
        let host = get.host.as_deref().unwrap_or(ip);
        let path = get.path.as_deref().unwrap_or("/");
        let status = http_status(host, port, path, timeout)?;
        return if (200..400).contains(&status) {
            Ok(())
        } else {
            Err(format!("GET {path} on port {port}: HTTP {status}"))
        };
    }
    if let Some(tcp) = &probe.tcp_socket {
        let port = mapped_port(&tcp.port, container, ports)?;
        let addr = socket_addr(ip, port)?;
        return TcpStream::connect_timeout(&addr, timeout)
            .map(drop)
            .map_err(|e| format!("connecting to {addr}: {e}"));
    }
    panic!("the harness runs httpGet and tcpSocket probes only: {probe:?}")
}

fn socket_addr(ip: &str, port: u16) -> Result<SocketAddr, String> {
    format!("{ip}:{port}")
        .parse()
        .map_err(|e| format!("{ip}:{port}: {e}"))
}

/// The status of `GET path` on `host:port`, within `timeout`.
fn http_status(host: &str, port: u16, path: &str, timeout: Duration) -> Result<u16, String> {
    let addr = socket_addr(host, port)?;
    let mut tcp = TcpStream::connect_timeout(&addr, timeout)
        .map_err(|e| format!("GET {path}: connecting to {addr}: {e}"))?;
    tcp.set_read_timeout(Some(timeout)).ok();
    tcp.set_write_timeout(Some(timeout)).ok();
    write!(
        tcp,
        "GET {path} HTTP/1.1\r\nHost: {addr}\r\nUser-Agent: kube-probe/1.32\r\nAccept: */*\r\nConnection: close\r\n\r\n"
    )
    .map_err(|e| format!("GET {path}: {e}"))?;
    let mut head = [0u8; 64];
    let n = tcp
        .read(&mut head)
        .map_err(|e| format!("GET {path}: {e}"))?;
    let text = String::from_utf8_lossy(&head[..n]);
    text.split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| format!("GET {path}: not an HTTP answer: {text:?}"))
}
