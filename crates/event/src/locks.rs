//! Locks by identity: the lock a call waited for (`record --why`'s `lock_*` columns), as the views
//! and the exports name it: a futex by its address in its process, a file lock by its file and
//! range, a SysV semaphore by its set and number.

use crate::{EventBatch, EventKind, LockKind};
use serde_json::{json, Value};

/// A lock, as `top --by lock` groups waits.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum LockKey {
    /// A futex: its process and address (the 8-byte word: glibc's condition variable waits on
    /// either of two adjacent words, one condition all the same).
    Futex {
        /// The process.
        pid: u32,
        /// The address.
        addr: u64,
    },
    /// A file lock: the file (device, inode) and, for fcntl, the range.
    File {
        /// Whether fcntl (record locks) rather than flock.
        fcntl: bool,
        /// The file's device.
        dev: u32,
        /// Its inode.
        ino: u64,
        /// The range's start (fcntl).
        start: i64,
        /// Its length (0: to the end of the file).
        len: i64,
    },
    /// A SysV semaphore: its set and number.
    Sem {
        /// The set's id.
        id: u64,
        /// The semaphore's number in it.
        num: i64,
    },
}

/// The lock call `i` of `b` waited for (`None`: none recorded).
pub fn lock_key(b: &EventBatch, i: usize) -> Option<LockKey> {
    if b.kind[i] != EventKind::Syscall as u8 {
        return None;
    }
    Some(match LockKind::from_u8(b.lock_kind[i]) {
        LockKind::None => return None,
        LockKind::Futex | LockKind::FutexWaitv => LockKey::Futex { pid: b.pid[i], addr: b.lock_addr[i] & !7 },
        LockKind::Flock => LockKey::File { fcntl: false, dev: b.dev[i], ino: b.ino[i], start: 0, len: 0 },
        LockKind::Fcntl => {
            LockKey::File { fcntl: true, dev: b.dev[i], ino: b.ino[i], start: b.lock_start[i], len: b.lock_len[i] }
        }
        LockKind::Sem => LockKey::Sem { id: b.lock_addr[i], num: b.lock_start[i] },
    })
}

/// A futex operation's name: `FUTEX_WAIT_PRIVATE`, `FUTEX_LOCK_PI`, ... (the decoder of the
/// event lines' `op=`, [`crate::argnames::write_futex_op`]).
pub fn futex_op(op: u32) -> String {
    let mut s = String::new();
    let _ = crate::argnames::write_futex_op(&mut s, u64::from(op));
    s
}

/// The lock of call `i` as text (`None` without one): `futex 0x7f3a5c0010a8 (FUTEX_WAIT_PRIVATE)`,
/// `flock /var/lib/app.lock (LOCK_EX)`, `fcntl write lock /db bytes 0-4095 (F_SETLKW)`,
/// `semaphore set 5 #0 (-1)`.
pub fn lock_text(b: &EventBatch, i: usize) -> Option<String> {
    let file = |b: &EventBatch| {
        let p = b.path.get(i);
        if p.is_empty() {
            format!("inode {} on {}:{}", b.ino[i], b.dev[i] >> 20, b.dev[i] & 0xfffff)
        } else {
            p.to_string()
        }
    };
    Some(match lock_key(b, i)? {
        LockKey::Futex { addr, .. } => format!("futex {addr:#x} ({})", futex_op(b.lock_op[i])),
        LockKey::File { fcntl: false, .. } => {
            let op = b.lock_op[i];
            let how = if op & 2 != 0 {
                "LOCK_EX"
            } else if op & 1 != 0 {
                "LOCK_SH"
            } else {
                "LOCK_UN"
            };
            format!("flock {} ({how}{})", file(b), if op & 4 != 0 { "|LOCK_NB" } else { "" })
        }
        LockKey::File { fcntl: true, start, len, .. } => {
            let ty = match b.lock_word[i] & 0xffff {
                0 => "read lock ",
                1 => "write lock ",
                2 => "unlock ",
                _ => "",
            };
            let from_end = if b.lock_word[i] & 0x10000 != 0 { " from the end" } else { "" };
            let range = match len {
                0 => format!("bytes {start}{from_end} to the end"),
                l if l > 0 => format!("bytes {start}-{}{from_end}", start.saturating_add(l - 1)),
                l => format!("bytes {}-{}{from_end}", start.saturating_add(l), start - 1),
            };
            let cmd = match b.lock_op[i] {
                5 => "F_GETLK",
                6 => "F_SETLK",
                7 => "F_SETLKW",
                36 => "F_OFD_GETLK",
                37 => "F_OFD_SETLK",
                38 => "F_OFD_SETLKW",
                _ => "fcntl",
            };
            format!("fcntl {ty}{} {range} ({cmd})", file(b))
        }
        LockKey::Sem { id, num } => format!("semaphore set {id} #{num} ({})", b.lock_op[i] as i32),
    })
}

/// The lock of call `i` as JSON (`None` without one): its kind, address or file and range, the
/// operation, and the holder where known.
pub fn lock_json(b: &EventBatch, i: usize) -> Option<Value> {
    let key = lock_key(b, i)?;
    let kind = LockKind::from_u8(b.lock_kind[i]).name();
    let mut v = json!({"kind": kind, "text": lock_text(b, i), "op": b.lock_op[i]});
    match key {
        LockKey::Futex { addr, .. } => {
            v["addr"] = json!(format!("{addr:#x}"));
            v["word"] = json!(b.lock_word[i]);
        }
        LockKey::File { start, len, .. } => {
            v["path"] = json!(b.path.get(i));
            v["start"] = json!(start);
            v["len"] = json!(len);
        }
        LockKey::Sem { id, num } => {
            v["set"] = json!(id);
            v["num"] = json!(num);
        }
    }
    if b.lock_owner[i] != 0 {
        v["owner_tid"] = json!(b.lock_owner[i]);
    }
    Some(v)
}
