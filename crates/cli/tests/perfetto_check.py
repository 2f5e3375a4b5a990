#!/usr/bin/env python3
"""Checks Perfetto traces written by `latscope export --perfetto` with Perfetto's own schema.

usage: perfetto_check.py FILE... > report.json

Each file is parsed with the official `perfetto_trace_pb2` (PyPI package `perfetto`) and read
as trace_processor reads it: interned data per sequence (cleared by SEQ_INCREMENTAL_STATE_CLEARED,
needed by SEQ_NEEDS_INCREMENTAL_STATE), track descriptors before the events on them, events
sorted by timestamp (ties in file order, as its sorter keeps them), slices opened by
TYPE_SLICE_BEGIN and closed by the next TYPE_SLICE_END on the same track (innermost first), flows
bound to the slice an event begins, ends or is (flow_ids begin or continue a flow,
terminating_flow_ids end one). Every problem found is listed in "errors"; the slices (with their
track's thread and process), flows and counters are printed as JSON for the caller to compare.
"""

import json
import sys

from perfetto.protos.perfetto.trace import perfetto_trace_pb2 as pb

CLEARED = 1
NEEDS = 2
MONOTONIC = 3


def check(path, out, errors, uid):
    trace = pb.Trace()
    with open(path, "rb") as f:
        trace.ParseFromString(f.read())
    tracks = {}
    seqs = {}
    events = []  # (ts, order, uuid, type, name, cat, args, flows, terminating)
    counters = []
    primary = None
    for order, p in enumerate(trace.packet):
        seq = p.trusted_packet_sequence_id
        if seq == 0:
            errors.append(f"{path}: packet {order} has no trusted_packet_sequence_id")
        st = seqs.setdefault(seq, {"valid": False, "names": {}, "cats": {}, "args": {}, "strs": {}, "clock": None})
        if p.sequence_flags & CLEARED:
            st.update(valid=True, names={}, cats={}, args={}, strs={}, clock=None)
        if p.HasField("trace_packet_defaults"):
            st["clock"] = p.trace_packet_defaults.timestamp_clock_id
        if p.HasField("clock_snapshot"):
            primary = p.clock_snapshot.primary_trace_clock
            if not any(c.clock_id == MONOTONIC for c in p.clock_snapshot.clocks):
                errors.append(f"{path}: the clock snapshot has no CLOCK_MONOTONIC")
        if p.HasField("interned_data"):
            d = p.interned_data
            for e in d.event_names:
                st["names"][e.iid] = e.name
            for e in d.event_categories:
                st["cats"][e.iid] = e.name
            for e in d.debug_annotation_names:
                st["args"][e.iid] = e.name
            for e in d.debug_annotation_string_values:
                st["strs"][e.iid] = e.str.decode("utf-8", "replace")
        if p.HasField("track_descriptor"):
            t = p.track_descriptor
            if t.uuid in tracks and tracks[t.uuid]["parent"] != t.parent_uuid:
                errors.append(f"{path}: track {t.uuid} declared again with another parent")
            info = {"uuid": t.uuid, "parent": t.parent_uuid, "name": t.name, "kind": "named"}
            if t.HasField("process"):
                info.update(kind="process", pid=t.process.pid, name=t.process.process_name,
                            labels=list(t.process.process_labels), cmdline=list(t.process.cmdline))
            elif t.HasField("thread"):
                info.update(kind="thread", pid=t.thread.pid, tid=t.thread.tid, name=t.thread.thread_name)
            elif t.HasField("counter"):
                info.update(kind="counter", unit=t.counter.unit)
            if t.parent_uuid and t.parent_uuid not in tracks:
                errors.append(f"{path}: track {t.uuid} declared before its parent {t.parent_uuid}")
            if not info["name"]:
                errors.append(f"{path}: track {t.uuid} ({info['kind']}) has no name")
            tracks[t.uuid] = info
        if p.HasField("track_event"):
            e = p.track_event
            if not p.HasField("timestamp"):
                errors.append(f"{path}: track event in packet {order} has no timestamp")
            clock = p.timestamp_clock_id if p.HasField("timestamp_clock_id") else st["clock"]
            if clock != MONOTONIC:
                errors.append(f"{path}: packet {order} has timestamps of clock {clock}, not CLOCK_MONOTONIC")
            if (p.sequence_flags & NEEDS) and not st["valid"]:
                errors.append(f"{path}: packet {order} needs incremental state the sequence never cleared")
            if e.track_uuid not in tracks:
                errors.append(f"{path}: event in packet {order} on track {e.track_uuid}, not declared before")
            name = None
            if e.HasField("name_iid"):
                name = st["names"].get(e.name_iid)
                if name is None:
                    errors.append(f"{path}: packet {order}: name iid {e.name_iid} not interned")
            elif e.HasField("name"):
                name = e.name
            cat = ",".join([st["cats"].get(i, f"?{i}") for i in e.category_iids] + list(e.categories))
            args = {}
            for a in e.debug_annotations:
                key = st["args"].get(a.name_iid) if a.HasField("name_iid") else a.name
                if key is None:
                    errors.append(f"{path}: packet {order}: argument name iid {a.name_iid} not interned")
                    continue
                if a.HasField("string_value_iid"):
                    v = st["strs"].get(a.string_value_iid)
                    if v is None:
                        errors.append(f"{path}: packet {order}: string iid {a.string_value_iid} not interned")
                elif a.HasField("string_value"):
                    v = a.string_value
                elif a.HasField("uint_value"):
                    v = a.uint_value
                elif a.HasField("int_value"):
                    v = a.int_value
                else:
                    v = None
                args[key] = v
            if e.type == pb.TrackEvent.TYPE_COUNTER:
                counters.append({"track": e.track_uuid, "ts": p.timestamp, "value": e.double_counter_value})
                continue
            events.append((p.timestamp, order, e.track_uuid, e.type, name, cat, args,
                           list(e.flow_ids), list(e.terminating_flow_ids)))
    if primary != MONOTONIC:
        errors.append(f"{path}: the trace's clock is {primary}, not CLOCK_MONOTONIC")

    # As trace_processor: by timestamp, ties in file order; a stack of open slices per track.
    events.sort(key=lambda e: (e[0], e[1]))
    stacks = {}
    slices = []
    active = {}  # flow id -> slice index
    flows = []
    for ts, order, uuid, typ, name, cat, args, fl, term in events:
        st = stacks.setdefault(uuid, [])
        if typ == pb.TrackEvent.TYPE_SLICE_BEGIN:
            sid = len(slices)
            slices.append({"id": uid + sid, "track": uuid, "ts": ts, "dur": None, "name": name, "cat": cat,
                           "depth": len(st), "args": args, "parent": slices[st[-1]]["id"] if st else None})
            st.append(sid)
        elif typ == pb.TrackEvent.TYPE_SLICE_END:
            if not st:
                errors.append(f"{path}: slice end at {ts} on track {uuid} with no slice open")
                continue
            sid = st.pop()
            slices[sid]["dur"] = ts - slices[sid]["ts"]
        elif typ == pb.TrackEvent.TYPE_INSTANT:
            sid = len(slices)
            slices.append({"id": uid + sid, "track": uuid, "ts": ts, "dur": 0, "name": name, "cat": cat,
                           "depth": len(st), "args": args, "parent": slices[st[-1]]["id"] if st else None})
        else:
            errors.append(f"{path}: event of type {typ} at {ts}")
            continue
        for f in fl:
            if f in active:
                flows.append({"id": f, "out": uid + active[f], "in": uid + sid})
            active[f] = sid
        for f in term:
            if f not in active:
                errors.append(f"{path}: flow {f} ends at a slice at {ts} without starting anywhere before")
                continue
            flows.append({"id": f, "out": uid + active.pop(f), "in": uid + sid})
    for uuid, st in stacks.items():
        for sid in st:
            errors.append(f"{path}: slice {slices[sid]['name']} at {slices[sid]['ts']} on track {uuid} never ends")
    ended = {f["id"] for f in flows}
    for f, sid in active.items():
        if f not in ended:
            errors.append(f"{path}: flow {f} starts at slice {slices[sid]['name']} at {slices[sid]['ts']} and ends nowhere")
    for f in flows:
        if f["out"] == f["in"]:
            errors.append(f"{path}: flow {f['id']} goes from a slice to itself")

    # Each slice's thread and process (a lane of a thread belongs to its thread).
    def owner(uuid):
        seen = set()
        while uuid and uuid not in seen:
            seen.add(uuid)
            t = tracks.get(uuid)
            if t is None:
                return None
            if t["kind"] in ("thread", "process"):
                return t
            uuid = t["parent"]
        return None

    for s in slices:
        t = owner(s["track"])
        if t is not None and t["kind"] == "thread":
            s["tid"], s["pid"], s["thread"] = t["tid"], t["pid"], t["name"]
            proc = owner(t["parent"]) if t["parent"] else None
            if proc is None or proc["kind"] != "process":
                errors.append(f"{path}: thread {t['tid']} has no process track")
            elif proc["pid"] != t["pid"]:
                errors.append(f"{path}: thread {t['tid']} of pid {t['pid']} is under process {proc['pid']}")
        elif t is not None:
            s["pid"], s["process"] = t["pid"], t["name"]
        s["track_name"] = tracks.get(s["track"], {}).get("name")
    out["files"].append({"path": path, "packets": len(trace.packet)})
    out["slices"].extend(slices)
    out["flows"].extend(flows)
    out["counters"].extend({**c, "name": tracks[c["track"]]["name"]} for c in counters if c["track"] in tracks)
    out["tracks"].extend(tracks.values())
    return len(slices)


def main():
    out = {"files": [], "slices": [], "flows": [], "counters": [], "tracks": [], "errors": []}
    uid = 0
    for path in sys.argv[1:]:
        # Slice ids unique over all files (each file is a trace of its own).
        uid += check(path, out, out["errors"], uid) + 1
    # One string: json.dump would write it to the pipe in millions of small pieces.
    sys.stdout.write(json.dumps(out))


if __name__ == "__main__":
    main()
