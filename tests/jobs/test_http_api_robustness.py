"""``trainprobe serve`` answers every request, whatever it holds and however it arrives: many at
once, slowly, or malformed; each failure is a 4xx in SageMaker's error JSON, never a dropped
connection, and the server stays responsive."""

from __future__ import annotations

import contextlib
import http.client
import json
import os
import random
import signal
import socket
import subprocess
import sys
import threading
from dataclasses import dataclass
from typing import Any

from tests.jobs.api_calls import CONTENT_TYPE, sign, signed_call

from trainprobe.jobs.server.access_key import AccessKey, load_or_create
from trainprobe.jobs.server.api_app import ApiLimits
from trainprobe.jobs.server.api_server import JobApiServer


@dataclass
class Answer:
    status: int
    error_type: str | None
    body: dict[str, Any]


def _exchange(server: JobApiServer, raw: bytes, timeout: float = 30.0) -> Answer:
    """Send ``raw`` bytes on a new connection and read the HTTP answer (AssertionError if the
    server drops the connection without one)."""
    with socket.create_connection(("127.0.0.1", server.port), timeout=timeout) as connection:
        # The server may answer and close before reading all of it: then read that answer.
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):
            connection.sendall(raw)
        response = http.client.HTTPResponse(connection, method="POST")
        try:
            response.begin()
        except (http.client.RemoteDisconnected, ConnectionResetError) as error:
            raise AssertionError(f"dropped connection for {raw[:200]!r}") from error
        body = response.read()
    try:
        answer = json.loads(body)
    except ValueError as error:
        raise AssertionError(f"not JSON ({body[:200]!r}) for {raw[:200]!r}") from error
    return Answer(response.status, response.getheader("x-amzn-ErrorType"), answer)


def _request_bytes(headers: dict[str, str], body: bytes, head: str = "POST / HTTP/1.1") -> bytes:
    lines = [head, *(f"{name}: {value}" for name, value in headers.items())]
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body


def _signed_bytes(
    server: JobApiServer, target: str, body: bytes, *, content_length: str | None = None
) -> bytes:
    headers = sign(server.url, target, body, server.key)
    headers["Content-Length"] = str(len(body)) if content_length is None else content_length
    return _request_bytes(headers, body)


def _assert_refused(answer: Answer, what: str) -> None:
    assert 400 <= answer.status < 500, (what, answer)
    assert answer.body.get("__type") == answer.error_type, (what, answer)
    assert isinstance(answer.body.get("message"), str) and answer.body["message"], (what, answer)
    assert "Traceback" not in answer.body["message"], (what, answer)


def test_200_concurrent_calls_all_get_answers(api_server: JobApiServer) -> None:
    statuses: list[int] = []
    failures: list[BaseException] = []

    def list_jobs() -> None:
        try:
            status, _, answer = signed_call(
                api_server.url, "SageMaker.ListTrainingJobs", {}, api_server.key
            )
            assert answer == {"TrainingJobSummaries": []}
            statuses.append(status)
        except BaseException as error:
            failures.append(error)

    threads = [threading.Thread(target=list_jobs) for _ in range(200)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert not any(thread.is_alive() for thread in threads)
    assert failures == []
    assert statuses == [200] * 200


def test_a_slow_client_is_timed_out_and_the_server_stays_responsive(
    api_server: JobApiServer,
) -> None:
    body = b'{"MaxResults": 1}'
    whole = _signed_bytes(api_server, "SageMaker.ListTrainingJobs", body)
    half_head = whole[: whole.index(b"\r\n\r\n") // 2]
    half_body = whole[: len(whole) - len(body) // 2]
    slow = []
    for part in (half_head, half_body):
        connection = socket.create_connection(("127.0.0.1", api_server.port), timeout=30)
        connection.sendall(part)
        slow.append(connection)
    try:
        # While both wait, others are served.
        assert (
            signed_call(api_server.url, "SageMaker.ListTrainingJobs", {}, api_server.key)[0] == 200
        )
        for connection in slow:
            response = http.client.HTTPResponse(connection, method="POST")
            response.begin()  # within the 2 s the fixture's server gives a request
            answer = json.loads(response.read())
            assert response.status == 408
            assert answer["__type"] == "RequestTimeoutException"
            assert connection.recv(1) == b""  # and the server closed the connection
    finally:
        for connection in slow:
            connection.close()
    assert signed_call(api_server.url, "SageMaker.ListTrainingJobs", {}, api_server.key)[0] == 200


def test_an_idle_connection_is_closed(api_server: JobApiServer) -> None:
    with socket.create_connection(("127.0.0.1", api_server.port), timeout=30) as connection:
        assert connection.recv(1) == b""


def _malformed(server: JobApiServer, rng: random.Random) -> list[tuple[str, bytes]]:
    """Requests that are each wrong in one way: (what, the bytes sent)."""
    describe = "SageMaker.DescribeTrainingJob"
    host = f"127.0.0.1:{server.port}"
    deep = b"[" * 100_000 + b"]" * 100_000
    cases: list[tuple[str, bytes]] = [
        ("an empty body", _signed_bytes(server, describe, b"")),
        ("a UTF-8 byte order mark", _signed_bytes(server, describe, b'\xef\xbb\xbf{"a": 1}')),
        ("invalid JSON", _signed_bytes(server, describe, b'{"TrainingJobName": ')),
        ("not UTF-8", _signed_bytes(server, describe, b'{"TrainingJobName": "\xff\xfe"}')),
        ("UTF-16", _signed_bytes(server, describe, '{"a": 1}'.encode("utf-16"))),
        ("deeply nested JSON", _signed_bytes(server, describe, deep)),
        ("nested objects", _signed_bytes(server, describe, b'{"a":' * 40 + b"1" + b"}" * 40)),
        ("a list body", _signed_bytes(server, describe, b"[]")),
        ("a string body", _signed_bytes(server, describe, b'"job"')),
        ("null", _signed_bytes(server, describe, b"null")),
        ("NaN", _signed_bytes(server, describe, b'{"TrainingJobName": NaN}')),
        ("Content-Length: abc", _signed_bytes(server, describe, b"{}", content_length="abc")),
        ("Content-Length: -1", _signed_bytes(server, describe, b"{}", content_length="-1")),
        ("two Content-Lengths", _signed_bytes(server, describe, b"{}", content_length="2, 3")),
        (
            "a missing X-Amz-Target",
            _request_bytes(
                sign(server.url, "", b"{}", server.key, headers={"Content-Type": CONTENT_TYPE})
                | {"Content-Length": "2"},
                b"{}",
            ),
        ),
        ("an unknown operation", _signed_bytes(server, "SageMaker.DeleteTrainingJob", b"{}")),
        ("another service", _signed_bytes(server, "AmazonS3.ListBuckets", b"{}")),
        ("GET", _request_bytes({"Host": host}, b"", head="GET / HTTP/1.1")),
        (
            "another path",
            _request_bytes(
                {"Host": host, "Content-Length": "2"}, b"{}", head="POST /admin HTTP/1.1"
            ),
        ),
        ("no Host", _request_bytes({"Content-Length": "0"}, b"", head="POST / HTTP/1.1")),
        ("HTTP/1.0 without Host", _request_bytes({}, b"", head="POST / HTTP/1.0")),
        ("a garbage request line", b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03\r\n\r\n"),
        ("a huge header", _request_bytes({"Host": host, "X-Big": "a" * 100_000}, b"")),
        ("a header of 1 MiB", _request_bytes({"Host": host, "X-Big": "a" * (1 << 20)}, b"")),
        (
            "many headers",
            _request_bytes({f"X-{i}": "v" for i in range(5000)} | {"Host": host}, b""),
        ),
        ("a huge body", _signed_bytes(server, describe, b'{"a": "' + b"x" * (4 << 20) + b'"}')),
        (
            "a huge declared body",
            _request_bytes({"Host": host, "Content-Length": str(1 << 40)}, b"{}"),
        ),
        (
            "an unsigned call",
            _request_bytes(
                {
                    "Host": host,
                    "Content-Type": CONTENT_TYPE,
                    "X-Amz-Target": describe,
                    "Content-Length": "2",
                },
                b"{}",
            ),
        ),
        (
            "a garbled Authorization",
            _request_bytes(
                {
                    "Host": host,
                    "Content-Type": CONTENT_TYPE,
                    "Authorization": "AWS4-HMAC-SHA256 nonsense",
                    "X-Amz-Target": describe,
                    "Content-Length": "2",
                },
                b"{}",
            ),
        ),
        (
            "chunked garbage",
            _request_bytes({"Host": host, "Transfer-Encoding": "chunked"}, b"zz\r\n"),
        ),
        (
            "a job name too long",
            _signed_bytes(server, describe, json.dumps({"TrainingJobName": "a" * 10_000}).encode()),
        ),
        (
            "a job name with NUL",
            _signed_bytes(server, describe, b'{"TrainingJobName": "a\\u0000"}'),
        ),
        (
            "a job name that is a path",
            _signed_bytes(server, describe, b'{"TrainingJobName": "../../etc"}'),
        ),
        ("no TrainingJobName", _signed_bytes(server, "SageMaker.StopTrainingJob", b"{}")),
        (
            "a huge number",
            _signed_bytes(
                server, "SageMaker.ListTrainingJobs", b'{"MaxResults": 1' + b"0" * 5000 + b"}"
            ),
        ),
    ]
    for number in range(60):
        junk = bytes(rng.randrange(256) for _ in range(rng.randrange(1, 2000)))
        kind = number % 3
        if kind == 0:
            cases.append((f"random bytes {number}", junk + b"\r\n\r\n"))
        elif kind == 1:
            cases.append((f"a random body {number}", _signed_bytes(server, describe, junk)))
        else:
            cut = _signed_bytes(server, describe, b'{"TrainingJobName": "x"}')
            position = rng.randrange(len(cut))
            mutated = cut[:position] + bytes([rng.randrange(256)]) + cut[position + 1 :]
            cases.append((f"a flipped byte {number} at {position}", mutated))
    return cases


def test_malformed_requests_each_get_a_4xx_sagemaker_error(api_server: JobApiServer) -> None:
    rng = random.Random(11)
    for what, raw in _malformed(api_server, rng):
        _assert_refused(_exchange(api_server, raw), what)
    assert signed_call(api_server.url, "SageMaker.ListTrainingJobs", {}, api_server.key)[0] == 200


def test_concurrent_huge_bodies_are_refused_without_holding_them(
    api_server: JobApiServer, store: Any
) -> None:
    body = b'{"TrainingJobName": "' + b"x" * (16 << 20) + b'"}'
    raw = _signed_bytes(api_server, "SageMaker.CreateTrainingJob", body)
    answers: list[Answer] = []
    threads = [
        threading.Thread(target=lambda: answers.append(_exchange(api_server, raw, timeout=60)))
        for _ in range(8)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert [answer.status for answer in answers] == [413] * 8
    assert {answer.error_type for answer in answers} == {"RequestEntityTooLargeException"}
    assert store.query() == []


def test_a_call_signed_for_the_server_still_works_after_a_refusal_on_its_connection(
    api_server: JobApiServer,
) -> None:
    wrong = AccessKey(api_server.key.access_key_id, "not-the-secret")
    body = b"{}"
    target = "SageMaker.ListTrainingJobs"
    connection = http.client.HTTPConnection("127.0.0.1", api_server.port, timeout=30)
    try:
        # One keep-alive connection: refused, then served.
        for key, status in ((wrong, 403), (api_server.key, 200)):
            headers = sign(api_server.url, target, body, key)
            connection.request("POST", "/", body=body, headers=headers)
            response = connection.getresponse()
            response.read()
            assert response.status == status
    finally:
        connection.close()


def test_serve_stops_cleanly_on_ctrl_c(store: Any) -> None:
    server = subprocess.Popen(
        [sys.executable, "-m", "trainprobe.cli.main", "serve", "--port", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=dict(os.environ),
    )
    try:
        assert server.stdout is not None
        url = [server.stdout.readline(), server.stdout.readline()][1].split()[-1]
        status, _, _ = signed_call(url, "SageMaker.ListTrainingJobs", {}, load_or_create())
        assert status == 200
        server.send_signal(signal.SIGINT)
        _, errors = server.communicate(timeout=60)
    finally:
        server.kill()
        server.wait()
    assert server.returncode == 0, errors
    assert "Traceback" not in errors


def test_requests_beyond_the_queue_are_throttled(store: Any, tmp_path: Any) -> None:
    server = JobApiServer(0, store=store, cwd=str(tmp_path), limits=ApiLimits(largest_queue=1))
    server.start()
    try:
        body = b"{}"
        target = "SageMaker.ListTrainingJobs"
        headers = sign(server.url, target, body, server.key) | {"Expect": "100-continue"}
        waiting = socket.create_connection(("127.0.0.1", server.port), timeout=30)
        head = _request_bytes(headers | {"Content-Length": str(len(body))}, b"")
        waiting.sendall(head)
        # The server says "100 Continue" once it reads the body: the request is open.
        assert waiting.recv(1024).startswith(b"HTTP/1.1 100")
        refused = _exchange(server, _signed_bytes(server, target, body))
        assert (refused.status, refused.error_type) == (400, "ThrottlingException")
        waiting.sendall(body)
        response = http.client.HTTPResponse(waiting, method="POST")
        response.begin()
        assert response.status == 200
        assert json.loads(response.read()) == {"TrainingJobSummaries": []}
        waiting.close()
        assert signed_call(server.url, target, {}, server.key)[0] == 200
    finally:
        server.stop()
