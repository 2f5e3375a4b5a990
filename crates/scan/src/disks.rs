//! Naming the block devices of `perf script` input, which knows only `major,minor`.

use latscope_event::{dev_major_minor, BlockDevice, EventBatch, TraceHeader};
use std::collections::BTreeSet;

/// Names the devices of `batch` from this machine's `/sys/dev/block`, so that `blk.disk = sda`
/// and per-disk views work on perf input. Returns a note for the user (the names are this
/// machine's, which is right only if the capture was made here), or `None` when nothing was named.
pub(crate) fn name_local(header: &mut TraceHeader, batch: &EventBatch) -> Option<String> {
    let devs: BTreeSet<u32> = batch.dev.iter().copied().collect();
    let mut named = Vec::new();
    for dev in devs {
        let (ma, mi) = dev_major_minor(dev);
        let Some(name) = local_name(ma, mi) else { continue };
        named.push(format!("{ma}:{mi}={name}"));
        header.block_devices.push(BlockDevice { dev, name, ..Default::default() });
    }
    (!named.is_empty()).then(|| {
        format!(
            "device names from this machine's /sys/dev/block ({}): right only if the capture was made here",
            named.join(", ")
        )
    })
}

/// `DEVNAME` of `/sys/dev/block/MAJ:MIN/uevent`.
fn local_name(major: u32, minor: u32) -> Option<String> {
    let uevent = std::fs::read_to_string(format!("/sys/dev/block/{major}:{minor}/uevent")).ok()?;
    uevent.lines().find_map(|l| l.strip_prefix("DEVNAME=")).map(str::to_string)
}

#[cfg(test)]
mod tests {
    use super::*;
    use latscope_event::Event;

    #[test]
    fn devices_present_here_get_their_names_and_a_note_says_where_from() {
        // Whatever disk this machine has: find one in /sys/dev/block and use its number.
        let Some(entry) = std::fs::read_dir("/sys/dev/block").ok().and_then(|mut d| d.next()).and_then(|e| e.ok())
        else {
            eprintln!("skipped: no /sys/dev/block on this machine");
            return;
        };
        let name = entry.file_name().into_string().unwrap();
        let (ma, mi) = name.split_once(':').unwrap();
        let dev = (ma.parse::<u32>().unwrap() << 20) | mi.parse::<u32>().unwrap();
        let mut b = EventBatch::default();
        b.push(&Event { kind: 1, dev, ..Default::default() });
        b.push(&Event { kind: 1, dev: (4095 << 20) | 77, ..Default::default() });
        let mut h = TraceHeader::default();
        let note = name_local(&mut h, &b).expect("a note");
        assert!(note.contains("/sys/dev/block"), "{note}");
        assert_eq!(h.block_devices.len(), 1, "the device that does not exist here stays unnamed");
        assert_eq!(h.block_devices[0].dev, dev);
        assert!(!h.block_devices[0].name.is_empty());
    }
}
