//! Shared by the catalog-server e2e suites (`e2e_registry_catalog_server.rs` and
//! `e2e_registry_load.rs` here, for the `catalog-server` binary, and
//! `bundle-tool/tests/it/e2e_registry_serve.rs` for `bundle-tool serve`, which includes this file
//! by path): start a real server process on a free port, talk to it with the Python grpcio
//! scripts in `tests/python`, stop it with SIGTERM and collect its exit status and log.

#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::io::Read;
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Output, Stdio};
use std::time::{Duration, Instant};

/// A server process under test.
pub struct Server {
    child: Option<Child>,
    /// `127.0.0.1:PORT`.
    pub addr: String,
    log: PathBuf,
    _dir: tempfile::TempDir,
}

/// Removes `ESC [ ... m` colour sequences.
pub fn strip_ansi(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut chars = s.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' && chars.peek() == Some(&'[') {
            for d in chars.by_ref() {
                if d.is_ascii_alphabetic() {
                    break;
                }
            }
        } else {
            out.push(c);
        }
    }
    out
}

/// A free TCP port on 127.0.0.1 (bound and released; the race is acceptable in tests).
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port")
}

impl Server {
    /// Starts `bin` with `args` plus `--address 127.0.0.1 --port N` and waits until the port
    /// accepts connections (the server listens before loading the catalog).
    pub fn start(bin: &Path, args: &[&str]) -> Server {
        Self::start_command(Command::new(bin), args)
    }

    /// Like [`Server::start`], with the server's open-file limit (`ulimit -n`) set to `limit`.
    pub fn start_with_open_files(bin: &Path, args: &[&str], limit: u32) -> Server {
        let mut cmd = Command::new("sh");
        // `exec` keeps the process id, so `pid()` and SIGTERM reach the server itself.
        cmd.arg("-c")
            .arg(format!("ulimit -n {limit} && exec \"$0\" \"$@\""))
            .arg(bin);
        Self::start_command(cmd, args)
    }

    fn start_command(mut cmd: Command, args: &[&str]) -> Server {
        let port = free_port();
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("server.log");
        let child = cmd
            .args(args)
            .args(["--address", "127.0.0.1", "--port", &port.to_string()])
            .env("RUST_LOG", "info")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .expect("start the server");
        let mut s = Server {
            child: Some(child),
            addr: format!("127.0.0.1:{port}"),
            log,
            _dir: dir,
        };
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            if TcpStream::connect(&s.addr).is_ok() {
                return s;
            }
            if let Some(status) = s.child.as_mut().unwrap().try_wait().unwrap() {
                panic!("server exited early ({status}):\n{}", s.log());
            }
            assert!(
                Instant::now() < deadline,
                "server did not listen:\n{}",
                s.log()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// The server's process id (for `/proc/<pid>/status`).
    pub fn pid(&self) -> u32 {
        self.child.as_ref().map_or(0, Child::id)
    }

    /// Sends SIGTERM without waiting.
    pub fn signal_term(&self) {
        let _ = Command::new("kill")
            .args(["-TERM", &self.pid().to_string()])
            .status();
    }

    /// What the server wrote to stderr so far, without terminal colour codes.
    pub fn log(&self) -> String {
        let mut s = String::new();
        if let Ok(mut f) = std::fs::File::open(&self.log) {
            let _ = f.read_to_string(&mut s);
        }
        strip_ansi(&s)
    }

    /// Waits until the log contains `needle`.
    pub fn wait_log(&self, needle: &str, timeout: Duration) {
        let deadline = Instant::now() + timeout;
        while !self.log().contains(needle) {
            assert!(
                Instant::now() < deadline,
                "log never said {needle:?}:\n{}",
                self.log()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Sends SIGTERM and waits for the exit status.
    pub fn stop(mut self) -> (ExitStatus, String) {
        let mut child = self.child.take().unwrap();
        let _ = Command::new("kill")
            .args(["-TERM", &child.id().to_string()])
            .status();
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if let Some(status) = child.try_wait().unwrap() {
                return (status, self.log());
            }
            if Instant::now() > deadline {
                let _ = child.kill();
                panic!("server ignored SIGTERM:\n{}", self.log());
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Waits for the server to exit on its own.
    pub fn wait_exit(mut self, timeout: Duration) -> (ExitStatus, String) {
        let mut child = self.child.take().unwrap();
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(status) = child.try_wait().unwrap() {
                return (status, self.log());
            }
            if Instant::now() > deadline {
                let _ = child.kill();
                panic!("server did not exit:\n{}", self.log());
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// The Python of the test venv (`tests/scripts/setup.sh` creates it).
pub fn python(root: &Path) -> PathBuf {
    let p = root.join(".venv/bin/python");
    assert!(
        p.is_file(),
        "{} is missing: run tests/scripts/setup.sh (make test does)",
        p.display()
    );
    p
}

/// Runs `tests/python/<script>` with `args`.
pub fn run_python(root: &Path, script: &str, args: &[&str]) -> Output {
    Command::new(python(root))
        .arg(root.join("tests/python").join(script))
        .args(args)
        .output()
        .expect("run python")
}

/// Asserts a Python check passed, showing its output (and the server log) otherwise.
pub fn assert_ok(out: &Output, server_log: &str) -> String {
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "python check failed ({}):\n{stdout}\n{}\n--- server log ---\n{server_log}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

/// The project's own proto.
pub fn own_proto(root: &Path) -> PathBuf {
    root.join("bundle-tool/crates/olmkit-catalog-server/proto/registry.proto")
}

/// Runs check_registry.py against a server.
pub fn check_registry(root: &Path, server: &Server, proto: &Path, catalog: &Path) -> String {
    let out = run_python(
        root,
        "check_registry.py",
        &[
            "--addr",
            &server.addr,
            "--proto",
            proto.to_str().unwrap(),
            "--catalog",
            catalog.to_str().unwrap(),
        ],
    );
    assert_ok(&out, &server.log())
}

/// Copies a directory tree.
pub fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let dst = to.join(e.file_name());
        if e.file_type().unwrap().is_dir() {
            copy_dir(&e.path(), &dst);
        } else {
            std::fs::copy(e.path(), dst).unwrap();
        }
    }
}
