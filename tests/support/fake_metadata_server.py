#!/usr/bin/env python3
"""A stand-in for the EC2 (IMDSv2) and GCP metadata servers, for the spot-notice tests.

Serves on 127.0.0.1, prints "PORT <n>" on its first line once listening, and exits by itself
after --lifetime-s seconds (so a crashed test never leaves it behind).
  PUT /latest/api/token  (needs X-aws-ec2-metadata-token-ttl-seconds) -> a token
  GET /latest/meta-data/spot/instance-action (needs X-aws-ec2-metadata-token = that token)
      -> 404 until the notice file exists, then {"action": "terminate", "time": ...}; 401 without
      the token
  GET /computeMetadata/v1/instance/preempted (needs Metadata-Flavor: Google)
      -> FALSE until the notice file exists, then TRUE; 403 without the header
Every request is appended to --log as "METHOD PATH STATUS".
"""
import argparse
import http.server
import os
import sys
import threading

TOKEN = "lathe-test-token"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--notice-file", required=True, help="a notice is given once this file exists")
    ap.add_argument("--log", required=True)
    ap.add_argument("--lifetime-s", type=float, default=60)
    args = ap.parse_args()

    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def reply(self, status, body=b""):
            self.send_response(status)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
            with open(args.log, "a") as f:
                f.write(f"{self.command} {self.path} {status}\n")

        def do_PUT(self):
            length = int(self.headers.get("Content-Length", "0"))
            if length:
                self.rfile.read(length)
            if self.path != "/latest/api/token":
                return self.reply(404)
            if not self.headers.get("X-aws-ec2-metadata-token-ttl-seconds"):
                return self.reply(400)
            self.reply(200, TOKEN.encode())

        def do_GET(self):
            notice = os.path.exists(args.notice_file)
            if self.path == "/latest/meta-data/spot/instance-action":
                if self.headers.get("X-aws-ec2-metadata-token") != TOKEN:
                    return self.reply(401)
                if not notice:
                    return self.reply(404, b"Not Found")
                return self.reply(200, b'{"action": "terminate", "time": "2026-12-03T18:00:00Z"}')
            if self.path == "/computeMetadata/v1/instance/preempted":
                if self.headers.get("Metadata-Flavor") != "Google":
                    return self.reply(403)
                return self.reply(200, b"TRUE" if notice else b"FALSE")
            self.reply(404)

        def log_message(self, *a):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    print(f"PORT {server.server_address[1]}", flush=True)
    threading.Timer(args.lifetime_s, server.shutdown).start()
    server.serve_forever()
    return 0


if __name__ == "__main__":
    sys.exit(main())
