//! The user-space side of the stack maps (`record --why --stacks`, see `bpf/why.bpf.h`): after
//! each read of the ring buffer the probe drains both maps (`BPF_MAP_LOOKUP_AND_DELETE_BATCH`)
//! into a [`StackStore`], so that the kernel's maps only hold the stacks new since the last
//! read and no one fills them for good. Frames are kept by key (a 64-bit hash of them), which
//! names the same frames for the whole recording, in a bounded cache of two generations: the
//! stack table (crates/live) reads each key's frames once and keeps its own id for it.

use libbpf_rs::MapCore;
use rustc_hash::FxHashMap;
use std::os::fd::{AsFd, AsRawFd};
use std::sync::Arc;

/// Frames by key, the recent generation and the one before (dropped when the recent one is
/// full).
#[derive(Debug, Default)]
struct Generations {
    now: FxHashMap<u64, Arc<[u64]>>,
    before: FxHashMap<u64, Arc<[u64]>>,
}

/// Keys kept per generation and kind.
const GENERATION: usize = 1 << 15;

impl Generations {
    fn get(&self, k: u64) -> Option<Arc<[u64]>> {
        self.now.get(&k).or_else(|| self.before.get(&k)).cloned()
    }
    fn put(&mut self, k: u64, v: Arc<[u64]>) {
        if self.now.len() >= GENERATION {
            self.before = std::mem::take(&mut self.now);
        }
        self.now.insert(k, v);
    }
}

/// A user stack frame as the file mapped there when its process exited or exec'd: device,
/// inode (0: none found) and byte offset in the file.
pub type FileFrame = (u32, u64, u64);

/// The frames of a `struct ls_ufiles` value (inodes, offsets, devices of [`crate::STACK_DEPTH`]
/// frames each); `None` for a value of another size.
pub(crate) fn file_frames(v: &[u8]) -> Option<Arc<[FileFrame]>> {
    let depth = crate::STACK_DEPTH;
    if v.len() < depth * 20 {
        return None;
    }
    let u64_at = |i: usize| u64::from_ne_bytes(v[i * 8..i * 8 + 8].try_into().expect("8 bytes"));
    let u32_at = |i: usize| u32::from_ne_bytes(v[i * 4..i * 4 + 4].try_into().expect("4 bytes"));
    Some((0..depth).map(|i| (u32_at(2 * depth * 2 + i), u64_at(i), u64_at(depth + i))).collect())
}

/// The stacks drained from the kernel's maps, by kind and key.
#[derive(Debug, Default)]
pub(crate) struct StackStore {
    kernel: Generations,
    user: Generations,
    /// User stacks named as files by the kernel (`why_ufiles`), by key: the two generations of
    /// [`Generations`], of their own.
    files_now: FxHashMap<u64, Arc<[FileFrame]>>,
    files_before: FxHashMap<u64, Arc<[FileFrame]>>,
    /// Entries drained so far (both kinds).
    pub(crate) drained: u64,
}

impl StackStore {
    /// The frames (innermost first, no trailing zeros) of stack `key`.
    pub(crate) fn get(&self, user: bool, key: u64) -> Option<Arc<[u64]>> {
        if user {
            self.user.get(key)
        } else {
            self.kernel.get(key)
        }
    }

    /// The files of user stack `key`, when the kernel named them (its process exited or exec'd
    /// before the stack was drained).
    pub(crate) fn files(&self, key: u64) -> Option<Arc<[FileFrame]>> {
        self.files_now.get(&key).or_else(|| self.files_before.get(&key)).cloned()
    }

    /// Move every entry of the user stack files map (`struct ls_ufiles`: inodes, offsets,
    /// devices) into the store.
    pub(crate) fn drain_files(&mut self, map: &libbpf_rs::MapMut) {
        let depth = crate::STACK_DEPTH;
        let vsize = map.value_size() as usize;
        if vsize < depth * 20 {
            return;
        }
        let (now, before) = (&mut self.files_now, &mut self.files_before);
        let mut put = |k: &[u8], v: &[u8]| {
            let key = u64::from_ne_bytes(k.try_into().expect("8-byte keys"));
            let Some(frames) = file_frames(v) else { return };
            if now.len() >= GENERATION {
                *before = std::mem::take(now);
            }
            now.insert(key, frames);
        };
        if !drain_batched(map, vsize, &mut put) {
            let keys: Vec<Vec<u8>> = map.keys().take(crate::STACK_ENTRIES as usize).collect();
            for k in keys {
                if let Ok(Some(v)) = map.lookup(&k, libbpf_rs::MapFlags::ANY) {
                    put(&k, &v);
                }
                let _ = map.delete(&k);
            }
        }
    }

    /// Move every entry of `map` (keys u64, values of frames) into the store: in batches where
    /// the kernel has them, else one key at a time.
    pub(crate) fn drain(&mut self, map: &libbpf_rs::MapMut, user: bool) {
        let into = if user { &mut self.user } else { &mut self.kernel };
        let vsize = map.value_size() as usize;
        let mut put = |k: &[u8], v: &[u8]| {
            let key = u64::from_ne_bytes(k.try_into().expect("8-byte keys"));
            let frames: Arc<[u64]> = v
                .chunks_exact(8)
                .map(|c| u64::from_ne_bytes(c.try_into().expect("8 bytes")))
                .take_while(|&a| a != 0)
                .collect();
            into.put(key, frames);
        };
        let mut n = 0u64;
        if !drain_batched(map, vsize, &mut |k, v| {
            put(k, v);
            n += 1;
        }) {
            // Kernels without batch operations on hash maps: key by key (the next key is taken
            // before the current one is deleted).
            let keys: Vec<Vec<u8>> = map.keys().take(crate::STACK_ENTRIES as usize * 2).collect();
            for k in keys {
                if let Ok(Some(v)) = map.lookup(&k, libbpf_rs::MapFlags::ANY) {
                    put(&k, &v);
                    n += 1;
                }
                let _ = map.delete(&k);
            }
        }
        self.drained += n;
    }
}

/// `BPF_MAP_LOOKUP_AND_DELETE_BATCH` until the map is empty; `false` when the kernel has no
/// batch operations for the map (nothing was taken then).
fn drain_batched(map: &libbpf_rs::MapMut, vsize: usize, f: &mut dyn FnMut(&[u8], &[u8])) -> bool {
    let fd = map.as_fd().as_raw_fd();
    let mut count_max: u32 = 256;
    let mut token = 0u64;
    let mut first = true;
    // A bound on the rounds, whatever the kernel says: the map holds STACK_ENTRIES at most.
    for _ in 0..(crate::STACK_ENTRIES * 2) {
        let mut keys = vec![0u64; count_max as usize];
        let mut vals = vec![0u8; count_max as usize * vsize];
        let mut out = 0u64;
        let mut count = count_max;
        let opts = libbpf_rs::libbpf_sys::bpf_map_batch_opts {
            sz: std::mem::size_of::<libbpf_rs::libbpf_sys::bpf_map_batch_opts>() as _,
            ..Default::default()
        };
        // SAFETY: keys and vals have room for `count` entries of this map (u64 keys, `vsize`
        // values); the batch tokens are u64s (the hash map's token is a u32 bucket index).
        let ret = unsafe {
            libbpf_rs::libbpf_sys::bpf_map_lookup_and_delete_batch(
                fd,
                if first { std::ptr::null_mut() } else { &mut token as *mut u64 as *mut _ },
                &mut out as *mut u64 as *mut _,
                keys.as_mut_ptr() as *mut _,
                vals.as_mut_ptr() as *mut _,
                &mut count,
                &opts,
            )
        };
        let errno = std::io::Error::last_os_error().raw_os_error().unwrap_or(0);
        for i in 0..(count.min(count_max) as usize) {
            f(&keys[i].to_ne_bytes(), &vals[i * vsize..(i + 1) * vsize]);
        }
        if ret != 0 {
            match errno {
                libc::ENOENT => return true,
                // A bucket holds more entries than asked for: ask for more.
                libc::ENOSPC if count_max < 1 << 14 => {
                    count_max *= 2;
                    continue;
                }
                // No batch operations here (EINVAL, ENOTSUPP 524).
                _ if first && count == 0 => return false,
                _ => return true,
            }
        }
        first = false;
        token = out;
    }
    true
}
