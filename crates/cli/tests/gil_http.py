"""A GIL-bound CPython HTTP server and its load generator, for `record --why` (why_waits.rs).

server PORTFILE REQUESTS LOOP_US: a ThreadingHTTPServer (HTTP/1.1 keep-alive, one thread per
connection) whose handler runs a pure-Python loop of about LOOP_US us of CPU (holding the GIL; its
iterations calibrated at the start, so that on any CPU it outlasts the interpreter's 5 ms switch
interval as much and the GIL changes hands inside the loops) and then sleeps 1 ms (a backend call, the GIL released); it exits after REQUESTS requests and prints
`key value` lines: its threads' ids (`main`, `handler0`..), the loops' summed wall time and
thread CPU time (`loop_wall_ns`, `loop_cpu_ns`: their difference is the time the loops did not
run, waiting for the GIL or for a CPU) and the handlers' summed wall time and CPU time
(`handler_ns`, `handler_cpu_ns`). PORTFILE.windows gets a line per request, of its loop: the
handler's thread id, the loop's start and end (CLOCK_MONOTONIC), its CPU time and its time
waiting for a CPU (/proc/thread-self/schedstat), in ns; the rest of the loop's wall time it
waited for the GIL.

client PORTFILE THREADS REQUESTS: THREADS threads, each on its own keep-alive connection,
send REQUESTS requests in all; prints the summed request latency (`client_ns`).
"""

import ctypes
import http.client
import http.server
import os
import sys
import threading
import time


LIBC = ctypes.PyDLL(None)  # PyDLL: calls keep the GIL (an os.read would drop and retake it)
LOCAL = threading.local()


def runq_ns():
    """The calling thread's time waiting for a CPU so far (schedstat's second field), read
    without releasing the GIL, so that no wait for it or for a CPU falls outside the reading."""
    if not hasattr(LOCAL, "fd"):
        LOCAL.fd = os.open("/proc/thread-self/schedstat", os.O_RDONLY)
        LOCAL.buf = ctypes.create_string_buffer(128)
    n = LIBC.pread(LOCAL.fd, LOCAL.buf, 127, ctypes.c_long(0))
    return int(LOCAL.buf.raw[:n].split()[1])


def iterations(us):
    """The iterations of the handler's loop that take about `us` us of CPU here."""
    n = 200000
    c0 = time.thread_time_ns()
    x = 0
    for i in range(n):
        x += i
    spent = max(time.thread_time_ns() - c0, 1)
    return max(1, n * us * 1000 // spent)


def server(portfile, requests, loop_us):
    loop = iterations(loop_us)
    lock = threading.Lock()
    windows = []
    stats = {"n": 0, "loop_wall": 0, "loop_cpu": 0, "handler": 0, "handler_cpu": 0, "tids": []}

    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        # Headers and body go in two writes: without TCP_NODELAY the body waits for the
        # client's delayed ACK (40 ms), and the server would be idle, not GIL-bound.
        disable_nagle_algorithm = True

        def log_message(self, *args):
            pass

        def do_GET(self):
            q0 = runq_ns()
            t0 = time.monotonic_ns()
            c0 = time.thread_time_ns()
            x = 0
            for i in range(loop):
                x += i
            c1 = time.thread_time_ns()
            t1 = time.monotonic_ns()
            q1 = runq_ns()
            time.sleep(0.001)
            body = b"%d\n" % x
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
            t2 = time.monotonic_ns()
            c2 = time.thread_time_ns()
            with lock:
                stats["n"] += 1
                stats["loop_wall"] += t1 - t0
                stats["loop_cpu"] += c1 - c0
                stats["handler"] += t2 - t0
                stats["handler_cpu"] += c2 - c0
                tid = threading.get_native_id()
                windows.append("%d %d %d %d %d\n" % (tid, t0, t1, c1 - c0, q1 - q0))
                if tid not in stats["tids"]:
                    stats["tids"].append(tid)
                if stats["n"] == requests:
                    # (From a thread of its own: shutdown waits for serve_forever to return.)
                    threading.Thread(target=srv.shutdown).start()

    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    tmp = portfile + ".tmp"
    with open(tmp, "w") as f:
        f.write(str(srv.server_address[1]))
    os.rename(tmp, portfile)
    srv.serve_forever()
    srv.server_close()
    with open(portfile + ".windows", "w") as f:
        f.writelines(windows)
    print("main", threading.get_native_id())
    for i, tid in enumerate(stats["tids"]):
        print("handler%d" % i, tid)
    print("handlers", len(stats["tids"]))
    print("requests", stats["n"])
    print("loop_wall_ns", stats["loop_wall"])
    print("loop_cpu_ns", stats["loop_cpu"])
    print("handler_ns", stats["handler"])
    print("handler_cpu_ns", stats["handler_cpu"])


def client(portfile, threads, requests):
    deadline = time.monotonic() + 30
    while not os.path.exists(portfile):
        if time.monotonic() > deadline:
            sys.exit("no server")
        time.sleep(0.01)
    port = int(open(portfile).read())
    total = [0]
    lock = threading.Lock()

    def run(n):
        conn = http.client.HTTPConnection("127.0.0.1", port)
        for _ in range(n):
            t0 = time.perf_counter_ns()
            conn.request("GET", "/")
            r = conn.getresponse()
            r.read()
            assert r.status == 200
            with lock:
                total[0] += time.perf_counter_ns() - t0
        conn.close()

    ts = [threading.Thread(target=run, args=(requests // threads + (i < requests % threads),)) for i in range(threads)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    print("client_ns", total[0])


if __name__ == "__main__":
    if sys.argv[1] == "server":
        server(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]))
    else:
        client(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]))
