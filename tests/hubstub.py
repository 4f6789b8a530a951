"""A Hugging Face Hub stand-in on 127.0.0.1 for the model-lock tests: the real huggingface_hub
client talks to it through HF_ENDPOINT.

It answers the way the Hub does (headers as huggingface_hub/file_download.py::get_hf_file_metadata
and utils/_http.py::hf_raise_for_status read them):
- GET /api/models/{repo}[/revision/{rev}]: JSON with `id`, `sha`, `siblings` [{rfilename}],
  `safetensors` {parameters: {dtype: n}, total}, `gated`;
- HEAD/GET /{repo}/resolve/{rev}/{file}: X-Repo-Commit, ETag (git blob sha1 for small files),
  Content-Length, Accept-Ranges; an LFS file answers 302 with Location on a second origin (the
  "CDN", another port) and X-Linked-Etag (sha256) / X-Linked-Size; Range requests get 206 +
  Content-Range;
- errors with X-Error-Code: RepoNotFound (401), GatedRepo (401 without a token, 403 with a
  token that has no access), RevisionNotFound (404), EntryNotFound (404, with X-Repo-Commit).
Every request is recorded (method, path, Range, Authorization, bytes sent).
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import unquote, urlparse


@dataclass
class Repo:
    files: dict[str, bytes]
    lfs: set[str] = field(default_factory=set)
    gated: bool = False
    tokens: set[str] = field(default_factory=set)  # tokens with access to a gated repo
    safetensors: dict | None = None  # the Hub's own count {parameters: {dtype: n}, total}
    sha: str = ""

    def __post_init__(self) -> None:
        if not self.sha:
            h = hashlib.sha1()
            for name in sorted(self.files):
                h.update(name.encode() + b"\0" + self.files[name])
            self.sha = h.hexdigest()


@dataclass
class Hit:
    method: str
    path: str
    range: str | None
    auth: str | None
    sent: int


def git_sha1(data: bytes) -> str:
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


class HubStub:
    def __init__(self) -> None:
        self.repos: dict[str, Repo] = {}
        self.hits: list[Hit] = []
        self.blobs: dict[str, bytes] = {}
        self._servers: list[ThreadingHTTPServer] = []
        self.hub = self._serve(self._hub_handler)
        self.cdn = self._serve(self._cdn_handler)

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.hub.server_address[1]}"

    @property
    def cdn_origin(self) -> str:
        return f"http://127.0.0.1:{self.cdn.server_address[1]}"

    def add(self, repo_id: str, repo: Repo) -> Repo:
        self.repos[repo_id] = repo
        for name in repo.lfs:
            self.blobs[hashlib.sha256(repo.files[name]).hexdigest()] = repo.files[name]
        return repo

    def close(self) -> None:
        for s in self._servers:
            s.shutdown()
            s.server_close()

    def bytes_sent(self, suffix: str) -> int:
        return sum(h.sent for h in self.hits if h.path.split("?")[0].endswith(suffix))

    # ---------------------------------------------------------------- plumbing

    def _serve(self, make) -> ThreadingHTTPServer:
        server = ThreadingHTTPServer(("127.0.0.1", 0), make())
        server.daemon_threads = True
        threading.Thread(target=server.serve_forever, daemon=True).start()
        self._servers.append(server)
        return server

    def _base(self):
        stub = self

        class Base(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args) -> None:  # quiet
                pass

            def reply(self, status: int, body: bytes = b"", headers: dict | None = None,
                      head: bool = False) -> None:
                self.send_response(status)
                for k, v in (headers or {}).items():
                    self.send_header(k, str(v))
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                if not head:
                    self.wfile.write(body)
                stub.hits.append(Hit(self.command, self.path, self.headers.get("Range"),
                                     self.headers.get("Authorization"), 0 if head else len(body)))

            def error(self, status: int, code: str, message: str, head: bool = False, extra: dict | None = None):
                body = json.dumps({"error": message}).encode()
                self.reply(status, body, {"Content-Type": "application/json", "X-Error-Code": code,
                                          "X-Error-Message": message, **(extra or {})}, head)

            def ranged(self, data: bytes, headers: dict, head: bool) -> None:
                rng = self.headers.get("Range")
                headers = {"Accept-Ranges": "bytes", **headers}
                m = re.fullmatch(r"bytes=(\d+)-(\d*)", rng or "")
                if not m:
                    self.reply(200, data, headers, head)
                    return
                start = int(m.group(1))
                end = min(int(m.group(2)) if m.group(2) else len(data) - 1, len(data) - 1)
                if start >= len(data):
                    self.reply(416, b"", {"Content-Range": f"bytes */{len(data)}"}, head)
                    return
                headers["Content-Range"] = f"bytes {start}-{end}/{len(data)}"
                self.reply(206, data[start:end + 1], headers, head)

        return Base

    # ---------------------------------------------------------------- the Hub

    def _hub_handler(self):
        stub = self
        Base = self._base()

        class Hub(Base):
            def do_GET(self) -> None:
                self.route(head=False)

            def do_HEAD(self) -> None:
                self.route(head=True)

            def token(self) -> str | None:
                auth = self.headers.get("Authorization") or ""
                return auth[7:] if auth.startswith("Bearer ") else None

            def route(self, head: bool) -> None:
                path = unquote(urlparse(self.path).path)
                m = re.fullmatch(r"/api/models/([^/]+/[^/]+?)(?:/revision/(.+))?", path)
                if m:
                    return self.info(m.group(1), m.group(2), head)
                m = re.fullmatch(r"/([^/]+/[^/]+)/resolve/([^/]+)/(.+)", path)
                if m:
                    return self.resolve(m.group(1), m.group(2), m.group(3), head)
                self.error(404, "NotFound", "Not Found", head)

            def repo(self, repo_id: str, head: bool) -> Repo | None:
                repo = stub.repos.get(repo_id)
                if repo is None:
                    self.error(401, "RepoNotFound", "Repository not found", head)
                return repo

            def info(self, repo_id: str, rev: str | None, head: bool) -> None:
                repo = self.repo(repo_id, head)
                if repo is None:
                    return
                if rev not in (None, "main", repo.sha):
                    return self.error(404, "RevisionNotFound", "Invalid rev id: " + str(rev), head)
                doc = {"_id": "0" * 24, "id": repo_id, "modelId": repo_id, "author": repo_id.split("/")[0],
                       "sha": repo.sha, "private": False, "disabled": False, "gated": "auto" if repo.gated else False,
                       "downloads": 0, "likes": 0, "tags": [], "library_name": "transformers",
                       "createdAt": "2025-01-01T00:00:00.000Z", "lastModified": "2025-01-01T00:00:00.000Z",
                       "siblings": [{"rfilename": f} for f in sorted(repo.files)]}
                if repo.safetensors is not None:
                    doc["safetensors"] = repo.safetensors
                self.reply(200, json.dumps(doc).encode(), {"Content-Type": "application/json"}, head)

            def resolve(self, repo_id: str, rev: str, filename: str, head: bool) -> None:
                repo = self.repo(repo_id, head)
                if repo is None:
                    return
                if repo.gated and self.token() not in repo.tokens:
                    status = 403 if self.token() else 401
                    return self.error(status, "GatedRepo", f"Access to model {repo_id} is restricted. You must "
                                      "have access to it and be authenticated to access it. Please log in.", head)
                if rev not in ("main", repo.sha):
                    return self.error(404, "RevisionNotFound", "Invalid rev id: " + rev, head)
                commit = {"X-Repo-Commit": repo.sha}
                data = repo.files.get(filename)
                if data is None:
                    return self.error(404, "EntryNotFound", f"{filename} does not exist on \"{rev}\"", head,
                                      commit)
                if filename in repo.lfs:
                    sha256 = hashlib.sha256(data).hexdigest()
                    loc = f"{stub.cdn_origin}/cdn/{sha256}?response-content-disposition=attachment"
                    return self.reply(302, b"Found. Redirecting", {
                        **commit, "Location": loc, "X-Linked-Etag": f'"{sha256}"', "X-Linked-Size": len(data),
                        "ETag": f'W/"{git_sha1(data)[:20]}"', "Content-Type": "text/plain; charset=utf-8"}, head)
                self.ranged(data, {**commit, "ETag": f'"{git_sha1(data)}"',
                                   "Content-Type": "application/octet-stream"}, head)

        return Hub

    # ---------------------------------------------------------------- the CDN (LFS blobs)

    def _cdn_handler(self):
        stub = self
        Base = self._base()

        class Cdn(Base):
            def do_GET(self) -> None:
                self.blob(head=False)

            def do_HEAD(self) -> None:
                self.blob(head=True)

            def blob(self, head: bool) -> None:
                m = re.fullmatch(r"/cdn/([0-9a-f]{64})", urlparse(self.path).path)
                data = stub.blobs.get(m.group(1)) if m else None
                if data is None:
                    return self.reply(404, b"NoSuchKey", {}, head)
                self.ranged(data, {"ETag": f'"{m.group(1)}"', "Content-Type": "binary/octet-stream"}, head)

        return Cdn
