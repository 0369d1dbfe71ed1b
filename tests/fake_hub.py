"""A tiny Hugging Face hub on 127.0.0.1 for the download tests: the endpoints huggingface_hub's own
download code calls (``list_repo_refs``, ``repo_info``, ``list_repo_tree``, HEAD and GET of
``/resolve/``), answered as the hub answers them (ETag / X-Linked-Etag, X-Repo-Commit,
X-Linked-Size, ``X-Error-Code`` on a 404), so the real ``snapshot_download`` runs against it.

Faults for the tests, keyed by ``(branch, path)``: ``damage`` (how many more times the file is
served with its first byte changed, same size) and ``fail`` (files whose GET answers 503, as a
hub going down mid-way); every request is logged.
"""

from __future__ import annotations

import hashlib
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import unquote, urlsplit

#: files served as LFS files (sha256 etag), as the hub stores weights
LFS_SUFFIXES = (".safetensors", ".bin")


def git_sha1(data: bytes) -> str:
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


class FakeHub:
    """Repositories ``{repo: {branch: (commit, {path: bytes})}}`` served over HTTP."""

    def __init__(self) -> None:
        self.repos: dict[str, dict[str, tuple[str, dict[str, bytes]]]] = {}
        self.log: list[tuple[str, str]] = []
        self.damage: dict[tuple[str, str], int] = {}
        self.fail: set[tuple[str, str]] = set()
        self._server: ThreadingHTTPServer | None = None

    def add(self, repo: str, branch: str, files: dict[str, bytes]) -> str:
        commit = hashlib.sha1(f"{repo}@{branch}".encode() + b"".join(sorted(files.values()))).hexdigest()
        self.repos.setdefault(repo, {})[branch] = (commit, dict(files))
        return commit

    def gets(self, suffix: str = "") -> list[str]:
        """Paths of the file downloads (GET /resolve/) so far, ending with ``suffix``."""
        return [p for m, p in self.log if m == "GET" and "/resolve/" in p and p.endswith(suffix)]

    def start(self) -> str:
        hub = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):  # quiet
                pass

            def do_GET(self):
                hub._answer(self, head=False)

            def do_HEAD(self):
                hub._answer(self, head=True)

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()

    # -- answers
    def _branch(self, repo: str, rev: str) -> tuple[str, str, dict[str, bytes]] | None:
        """``(branch, commit, files)`` of a branch name or a commit."""
        branches = self.repos.get(repo, {})
        return next(((b, c, f) for b, (c, f) in branches.items() if rev in (b, c)), None)

    def _answer(self, req: BaseHTTPRequestHandler, head: bool) -> None:
        path = unquote(urlsplit(req.path).path)
        self.log.append(("HEAD" if head else "GET", path))
        parts = path.strip("/").split("/")
        if parts[:2] == ["api", "models"]:
            repo, rest = "/".join(parts[2:4]), parts[4:]
            if repo not in self.repos:
                return self._error(req, 404, "RepoNotFound", head)
            if rest == ["refs"]:
                branches = [
                    {"name": b, "ref": f"refs/heads/{b}", "targetCommit": c} for b, (c, _) in self.repos[repo].items()
                ]
                return self._json(req, {"branches": branches, "tags": [], "converts": []}, head)
            found = self._branch(repo, rest[1]) if len(rest) >= 2 else None
            if found is None:
                return self._error(req, 404, "RevisionNotFound", head)
            _, commit, files = found
            if rest[0] == "revision":
                siblings = [{"rfilename": p} for p in files]
                return self._json(req, {"id": repo, "sha": commit, "siblings": siblings}, head)
            if rest[0] == "tree":
                return self._json(req, [self._entry(p, d) for p, d in sorted(files.items())], head)
            return self._error(req, 404, "EntryNotFound", head)
        if len(parts) >= 5 and parts[2] == "resolve":
            repo, rev, name = "/".join(parts[:2]), parts[3], "/".join(parts[4:])
            found = self._branch(repo, rev) if repo in self.repos else None
            if found is None or name not in found[2]:
                return self._error(req, 404, "EntryNotFound" if found else "RevisionNotFound", head)
            branch, commit, files = found
            data = files[name]
            if not head and (branch, name) in self.fail:
                return self._error(req, 503, "", head)
            if not head and self.damage.get((branch, name), 0) > 0:
                self.damage[(branch, name)] -= 1
                data = bytes([data[0] ^ 0xFF]) + data[1:]
            req.send_response(200)
            req.send_header("X-Repo-Commit", commit)
            if name.endswith(LFS_SUFFIXES):
                req.send_header("X-Linked-Etag", f'"{hashlib.sha256(files[name]).hexdigest()}"')
                req.send_header("X-Linked-Size", str(len(data)))
            req.send_header("ETag", f'"{git_sha1(files[name])}"')
            req.send_header("Content-Length", str(len(data)))
            req.end_headers()
            if not head:
                req.wfile.write(data)
            return None
        return self._error(req, 404, "", head)

    @staticmethod
    def _entry(path: str, data: bytes) -> dict:
        entry = {"type": "file", "oid": git_sha1(data), "size": len(data), "path": path}
        if path.endswith(LFS_SUFFIXES):
            entry["lfs"] = {"oid": hashlib.sha256(data).hexdigest(), "size": len(data), "pointerSize": 134}
        return entry

    @staticmethod
    def _json(req: BaseHTTPRequestHandler, obj, head: bool) -> None:
        body = json.dumps(obj).encode()
        req.send_response(200)
        req.send_header("Content-Type", "application/json")
        req.send_header("Content-Length", str(len(body)))
        req.end_headers()
        if not head:
            req.wfile.write(body)

    @staticmethod
    def _error(req: BaseHTTPRequestHandler, status: int, code: str, head: bool) -> None:
        body = json.dumps({"error": code or "error"}).encode()
        req.send_response(status)
        if code:
            req.send_header("X-Error-Code", code)
        req.send_header("Content-Type", "application/json")
        req.send_header("Content-Length", str(len(body)))
        req.end_headers()
        if not head:
            req.wfile.write(body)
