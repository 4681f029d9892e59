"""The OpenAI Batch API routes on top of `tests.openai_server.OpenAIServer` (stdlib only).

`POST /v1/files` (multipart, purpose=batch), `POST /v1/batches`, `GET /v1/batches/{id}` and
`GET /v1/files/{id}/content`, with the response shapes of OpenAI's API. A batch runs every request
line through the server's own chat reply (`reply`, as `/v1/chat/completions` would answer it)
when it is created, and reports `in_progress` on its first retrieval, `completed` afterwards.
Request lines whose position is in `fail_lines` go to the error file with a server error.
"""

from __future__ import annotations

import email
import json
from typing import Any

from tests.openai_server import OpenAIServer


class BatchServer(OpenAIServer):
    def __init__(self, *args: Any, fail_lines: frozenset[int] = frozenset(), **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.files: dict[str, bytes] = {}
        self.batches: dict[str, dict[str, Any]] = {}
        self.fail_lines = fail_lines
        self.batch_requests = (
            0  # chat requests answered inside batches (not via /v1/chat/completions)
        )

    def _new_file(self, content: bytes, filename: str, purpose: str) -> dict[str, Any]:
        fid = f"file-{len(self.files) + 1}"
        self.files[fid] = content
        return {
            "id": fid,
            "object": "file",
            "bytes": len(content),
            "created_at": 0,
            "filename": filename,
            "purpose": purpose,
            "status": "processed",
        }

    def _run_batch(self, body: dict[str, Any]) -> dict[str, Any]:
        out, errors = [], []
        lines = [
            json.loads(x)
            for x in self.files[body["input_file_id"]].decode().splitlines()
            if x.strip()
        ]
        for n, line in enumerate(lines):
            if n in self.fail_lines:
                errors.append(
                    {
                        "id": f"req-{n}",
                        "custom_id": line["custom_id"],
                        "response": None,
                        "error": {"code": "server_error", "message": "batch worker failed"},
                    }
                )
                continue
            self.batch_requests += 1
            completion = self._completion(line["body"], self.reply(line["body"]))
            out.append(
                {
                    "id": f"req-{n}",
                    "custom_id": line["custom_id"],
                    "error": None,
                    "response": {"status_code": 200, "request_id": f"q-{n}", "body": completion},
                }
            )
        dump = "".join(json.dumps(x) + "\n" for x in out).encode()
        output = self._new_file(dump, "output.jsonl", "batch_output")["id"]
        error = (
            self._new_file(
                "".join(json.dumps(x) + "\n" for x in errors).encode(),
                "errors.jsonl",
                "batch_output",
            )["id"]
            if errors
            else None
        )
        bid = f"batch_{len(self.batches) + 1}"
        self.batches[bid] = {
            "id": bid,
            "object": "batch",
            "endpoint": body["endpoint"],
            "input_file_id": body["input_file_id"],
            "completion_window": body["completion_window"],
            "status": "in_progress",
            "created_at": 0,
            "output_file_id": None,
            "error_file_id": None,
            "request_counts": {"total": len(lines), "completed": 0, "failed": 0},
            "_done": {
                "output_file_id": output,
                "error_file_id": error,
                "request_counts": {
                    "total": len(lines),
                    "completed": len(out),
                    "failed": len(errors),
                },
            },
        }
        return self._public(bid)

    def _public(self, bid: str) -> dict[str, Any]:
        return {k: v for k, v in self.batches[bid].items() if not k.startswith("_")}

    def _retrieve(self, bid: str) -> dict[str, Any]:
        b = self.batches[bid]
        if b["status"] == "in_progress" and b.get("_seen"):
            b.update(status="completed", **b["_done"])
        b["_seen"] = True
        return self._public(bid)

    def _handler_class(self):  # noqa: ANN202 - extends the chat handler
        server = self
        base = super()._handler_class()

        class Handler(base):  # type: ignore[misc, valid-type]
            def do_GET(self) -> None:
                parts = self.path.strip("/").split("/")
                if parts[:2] in (["v1", "batches"], ["v1", "files"]):
                    server.authorizations.append(self.headers.get("Authorization", ""))
                if (
                    parts[:2] == ["v1", "batches"]
                    and len(parts) == 3
                    and parts[2] in server.batches
                ):
                    return self._send(200, json.dumps(server._retrieve(parts[2])).encode())
                if parts[:2] == ["v1", "files"] and len(parts) == 4 and parts[3] == "content":
                    if parts[2] in server.files:
                        return self._send(200, server.files[parts[2]], "application/octet-stream")
                    return self._error(404, f"no file {parts[2]}")
                return super().do_GET()

            def do_POST(self) -> None:
                path = self.path.rstrip("/")
                if path not in ("/v1/files", "/v1/batches"):
                    return super().do_POST()
                raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                server.authorizations.append(self.headers.get("Authorization", ""))
                if path == "/v1/batches":
                    body = json.loads(raw)
                    if body.get("input_file_id") not in server.files:
                        return self._error(
                            400, f"unknown input_file_id {body.get('input_file_id')!r}"
                        )
                    return self._send(200, json.dumps(server._run_batch(body)).encode())
                msg = email.message_from_bytes(
                    b"Content-Type: " + self.headers["Content-Type"].encode() + b"\r\n\r\n" + raw
                )
                fields = {
                    p.get_param("name", header="content-disposition"): p for p in msg.get_payload()
                }
                if "file" not in fields:
                    return self._error(400, "multipart upload without a `file` part")
                content = fields["file"].get_payload(decode=True)
                purpose = (
                    fields["purpose"].get_payload(decode=True).decode()
                    if "purpose" in fields
                    else ""
                )
                filename = fields["file"].get_filename() or "upload.jsonl"
                return self._send(
                    200, json.dumps(server._new_file(content, filename, purpose)).encode()
                )

        return Handler
