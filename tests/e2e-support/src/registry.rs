//! A real local OCI registry for e2e tests, and a TCP proxy that breaks connections.
//!
//! [`Registry::start`] runs Debian's `docker-registry` (CNCF distribution 2.x) with its own
//! config file and storage in a temporary directory, on 127.0.0.1 and a free port, optionally
//! with htpasswd basic auth (`htpasswd -Bbn`). It waits until `/v2/` answers and stops the
//! process on drop. [`FlakyProxy`] sits between a client and the registry and drops the first
//! connections or cuts them after some bytes, to test retries and interrupted pushes.

use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::thread;
use std::time::{Duration, Instant};

const SETUP_HINT: &str =
    "run tests/scripts/setup.sh (it installs docker-registry, skopeo, umoci and apache2-utils)";

/// Finds a program on PATH or panics with the setup hint.
pub fn require_tool(name: &str) -> PathBuf {
    let path = std::env::var_os("PATH").unwrap_or_default();
    for dir in std::env::split_paths(&path) {
        let p = dir.join(name);
        if p.is_file() {
            return p;
        }
    }
    panic!("`{name}` is not installed: {SETUP_HINT}");
}

/// A free TCP port on 127.0.0.1 (bound and released; the registry binds it right after).
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .unwrap_or_else(|e| panic!("cannot find a free port: {e}"))
}

/// A running `docker-registry serve`.
pub struct Registry {
    child: Option<Child>,
    dir: tempfile::TempDir,
    port: u16,
    credentials: Option<(String, String)>,
}

impl Registry {
    /// Starts a registry without authentication.
    pub fn start() -> Registry {
        Self::start_inner(None)
    }

    /// Starts a registry requiring basic auth for `user`/`password`.
    pub fn start_with_auth(user: &str, password: &str) -> Registry {
        Self::start_inner(Some((user.to_string(), password.to_string())))
    }

    fn start_inner(credentials: Option<(String, String)>) -> Registry {
        require_tool("docker-registry");
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("cannot create a temp dir: {e}"));
        std::fs::create_dir_all(dir.path().join("storage"))
            .unwrap_or_else(|e| panic!("cannot create storage dir: {e}"));
        if let Some((user, password)) = &credentials {
            require_tool("htpasswd");
            let out = Command::new("htpasswd")
                .args(["-Bbn", user, password])
                .output()
                .unwrap_or_else(|e| panic!("cannot run htpasswd: {e}"));
            assert!(out.status.success(), "htpasswd failed: {:?}", out);
            std::fs::write(dir.path().join("htpasswd"), &out.stdout)
                .unwrap_or_else(|e| panic!("cannot write htpasswd file: {e}"));
        }
        let mut registry = Registry {
            child: None,
            dir,
            port: 0,
            credentials,
        };
        // A free port can be taken between probing and binding: try a few.
        let mut last = String::new();
        for _ in 0..5 {
            registry.port = free_port();
            match registry.spawn() {
                Ok(()) => return registry,
                Err(e) => last = e,
            }
        }
        panic!("docker-registry did not start: {last}");
    }

    fn write_config(&self) -> PathBuf {
        let root = self.dir.path();
        let mut config = format!(
            "version: 0.1\nlog:\n  level: warn\n  accesslog:\n    disabled: true\nstorage:\n  filesystem:\n    rootdirectory: {}\n  delete:\n    enabled: true\nhttp:\n  addr: 127.0.0.1:{}\n  secret: e2e-test-secret\n",
            root.join("storage").display(),
            self.port
        );
        if self.credentials.is_some() {
            config.push_str(&format!(
                "auth:\n  htpasswd:\n    realm: e2e\n    path: {}\n",
                root.join("htpasswd").display()
            ));
        }
        let path = root.join("config.yml");
        std::fs::write(&path, config).unwrap_or_else(|e| panic!("cannot write config: {e}"));
        path
    }

    fn log_path(&self) -> PathBuf {
        self.dir.path().join("registry.log")
    }

    fn spawn(&mut self) -> Result<(), String> {
        let config = self.write_config();
        let log = std::fs::File::create(self.log_path()).map_err(|e| e.to_string())?;
        let log2 = log.try_clone().map_err(|e| e.to_string())?;
        let child = Command::new("docker-registry")
            .arg("serve")
            .arg(&config)
            .stdin(Stdio::null())
            .stdout(log)
            .stderr(log2)
            .spawn()
            .map_err(|e| format!("cannot run docker-registry: {e} ({SETUP_HINT})"))?;
        self.child = Some(child);
        let deadline = Instant::now() + Duration::from_secs(15);
        while Instant::now() < deadline {
            if let Some(c) = self.child.as_mut()
                && let Ok(Some(status)) = c.try_wait()
            {
                self.child = None;
                return Err(format!("exited with {status}: {}", self.log_tail()));
            }
            if let Some(code) = http_status(self.addr(), "/v2/")
                && (code == 200 || code == 401)
            {
                return Ok(());
            }
            thread::sleep(Duration::from_millis(50));
        }
        self.kill();
        Err(format!(
            "no answer on /v2/ within 15 s: {}",
            self.log_tail()
        ))
    }

    /// The last lines of the registry's log (for failure messages).
    pub fn log_tail(&self) -> String {
        let text = std::fs::read_to_string(self.log_path()).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(20)..].join("\n")
    }

    /// `127.0.0.1:PORT`.
    pub fn host(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    /// Socket address.
    pub fn addr(&self) -> SocketAddr {
        SocketAddr::from(([127, 0, 0, 1], self.port))
    }

    /// The credentials it requires, if any.
    pub fn credentials(&self) -> Option<(&str, &str)> {
        self.credentials
            .as_ref()
            .map(|(u, p)| (u.as_str(), p.as_str()))
    }

    /// Storage directory (blobs and repositories).
    pub fn storage(&self) -> PathBuf {
        self.dir.path().join("storage")
    }

    /// Stops the process (storage is kept; [`Registry::restart`] serves it again).
    pub fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// Starts the process again on the same port and storage.
    pub fn restart(&mut self) {
        self.kill();
        if let Err(e) = self.spawn() {
            panic!("docker-registry did not restart: {e}");
        }
    }

    /// A Docker `config.json` directory with this registry's credentials (for `DOCKER_CONFIG`).
    pub fn docker_config_dir(&self, user: &str, password: &str) -> tempfile::TempDir {
        let d = tempfile::tempdir().unwrap_or_else(|e| panic!("temp dir: {e}"));
        let auth = base64_encode(format!("{user}:{password}").as_bytes());
        std::fs::write(
            d.path().join("config.json"),
            format!(
                "{{\"auths\":{{\"{}\":{{\"auth\":\"{auth}\"}}}}}}",
                self.host()
            ),
        )
        .unwrap_or_else(|e| panic!("write config.json: {e}"));
        d
    }
}

impl Drop for Registry {
    fn drop(&mut self) {
        self.kill();
    }
}

fn base64_encode(bytes: &[u8]) -> String {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

/// Status code of `GET path` on `addr`, or `None` when nothing answers.
pub fn http_status(addr: SocketAddr, path: &str) -> Option<u16> {
    let mut s = TcpStream::connect_timeout(&addr, Duration::from_millis(500)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(2))).ok()?;
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
    )
    .ok()?;
    let mut buf = [0u8; 64];
    let n = s.read(&mut buf).ok()?;
    let head = std::str::from_utf8(&buf[..n]).ok()?;
    head.split_whitespace().nth(1)?.parse().ok()
}

/// How a [`FlakyProxy`] mistreats connections.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Flakiness {
    /// Close the first `n` connections right after accepting them.
    DropFirst(usize),
    /// For the first `n` connections, forward only `bytes` bytes from the client, then cut
    /// both directions (an upload interrupted mid-body).
    CutFirst {
        /// Connections to cut.
        n: usize,
        /// Client bytes forwarded before the cut.
        bytes: usize,
    },
    /// Close every connection.
    DropAll,
}

/// A TCP proxy on 127.0.0.1 that forwards to `target`, breaking connections as configured.
pub struct FlakyProxy {
    port: u16,
    stop: Arc<AtomicBool>,
    accepted: Arc<AtomicUsize>,
    handle: Option<thread::JoinHandle<()>>,
}

impl FlakyProxy {
    /// Starts the proxy.
    pub fn start(target: SocketAddr, mode: Flakiness) -> FlakyProxy {
        let listener =
            TcpListener::bind("127.0.0.1:0").unwrap_or_else(|e| panic!("proxy cannot bind: {e}"));
        let port = listener
            .local_addr()
            .unwrap_or_else(|e| panic!("proxy address: {e}"))
            .port();
        let stop = Arc::new(AtomicBool::new(false));
        let accepted = Arc::new(AtomicUsize::new(0));
        let (stop2, accepted2) = (stop.clone(), accepted.clone());
        let handle = thread::spawn(move || {
            for conn in listener.incoming() {
                if stop2.load(Ordering::SeqCst) {
                    break;
                }
                let Ok(client) = conn else { continue };
                let nth = accepted2.fetch_add(1, Ordering::SeqCst);
                let limit = match mode {
                    Flakiness::DropAll => Some(0),
                    Flakiness::DropFirst(n) if nth < n => Some(0),
                    Flakiness::CutFirst { n, bytes } if nth < n => Some(bytes),
                    _ => None,
                };
                if limit == Some(0) {
                    let _ = client.shutdown(Shutdown::Both);
                    continue;
                }
                thread::spawn(move || forward(client, target, limit));
            }
        });
        FlakyProxy {
            port,
            stop,
            accepted,
            handle: Some(handle),
        }
    }

    /// `127.0.0.1:PORT` of the proxy.
    pub fn host(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    /// Connections accepted so far.
    pub fn connections(&self) -> usize {
        self.accepted.load(Ordering::SeqCst)
    }
}

impl Drop for FlakyProxy {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        // Wake the accept loop.
        let _ = TcpStream::connect(("127.0.0.1", self.port));
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
    }
}

fn forward(client: TcpStream, target: SocketAddr, limit: Option<usize>) {
    let Ok(server) = TcpStream::connect(target) else {
        let _ = client.shutdown(Shutdown::Both);
        return;
    };
    let (Ok(mut c_read), Ok(mut s_write)) = (client.try_clone(), server.try_clone()) else {
        return;
    };
    let (c_cut, s_cut) = (client.try_clone().ok(), server.try_clone().ok());
    let up = thread::spawn(move || {
        let mut sent = 0usize;
        let mut buf = [0u8; 16 * 1024];
        loop {
            let n = match c_read.read(&mut buf) {
                Ok(0) | Err(_) => break,
                Ok(n) => n,
            };
            let n = match limit {
                Some(l) if sent + n >= l => {
                    let _ = s_write.write_all(&buf[..l - sent]);
                    // Cut both connections mid-request.
                    if let Some(c) = &c_cut {
                        let _ = c.shutdown(Shutdown::Both);
                    }
                    if let Some(s) = &s_cut {
                        let _ = s.shutdown(Shutdown::Both);
                    }
                    return;
                }
                _ => n,
            };
            if s_write.write_all(&buf[..n]).is_err() {
                break;
            }
            sent += n;
        }
        let _ = s_write.shutdown(Shutdown::Write);
    });
    let (Ok(mut s_read), Ok(mut c_write)) = (server.try_clone(), client.try_clone()) else {
        return;
    };
    let _ = std::io::copy(&mut s_read, &mut c_write);
    let _ = c_write.shutdown(Shutdown::Write);
    let _ = up.join();
}

/// Runs `skopeo` with `args`, returning stdout; panics with stderr on failure.
pub fn skopeo(args: &[&str]) -> String {
    require_tool("skopeo");
    let out = Command::new("skopeo")
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("cannot run skopeo: {e}"));
    assert!(
        out.status.success(),
        "skopeo {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Lists a gzip tar with GNU tar (`tar -tvzf --numeric-owner`): one
/// `(path, mode string, uid/gid)` per entry, an independent reader of our layers.
pub fn gnu_tar_listing(blob: &Path) -> Vec<(String, String, String)> {
    let out = Command::new("tar")
        .args(["--numeric-owner", "-tvzf"])
        .arg(blob)
        .output()
        .unwrap_or_else(|e| panic!("cannot run tar: {e}"));
    assert!(
        out.status.success(),
        "tar -tvzf {} failed: {}",
        blob.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| {
            // -rwxr-xr-x 0/0  1234 1970-01-01 00:00 usr/local/bin/op
            let parts: Vec<&str> = l.split_whitespace().collect();
            if parts.len() < 6 {
                return None;
            }
            let name = parts[5..].join(" ");
            let name = name.split(" -> ").next().unwrap_or_default().to_string();
            Some((name, parts[0].to_string(), parts[1].to_string()))
        })
        .collect()
}
