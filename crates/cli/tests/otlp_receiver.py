"""An OTLP/HTTP metrics receiver for the agent's tests, on OpenTelemetry's own schema (the PyPI
package opentelemetry-proto): every POST body is decoded as an ExportMetricsServiceRequest and
written to OUT as one JSON line (protobuf's JSON mapping: 64-bit integers are strings).

usage: otlp_receiver.py OUT PORTFILE [fail]
  Listens on a free loopback port, written to PORTFILE once listening. With `fail`, every
  request is answered 500 (a collector in trouble) after being decoded.
"""

import http.server
import json
import os
import sys

from google.protobuf.json_format import MessageToDict
from opentelemetry.proto.collector.metrics.v1 import metrics_service_pb2 as svc

OUT, PORTFILE = sys.argv[1], sys.argv[2]
FAIL = len(sys.argv) > 3 and sys.argv[3] == "fail"


class Handler(http.server.BaseHTTPRequestHandler):
    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        req = svc.ExportMetricsServiceRequest()
        req.ParseFromString(body)  # raises on a malformed body: the test sees no line
        line = {
            "path": self.path,
            "content_type": self.headers.get("Content-Type"),
            "headers": {k.lower(): v for k, v in self.headers.items()},
            "request": MessageToDict(req, preserving_proto_field_name=True),
        }
        with open(OUT, "a") as f:
            f.write(json.dumps(line) + "\n")
        if FAIL:
            self.send_response(500)
            self.send_header("Content-Type", "text/plain")
            msg = b"collector overloaded"
        else:
            self.send_response(200)
            self.send_header("Content-Type", "application/x-protobuf")
            msg = svc.ExportMetricsServiceResponse().SerializeToString()
        self.send_header("Content-Length", str(len(msg)))
        self.end_headers()
        self.wfile.write(msg)

    def log_message(self, *args):
        pass


server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
with open(PORTFILE + ".tmp", "w") as f:
    f.write(str(server.server_address[1]))
os.rename(PORTFILE + ".tmp", PORTFILE)
server.serve_forever()
