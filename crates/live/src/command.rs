//! A command run under the probes: started held at a gate, released once they are attached, and
//! never left orphaned.

use std::ffi::CString;
use std::time::{Duration, Instant};

/// Why a command could not be started.
#[derive(Debug, thiserror::Error)]
pub enum CommandError {
    /// An argument holds a NUL byte, which no exec can pass.
    #[error("argument {0:?} contains a NUL byte")]
    Nul(String),
    /// The command line is empty.
    #[error("no command given")]
    Empty,
    /// fork/pipe failed.
    #[error("cannot start the command: {0}")]
    Os(#[from] std::io::Error),
}

/// A child process held at a gate (a pipe it reads one byte from) until [`Command::release`].
///
/// The child runs in a process group of its own, so that stopping it reaches its children too;
/// when the terminal is ours, the child's group is made its foreground group (Ctrl-C and
/// terminal input go to the command, as with `time CMD`) and we take it back at the end.
/// Dropping a `Command` whose process still runs stops it: SIGTERM to its group, then SIGKILL
/// after a grace period, unless it was [`Command::detach`]ed.
#[derive(Debug)]
pub struct Command {
    pid: libc::pid_t,
    gate: libc::c_int,
    status: Option<i32>,
    detached: bool,
    tty: bool,
    grace: Duration,
}

/// Where `name` is run from: itself when it holds a `/`, else the first executable regular file
/// of that name in a `PATH` directory (the default path when `PATH` is unset, as execvp does);
/// `name` unchanged when none is found (exec then fails and says so).
fn resolve(name: &str) -> std::path::PathBuf {
    use std::os::unix::fs::PermissionsExt;
    if name.contains('/') || name.is_empty() {
        return name.into();
    }
    let path = std::env::var_os("PATH").unwrap_or_else(|| "/usr/local/bin:/usr/bin:/bin".into());
    for dir in std::env::split_paths(&path) {
        // An empty entry means the current directory.
        let dir = if dir.as_os_str().is_empty() { ".".into() } else { dir };
        let candidate = dir.join(name);
        if let Ok(m) = std::fs::metadata(&candidate) {
            if m.is_file() && m.permissions().mode() & 0o111 != 0 {
                return candidate;
            }
        }
    }
    name.into()
}

/// The exit status the way shells report it: the exit code, or 128 + the signal number.
fn decode_status(st: libc::c_int) -> i32 {
    if libc::WIFEXITED(st) {
        libc::WEXITSTATUS(st)
    } else {
        128 + libc::WTERMSIG(st)
    }
}

impl Command {
    /// Fork `argv` held at the gate. Exit status 127 means the command could not be executed
    /// (not found or not executable: the child says so on stderr), as in shells.
    pub fn spawn(argv: &[String]) -> Result<Command, CommandError> {
        if argv.is_empty() {
            return Err(CommandError::Empty);
        }
        let cargs: Vec<CString> = argv
            .iter()
            .map(|a| CString::new(a.as_str()).map_err(|_| CommandError::Nul(a.clone())))
            .collect::<Result<_, _>>()?;
        let mut ptrs: Vec<*const libc::c_char> = cargs.iter().map(|c| c.as_ptr()).collect();
        ptrs.push(std::ptr::null());
        // The PATH search happens here, before the probes see the child: execvp's failed tries
        // (one execve per PATH entry) would otherwise be recorded as the command's first calls.
        let exe = CString::new(resolve(&argv[0]).into_os_string().into_encoded_bytes())
            .map_err(|_| CommandError::Nul(argv[0].clone()))?;
        // Written by the child if exec fails: made before fork (the child may not allocate).
        let msg = format!(
            "latscope: cannot execute the command '{}': not found (in PATH) or not executable\n",
            argv[0].escape_debug()
        );
        let mut fds = [0 as libc::c_int; 2];
        // SAFETY: plain syscalls; the child only calls async-signal-safe functions before exec.
        unsafe {
            if libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) != 0 {
                return Err(std::io::Error::last_os_error().into());
            }
            let tty = libc::isatty(0) == 1 && libc::tcgetpgrp(0) == libc::getpgrp();
            let pid = libc::fork();
            if pid < 0 {
                let e = std::io::Error::last_os_error();
                libc::close(fds[0]);
                libc::close(fds[1]);
                return Err(e.into());
            }
            if pid == 0 {
                libc::setpgid(0, 0);
                libc::close(fds[1]);
                let mut b = [0u8; 1];
                if libc::read(fds[0], b.as_mut_ptr() as *mut _, 1) != 1 {
                    libc::_exit(126);
                }
                // The parent ignored SIGPIPE and may have blocked signals for its own use: the
                // command starts with the dispositions a shell would give it.
                libc::signal(libc::SIGPIPE, libc::SIG_DFL);
                libc::signal(libc::SIGTTOU, libc::SIG_DFL);
                libc::execv(exe.as_ptr(), ptrs.as_ptr());
                // Not found, or a script without #! (execvp runs those with sh): as before.
                libc::execvp(ptrs[0], ptrs.as_ptr());
                libc::write(2, msg.as_ptr() as *const _, msg.len());
                libc::_exit(127);
            }
            libc::setpgid(pid, pid);
            libc::close(fds[0]);
            Ok(Command { pid, gate: fds[1], status: None, detached: false, tty, grace: Duration::from_secs(2) })
        }
    }

    /// The process id (also its process group id).
    pub fn pid(&self) -> u32 {
        self.pid as u32
    }

    /// How long [`Command::stop`] waits after SIGTERM before SIGKILL.
    pub fn set_grace(&mut self, grace: Duration) {
        self.grace = grace;
    }

    /// Let the command run: it execs now.
    pub fn release(&mut self) {
        if self.gate < 0 {
            return;
        }
        // SAFETY: our own pipe end and terminal; SIGTTOU is ignored around tcsetpgrp so that a
        // background latscope is not stopped by it.
        unsafe {
            if self.tty {
                let old = libc::signal(libc::SIGTTOU, libc::SIG_IGN);
                libc::tcsetpgrp(0, self.pid);
                libc::signal(libc::SIGTTOU, old);
            }
            libc::write(self.gate, b"g".as_ptr() as *const _, 1);
            libc::close(self.gate);
        }
        self.gate = -1;
    }

    /// The exit status once the command has ended (the code, or 128 + signal), without waiting.
    pub fn try_status(&mut self) -> Option<i32> {
        if self.status.is_none() {
            let mut st = 0;
            // SAFETY: waitpid on our own child.
            let r = unsafe { libc::waitpid(self.pid, &mut st, libc::WNOHANG) };
            if r == self.pid {
                self.status = Some(decode_status(st));
                self.restore_tty();
            }
        }
        self.status
    }

    /// Whether [`Command::detach`] was called.
    pub fn is_detached(&self) -> bool {
        self.detached
    }

    /// Leave the command running when this handle is dropped.
    pub fn detach(&mut self) {
        self.detached = true;
        self.restore_tty();
    }

    /// Stop the command and its process group: `signal` (SIGTERM, or the signal that stopped
    /// us), then SIGKILL after the grace period. Returns its status.
    pub fn stop(&mut self, signal: libc::c_int) -> i32 {
        if let Some(st) = self.try_status() {
            return st;
        }
        // SAFETY: signalling our own child's process group.
        unsafe { libc::kill(-self.pid, signal) };
        let deadline = Instant::now() + self.grace;
        while Instant::now() < deadline {
            if let Some(st) = self.try_status() {
                return st;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        // SAFETY: as above.
        unsafe { libc::kill(-self.pid, libc::SIGKILL) };
        let mut st = 0;
        // SAFETY: waiting for our own child.
        unsafe { libc::waitpid(self.pid, &mut st, 0) };
        let st = decode_status(st);
        self.status = Some(st);
        self.restore_tty();
        st
    }

    fn restore_tty(&mut self) {
        if self.tty {
            self.tty = false;
            // SAFETY: taking our terminal back for our own process group, SIGTTOU ignored.
            unsafe {
                let old = libc::signal(libc::SIGTTOU, libc::SIG_IGN);
                libc::tcsetpgrp(0, libc::getpgrp());
                libc::signal(libc::SIGTTOU, old);
            }
        }
    }
}

impl Drop for Command {
    fn drop(&mut self) {
        if self.gate >= 0 {
            // Never released (setup failed): closing the gate makes the child exit unrun.
            // SAFETY: closing our own fd, then reaping our own child.
            unsafe {
                libc::close(self.gate);
                let mut st = 0;
                libc::waitpid(self.pid, &mut st, 0);
            }
            return;
        }
        if !self.detached && self.status.is_none() {
            self.stop(libc::SIGTERM);
        }
        self.restore_tty();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn argv(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn a_released_command_runs_and_reports_its_exit_code() {
        let mut c = Command::spawn(&argv(&["sh", "-c", "exit 3"])).unwrap();
        c.release();
        let st = loop {
            if let Some(st) = c.try_status() {
                break st;
            }
            std::thread::sleep(Duration::from_millis(5));
        };
        assert_eq!(st, 3);
    }

    #[test]
    fn a_missing_command_exits_127() {
        let mut c = Command::spawn(&argv(&["/nonexistent/latscope-test-cmd"])).unwrap();
        c.release();
        let st = loop {
            if let Some(st) = c.try_status() {
                break st;
            }
            std::thread::sleep(Duration::from_millis(5));
        };
        assert_eq!(st, 127);
    }

    #[test]
    fn stopping_reaches_the_whole_process_group_and_reports_the_signal() {
        // A shell that ignores SIGTERM and keeps starting children: its children die of the
        // SIGTERM sent to the group, the shell itself of the SIGKILL after the grace period.
        let mut c =
            Command::spawn(&argv(&["sh", "-c", "trap '' TERM; sleep 30 & while :; do sleep 0.05; done"])).unwrap();
        c.set_grace(Duration::from_millis(200));
        c.release();
        std::thread::sleep(Duration::from_millis(100));
        let pgid = c.pid() as i32;
        let st = c.stop(libc::SIGTERM);
        assert_eq!(st, 128 + libc::SIGKILL);
        // Nothing of the group runs any more (orphans killed with the shell may linger as
        // zombies until init reaps them).
        std::thread::sleep(Duration::from_millis(100));
        let running: Vec<String> = std::fs::read_dir("/proc")
            .unwrap()
            .filter_map(|e| std::fs::read_to_string(e.ok()?.path().join("stat")).ok())
            .filter(|stat| {
                // pid (comm) state ppid pgrp ...: split after the comm, which may hold spaces.
                let rest: Vec<&str> = stat.rsplit_once(')').map_or(vec![], |(_, r)| r.split_whitespace().collect());
                rest.first() != Some(&"Z") && rest.get(2) == Some(&pgid.to_string().as_str())
            })
            .collect();
        assert!(running.is_empty(), "processes of the command's group survived: {running:?}");
    }

    #[test]
    fn an_unreleased_command_never_runs() {
        let dir = tempfile::tempdir().unwrap();
        let marker = dir.path().join("ran");
        let c = Command::spawn(&argv(&["touch", marker.to_str().unwrap()])).unwrap();
        drop(c);
        assert!(!marker.exists());
    }

    #[test]
    fn empty_and_nul_arguments_are_refused() {
        assert!(matches!(Command::spawn(&[]), Err(CommandError::Empty)));
        assert!(matches!(Command::spawn(&argv(&["a\0b"])), Err(CommandError::Nul(_))));
    }
}
