#!/usr/bin/env python3
"""Every loaded BPF program that has run: "id name run_time_ns run_cnt" per line, read with the
bpf() syscall (BPF_PROG_GET_NEXT_ID, BPF_PROG_GET_FD_BY_ID, BPF_OBJ_GET_INFO_BY_FD), for hosts
without bpftool. Offsets are those of struct bpf_prog_info (include/uapi/linux/bpf.h)."""
import ctypes
import os
import struct

libc = ctypes.CDLL(None, use_errno=True)
SYS_BPF = 321  # x86_64


def bpf(cmd, attr):
    buf = ctypes.create_string_buffer(attr, 128)
    return libc.syscall(SYS_BPF, cmd, buf, 128), buf


nid = 0
while True:
    r, b = bpf(11, struct.pack("I", nid))  # BPF_PROG_GET_NEXT_ID
    if r < 0:
        break
    nid = struct.unpack_from("I", b.raw, 4)[0]
    fd, _ = bpf(13, struct.pack("I", nid))  # BPF_PROG_GET_FD_BY_ID
    if fd < 0:
        continue
    info = ctypes.create_string_buffer(256)
    bpf(15, struct.pack("IIQ", fd, 256, ctypes.addressof(info)))  # BPF_OBJ_GET_INFO_BY_FD
    os.close(fd)
    raw = info.raw
    name = raw[64:80].split(b"\0")[0].decode(errors="replace") or "?"
    run_ns, run_cnt = struct.unpack_from("QQ", raw, 192)
    if run_cnt > 0:
        print(nid, name, run_ns, run_cnt)
