#!/usr/bin/env python3
"""Build the initramfs that boots a Debian kernel unpacked with dpkg -x: busybox, /init, and the
modules (with what they depend on) that mount the host's root over virtio 9p with an overlay.

usage: mkinitramfs.py UNPACKED_DEB_DIR BUSYBOX INIT_SCRIPT OUT.cpio
"""
import lzma
import os
import stat
import sys

WANTED = ["virtio_pci", "9pnet_virtio", "9p", "overlay"]


def modules(root):
    """name -> path of every module of the unpacked package (names with '_', as depends= has)."""
    (kver,) = os.listdir(os.path.join(root, "lib/modules"))
    out = {}
    for d, _, files in os.walk(os.path.join(root, "lib/modules", kver, "kernel")):
        for f in files:
            if f.endswith((".ko", ".ko.xz")):
                out[f.split(".ko")[0].replace("-", "_")] = os.path.join(d, f)
    return kver, out


def read_ko(path):
    data = open(path, "rb").read()
    return lzma.decompress(data) if path.endswith(".xz") else data


def depends(ko):
    i = ko.find(b"\0depends=")
    if i < 0:
        return []
    v = ko[i + 9 : ko.index(b"\0", i + 1)].decode()
    return [d.replace("-", "_") for d in v.split(",") if d]


def closure(mods):
    """Modules to load, each after what it depends on; built-in ones are not in `mods`."""
    order, seen = [], set()

    def visit(n):
        if n in seen or n not in mods:
            return
        seen.add(n)
        for d in depends(read_ko(mods[n])):
            visit(d)
        order.append(n)

    for w in WANTED:
        visit(w)
    return order


def cpio(entries, out):
    """newc archive of (name, mode, data) entries."""
    with open(out, "wb") as f:
        for ino, (name, mode, data) in enumerate(entries + [("TRAILER!!!", 0, b"")], 1):
            nb = name.encode() + b"\0"
            hdr = "070701" + "".join(
                "%08X" % v for v in (ino, mode, 0, 0, 1, 0, len(data), 0, 0, 0, 0, len(nb), 0)
            )
            f.write(hdr.encode() + nb)
            f.write(b"\0" * ((4 - (110 + len(nb)) % 4) % 4))
            f.write(data)
            f.write(b"\0" * ((4 - len(data) % 4) % 4))


def main():
    root, busybox, init, out = sys.argv[1:5]
    kver, mods = modules(root)
    order = closure(mods)
    d, f, x = stat.S_IFDIR | 0o755, stat.S_IFREG | 0o644, stat.S_IFREG | 0o755
    entries = [(p, d, b"") for p in ("bin", "dev", "proc", "sys", "mnt", "modules")]
    entries.append(("bin/busybox", x, open(busybox, "rb").read()))
    entries.append(("bin/sh", stat.S_IFLNK | 0o777, b"busybox"))
    entries.append(("init", x, open(init, "rb").read()))
    for i, n in enumerate(order):
        entries.append(("modules/%02d-%s.ko" % (i, n), f, read_ko(mods[n])))
    cpio(entries, out)
    print("%s: %s" % (kver, " ".join(order)))


main()
