"""The rule actions against real local servers: Email through an SMTP server (aiosmtpd) on
127.0.0.1, SMS through an HTTP gateway and a webhook to an HTTP receiver on 127.0.0.1, and the
StopTraining request file. A failing action is recorded and never changes the verdict."""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Iterator
from email import message_from_bytes
from email.message import Message
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from aiosmtpd.controller import Controller
from aiosmtpd.smtp import AuthResult, Envelope, Session

from trainprobe.capture.stop_request import StopRequestWatch, TrainingStopRequested
from trainprobe.config.actions import SMS, ActionList, Email, StopTraining, Webhook
from trainprobe.rules import Rule
from trainprobe.rules.definition import RuleDefinition
from trainprobe.rules.runner import RuleRunner
from trainprobe.storage.modes import ModeKeys
from trainprobe.storage.rule_output import read_actions
from trainprobe.storage.step_file import StepWriter, write_collections_file, write_training_end
from trainprobe.storage.stop_request import StopRequest, read_stop_request, write_stop_request

GRADIENT = "gradients/fc.weight_grad"


def gradient_run(out: Path, values: list[float]) -> None:
    collections = {"gradients": {"name": "gradients", "include_regex": ["^gradients/"]}}
    write_collections_file(str(out), "worker_0", collections, num_workers=1)
    for step, value in enumerate(values):
        with StepWriter(str(out), step, "worker_0") as writer:
            grad = np.full(3, value, dtype=np.float32)
            writer.add(GRADIENT, grad, mode=ModeKeys.TRAIN, mode_step=step)
    write_training_end(str(out))


class TooSmall(Rule):
    def invoke_at_step(self, step: int) -> bool:
        value = float(self.base_trial.tensor(GRADIENT).value(step).mean())
        if value < 0.5:
            self.record(message="gradient too small", tensor=GRADIENT, value=value, threshold=0.5)
            return True
        return False


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


# ----- a real SMTP server --------------------------------------------------------------------


class Mailbox:
    """aiosmtpd handler: keeps every message delivered, and who logged in."""

    def __init__(self) -> None:
        self.messages: list[tuple[str, list[str], Message]] = []
        self.logins: list[tuple[str, str]] = []

    async def handle_DATA(self, server: Any, session: Session, envelope: Envelope) -> str:
        content = envelope.original_content or b""
        self.messages.append(
            (str(envelope.mail_from), list(envelope.rcpt_tos), message_from_bytes(content))
        )
        return "250 Message accepted for delivery"

    def authenticate(
        self, server: Any, session: Session, envelope: Envelope, mechanism: str, auth_data: Any
    ) -> AuthResult:
        login = (auth_data.login.decode(), auth_data.password.decode())
        self.logins.append(login)
        return AuthResult(success=login == ("trainer", "s3cret"))


@pytest.fixture
def smtp_server() -> Iterator[tuple[Mailbox, int]]:
    mailbox = Mailbox()
    port = free_port()
    controller = Controller(
        mailbox,
        hostname="127.0.0.1",
        port=port,
        authenticator=mailbox.authenticate,
        auth_require_tls=False,
    )
    controller.start()
    try:
        yield mailbox, port
    finally:
        controller.stop()


# ----- a real HTTP receiver ------------------------------------------------------------------


class Receiver:
    """A local HTTP server recording each POST (path, headers, JSON body); answers ``status``."""

    def __init__(self, status: int = 200) -> None:
        self.status = status
        self.posts: list[tuple[str, dict[str, str], Any]] = []
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length", "0"))
                body = json.loads(self.rfile.read(length))
                receiver.posts.append((self.path, dict(self.headers), body))
                self.send_response(receiver.status)
                self.end_headers()
                self.wfile.write(b"ok" if receiver.status < 300 else b"gateway broken")

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> Receiver:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()


def run_with_actions(out: Path, actions: Any, **runner: Any) -> tuple[Any, list[dict[str, Any]]]:
    output = out.parent / "rule-output"
    definition = RuleDefinition.for_class(TooSmall, actions=actions)
    verdict = RuleRunner(definition, str(out), output_dir=str(output), **runner).run()[0]
    return verdict, read_actions(str(output / "TooSmall"))


# ----- the tests -----------------------------------------------------------------------------


def test_email_is_sent_through_the_configured_smtp_server(
    tmp_path: Path, smtp_server: tuple[Mailbox, int], monkeypatch: pytest.MonkeyPatch
) -> None:
    mailbox, port = smtp_server
    monkeypatch.setenv("TRAINPROBE_SMTP_HOST", "127.0.0.1")
    monkeypatch.setenv("TRAINPROBE_SMTP_PORT", str(port))
    monkeypatch.setenv("TRAINPROBE_SMTP_USER", "trainer")
    monkeypatch.setenv("TRAINPROBE_SMTP_PASSWORD", "s3cret")
    monkeypatch.setenv("TRAINPROBE_SMTP_FROM", "rules@trainprobe.test")
    gradient_run(tmp_path / "debug-output", [1.0, 0.9, 0.25])
    verdict, outcomes = run_with_actions(tmp_path / "debug-output", Email("ops@example.com"))
    assert verdict.status == "IssuesFound"
    assert mailbox.logins == [("trainer", "s3cret")]
    assert len(mailbox.messages) == 1
    sender, recipients, message = mailbox.messages[0]
    assert (sender, recipients) == ("rules@trainprobe.test", ["ops@example.com"])
    assert "TooSmall" in message["Subject"] and "step 2" in message["Subject"]
    body = message.get_payload(decode=True).decode()  # type: ignore[union-attr]
    assert "gradient too small" in body and GRADIENT in body and "0.25" in body
    assert str(tmp_path / "debug-output") in body
    assert [(o["action"], o["target"], o["ok"], o["step"]) for o in outcomes] == [
        ("email", "ops@example.com", True, 2)
    ]


def test_sms_goes_through_the_http_gateway(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    gradient_run(tmp_path / "debug-output", [0.1])
    with Receiver() as gateway:
        monkeypatch.setenv("TRAINPROBE_SMS_GATEWAY_URL", f"{gateway.url}/send")
        monkeypatch.setenv("TRAINPROBE_SMS_GATEWAY_TOKEN", "tok-123")
        verdict, outcomes = run_with_actions(tmp_path / "debug-output", SMS("+14155550100"))
    assert verdict.status == "IssuesFound"
    [(path, headers, body)] = gateway.posts
    assert path == "/send" and headers["Authorization"] == "Bearer tok-123"
    assert headers["Content-Type"] == "application/json"
    assert body["to"] == "+14155550100"
    assert "TooSmall" in body["message"] and "gradient too small" in body["message"]
    assert outcomes[0]["ok"] is True and outcomes[0]["action"] == "sms"


def test_webhook_posts_a_slack_compatible_message(tmp_path: Path) -> None:
    gradient_run(tmp_path / "debug-output", [1.0, 0.3])
    with Receiver() as receiver:
        verdict, outcomes = run_with_actions(
            tmp_path / "debug-output", Webhook(f"{receiver.url}/hooks/abc")
        )
    assert verdict.status == "IssuesFound"
    [(path, _, body)] = receiver.posts
    assert path == "/hooks/abc"
    assert isinstance(body["text"], str) and "TooSmall" in body["text"]
    assert "step 1" in body["text"] and "gradient too small" in body["text"]
    details = body["trainprobe"]
    assert (details["rule"], details["status"], details["step"]) == ("TooSmall", "IssuesFound", 1)
    assert details["evidence"][0]["tensor"] == GRADIENT
    assert outcomes[0]["ok"] is True


def test_failing_actions_are_recorded_and_never_change_the_verdict(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("TRAINPROBE_SMTP_HOST", raising=False)
    gradient_run(tmp_path / "debug-output", [1.0, 0.2, 1.0])
    with Receiver(status=500) as gateway, Receiver() as receiver:
        monkeypatch.setenv("TRAINPROBE_SMS_GATEWAY_URL", gateway.url)
        actions = ActionList(
            Email("ops@example.com"),
            SMS("+14155550100"),
            Webhook(f"http://127.0.0.1:{free_port()}/closed"),
            Webhook(f"{receiver.url}/works"),
        )
        verdict, outcomes = run_with_actions(tmp_path / "debug-output", actions)
    assert verdict.status == "IssuesFound" and verdict.issues[0].step == 1
    assert [(o["action"], o["ok"]) for o in outcomes] == [
        ("email", False),
        ("sms", False),
        ("webhook", False),
        ("webhook", True),
    ]
    assert "TRAINPROBE_SMTP_HOST" in outcomes[0]["detail"]
    assert "HTTP 500" in outcomes[1]["detail"] and "gateway broken" in outcomes[1]["detail"]
    assert "cannot reach" in outcomes[2]["detail"]
    assert len(receiver.posts) == 1
    assert [(o.action, o.ok) for o in verdict.actions] == [(o["action"], o["ok"]) for o in outcomes]


def test_actions_run_once_at_the_first_issue_even_when_evaluating_every_step(
    tmp_path: Path,
) -> None:
    gradient_run(tmp_path / "debug-output", [0.1, 0.1, 0.1])
    with Receiver() as receiver:
        verdict, outcomes = run_with_actions(
            tmp_path / "debug-output", Webhook(receiver.url), every_step=True
        )
    assert [issue.step for issue in verdict.issues] == [0, 1, 2]
    assert len(receiver.posts) == 1 and len(outcomes) == 1


def test_action_json_from_rule_parameters_and_from_an_smdebug_style_rule(tmp_path: Path) -> None:
    gradient_run(tmp_path / "debug-output", [0.1])
    with Receiver() as receiver:
        action_json = Webhook(receiver.url).serialize()
        source = tmp_path / "rules.py"
        source.write_text(
            "from trainprobe.rules import Rule\n"
            "class Always(Rule):\n"
            "    def __init__(self, base_trial, action_str=''):\n"
            "        super().__init__(base_trial, action_str)\n"
            "    def invoke_at_step(self, step):\n"
            "        return True\n"
        )
        by_parameter = RuleDefinition.for_custom(
            str(source), "Always", {"action_json": action_json}, name="by_parameter"
        )
        by_rule = RuleDefinition.for_custom(
            str(source), "Always", {"action_str": action_json}, name="by_rule"
        )
        verdicts = RuleRunner(
            [by_parameter, by_rule], str(tmp_path / "debug-output"), every_step=False
        ).run()
    assert [v.status for v in verdicts] == ["IssuesFound", "IssuesFound"]
    assert [len(v.actions) for v in verdicts] == [1, 1]
    assert len(receiver.posts) == 2


def test_stop_training_writes_a_request_the_hook_side_reads(tmp_path: Path) -> None:
    out = tmp_path / "debug-output"
    gradient_run(out, [1.0, 0.1])
    watch = StopRequestWatch(str(out), interval=0.0)
    assert watch.check() is None
    handed: list[StopRequest] = []
    verdict, outcomes = run_with_actions(
        out,
        ActionList(Webhook(f"http://127.0.0.1:{free_port()}/"), StopTraining("my-job")),
        on_stop_training=handed.append,
    )
    assert verdict.status == "IssuesFound"
    assert [o["action"] for o in outcomes] == ["stoptraining", "webhook"]
    request = read_stop_request(str(out))
    assert request is not None
    assert (request.rule, request.step, request.training_job_prefix) == ("TooSmall", 1, "my-job")
    assert "gradient too small" in request.message
    assert handed == [request]
    assert watch.check() == request
    with pytest.raises(TrainingStopRequested, match="rule TooSmall found an issue at TRAIN step 1"):
        watch.raise_if_requested(7)


def test_stop_requests_older_than_the_training_are_ignored(tmp_path: Path) -> None:
    old = StopRequest(rule="Old", message="from an earlier run", step=3, time=time.time() - 60)
    write_stop_request(str(tmp_path), old)
    watch = StopRequestWatch(str(tmp_path), interval=0.0)
    assert watch.check() is None
    watch.raise_if_requested(0)
    new = StopRequest(rule="New", message="now", step=9, time=time.time() + 1)
    write_stop_request(str(tmp_path), new)
    assert watch.check() == new


def test_the_stop_check_looks_at_the_file_at_most_once_per_interval(tmp_path: Path) -> None:
    watch = StopRequestWatch(str(tmp_path), interval=3600.0)
    assert watch.check() is None  # the first look
    write_stop_request(str(tmp_path), StopRequest("R", "m", 1, time.time() + 1))
    assert watch.check() is None  # not looked at again within the interval
    assert StopRequestWatch(str(tmp_path), interval=3600.0, since=0).check() is not None
