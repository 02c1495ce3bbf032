"""A small HTTP service for the agent's tests: each GET /work?n=N builds N records, keeps the
last 64 results (a heap that turns over but stays bounded) and answers with a checksum.
Prints {"port": P} once it listens on 127.0.0.1 (an ephemeral port)."""
import hashlib
import http.server
import json
import sys

kept = []


class Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        n = 200
        if "?n=" in self.path:
            n = max(1, min(5000, int(self.path.split("?n=")[1])))
        doc = [{"id": i, "name": "x" * (i % 97), "tags": [str(j) for j in range(i % 7)]} for i in range(n)]
        text = json.dumps(doc)
        kept.append(text)
        del kept[:-64]
        body = json.dumps({"ok": True, "n": n, "sha": hashlib.sha256(text.encode()).hexdigest()[:16]}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


server = http.server.HTTPServer(("127.0.0.1", 0), Handler)
print(json.dumps({"port": server.server_address[1]}), flush=True)
server.serve_forever()
