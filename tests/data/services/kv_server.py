"""A tiny service for the harness's tests: an HTTP server that keeps a durable count of
its starts, and a file it never fsyncs, in its data folder.

    python3 kv_server.py PORT DATA

At start it reads ``starts`` (made durable: written, fsynced, renamed, its folder
fsynced), adds one and writes it back the same way, and writes ``scratch-PID`` without
any fsync. It prints one line saying what it found (its pid, the starts before it, the
scratch files left), then serves ``GET /health`` (200) and ``GET /seen?life=N``, which
prints ``seen pid=PID life=N`` and answers its pid: the log tells which of its runs
answered which life of the agent.
"""

import os
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

port, data = int(sys.argv[1]), Path(sys.argv[2])


def write_durably(path: Path, text: str) -> None:
    partial = path.with_name(path.name + ".partial")
    fd = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    os.write(fd, text.encode())
    os.fsync(fd)
    os.close(fd)
    os.rename(partial, path)
    folder = os.open(path.parent, os.O_RDONLY)
    os.fsync(folder)
    os.close(folder)


starts = int((data / "starts").read_text()) if (data / "starts").exists() else 0
scratch = sorted(p.name for p in data.glob("scratch-*"))
write_durably(data / "starts", str(starts + 1))
(data / f"scratch-{os.getpid()}").write_text("never fsynced")
print(
    f"started pid={os.getpid()} starts_before={starts} scratch_left={','.join(scratch)}", flush=True
)


class Handler(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        if self.path.startswith("/seen"):
            print(f"seen pid={os.getpid()} {self.path.partition('?')[2]}", flush=True)
        elif self.path != "/health":
            self.send_error(404)
            return
        body = str(os.getpid()).encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


ThreadingHTTPServer(("127.0.0.1", port), Handler).serve_forever()
