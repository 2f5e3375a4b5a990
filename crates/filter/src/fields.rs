//! The fields a filter can test, and how each is read from an event.

use crate::context::EvalContext;
use crate::helpers::{self, bytes_at, Scratch};
use latscope_event::syscalls::{SysDesc, NONE};
use latscope_event::{parse_sock_name, syscalls, BlockOp, EventBatch, FdType, ProcOp, SockName, NO_FD};
use std::fmt::Write as _;

/// Kind bits (index = the event's kind byte; bit 3 stands for any unknown kind byte).
pub(crate) const K_SYS: u8 = 1;
pub(crate) const K_BLK: u8 = 2;
pub(crate) const K_PROC: u8 = 4;
pub(crate) const K_OTHER: u8 = 8;
pub(crate) const K_VALID: u8 = K_SYS | K_BLK | K_PROC;
pub(crate) const K_ALL: u8 = K_VALID | K_OTHER;

/// The kind bit of a kind byte.
#[inline]
pub(crate) fn kind_bit(kind: u8) -> u8 {
    if kind < 3 {
        1 << kind
    } else {
        K_OTHER
    }
}

/// The type of a field's values: decides which operators and which value syntax it takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FieldType {
    /// Text; string operators (`contains`, `glob`, `pmatch`, ...) and `=`, `!=`, `in`.
    String,
    /// Nanoseconds; values take units (`250us`, `1.5ms`, `2s`; a bare number is ns).
    Duration,
    /// Bytes; values take units (`4KiB`, `1M`; a bare number is bytes).
    Size,
    /// An integer.
    Number,
    /// `true` or `false`.
    Bool,
    /// Wall-clock ns since the Unix epoch.
    Timestamp,
}

impl FieldType {
    /// Short name (`string`, `duration`, ...).
    pub fn name(self) -> &'static str {
        match self {
            Self::String => "string",
            Self::Duration => "duration",
            Self::Size => "size",
            Self::Number => "number",
            Self::Bool => "bool",
            Self::Timestamp => "timestamp",
        }
    }
    pub(crate) fn with_article(self) -> &'static str {
        match self {
            Self::String => "a string",
            Self::Duration => "a duration",
            Self::Size => "a size",
            Self::Number => "a number",
            Self::Bool => "a boolean",
            Self::Timestamp => "a timestamp",
        }
    }
    pub(crate) fn is_numeric(self) -> bool {
        matches!(self, Self::Duration | Self::Size | Self::Number | Self::Timestamp)
    }
}

/// Every field, in the order of [`fields()`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum Field {
    EvtType,
    EvtCategory,
    EvtKind,
    EvtLatency,
    EvtRes,
    EvtRawres,
    EvtFailed,
    EvtIsIo,
    EvtIsIoRead,
    EvtIsIoWrite,
    EvtBuflen,
    EvtTime,
    EvtDatetime,
    EvtReltime,
    EvtCpu,
    EvtArgs,
    EvtArgFd,
    EvtArgSize,
    EvtArgName,
    EvtArgPath,
    EvtArgOldpath,
    EvtArgNewpath,
    EvtArgFlags,
    EvtArgMode,
    EvtArgOffset,
    EvtArgPos,
    EvtArgWhence,
    EvtArgDirfd,
    EvtArgRes,
    ProcName,
    ProcPid,
    ProcPpid,
    ProcExe,
    ProcCmdline,
    ProcArgs,
    ThreadTid,
    UserUid,
    UserName,
    FdNum,
    FdType,
    FdName,
    FdDirectory,
    FdFilename,
    FdSip,
    FdSport,
    FdCip,
    FdCport,
    FdPort,
    FdLip,
    FdRip,
    FdLport,
    FdRport,
    FdL4proto,
    ContainerId,
    BlkDev,
    BlkDisk,
    BlkOp,
    BlkSector,
    BlkBytes,
    BlkLatency,
    BlkQtime,
    EvtNum,
    EvtRawtime,
    EvtDir,
    EvtLatencyNs,
    EvtLatencyS,
    EvtLatencyHuman,
    EvtIsWait,
    EvtSource,
    EvtArgN,
    EvtRawarg,
    ProcAname,
    ProcApid,
    ProcPname,
    ProcPcmdline,
    ProcPexe,
    ProcExepath,
    FdTypechar,
    FdIp,
    FdNet,
    FdSnet,
    FdCnet,
    FdConnected,
    FdNamed,
    FsPathName,
    FsPathNameraw,
    FsPathSource,
    FsPathSourceraw,
    FsPathTarget,
    FsPathTargetraw,
    ContainerFullId,
    ContainerName,
    ContainerType,
    ContainerImage,
    ContainerImageRepository,
    ContainerImageTag,
    K8sPodName,
    K8sNsName,
    K8sPodUid,
    CgroupPath,
    CgroupId,
    ProcTty,
    UserLoginuid,
    GroupGid,
    GroupName,
    ProcVpid,
    ThreadVtid,
    EvtWait,
    LockKind,
    LockAddr,
    LockOwner,
}

/// A field as listed by `latscope fields`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FieldInfo {
    /// Name used in filters (`proc.name`).
    pub name: &'static str,
    /// Value type.
    pub ty: FieldType,
    /// Which events have it: `all`, `syscall`, `block`, `syscall, block`, or `none` (declared for
    /// sysdig compatibility, never present yet).
    pub applies_to: &'static str,
    /// One-line description.
    pub description: &'static str,
    pub(crate) field: Field,
    pub(crate) kinds: u8,
}

impl FieldInfo {
    /// Is the field's value (part of) the name the decoder gives an fd or a path argument: the
    /// file's path, a socket's addresses? Such names are learnt from the calls that open,
    /// accept, connect, duplicate and close fds and change directory (see
    /// [`Filter::tests_fd_names`](crate::Filter::tests_fd_names)).
    pub fn reads_fd_names(&self) -> bool {
        self.field.of_socket()
            || matches!(
                self.field,
                Field::FdName
                    | Field::FdDirectory
                    | Field::FdFilename
                    | Field::EvtArgs
                    | Field::EvtArgName
                    | Field::EvtArgPath
                    | Field::EvtArgOldpath
                    | Field::EvtArgNewpath
            )
    }

    /// The field's value for event `row`, formatted as filters compare it (`None` when the event
    /// does not have the field). Numbers print in decimal (ns for durations and times).
    pub fn value(&self, batch: &EventBatch, row: usize, ctx: &EvalContext) -> Option<String> {
        if self.ty == FieldType::String {
            let mut s = Scratch::new();
            let b = self.field.string(batch, row, ctx, Some(&mut s))?;
            Some(String::from_utf8_lossy(b).into_owned())
        } else if self.ty == FieldType::Bool {
            self.field.boolean(batch, row).map(|b| b.to_string())
        } else if self.field == Field::FdPort {
            let n = sock(batch, row)?;
            Some(match n.peer {
                Some(p) => format!("{},{}", n.local.port, p.port),
                None => n.local.port.to_string(),
            })
        } else if self.field == Field::EvtDatetime {
            self.field.num(batch, row, ctx).map(helpers::rfc3339)
        } else {
            self.field.num(batch, row, ctx).map(|n| n.to_string())
        }
    }
}

macro_rules! info {
    ($name:literal, $field:ident, $ty:ident, $kinds:expr, $applies:literal, $desc:literal) => {
        FieldInfo {
            name: $name,
            ty: FieldType::$ty,
            applies_to: $applies,
            description: $desc,
            field: Field::$field,
            kinds: $kinds,
        }
    };
}

static FIELDS: [FieldInfo; 111] = [
    info!("evt.type", EvtType, String, K_VALID, "all", "operation, as events print it: the syscall name (openat, write: syscalls only), block_ and the block op (block_write, block_flush, ...) or proc_ and the process op (proc_fork, proc_exec, proc_exit)"),
    info!("evt.category", EvtCategory, String, K_VALID, "all", "class of the operation: read, write, file-meta, net, wait, memory, process, sync, other (syscalls); block; proc"),
    info!("evt.kind", EvtKind, String, K_VALID, "all", "what produced the event: syscall, block or proc"),
    info!("evt.latency", EvtLatency, Duration, K_SYS | K_BLK, "syscall, block", "syscall entry to return, or block issue to completion"),
    info!("evt.res", EvtRes, String, K_SYS, "syscall", "result: SUCCESS, or the errno name of a failed syscall (ENOENT; E<n> for numbers without a name)"),
    info!("evt.rawres", EvtRawres, Number, K_SYS, "syscall", "raw return value (negative errno on failure); errno names are accepted as -errno"),
    info!("evt.failed", EvtFailed, Bool, K_SYS, "syscall", "true when the syscall returned an error (-4095..-1)"),
    info!("evt.is_io", EvtIsIo, Bool, K_SYS, "syscall", "true for syscalls that move data (read, write, sendto, splice, ...)"),
    info!("evt.is_io_read", EvtIsIoRead, Bool, K_SYS, "syscall", "true for syscalls that read data"),
    info!("evt.is_io_write", EvtIsIoWrite, Bool, K_SYS, "syscall", "true for syscalls that write data"),
    info!("evt.buflen", EvtBuflen, Size, K_SYS | K_BLK, "syscall, block", "bytes requested (the count argument); for block events the request size"),
    info!("evt.time", EvtTime, Timestamp, K_ALL, "all", "start time, wall clock: ns since the Unix epoch; compares with ns or a date and time (2026-11-22T22:30:13Z, 2026-11-22T23:30:13.5+01:00; UTC without a zone)"),
    info!("evt.datetime", EvtDatetime, Timestamp, K_ALL, "all", "evt.time shown as an RFC 3339 date and time in UTC (2026-11-22T22:30:13.000000500Z); compares like evt.time"),
    info!("evt.reltime", EvtReltime, Duration, K_ALL, "all", "start time relative to the start of the trace"),
    info!("evt.cpu", EvtCpu, Number, K_ALL, "all", "the CPU the event ended on (syscall return, block completion, process event); 0 in traces recorded before it was"),
    info!("evt.args", EvtArgs, String, K_VALID, "all", "the arguments as 'latscope events' prints them (fd=3(<file>/etc/hosts) bytes=4096 off=0; dev=vda(254:0) sector=... for block requests)"),
    info!("evt.arg.fd", EvtArgFd, Number, K_SYS, "syscall", "the fd argument (absent when the syscall takes none)"),
    info!("evt.arg.size", EvtArgSize, Size, K_SYS, "syscall", "the byte count argument (read, write, pread64, sendto, ...; readv and writev: the iovecs' total)"),
    info!("evt.arg.name", EvtArgName, String, K_SYS, "syscall", "the (first) path argument, made absolute (open, openat, stat, execve, ...); same as evt.arg.path"),
    info!("evt.arg.path", EvtArgPath, String, K_SYS, "syscall", "the (first) path argument, made absolute (mkdir, unlink, chdir, ...); same as evt.arg.name"),
    info!("evt.arg.oldpath", EvtArgOldpath, String, K_SYS, "syscall", "the first path of two-path calls (rename, link, symlink), made absolute"),
    info!("evt.arg.newpath", EvtArgNewpath, String, K_SYS, "syscall", "the second path of two-path calls (rename, link, symlink), made absolute"),
    info!("evt.arg.flags", EvtArgFlags, String, K_SYS, "syscall", "the flags argument as printed, named as strace names it (O_WRONLY|O_CREAT, F_SETLK, FUTEX_WAIT_PRIVATE, MAP_PRIVATE|MAP_ANONYMOUS)"),
    info!("evt.arg.mode", EvtArgMode, String, K_SYS, "syscall", "the mode argument as printed (0644, PROT_READ|PROT_WRITE; absent where the line leaves it out: open without O_CREAT)"),
    info!("evt.arg.offset", EvtArgOffset, Size, K_SYS, "syscall", "the file offset (pread64, pwrite64, lseek, ...; read and write: the file position); same as evt.arg.pos"),
    info!("evt.arg.pos", EvtArgPos, Size, K_SYS, "syscall", "the file position or offset argument; same as evt.arg.offset"),
    info!("evt.arg.whence", EvtArgWhence, String, K_SYS, "syscall", "lseek's whence: SEEK_SET, SEEK_CUR, SEEK_END, SEEK_DATA, SEEK_HOLE"),
    info!("evt.arg.dirfd", EvtArgDirfd, Number, K_SYS, "syscall", "the directory fd of *at calls (AT_FDCWD is -100 and may be written so)"),
    info!("evt.arg.res", EvtArgRes, String, K_SYS, "syscall", "the result as printed: the return value, or the errno name of a failure (ENOENT)"),
    info!("proc.name", ProcName, String, K_ALL, "all", "command name (comm, at most 15 bytes; longer values given to =, != and in are cut to 15 bytes)"),
    info!("proc.pid", ProcPid, Number, K_ALL, "all", "process id (thread group id)"),
    info!("proc.ppid", ProcPpid, Number, K_ALL, "all", "parent process id (from the process table; absent when unknown)"),
    info!("proc.exe", ProcExe, String, K_ALL, "all", "executable path (from the process table; absent when unknown)"),
    info!("proc.cmdline", ProcCmdline, String, K_ALL, "all", "command name and arguments (bash -c ls; from the start snapshot and execs; absent when unknown)"),
    info!("proc.args", ProcArgs, String, K_ALL, "all", "arguments, argv[1..] joined by spaces (-c ls; empty without any; absent when unknown)"),
    info!("thread.tid", ThreadTid, Number, K_ALL, "all", "thread id"),
    info!("user.uid", UserUid, Number, K_ALL, "all", "user id"),
    info!("user.name", UserName, String, K_ALL, "all", "user name (from the trace header; absent when unknown)"),
    info!("fd.num", FdNum, Number, K_SYS, "syscall", "file descriptor argument (absent when the syscall takes none); for a call that creates one (open, socket, accept, ...) and failed, its result (the negative errno), as in sysdig"),
    info!("fd.type", FdType, String, K_SYS, "syscall", "type of the fd: file, directory, ipv4, ipv6, unix, pipe, event, signalfd, eventpoll, inotify, timerfd, memfd, chardev, blockdev, netlink, socket, anon, unknown"),
    info!("fd.name", FdName, String, K_SYS, "syscall", "path of the file behind the fd, or the path argument (absent when empty)"),
    info!("fd.directory", FdDirectory, String, K_SYS, "syscall", "directory part of fd.name (/a/b for /a/b/c)"),
    info!("fd.filename", FdFilename, String, K_SYS, "syscall", "file name part of fd.name (c for /a/b/c)"),
    info!("fd.sip", FdSip, String, K_SYS, "syscall", "server IP address of an IPv4/IPv6 socket (the accepting or listening end; 10.0.0.1, ::1)"),
    info!("fd.sport", FdSport, Number, K_SYS, "syscall", "server port of an IPv4/IPv6 socket"),
    info!("fd.cip", FdCip, String, K_SYS, "syscall", "client IP address of an IPv4/IPv6 socket (the connecting end; absent without a peer)"),
    info!("fd.cport", FdCport, Number, K_SYS, "syscall", "client port of an IPv4/IPv6 socket (absent without a peer)"),
    info!("fd.port", FdPort, Number, K_SYS, "syscall", "either port of an IPv4/IPv6 socket: fd.port = 80 matches either end, != neither"),
    info!("fd.lip", FdLip, String, K_SYS, "syscall", "local IP address of an IPv4/IPv6 socket (this process's end)"),
    info!("fd.rip", FdRip, String, K_SYS, "syscall", "remote IP address of an IPv4/IPv6 socket (the peer; absent without one)"),
    info!("fd.lport", FdLport, Number, K_SYS, "syscall", "local port of an IPv4/IPv6 socket"),
    info!("fd.rport", FdRport, Number, K_SYS, "syscall", "remote port of an IPv4/IPv6 socket (absent without a peer)"),
    info!("fd.l4proto", FdL4proto, String, K_SYS, "syscall", "protocol of a socket: tcp, udp, udplite, sctp, mptcp, icmp, icmpv6, raw (IPv4/IPv6, named by its addresses), unix"),
    info!("container.id", ContainerId, String, K_ALL, "all", "the container's short id (12 hex digits, as docker ps shows it; a full 64-digit id compares as its short id); 'host' outside containers; absent for cgroups the trace does not know"),
    info!("blk.dev", BlkDev, String, K_BLK, "block", "device as major:minor (8:0)"),
    info!("blk.disk", BlkDisk, String, K_BLK, "block", "device name from the trace header (vda, nvme0n1p1; absent when unknown)"),
    info!("blk.op", BlkOp, String, K_BLK, "block", "request operation: read, write, flush, discard, secure_erase, write_zeroes, other"),
    info!("blk.sector", BlkSector, Number, K_BLK, "block", "first sector of the request"),
    info!("blk.bytes", BlkBytes, Size, K_BLK, "block", "request size"),
    info!("blk.latency", BlkLatency, Duration, K_BLK, "block", "issue to completion"),
    info!("blk.qtime", BlkQtime, Duration, K_BLK, "block", "time queued before issue (insert to issue)"),
    info!("evt.num", EvtNum, Number, K_ALL, "all", "the event's number in the trace or session, from 1"),
    info!("evt.rawtime", EvtRawtime, Timestamp, K_ALL, "all", "same as evt.time: ns since the Unix epoch"),
    info!("evt.dir", EvtDir, String, K_ALL, "all", "direction as sysdig writes it: '<', latscope records each call once, at its return"),
    info!("evt.latency.ns", EvtLatencyNs, Number, K_SYS | K_BLK, "syscall, block", "evt.latency in ns, a plain number"),
    info!("evt.latency.s", EvtLatencyS, Number, K_SYS | K_BLK, "syscall, block", "evt.latency in whole seconds"),
    info!("evt.latency.human", EvtLatencyHuman, String, K_SYS | K_BLK, "syscall, block", "evt.latency as printed (1.25ms)"),
    info!("evt.is_wait", EvtIsWait, Bool, K_SYS, "syscall", "true for syscalls that wait (poll, epoll_wait, nanosleep, futex wait, ...)"),
    info!("evt.source", EvtSource, String, K_VALID, "all", "the event source: syscall (sysdig's name for kernel events)"),
    info!("evt.arg", EvtArgN, String, K_VALID, "all", "evt.arg[N]: the Nth argument (from 0) as evt.args prints it, without its name"),
    info!("evt.rawarg", EvtRawarg, Number, K_SYS, "syscall", "evt.rawarg.NAME: an argument's raw value: fd, size, offset, pos, dirfd, flags, mode, res (numbers); name, path, oldpath, newpath (strings)"),
    info!("proc.aname", ProcAname, String, K_ALL, "all", "proc.aname[N]: the command name of the Nth ancestor (0: the process, 1: its parent); without [N], any ancestor"),
    info!("proc.apid", ProcApid, Number, K_ALL, "all", "proc.apid[N]: the pid of the Nth ancestor (0: the process, 1: its parent); without [N], any ancestor"),
    info!("proc.pname", ProcPname, String, K_ALL, "all", "the parent's command name (from the process table; absent when unknown)"),
    info!("proc.pcmdline", ProcPcmdline, String, K_ALL, "all", "the parent's proc.cmdline (absent when unknown)"),
    info!("proc.pexe", ProcPexe, String, K_ALL, "all", "the parent's executable path (absent when unknown)"),
    info!("proc.exepath", ProcExepath, String, K_ALL, "all", "same as proc.exe: the executable's full path"),
    info!("fd.typechar", FdTypechar, String, K_SYS, "syscall", "fd type as one character: f file, d directory, 4 ipv4, 6 ipv6, u unix, p pipe, e event, s signalfd, l eventpoll, i inotify, t timerfd, n netlink, o other"),
    info!("fd.ip", FdIp, String, K_SYS, "syscall", "either IP address of an IPv4/IPv6 socket: fd.ip = 10.0.0.1 matches either end, != neither; =, != and in only"),
    info!("fd.net", FdNet, String, K_SYS, "syscall", "either end of an IPv4/IPv6 socket in a network: fd.net = 10.0.0.0/8; =, != and in only"),
    info!("fd.snet", FdSnet, String, K_SYS, "syscall", "the server's end in a network (fd.snet = 10.0.0.0/8)"),
    info!("fd.cnet", FdCnet, String, K_SYS, "syscall", "the client's end in a network (absent without a peer)"),
    info!("fd.connected", FdConnected, Bool, K_SYS, "syscall", "true for an IPv4/IPv6 socket with a peer"),
    info!("fd.named", FdNamed, Bool, K_SYS, "syscall", "whether the call's fd has a name (fd.name): false for an fd whose opening the recording never saw and /proc did not name (views show it as <file>); absent for calls without an fd"),
    info!("fs.path.name", FsPathName, String, K_SYS, "syscall", "the path of a file system call, made absolute (same as evt.arg.path)"),
    info!("fs.path.nameraw", FsPathNameraw, String, K_SYS, "syscall", "same as fs.path.name (latscope records paths made absolute)"),
    info!("fs.path.source", FsPathSource, String, K_SYS, "syscall", "the source path of rename, link, symlink (same as evt.arg.oldpath)"),
    info!("fs.path.sourceraw", FsPathSourceraw, String, K_SYS, "syscall", "same as fs.path.source"),
    info!("fs.path.target", FsPathTarget, String, K_SYS, "syscall", "the target path of rename, link, symlink (same as evt.arg.newpath)"),
    info!("fs.path.targetraw", FsPathTargetraw, String, K_SYS, "syscall", "same as fs.path.target"),
    info!("container.full_id", ContainerFullId, String, K_ALL, "all", "the container's full id (64 hex digits); 'host' outside containers"),
    info!("container.name", ContainerName, String, K_ALL, "all", "the container's name from the runtime's state (docker, podman, containerd, CRI-O); 'host' outside containers; absent when unknown"),
    info!("container.type", ContainerType, String, K_ALL, "all", "the runtime, from the cgroup's name: docker, containerd, cri-o, podman, cri (a CRI runtime the cgroup does not name); 'host' outside containers"),
    info!("container.image", ContainerImage, String, K_ALL, "all", "the container's image as configured (docker.io/library/nginx:1.27; absent when unknown)"),
    info!("container.image.repository", ContainerImageRepository, String, K_ALL, "all", "the image without tag and digest (docker.io/library/nginx)"),
    info!("container.image.tag", ContainerImageTag, String, K_ALL, "all", "the image's tag (1.27; absent without one)"),
    info!("k8s.pod.name", K8sPodName, String, K_ALL, "all", "the Kubernetes pod's name (from the runtime's state or kubelet's pod log directory; absent outside pods)"),
    info!("k8s.ns.name", K8sNsName, String, K_ALL, "all", "the pod's namespace"),
    info!("k8s.pod.uid", K8sPodUid, String, K_ALL, "all", "the pod's uid (from the kubepods cgroup's name)"),
    info!("cgroup.path", CgroupPath, String, K_ALL, "all", "the task's cgroup v2 cgroup, below the cgroup2 root (/system.slice/nginx.service; absent for cgroups the trace does not know)"),
    info!("cgroup.id", CgroupId, Number, K_ALL, "all", "the task's cgroup v2 cgroup id (the directory's inode number)"),
    info!("proc.tty", ProcTty, Number, K_ALL, "all", "the controlling terminal's device number, as /proc/PID/stat's tty_nr (34816 is /dev/pts/0); 0 without one"),
    info!("user.loginuid", UserLoginuid, Number, K_ALL, "all", "the audit login uid (/proc/PID/loginuid): the user who logged in, kept across su and sudo; -1 when unset"),
    info!("group.gid", GroupGid, Number, K_ALL, "all", "the real group id"),
    info!("group.name", GroupName, String, K_ALL, "all", "the group's name (from the trace header; absent when unknown)"),
    info!("proc.vpid", ProcVpid, Number, K_ALL, "all", "the process id in the process's own pid namespace (1 for a container's first process)"),
    info!("thread.vtid", ThreadVtid, Number, K_ALL, "all", "the thread id in the thread's own pid namespace"),
    info!("evt.wait", EvtWait, String, K_SYS, "syscall", "how the call's latency counts in rankings (the idle rule, record --why): work, on_someone (a wait another thread of the recording ended), idle_timeout (its own timeout ended it), idle_outside (outside work ended it), idle_by_syscall (a blocking wait without a breakdown)"),
    info!("lock.kind", LockKind, String, K_SYS, "syscall", "the lock a call waited for (record --why): futex, futex_waitv, flock, fcntl, sem; absent without one"),
    info!("lock.addr", LockAddr, Number, K_SYS, "syscall", "the lock's address: a futex's (uaddr), a semaphore set's id; absent for file locks (their file is fd.name) and without a lock"),
    info!("lock.owner", LockOwner, Number, K_SYS, "syscall", "the thread that held the lock, where known: a PI or robust futex's owner, or the holder of a futex whose wait its timeout ended; absent when not known"),
];

/// Every field a filter can test, with its type and a one-line description (for `latscope fields`).
pub fn fields() -> &'static [FieldInfo] {
    &FIELDS
}

/// The field called `name` (exact, lower-case).
pub(crate) fn lookup(name: &str) -> Option<&'static FieldInfo> {
    FIELDS.iter().find(|f| f.name == name)
}

impl Field {
    pub(crate) fn info(self) -> &'static FieldInfo {
        &FIELDS[self as usize]
    }

    /// The field another name stands for (`proc.exepath` is `proc.exe`): the parser compiles
    /// aliases as their field, so that they get its fast paths and kernel tests.
    pub(crate) fn canonical(self) -> Field {
        match self {
            Field::EvtRawtime => Field::EvtTime,
            Field::EvtLatencyNs => Field::EvtLatency,
            Field::ProcExepath => Field::ProcExe,
            Field::FsPathName | Field::FsPathNameraw => Field::EvtArgPath,
            Field::FsPathSource | Field::FsPathSourceraw => Field::EvtArgOldpath,
            Field::FsPathTarget | Field::FsPathTargetraw => Field::EvtArgNewpath,
            f => f,
        }
    }

    /// The container, pod and cgroup-path fields: read from the entry of the event's cgroup in
    /// the context.
    pub(crate) fn of_cgroup(self) -> bool {
        matches!(
            self,
            Field::ContainerId
                | Field::ContainerFullId
                | Field::ContainerName
                | Field::ContainerType
                | Field::ContainerImage
                | Field::ContainerImageRepository
                | Field::ContainerImageTag
                | Field::K8sPodName
                | Field::K8sNsName
                | Field::K8sPodUid
                | Field::CgroupPath
        )
    }

    /// The socket fields (addresses, ports, protocol): read from the fd's name taken apart.
    pub(crate) fn of_socket(self) -> bool {
        matches!(
            self,
            Field::FdSip
                | Field::FdSport
                | Field::FdCip
                | Field::FdCport
                | Field::FdPort
                | Field::FdLip
                | Field::FdRip
                | Field::FdLport
                | Field::FdRport
                | Field::FdL4proto
        )
    }

    /// Fields that take an argument in brackets or after a dot (`proc.aname[2]`,
    /// `evt.rawarg.size`), or hold several values: evaluated by [`crate::rich`].
    pub(crate) fn is_rich(self) -> bool {
        matches!(
            self,
            Field::EvtArgN
                | Field::EvtRawarg
                | Field::ProcAname
                | Field::ProcApid
                | Field::FdIp
                | Field::FdNet
                | Field::FdSnet
                | Field::FdCnet
        )
    }
}

/// The character sysdig's `fd.typechar` gives an fd type.
pub(crate) fn type_char(t: FdType) -> &'static str {
    match t {
        FdType::File | FdType::Memfd | FdType::Chardev | FdType::Blockdev => "f",
        FdType::Directory => "d",
        FdType::Ipv4 => "4",
        FdType::Ipv6 => "6",
        FdType::Unix => "u",
        FdType::Pipe => "p",
        FdType::Event => "e",
        FdType::Signalfd => "s",
        FdType::Eventpoll => "l",
        FdType::Inotify => "i",
        FdType::Timerfd => "t",
        FdType::Netlink => "n",
        _ => "o",
    }
}

/// Names of block ops as [`BlockOp::name`] gives them, in mask-bit order.
pub(crate) const BLOCK_OP_NAMES: [&str; 7] =
    ["read", "write", "flush", "discard", "secure_erase", "write_zeroes", "other"];

/// Mask bit of a block op code (by name, so that all `Other` codes share one bit).
#[inline]
pub(crate) fn blk_op_bit(nr: u16) -> u8 {
    match BlockOp::from_u16(nr) {
        BlockOp::Read => 1,
        BlockOp::Write => 2,
        BlockOp::Flush => 4,
        BlockOp::Discard => 8,
        BlockOp::SecureErase => 16,
        BlockOp::WriteZeroes => 32,
        BlockOp::Other(_) => 64,
    }
}

/// Mask bit of a proc op code (0 when unknown).
#[inline]
pub(crate) fn proc_op_bit(nr: u16) -> u8 {
    match ProcOp::from_u16(nr) {
        Some(op) => 1 << (op as u16),
        None => 0,
    }
}

/// Category names other than the syscall classes.
pub(crate) fn category_names() -> impl Iterator<Item = &'static str> {
    use latscope_event::SysClass::*;
    [Other, Read, Write, FileMeta, Net, Wait, Memory, Process, Sync]
        .into_iter()
        .map(|c| c.name())
        .chain(["block", "proc"])
}

/// The name of the IPv4/IPv6 socket of syscall event `row`, taken apart, if it has one.
#[inline]
pub(crate) fn sock(b: &EventBatch, row: usize) -> Option<SockName<'_>> {
    if !matches!(FdType::from_u8(*b.fd_type.get(row)?), FdType::Ipv4 | FdType::Ipv6) {
        return None;
    }
    parse_sock_name(helpers::str_at(&b.path, row)?)
}

/// `v`, or `None` for 0 (a column not recorded).
#[inline]
fn nonzero(v: u32) -> Option<u32> {
    (v != 0).then_some(v)
}

#[inline]
fn kind_of(b: &EventBatch, row: usize) -> Option<u8> {
    b.kind.get(row).copied()
}

#[inline]
fn is_kind(b: &EventBatch, row: usize, k: u8) -> bool {
    kind_of(b, row) == Some(k)
}

impl Field {
    /// Numeric value (all numeric types widen to i128 so that signed and unsigned columns
    /// compare exactly).
    #[inline]
    pub(crate) fn num(self, b: &EventBatch, row: usize, ctx: &EvalContext) -> Option<i128> {
        let kind = kind_of(b, row)?;
        let sys = kind == 0;
        let blk = kind == 1;
        let v = match self {
            Field::EvtLatency if sys || blk => i128::from(*b.lat.get(row)?),
            Field::EvtRawres if sys => i128::from(*b.ret.get(row)?),
            Field::EvtBuflen if sys || blk => i128::from(*b.bytes.get(row)?),
            Field::EvtTime | Field::EvtDatetime | Field::EvtRawtime => ctx.wall(*b.ts.get(row)?),
            Field::EvtNum => ctx.event_number(row),
            Field::EvtLatencyNs if sys || blk => i128::from(*b.lat.get(row)?),
            Field::EvtLatencyS if sys || blk => i128::from(*b.lat.get(row)? / 1_000_000_000),
            Field::EvtReltime => ctx.rel(*b.ts.get(row)?),
            Field::EvtCpu => i128::from(*b.cpu.get(row)?),
            Field::ProcPid => i128::from(*b.pid.get(row)?),
            Field::ProcPpid => i128::from(ctx.ppid(*b.pid.get(row)?)?),
            Field::ThreadTid => i128::from(*b.tid.get(row)?),
            Field::UserUid => i128::from(*b.uid.get(row)?),
            Field::GroupGid => i128::from(*b.gid.get(row)?),
            Field::UserLoginuid => match *b.loginuid.get(row)? {
                u32::MAX => -1,
                u => i128::from(u),
            },
            Field::ProcTty => i128::from(*b.tty.get(row)?),
            // 0: a trace recorded before the column existed.
            Field::ProcVpid => i128::from(nonzero(*b.vpid.get(row)?)?),
            Field::ThreadVtid => i128::from(nonzero(*b.vtid.get(row)?)?),
            Field::CgroupId => i128::from(*b.cgroup.get(row)?),
            Field::LockAddr if sys && matches!(*b.lock_kind.get(row)?, 1 | 4 | 5) => i128::from(*b.lock_addr.get(row)?),
            Field::LockOwner if sys => i128::from(nonzero(*b.lock_owner.get(row)?)?),
            Field::FdNum if sys => {
                let fd = *b.fd.get(row)?;
                if fd == NO_FD {
                    // As sysdig: a call that creates an fd (open, socket, accept, ...) and
                    // failed has its result (the negative errno) as fd.num.
                    let ret = *b.ret.get(row)?;
                    if ret < 0 && syscalls::desc(*b.nr.get(row)?).has(SysDesc::RET_FD) {
                        return Some(ret.into());
                    }
                    return None;
                }
                i128::from(fd)
            }
            Field::EvtArgFd if sys => {
                if syscalls::desc(*b.nr.get(row)?).fd == NONE {
                    return None;
                }
                i128::from(*b.fd.get(row)?)
            }
            Field::EvtArgSize if sys => {
                let d = syscalls::desc(*b.nr.get(row)?);
                if d.count == NONE && !d.has(SysDesc::IOV) {
                    return None;
                }
                i128::from(*b.bytes.get(row)?)
            }
            Field::EvtArgOffset | Field::EvtArgPos if sys => {
                let d = syscalls::desc(*b.nr.get(row)?);
                let off = *b.off.get(row)?;
                if off < 0 || (d.off == NONE && !d.has(SysDesc::FILE_POS)) {
                    return None;
                }
                i128::from(off)
            }
            Field::EvtArgDirfd if sys => {
                if syscalls::desc(*b.nr.get(row)?).dirfd == NONE {
                    return None;
                }
                i128::from(*b.dirfd.get(row)?)
            }
            Field::FdSport if sys => i128::from(ctx.sock_roles(&sock(b, row)?).server.port),
            Field::FdCport if sys => i128::from(ctx.sock_roles(&sock(b, row)?).client?.port),
            // fd.port compares both ends (compile.rs); alone (exists, value) it is the local port.
            Field::FdLport | Field::FdPort if sys => i128::from(sock(b, row)?.local.port),
            Field::FdRport if sys => i128::from(sock(b, row)?.peer?.port),
            Field::BlkSector if blk => i128::from(*b.off.get(row)?),
            Field::BlkBytes if blk => i128::from(*b.bytes.get(row)?),
            Field::BlkLatency if blk => i128::from(*b.lat.get(row)?),
            Field::BlkQtime if blk => i128::from(*b.qtime.get(row)?),
            _ => return None,
        };
        Some(v)
    }

    /// Boolean value.
    #[inline]
    pub(crate) fn boolean(self, b: &EventBatch, row: usize) -> Option<bool> {
        if !is_kind(b, row, 0) {
            return None;
        }
        let nr = *b.nr.get(row)?;
        Some(match self {
            Field::EvtFailed => (-4095..0).contains(b.ret.get(row)?),
            Field::EvtIsIo => syscalls::desc(nr).has(syscalls::SysDesc::IO),
            Field::EvtIsIoRead => syscalls::desc(nr).has(syscalls::SysDesc::READ),
            Field::EvtIsIoWrite => syscalls::desc(nr).has(syscalls::SysDesc::WRITE),
            Field::EvtIsWait => syscalls::desc(nr).class == latscope_event::SysClass::Wait,
            Field::FdConnected => sock(b, row)?.peer.is_some(),
            Field::FdNamed => {
                if *b.fd.get(row)? < 0 {
                    return None;
                }
                crate::helpers::fd_name(b, row).is_some()
            }
            _ => return None,
        })
    }

    /// Does the field format its value (into a [`Scratch`]) rather than borrow it from the batch
    /// or the context? Only those get a buffer (see `string`).
    pub(crate) fn formats(self) -> bool {
        matches!(
            self,
            Field::EvtType
                | Field::EvtRes
                | Field::BlkDev
                | Field::EvtArgs
                | Field::EvtArgFlags
                | Field::EvtArgMode
                | Field::EvtArgRes
                | Field::EvtLatencyHuman
        )
    }

    /// String value; formatted values are written to `buf`, which fields that
    /// [`format`](Field::formats) need (without it they are absent).
    pub(crate) fn string<'a>(
        self,
        b: &'a EventBatch,
        row: usize,
        ctx: &'a EvalContext,
        buf: Option<&'a mut Scratch>,
    ) -> Option<&'a [u8]> {
        let kind = kind_of(b, row)?;
        let sys = kind == 0;
        let blk = kind == 1;
        let s: &'a str = match self {
            Field::EvtType => {
                let nr = *b.nr.get(row)?;
                match kind {
                    0 => match syscalls::syscall_name(nr) {
                        Some(n) => n,
                        None => {
                            let buf = buf?;
                            write!(buf, "syscall_{nr}").ok()?;
                            return Some(buf.as_bytes());
                        }
                    },
                    // As events print them: `block_write`, `proc_exec`.
                    1 => match BlockOp::from_u16(nr) {
                        BlockOp::Read => "block_read",
                        BlockOp::Write => "block_write",
                        BlockOp::Flush => "block_flush",
                        BlockOp::Discard => "block_discard",
                        BlockOp::SecureErase => "block_secure_erase",
                        BlockOp::WriteZeroes => "block_write_zeroes",
                        BlockOp::Other(_) => "block_other",
                    },
                    2 => match ProcOp::from_u16(nr)? {
                        ProcOp::Fork => "proc_fork",
                        ProcOp::Exec => "proc_exec",
                        ProcOp::Exit => "proc_exit",
                        ProcOp::Times => "proc_times",
                        ProcOp::Sample => "proc_sample",
                    },
                    _ => return None,
                }
            }
            Field::EvtCategory => match kind {
                0 => syscalls::desc(*b.nr.get(row)?).class.name(),
                1 => "block",
                2 => "proc",
                _ => return None,
            },
            Field::EvtKind => latscope_event::EventKind::from_u8(kind)?.name(),
            Field::EvtRes if sys => {
                let buf = buf?;
                match helpers::write_result(buf, *b.ret.get(row)?) {
                    Some(s) => s,
                    None => return Some(buf.as_bytes()),
                }
            }
            Field::ProcName => return bytes_at(&b.comm, row),
            Field::ProcExe => ctx.exe(*b.pid.get(row)?)?,
            Field::UserName => ctx.user(*b.uid.get(row)?)?,
            Field::GroupName => ctx.group(*b.gid.get(row)?)?,
            Field::FdType if sys => {
                let (t, fd) = (*b.fd_type.get(row)?, *b.fd.get(row)?);
                if t == 0 && fd == NO_FD {
                    return None;
                }
                FdType::from_u8(t).name()
            }
            Field::FdName if sys => return bytes_at(&b.path, row).filter(|p| !p.is_empty()),
            Field::FdDirectory if sys => helpers::split_path(helpers::str_at(&b.path, row)?).0?,
            Field::FdFilename if sys => helpers::split_path(helpers::str_at(&b.path, row)?).1?,
            Field::BlkDev if blk => {
                let (ma, mi) = latscope_event::dev_major_minor(*b.dev.get(row)?);
                let buf = buf?;
                write!(buf, "{ma}:{mi}").ok()?;
                return Some(buf.as_bytes());
            }
            Field::BlkDisk if blk => ctx.disk(*b.dev.get(row)?)?,
            Field::BlkOp if blk => BlockOp::from_u16(*b.nr.get(row)?).name(),
            // The argument, socket, command-line and container fields.
            _ => return self.string_ext(b, row, ctx, buf),
        };
        Some(s.as_bytes())
    }

    /// [`Field::string`] of the argument, socket and command-line fields, out of line so that the
    /// common fields stay cheap to test.
    #[inline(never)]
    fn string_ext<'a>(
        self,
        b: &'a EventBatch,
        row: usize,
        ctx: &'a EvalContext,
        buf: Option<&'a mut Scratch>,
    ) -> Option<&'a [u8]> {
        let kind = kind_of(b, row)?;
        let sys = kind == 0;
        let blk = kind == 1;
        let s: &'a str = match self {
            Field::ProcCmdline => ctx.cmdline(*b.pid.get(row)?)?,
            Field::ProcArgs => ctx.args(*b.pid.get(row)?)?,
            Field::ProcPname => ctx.comm(ctx.ppid(*b.pid.get(row)?)?)?,
            Field::ProcPcmdline => ctx.cmdline(ctx.ppid(*b.pid.get(row)?)?)?,
            Field::ProcPexe => ctx.exe(ctx.ppid(*b.pid.get(row)?)?)?,
            f if f.of_cgroup() => {
                let c = ctx.cgroup(*b.cgroup.get(row)?)?;
                let host = c.container_id.is_empty();
                let v = match self {
                    Field::ContainerId if host => "host",
                    Field::ContainerId => c.short_id(),
                    Field::ContainerFullId if host => "host",
                    Field::ContainerFullId => &c.container_id,
                    Field::ContainerName if host => "host",
                    Field::ContainerName => &c.container_name,
                    Field::ContainerType if host => "host",
                    Field::ContainerType => &c.runtime,
                    Field::ContainerImage => &c.image,
                    Field::ContainerImageRepository => c.image_repository(),
                    Field::ContainerImageTag => c.image_tag(),
                    Field::K8sPodName => &c.pod_name,
                    Field::K8sNsName => &c.pod_namespace,
                    Field::K8sPodUid => &c.pod_uid,
                    _ => &c.path,
                };
                return (!v.is_empty()).then_some(v.as_bytes());
            }
            Field::EvtDir if kind < 3 => "<",
            Field::EvtWait if sys => latscope_event::waits::wait_kind(b, row).name(),
            Field::LockKind if sys => match latscope_event::LockKind::from_u8(*b.lock_kind.get(row)?) {
                latscope_event::LockKind::None => return None,
                k => k.name(),
            },
            Field::EvtSource if kind < 3 => "syscall",
            Field::EvtLatencyHuman if sys || blk => {
                let buf = buf?;
                latscope_event::units::write_ns(buf, *b.lat.get(row)?).ok()?;
                return Some(buf.as_bytes());
            }
            Field::FdTypechar if sys => {
                let (t, fd) = (*b.fd_type.get(row)?, *b.fd.get(row)?);
                if t == 0 && fd == NO_FD {
                    return None;
                }
                type_char(FdType::from_u8(t))
            }
            Field::EvtArgs if kind < 3 => {
                let buf = buf?;
                let disk = if blk { b.dev.get(row).and_then(|&d| ctx.disk(d)) } else { None };
                latscope_event::args::write_args(buf, b, row, disk).ok()?;
                return Some(buf.as_bytes());
            }
            Field::EvtArgName | Field::EvtArgPath | Field::EvtArgOldpath | Field::EvtArgNewpath if sys => {
                let d = syscalls::desc(*b.nr.get(row)?);
                let (has, col) = match self {
                    Field::EvtArgName | Field::EvtArgPath => (d.path != NONE, &b.path),
                    Field::EvtArgOldpath => (d.path != NONE && d.path2 != NONE, &b.path),
                    _ => (d.path2 != NONE, &b.path2),
                };
                if !has {
                    return None;
                }
                return bytes_at(col, row).filter(|p| !p.is_empty());
            }
            Field::EvtArgFlags if sys => {
                let buf = buf?;
                latscope_event::args::write_flags(buf, b, row)?.ok()?;
                return Some(buf.as_bytes());
            }
            Field::EvtArgMode if sys => {
                let buf = buf?;
                latscope_event::args::write_mode(buf, b, row)?.ok()?;
                return Some(buf.as_bytes());
            }
            Field::EvtArgWhence if sys => {
                let nr = *b.nr.get(row)?;
                if syscalls::syscall_name(nr) != Some("lseek") {
                    return None;
                }
                latscope_event::args::whence_name(*b.flags.get(row)?)
            }
            Field::EvtArgRes if sys => {
                let ret = *b.ret.get(row)?;
                let buf = buf?;
                match helpers::write_result(buf, ret) {
                    Some("SUCCESS") => {
                        write!(buf, "{ret}").ok()?;
                        return Some(buf.as_bytes());
                    }
                    Some(name) => name,
                    None => return Some(buf.as_bytes()),
                }
            }
            Field::FdSip if sys => ctx.sock_roles(&sock(b, row)?).server.ip,
            Field::FdCip if sys => ctx.sock_roles(&sock(b, row)?).client?.ip,
            Field::FdLip if sys => sock(b, row)?.local.ip,
            Field::FdRip if sys => sock(b, row)?.peer?.ip,
            Field::FdL4proto if sys => match FdType::from_u8(*b.fd_type.get(row)?) {
                FdType::Unix => "unix",
                _ => sock(b, row)?.proto,
            },
            _ => return None,
        };
        Some(s.as_bytes())
    }

    /// Whether the event has the field.
    pub(crate) fn exists(self, b: &EventBatch, row: usize, ctx: &EvalContext) -> bool {
        match self.info().ty {
            FieldType::String if self.formats() => self.string(b, row, ctx, Some(&mut Scratch::new())).is_some(),
            FieldType::String => self.string(b, row, ctx, None).is_some(),
            FieldType::Bool => self.boolean(b, row).is_some(),
            _ => self.num(b, row, ctx).is_some(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_is_consistent() {
        for (i, f) in FIELDS.iter().enumerate() {
            assert_eq!(f.field as usize, i, "{}", f.name);
            assert_eq!(lookup(f.name).map(|x| x.field), Some(f.field));
            assert!(!f.description.is_empty());
            let expected = match f.kinds {
                K_ALL | K_VALID => "all",
                K_SYS => "syscall",
                K_BLK => "block",
                0 => "none",
                _ => "syscall, block",
            };
            assert_eq!(f.applies_to, expected, "{}", f.name);
        }
        for (i, n) in BLOCK_OP_NAMES.iter().enumerate().take(6) {
            let op = BlockOp::from_name(n).unwrap();
            assert_eq!(blk_op_bit(op.code()), 1 << i);
        }
        assert_eq!(blk_op_bit(77), 64);
        assert_eq!(BlockOp::from_u16(77).name(), BLOCK_OP_NAMES[6]);
        assert_eq!((proc_op_bit(0), proc_op_bit(2), proc_op_bit(3), proc_op_bit(4), proc_op_bit(5)), (1, 4, 8, 16, 0));
    }

    /// Fields that do not format their value read the same without a buffer.
    #[test]
    fn only_formatting_fields_need_a_buffer() {
        let (b, _, ctx) = crate::fuzz_support::sample();
        for f in FIELDS.iter().filter(|f| f.ty == FieldType::String && !f.field.formats()) {
            for row in 0..=b.len() {
                let mut s = Scratch::new();
                let with = f.field.string(b, row, ctx, Some(&mut s)).map(<[u8]>::to_vec);
                assert_eq!(f.field.string(b, row, ctx, None).map(<[u8]>::to_vec), with, "{} row {row}", f.name);
                assert!(s.as_bytes().is_empty(), "{} formats into the buffer", f.name);
            }
        }
    }
}
