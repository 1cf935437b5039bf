//! One kube-apiserver process of a [`ControlPlane`](super::ControlPlane): its flags,
//! start-up, restarts and stop, and the etcd it talks to.

use super::*;

pub(super) fn log_file(path: &Path) -> Result<Stdio, String> {
    std::fs::File::create(path)
        .map(Stdio::from)
        .map_err(|e| format!("creating {}: {e}", path.display()))
}

/// POSTs `body` to etcd's JSON gateway; returns the answer's body.
pub(super) fn etcd_post(url: &str, path: &str, body: &str) -> String {
    let addr = url.trim_start_matches("http://");
    let mut tcp = std::net::TcpStream::connect(addr).expect("connecting to etcd");
    tcp.set_read_timeout(Some(Duration::from_secs(10))).ok();
    write!(
        tcp,
        "POST {path} HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
    .expect("writing to etcd");
    let mut text = String::new();
    tcp.read_to_string(&mut text)
        .expect("reading etcd's answer");
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    assert!(head.starts_with("HTTP/1.1 200"), "etcd {path}: {text}");
    // A chunked answer: the JSON is the one line that starts with `{`.
    body.lines()
        .find(|l| l.starts_with('{'))
        .unwrap_or(body)
        .to_string()
}

pub(super) fn wait_for_etcd(url: &str, log: &Path) -> Result<(), String> {
    let addr = url.trim_start_matches("http://");
    let deadline = Instant::now() + START_TIMEOUT;
    loop {
        if let Ok(mut tcp) = std::net::TcpStream::connect(addr) {
            let _ = write!(
                tcp,
                "GET /health HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
            );
            let mut text = String::new();
            let _ = tcp.read_to_string(&mut text);
            if text.contains("\"health\":\"true\"") {
                return Ok(());
            }
        }
        if Instant::now() > deadline {
            return Err(format!(
                "etcd did not become healthy in {START_TIMEOUT:?}; the end of its log:\n{}",
                tail(log, 30)
            ));
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

impl ApiServer {
    pub(super) fn new(assets: &Path, dir: &Path, etcd_url: &str, extra: &[&str]) -> ApiServer {
        let port = free_port();
        let file = |name: &str| dir.join(name).display().to_string();
        let mut args = vec![
            format!("--etcd-servers={etcd_url}"),
            "--bind-address=127.0.0.1".into(),
            "--advertise-address=127.0.0.1".into(),
            format!("--secure-port={port}"),
            format!("--client-ca-file={}", file("ca.crt")),
            format!("--tls-cert-file={}", file("tls.crt")),
            format!("--tls-private-key-file={}", file("tls.key")),
            format!("--service-account-key-file={}", file("sa.pub")),
            format!("--service-account-signing-key-file={}", file("sa.key")),
            "--service-account-issuer=https://kubernetes.default.svc.cluster.local".into(),
            "--authorization-mode=Node,RBAC".into(),
            "--service-cluster-ip-range=10.96.0.0/16".into(),
            "--allow-privileged=true".into(),
            "--endpoint-reconciler-type=none".into(),
            "--enable-admission-plugins=NamespaceLifecycle,MutatingAdmissionWebhook,ValidatingAdmissionWebhook".into(),
            "--disable-admission-plugins=ServiceAccount".into(),
            // etcd's history is compacted only when a test asks (compact_etcd),
            // never by the API server's own timer (every 5 minutes by default).
            "--etcd-compaction-interval=0".into(),
        ];
        args.extend(extra.iter().map(|a| a.to_string()));
        ApiServer {
            url: format!("https://127.0.0.1:{port}"),
            port,
            args,
            binary: assets.join("kube-apiserver"),
            log: dir.join(format!("kube-apiserver-{port}.log")),
            child: Mutex::new(None),
        }
    }

    /// The port it listens on.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// Its process ID while it runs.
    pub fn pid(&self) -> Option<u32> {
        self.child.lock().unwrap().as_ref().map(Guard::id)
    }

    /// Starts the process (again, on the same port) without waiting.
    pub fn start(&self) {
        let mut child = self.child.lock().unwrap();
        assert!(
            child.is_none(),
            "the API server on {} runs already",
            self.url
        );
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.log)
            .expect("the API server's log");
        let process = Guard::spawn(
            Command::new(&self.binary)
                .args(&self.args)
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(log),
        )
        .unwrap_or_else(|e| panic!("starting {}: {e}", self.binary.display()));
        *child = Some(process);
    }

    /// Stops the process (SIGKILL, as a crash would) and waits for it.
    pub fn stop(&self) {
        drop(self.child.lock().unwrap_or_else(|p| p.into_inner()).take());
    }

    /// Waits until `GET /readyz` answers 200 `ok` to `admin`, trusting `ca` (as `kubectl get
    /// --raw /readyz` would, without a kubectl process every 200 ms).
    pub fn wait_ready(&self, ca: &str, admin: &Leaf) -> Result<(), String> {
        let deadline = Instant::now() + START_TIMEOUT;
        loop {
            let answer = https_get(&self.url, ca, admin, "/readyz", Duration::from_secs(5));
            if answer.is_some_and(|(status, body)| status == 200 && body.starts_with("ok")) {
                return Ok(());
            }
            if let Some(status) = self
                .child
                .lock()
                .unwrap()
                .as_mut()
                .and_then(|c| c.try_wait().ok().flatten())
            {
                return Err(format!(
                    "kube-apiserver exited ({status}); the end of its log ({}):\n{}",
                    self.log.display(),
                    tail(&self.log, 30)
                ));
            }
            if Instant::now() > deadline {
                return Err(format!(
                    "kube-apiserver was not ready in {START_TIMEOUT:?}; the end of its log:\n{}",
                    tail(&self.log, 30)
                ));
            }
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    pub(super) fn start_and_wait(&self, ca: &str, admin: &Leaf) -> Result<(), String> {
        self.start();
        self.wait_ready(ca, admin)
    }

    /// The end of its log.
    pub fn log_tail(&self, lines: usize) -> String {
        tail(&self.log, lines)
    }
}

impl Drop for ApiServer {
    fn drop(&mut self) {
        self.stop();
    }
}
