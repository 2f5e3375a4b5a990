//! `latscope trigger NAME`: a local socket on which a process running flight recorders (`record
//! --ring`, the agent) takes requests to fire their triggers by name.
//!
//! The socket is `/run/latscope/PROGRAM-PID.sock` (or a path given), mode 0600 in a directory
//! of mode 0700 owned by the user latscope runs as, and each connection's peer is checked
//! (`SO_PEERCRED`): only root and that user are answered. A request is one line, `fire NAME` or
//! `list`; the answer one line of JSON.

use crate::recorder::FlightHandle;
use serde_json::{json, Value};
use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

/// Where the sockets are, unless a path is given.
pub const SOCKET_DIR: &str = "/run/latscope";

/// The socket server (see the module documentation). Dropping it removes the socket.
pub struct ControlServer {
    path: PathBuf,
    stop: Arc<AtomicBool>,
    handle: Option<JoinHandle<()>>,
    recorders: Arc<Mutex<Vec<FlightHandle>>>,
}

impl std::fmt::Debug for ControlServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ControlServer").field("path", &self.path).finish_non_exhaustive()
    }
}

/// The default socket of this process: `/run/latscope/PROGRAM-PID.sock`.
pub fn default_socket(program: &str) -> PathBuf {
    Path::new(SOCKET_DIR).join(format!("{program}-{}.sock", std::process::id()))
}

/// The directory of a socket: created with mode 0700 if missing; an existing one must be a
/// directory of this user that others cannot write to.
fn check_dir(dir: &Path) -> Result<(), String> {
    match dir.symlink_metadata() {
        Err(_) => {
            std::fs::create_dir_all(dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
            std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))
                .map_err(|e| format!("cannot set the permissions of {}: {e}", dir.display()))?;
            Ok(())
        }
        Ok(m) if !m.is_dir() => Err(format!("{} is not a directory (a symlink?): remove it", dir.display())),
        // SAFETY: geteuid cannot fail.
        Ok(m) if m.uid() != unsafe { libc::geteuid() } || m.mode() & 0o022 != 0 => Err(format!(
            "{} belongs to uid {} or others may write to it (mode {:o}): the trigger socket needs a directory \
             only this user controls",
            dir.display(),
            m.uid(),
            m.mode() & 0o7777
        )),
        Ok(_) => Ok(()),
    }
}

/// Remove the sockets in `dir` named `PROGRAM-PID.sock` whose process is gone and that nobody
/// answers on; returns how many.
pub fn remove_stale(dir: &Path) -> usize {
    use std::os::unix::fs::FileTypeExt;
    let Ok(entries) = std::fs::read_dir(dir) else { return 0 };
    let mut removed = 0;
    for e in entries.flatten() {
        let name = e.file_name();
        let Some(pid) = name
            .to_str()
            .and_then(|n| n.strip_suffix(".sock"))
            .and_then(|n| n.rsplit_once('-'))
            .and_then(|(_, pid)| pid.parse::<i32>().ok())
            .filter(|&p| p > 0)
        else {
            continue;
        };
        // SAFETY: signal 0 only tests whether the process exists.
        let gone =
            unsafe { libc::kill(pid, 0) } == -1 && std::io::Error::last_os_error().raw_os_error() == Some(libc::ESRCH);
        let socket = e.file_type().is_ok_and(|t| t.is_socket());
        if gone && socket && UnixStream::connect(e.path()).is_err() && std::fs::remove_file(e.path()).is_ok() {
            removed += 1;
        }
    }
    removed
}

impl ControlServer {
    /// Listen on `path` (`None`: [`default_socket`] of `program`).
    pub fn start(path: Option<PathBuf>, program: &str) -> Result<ControlServer, String> {
        let default = path.is_none();
        let path = path.unwrap_or_else(|| default_socket(program));
        let dir = path.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
        check_dir(dir)?;
        if default {
            // A process killed with -9 left its socket: `latscope trigger` would list it.
            remove_stale(dir);
        }
        if let Ok(m) = path.symlink_metadata() {
            use std::os::unix::fs::FileTypeExt;
            if !m.file_type().is_socket() {
                return Err(format!("{} exists and is not a socket: choose another path", path.display()));
            }
            if UnixStream::connect(&path).is_ok() {
                return Err(format!("{} is in use by another process", path.display()));
            }
            let _ = std::fs::remove_file(&path);
        }
        let listener = UnixListener::bind(&path).map_err(|e| format!("cannot listen on {}: {e}", path.display()))?;
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600))
            .map_err(|e| format!("cannot set the permissions of {}: {e}", path.display()))?;
        listener.set_nonblocking(true).map_err(|e| format!("{}: {e}", path.display()))?;
        let stop = Arc::new(AtomicBool::new(false));
        let recorders: Arc<Mutex<Vec<FlightHandle>>> = Arc::default();
        let (s, r) = (stop.clone(), recorders.clone());
        let handle = std::thread::Builder::new()
            .name("latscope-ctl".into())
            .spawn(move || serve(listener, &s, &r))
            .map_err(|e| format!("cannot start the socket's thread: {e}"))?;
        Ok(ControlServer { path, stop, handle: Some(handle), recorders })
    }

    /// The socket's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Answer for these recorders (replacing those given before).
    pub fn set(&self, recorders: Vec<FlightHandle>) {
        *self.recorders.lock().unwrap_or_else(|p| p.into_inner()) = recorders;
    }
}

impl Drop for ControlServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
        let _ = std::fs::remove_file(&self.path);
    }
}

fn serve(listener: UnixListener, stop: &AtomicBool, recorders: &Mutex<Vec<FlightHandle>>) {
    while !stop.load(Ordering::Relaxed) {
        match listener.accept() {
            Ok((s, _)) => {
                let _ = answer(s, recorders);
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => std::thread::sleep(Duration::from_millis(50)),
            Err(_) => std::thread::sleep(Duration::from_millis(50)),
        }
    }
}

/// The peer's pid and uid.
fn peer(s: &UnixStream) -> Option<(i32, u32)> {
    use std::os::fd::AsRawFd;
    let mut c: libc::ucred = unsafe { std::mem::zeroed() };
    let mut len = std::mem::size_of::<libc::ucred>() as libc::socklen_t;
    // SAFETY: SO_PEERCRED fills a ucred of the given length.
    let r = unsafe {
        libc::getsockopt(
            s.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_PEERCRED,
            (&mut c as *mut libc::ucred).cast(),
            &mut len,
        )
    };
    (r == 0).then_some((c.pid, c.uid))
}

fn answer(s: UnixStream, recorders: &Mutex<Vec<FlightHandle>>) -> std::io::Result<()> {
    s.set_nonblocking(false)?;
    s.set_read_timeout(Some(Duration::from_secs(5)))?;
    s.set_write_timeout(Some(Duration::from_secs(5)))?;
    let mut w = s.try_clone()?;
    let reply = match peer(&s) {
        // SAFETY: geteuid cannot fail.
        Some((_, uid)) if uid != 0 && uid != unsafe { libc::geteuid() } => {
            json!({"error": format!("uid {uid} may not fire triggers here (root only)")})
        }
        None => json!({"error": "the peer's credentials could not be read"}),
        Some((pid, uid)) => {
            let mut line = String::new();
            BufReader::new((&s).take(4096)).read_line(&mut line)?;
            let handles = recorders.lock().unwrap_or_else(|p| p.into_inner()).clone();
            request(line.trim(), &handles, pid, uid)
        }
    };
    writeln!(w, "{reply}")?;
    w.flush()
}

fn request(line: &str, handles: &[FlightHandle], pid: i32, uid: u32) -> Value {
    let list =
        || -> Vec<Value> { handles.iter().map(|h| json!({"recorder": h.name(), "triggers": h.triggers()})).collect() };
    match line.split_once(' ').map_or((line, ""), |(a, b)| (a, b.trim())) {
        ("list", "") => json!({"recorders": list()}),
        ("fire", name) if !name.is_empty() => {
            // `RECORDER/TRIGGER` picks one recorder; a bare name fires it wherever it is.
            let (only, trigger) = match name.split_once('/') {
                Some((r, t)) => (Some(r), t),
                None => (None, name),
            };
            let reason = format!("fired by hand (latscope trigger, pid {pid}, uid {uid})");
            let results: Vec<Value> = handles
                .iter()
                .filter(|h| only.is_none_or(|r| h.name() == r) && h.triggers().iter().any(|t| t == trigger))
                .map(|h| match h.fire(trigger, &reason) {
                    Ok(o) => json!({"recorder": h.name(), "trigger": trigger, "outcome": o.to_string()}),
                    Err(e) => json!({"recorder": h.name(), "trigger": trigger, "error": e}),
                })
                .collect();
            if results.is_empty() {
                json!({"error": format!("no trigger '{name}' here"), "recorders": list()})
            } else {
                json!({"results": results})
            }
        }
        _ => json!({"error": format!("unknown request '{line}': send 'fire NAME' or 'list'")}),
    }
}

/// Send `request` (`fire NAME`, `list`) to the socket at `path`; the answer, parsed.
pub fn ask(path: &Path, request: &str) -> Result<Value, String> {
    let mut s = UnixStream::connect(path).map_err(|e| format!("{}: {e}", path.display()))?;
    s.set_read_timeout(Some(Duration::from_secs(15))).map_err(|e| e.to_string())?;
    writeln!(s, "{request}").map_err(|e| format!("{}: {e}", path.display()))?;
    let mut line = String::new();
    BufReader::new(&s).read_line(&mut line).map_err(|e| format!("{}: {e}", path.display()))?;
    serde_json::from_str(&line).map_err(|e| format!("{}: unreadable answer ({e}): {line}", path.display()))
}

/// The sockets in [`SOCKET_DIR`] (of running or crashed processes).
pub fn sockets() -> Vec<PathBuf> {
    use std::os::unix::fs::FileTypeExt;
    let mut v: Vec<PathBuf> = std::fs::read_dir(SOCKET_DIR)
        .into_iter()
        .flatten()
        .flatten()
        .filter(|e| e.file_type().is_ok_and(|t| t.is_socket()))
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "sock"))
        .collect();
    v.sort();
    v
}

#[cfg(test)]
mod stale_tests {
    use super::*;

    #[test]
    fn sockets_of_dead_processes_are_removed_and_no_others() {
        let dir = tempfile::tempdir().unwrap();
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let dead = child.id();
        child.wait().unwrap();
        // A socket left by a killed process: bound, then its listener gone (the file stays).
        let stale = dir.path().join(format!("record-{dead}.sock"));
        drop(UnixListener::bind(&stale).unwrap());
        let live = dir.path().join(format!("record-{}.sock", std::process::id()));
        let _listener = UnixListener::bind(&live).unwrap();
        let other = dir.path().join(format!("notes-{dead}.sock"));
        std::fs::write(&other, "not a socket").unwrap();
        assert_eq!(remove_stale(dir.path()), 1);
        assert!(!stale.exists() && live.exists() && other.exists());
    }
}
