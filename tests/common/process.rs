//! The processes the tests and benchmarks start, and the folders they leave
//! to this binary's end.
//!
//! A [`Guard`] owns one child, started in a process group of its own. Dropped
//! (its test passed, failed or panicked), it kills the group with SIGKILL and
//! reaps the child. A child that ends first has what it left in its group (a
//! script's children) killed before it is reaped, while its PID still names
//! the group: no signal can reach a process that took the PID since.
//!
//! What no drop reaches (a fixture kept in a static, which Rust never drops; a
//! binary ended by a signal or a harness's timeout) this binary's watchdog
//! ends: a shell told of each live group and of each folder handed to it
//! ([`leave_to_watchdog`]), which kills those groups and removes those folders
//! once the binary has ended, however it ended (its end closes the pipe the
//! shell reads). `scripts/survivors.sh` checks, after the suite, that nothing
//! is left.
#![allow(dead_code)]

use std::io::{self, Read, Write};
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{
    Child, ChildStderr, ChildStdin, ChildStdout, Command, ExitStatus, Output, Stdio,
};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, OnceLock, PoisonError};

use nix::errno::Errno;
use nix::sys::signal::{Signal, kill, killpg};
use nix::sys::wait::{Id, WaitPidFlag, WaitStatus, waitid};
use nix::unistd::Pid;

/// A child process in a process group of its own, killed with its group and
/// reaped when dropped.
pub struct Guard {
    child: Child,
    status: Option<ExitStatus>,
    /// The watchdog's entry for the group, until the child is reaped.
    entry: Option<Entry>,
}

/// kubectl and kpt keep a discovery cache of each API server they reach, by
/// address, in `~/.kube/cache` unless `KUBECACHEDIR` says otherwise: the
/// tests' API servers, each on a port of its own and gone after its test,
/// would fill the home folder (gigabytes over a few hundred runs). A command
/// given a kubeconfig (`--kubeconfig`, or else `KUBECONFIG`'s first file)
/// keeps the cache beside that file, in the folder of the test or of the API
/// server that wrote it, which goes with them; one that sets `KUBECACHEDIR`
/// keeps its own.
fn cache_beside_kubeconfig(command: &mut Command) {
    let mut kubeconfig = None;
    for (key, value) in command.get_envs() {
        match (key.to_str(), value) {
            (Some("KUBECACHEDIR"), _) => return,
            (Some("KUBECONFIG"), Some(value)) => {
                kubeconfig = value.to_str().and_then(|list| list.split(':').next());
            }
            _ => {}
        }
    }
    let mut args = command.get_args().filter_map(|a| a.to_str());
    while let Some(arg) = args.next() {
        match arg.strip_prefix("--kubeconfig") {
            Some("") => kubeconfig = args.next(),
            Some(value) if value.starts_with('=') => kubeconfig = Some(&value[1..]),
            _ => {}
        }
    }
    let Some(folder) = kubeconfig.and_then(|file| Path::new(file).parent()) else {
        return;
    };
    if folder.parent().is_some() && folder.is_dir() {
        let cache = folder.join(".kube-cache");
        command.env("KUBECACHEDIR", cache);
    }
}

impl Guard {
    /// Starts `command` in a process group of its own, with kubectl's cache
    /// beside its kubeconfig ([`cache_beside_kubeconfig`]).
    pub fn spawn(command: &mut Command) -> io::Result<Guard> {
        cache_beside_kubeconfig(command);
        let mut guard = Guard {
            child: command.process_group(0).spawn()?,
            status: None,
            entry: None,
        };
        guard.entry = Some(Entry::new("group", &guard.id().to_string()));
        Ok(guard)
    }

    /// Runs `command` to its end, as [`Command::output`] does (stdin closed,
    /// stdout and stderr captured), then kills what it left in its group.
    pub fn output(command: &mut Command) -> io::Result<Output> {
        command
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        Guard::spawn(command)?.wait_with_output()
    }

    /// The child's process ID, which is also its group's.
    pub fn id(&self) -> u32 {
        self.child.id()
    }

    fn pid(&self) -> Pid {
        Pid::from_raw(self.child.id() as i32)
    }

    /// Its stdin, when piped and not taken yet.
    pub fn take_stdin(&mut self) -> Option<ChildStdin> {
        self.child.stdin.take()
    }

    /// Its stdout, when piped and not taken yet.
    pub fn take_stdout(&mut self) -> Option<ChildStdout> {
        self.child.stdout.take()
    }

    /// Its stderr, when piped and not taken yet.
    pub fn take_stderr(&mut self) -> Option<ChildStderr> {
        self.child.stderr.take()
    }

    /// Sends `signal` to the child alone; `ESRCH` once it has been reaped.
    pub fn signal(&self, signal: Signal) -> nix::Result<()> {
        match self.status {
            Some(_) => Err(Errno::ESRCH),
            None => kill(self.pid(), signal),
        }
    }

    /// Its status once it has exited (what it left in its group killed, and
    /// the child reaped), without waiting.
    pub fn try_wait(&mut self) -> io::Result<Option<ExitStatus>> {
        if self.status.is_some() {
            return Ok(self.status);
        }
        if !self.exited(WaitPidFlag::WNOHANG)? {
            return Ok(None);
        }
        self.reap().map(Some)
    }

    /// Waits for it to exit, then kills what it left in its group and reaps it.
    pub fn wait(&mut self) -> io::Result<ExitStatus> {
        match self.status {
            Some(status) => Ok(status),
            None => {
                self.exited(WaitPidFlag::empty())?;
                self.reap()
            }
        }
    }

    /// Kills it and its group (SIGKILL) and reaps it; its status if it had
    /// exited already.
    pub fn kill(&mut self) -> io::Result<ExitStatus> {
        match self.status {
            Some(status) => Ok(status),
            None => self.reap(),
        }
    }

    /// Reads its stdout and stderr to their ends (stdin closed first), then
    /// waits for it.
    pub fn wait_with_output(mut self) -> io::Result<Output> {
        drop(self.child.stdin.take());
        let stderr = self.child.stderr.take().map(|mut stderr| {
            std::thread::spawn(move || {
                let mut bytes = Vec::new();
                stderr.read_to_end(&mut bytes).map(|_| bytes)
            })
        });
        let mut stdout = Vec::new();
        if let Some(mut out) = self.child.stdout.take() {
            out.read_to_end(&mut stdout)?;
        }
        let stderr = match stderr {
            Some(reader) => reader.join().expect("the stderr reader")?,
            None => Vec::new(),
        };
        let status = self.wait()?;
        Ok(Output {
            status,
            stdout,
            stderr,
        })
    }

    /// Whether the child has exited, left unreaped so that its PID still
    /// names its group; blocks until it has unless `flags` holds `WNOHANG`.
    fn exited(&self, flags: WaitPidFlag) -> io::Result<bool> {
        let flags = flags | WaitPidFlag::WEXITED | WaitPidFlag::WNOWAIT;
        loop {
            match waitid(Id::Pid(self.pid()), flags) {
                Ok(WaitStatus::StillAlive) => return Ok(false),
                Ok(_) => return Ok(true),
                Err(Errno::EINTR) => {}
                Err(e) => return Err(e.into()),
            }
        }
    }

    /// Kills the group (the child too, when it runs), then reaps the child.
    fn reap(&mut self) -> io::Result<ExitStatus> {
        // ESRCH: the group is empty but for the unreaped child.
        let _ = killpg(self.pid(), Signal::SIGKILL);
        let status = self.child.wait()?;
        self.status = Some(status);
        self.entry = None;
        Ok(status)
    }
}

/// Runs a [`Command`] to its end through a [`Guard`], as [`Command::output`]
/// and [`Command::status`] do, so that what it leaves in its group ends with
/// it, and a test that panics while it runs leaves nothing behind.
pub trait Guarded {
    /// As [`Command::output`]: stdin closed, stdout and stderr captured.
    fn guarded_output(&mut self) -> io::Result<Output>;
    /// As [`Command::status`]: the stdio the command sets, inherited otherwise.
    fn guarded_status(&mut self) -> io::Result<ExitStatus>;
}

impl Guarded for Command {
    fn guarded_output(&mut self) -> io::Result<Output> {
        Guard::output(self)
    }

    fn guarded_status(&mut self) -> io::Result<ExitStatus> {
        Guard::spawn(self)?.wait()
    }
}

impl Drop for Guard {
    fn drop(&mut self) {
        let _ = self.kill();
    }
}

/// What the watchdog is to clean up if the binary ends first; forgotten when
/// dropped.
pub struct Entry(u64);

impl Entry {
    fn new(kind: &str, what: &str) -> Entry {
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let id = NEXT.fetch_add(1, Ordering::Relaxed);
        tell_watchdog(&format!("+ {id} {kind} {what}\n"))
            .unwrap_or_else(|e| panic!("telling the watchdog of {kind} {what}: {e}"));
        Entry(id)
    }
}

impl Drop for Entry {
    fn drop(&mut self) {
        let _ = tell_watchdog(&format!("- {}\n", self.0));
    }
}

/// Has the watchdog remove `dir` if this binary ends while the entry lives:
/// for a folder a test may never remove (a fixture kept in a static).
pub fn leave_to_watchdog(dir: &Path) -> Entry {
    let path = dir.to_str().expect("a UTF-8 path");
    assert!(!path.contains('\n'), "a path on one line: {path:?}");
    Entry::new("folder", path)
}

/// The watchdog: it reads `+ ID KIND WHAT` and `- ID` lines until this
/// binary's end closes its stdin, then kills the groups and removes the
/// folders still listed. It ignores SIGINT, SIGHUP and SIGTERM, so that what
/// ends the binary does not end it before it has cleaned up.
pub const WATCHDOG: &str = r#"trap '' INT HUP TERM
entries=()
while read -r op id kind what; do
  case $op in
    +) entries[id]="$kind $what" ;;
    -) unset 'entries[id]' ;;
  esac
done
for entry in "${entries[@]}"; do
  case $entry in group\ *) kill -KILL -- "-${entry#group }" 2>/dev/null ;; esac
done
for entry in "${entries[@]}"; do
  case $entry in folder\ *) rm -rf -- "${entry#folder }" ;; esac
done"#;

fn tell_watchdog(line: &str) -> io::Result<()> {
    static STDIN: OnceLock<Mutex<ChildStdin>> = OnceLock::new();
    let stdin = STDIN.get_or_init(|| {
        // Never waited for: it outlives this process to clean up after it.
        #[allow(clippy::zombie_processes)]
        let mut watchdog = Command::new("bash")
            .args(["-c", WATCHDOG, "watchdog"])
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("starting the watchdog shell");
        Mutex::new(watchdog.stdin.take().expect("the watchdog's stdin"))
    });
    let mut stdin = stdin.lock().unwrap_or_else(PoisonError::into_inner);
    stdin.write_all(line.as_bytes())
}
