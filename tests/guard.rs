//! The guard of every process the tests start (`tests/common/process.rs`): a child and what it
//! started end with the test that started them, passed or panicked; what a child leaves
//! behind when it exits ends too; and the watchdog ends what no drop reaches once the binary
//! has ended.

use std::io::{BufRead, BufReader, Write};
use std::os::unix::process::ExitStatusExt;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::common::process::{Guard, WATCHDOG};

/// A process by its PID and its start (clock ticks since boot), so that another process
/// given the PID since is not taken for it.
struct Process {
    pid: u32,
    start: String,
}

impl Process {
    fn of(pid: u32) -> Process {
        let start = Self::stat(pid).expect("a running process").1;
        Process { pid, start }
    }

    /// Its state letter and start, from /proc/PID/stat (after the command name, which may
    /// hold spaces: the 3rd and the 22nd fields).
    fn stat(pid: u32) -> Option<(String, String)> {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
        let fields: Vec<&str> = stat.rsplit_once(')')?.1.split_whitespace().collect();
        Some((fields[0].to_string(), fields[19].to_string()))
    }

    /// Whether it runs: it exists, and is not a zombie that init has yet to reap.
    fn runs(&self) -> bool {
        Self::stat(self.pid).is_some_and(|(state, start)| state != "Z" && start == self.start)
    }

    /// Waits until a SIGKILL sent to it has taken effect; fails after 10 s.
    fn assert_ends(&self, what: &str) {
        let deadline = Instant::now() + Duration::from_secs(10);
        while self.runs() {
            assert!(
                Instant::now() < deadline,
                "{what} (PID {}) still runs",
                self.pid
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

/// A shell that starts `sleep` in the background (in its group), prints its PID, then runs
/// `then`; the shell and the sleep.
fn shell_with_a_child(then: &str) -> (Guard, Process) {
    let mut shell = Guard::spawn(
        Command::new("sh")
            .args(["-c", &format!("sleep 600 & echo $!; {then}")])
            .stdout(Stdio::piped()),
    )
    .unwrap();
    let mut line = String::new();
    BufReader::new(shell.take_stdout().unwrap())
        .read_line(&mut line)
        .unwrap();
    let sleep = Process::of(line.trim().parse().expect("the sleep's PID"));
    (shell, sleep)
}

#[test]
fn a_test_that_panics_ends_its_child_and_what_the_child_started() {
    let (sender, receiver) = std::sync::mpsc::channel();
    let panicked = std::panic::catch_unwind(move || {
        let (shell, sleep) = shell_with_a_child("sleep 600");
        sender.send((Process::of(shell.id()), sleep)).unwrap();
        panic!("the test fails with its child running");
    });
    assert!(panicked.is_err());
    let (shell, sleep) = receiver.recv().unwrap();
    assert!(
        !shell.runs(),
        "the shell is killed and reaped when the guard drops"
    );
    sleep.assert_ends("the shell's background sleep");
}

#[test]
fn a_child_that_exits_leaves_nothing_running() {
    let (mut shell, sleep) = shell_with_a_child("exit 3");
    assert_eq!(shell.wait().unwrap().code(), Some(3));
    sleep.assert_ends("the background sleep of a shell that exited");
}

#[test]
fn a_child_killed_by_the_test_takes_its_group_with_it() {
    let (mut shell, sleep) = shell_with_a_child("sleep 600");
    assert!(sleep.runs());
    assert_eq!(shell.kill().unwrap().signal(), Some(9));
    sleep.assert_ends("the background sleep of a killed shell");
}

/// The watchdog, told as the guards tell it, kills the groups and removes the folders still
/// listed once its stdin closes (the binary has ended), and leaves what was forgotten.
#[test]
fn the_watchdog_ends_what_is_still_listed_when_the_binary_ends() {
    let (mut listed, listed_sleep) = shell_with_a_child("sleep 600");
    let (mut forgotten, forgotten_sleep) = shell_with_a_child("sleep 600");
    let (kept_dir, forgotten_dir) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let mut watchdog = Guard::spawn(
        Command::new("bash")
            .args(["-c", WATCHDOG, "watchdog"])
            .stdin(Stdio::piped()),
    )
    .unwrap();
    let mut stdin = watchdog.take_stdin().unwrap();
    write!(
        stdin,
        "+ 1 group {}\n+ 2 group {}\n+ 3 folder {}\n+ 4 folder {}\n- 2\n- 4\n",
        listed.id(),
        forgotten.id(),
        kept_dir.path().display(),
        forgotten_dir.path().display()
    )
    .unwrap();
    drop(stdin);
    assert!(watchdog.wait().unwrap().success());
    assert_eq!(listed.wait().unwrap().signal(), Some(9));
    listed_sleep.assert_ends("the listed group's sleep");
    assert!(!kept_dir.path().exists(), "the listed folder is removed");
    assert_eq!(
        forgotten.try_wait().unwrap(),
        None,
        "a forgotten group runs"
    );
    assert!(forgotten_sleep.runs());
    assert!(forgotten_dir.path().exists(), "a forgotten folder is kept");
}
