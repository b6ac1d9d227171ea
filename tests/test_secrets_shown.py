"""Secrets in what the script prints never reach what mgtutor shows (issue 46, item 2): the report
(HTML and Markdown), the diagnosis, `runs show` (and --json), `doctor` (and --json). They are found by
shape (token prefixes, Bearer headers, URL passwords, --api-key X, password: X) and by the values of
the secret-named variables the run had at launch, kept in its record as keyed hashes only, so a
report made from another shell (an empty environment here) still hides them. Short and boolean
values are never looked for: TOKENIZERS_PARALLELISM=false and AUTHOR=root blank out nothing."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from mgtutor.diagnostics.doctor.report import environment
from mgtutor.diagnostics.failures.classify import diagnose_run
from mgtutor.diagnostics.report.render import build, to_markdown
from mgtutor.training.runs.records.record import RunRecord, runs_root
from mgtutor.training.foundation.secrets import (REDACTED, SecretRedactor, looks_secret, redact_env, redact_text,
                                           secret_digests, secret_values)
from mgtutor.tui.cli import main as cli_main

FIXTURE = Path(__file__).parent / "data" / "monitor_runs" / "20260101-000000-train-tinycnn-f1x7"
HF = "hfvalue-0123456789abcdef"  # no known prefix: only the record's hash can find it
WANDB = "0123456789abcdef0123456789abcdef01234567"
ARGV_KEY = "argvkey-Zq81xx"
SHAPED = {  # printed line -> the secret in it
    "token ghp_abcdefghijklmnopqrstuvwxyz0123 used": "ghp_abcdefghijklmnopqrstuvwxyz0123",
    "github_pat_11ABCDEFG0123456789_abcdefghijklmnop": "github_pat_11ABCDEFG0123456789_abcdefghijklmnop",
    "OPENAI key sk-proj-abcdefghijklmnop12345678": "sk-proj-abcdefghijklmnop12345678",
    "hf_abcdefghijklmnopqrstuvwxyz": "hf_abcdefghijklmnopqrstuvwxyz",
    "slack xoxb-123456789012-abcdefghij": "xoxb-123456789012-abcdefghij",
    "aws AKIAABCDEFGHIJKLMNOP": "AKIAABCDEFGHIJKLMNOP",
    "Authorization: Bearer eyJhbGciOi.payload.sig": "eyJhbGciOi.payload.sig",
    "curl -H 'Authorization: Basic dXNlcjpwYXNzd29yZA=='": "dXNlcjpwYXNzd29yZA==",
    "db postgres://bob:hunter2pw@db.internal:5432/x": "hunter2pw",
    "train.py --api-key opensesame99 --lr 0.1": "opensesame99",
    "train.py --token=tok-4242abcd": "tok-4242abcd",
    "python x.py --password pw1 --secret s3cr3t-value": "s3cr3t-value",
    "config: password: hunter2": "hunter2",
    'cfg {"password": "hunter3", "api_key": "k-998877"}': "k-998877",
}


@pytest.mark.parametrize("name", ["DB_PASS", "GH_PAT", "DATABASE_URL", "SENTRY_DSN", "SLACK_WEBHOOK", "apiKey",
                                  "CELERY_BROKER_URL", "AWS_ACCESS_KEY_ID", "HFTOKEN"])
def test_secret_names_by_their_parts(name: str) -> None:
    assert looks_secret(name)


@pytest.mark.parametrize("name", ["MONKEY", "AUTHOR", "KEYBOARD_LAYOUT", "TOKENIZERS_PARALLELISM", "PWD",
                                  "KeyError", "MGTUTOR_RUN_ID", "MAX_TOKENS"])
def test_names_that_merely_contain_a_secret_word_are_kept(name: str) -> None:
    assert not looks_secret(name)


@pytest.mark.parametrize("line, secret", sorted(SHAPED.items()))
def test_secrets_are_found_by_shape(line: str, secret: str) -> None:
    cleaned = redact_text(line)
    assert secret not in cleaned and REDACTED in cleaned


def test_ordinary_text_is_left_alone() -> None:
    text = ("KeyError: 'missing' token: 50256 http://host:8080/path --max-tokens 512 --lr 0.1 "
            "TOKENIZERS_PARALLELISM=false AUTHOR=root /root/data 19:27:28 MY_TOKEN=true Basic usage")
    assert redact_text(text) == text


def test_values_are_kept_as_keyed_hashes_never_short_or_boolean_ones() -> None:
    env = {"HF_TOKEN": HF, "DB_PASS": "short", "MY_SECRET": "false", "TOKENIZERS_PARALLELISM": "false",
           "AUTHOR": "rootroot-long", "PATH": "/usr/bin:/bin"}
    values = secret_values(env, ["train.py", "--api-key", ARGV_KEY])
    assert sorted(values) == sorted([HF, ARGV_KEY])
    kept = secret_digests(values)
    assert HF not in json.dumps(kept) and ARGV_KEY not in json.dumps(kept) and len(kept["digests"]) == 2
    clean = SecretRedactor()
    clean.learn_digests(kept)
    text = clean.text(f"login {HF}. url=https://x:{HF}@h arg={ARGV_KEY} false rootroot-long /root/ short")
    assert HF not in text and ARGV_KEY not in text
    assert text.endswith("false rootroot-long /root/ short")


def test_doctor_hides_url_credentials_in_nccl_and_master_values(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NCCL_NET_PLUGIN_URL", "https://user:pa55word99@plugins.example/x")
    monkeypatch.setenv("MASTER_ADDR", "redis://:hunter2pw@10.0.0.1")
    shown = environment()
    assert "pa55word99" not in json.dumps(shown) and "hunter2pw" not in json.dumps(shown)
    assert shown["NCCL_NET_PLUGIN_URL"] == "https://user:<redacted>@plugins.example/x"
    assert redact_env({"MASTER_PORT": "29500"}) == {"MASTER_PORT": "29500"}


@pytest.fixture
def printed_secrets(monkeypatch: pytest.MonkeyPatch) -> RunRecord:
    """A run whose script printed its secrets, made in a shell that no longer has them."""
    monkeypatch.setenv("MGTUTOR_NO_NVML", "1")
    for name in ("HF_TOKEN", "WANDB_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    path = runs_root() / FIXTURE.name
    shutil.copytree(FIXTURE, path)
    meta = json.loads((path / "meta.json").read_text())
    target = ["train.py", "--api-key", ARGV_KEY, "--lr", "0.1"]
    meta.update(target=target, env={"MASTER_ADDR": "127.0.0.1", "NCCL_DEBUG": "INFO", "HF_TOKEN": REDACTED,
                                    "NCCL_NET_PLUGIN_URL": "https://u:pa55word99@h/x"},
                secret_digests=secret_digests(secret_values({"HF_TOKEN": HF, "WANDB_API_KEY": WANDB,
                                                             "TOKENIZERS_PARALLELISM": "false", "AUTHOR": "root"},
                                                            target)))
    (path / "meta.json").write_text(json.dumps(meta))
    (path / "result.json").write_text(json.dumps({  # rank 1 failed: the diagnosis quotes its error
        "run_id": FIXTURE.name, "status": "failed", "world_size": 2, "backend": "gloo",
        "ranks": [{"rank": 0, "exit_code": 0, "outcome": "ok"}, {"rank": 1, "exit_code": 1, "outcome": "failed"}],
        "first_failure": {"rank": 1, "exit_code": 1}}))
    (path / "events.jsonl").write_text("")  # its events explain another problem, which would come first
    with (path / "logs" / "rank1.stderr.log").open("a") as log:
        log.write(f"logging in with {HF} and wandb {WANDB}; key {ARGV_KEY}; tokenizers false; home /root/\n"
                  + "".join(f"{line}\n" for line in SHAPED)
                  + "Traceback (most recent call last):\n  File \"train.py\", line 9, in <module>\n"
                  f"RuntimeError: login failed for token {HF} (Authorization: Bearer abcdefghijklmnop1234)\n")
    return RunRecord(path)


def _leaks(text: str) -> list[str]:
    return [s for s in (HF, WANDB, ARGV_KEY, "pa55word99", *SHAPED.values()) if s in text]


def test_the_report_from_another_shell_hides_what_the_script_printed(printed_secrets: RunRecord) -> None:
    markdown = to_markdown(build(printed_secrets, doctor="none", environ={}))
    assert _leaks(markdown) == []
    assert "tokenizers false; home /root/" in markdown  # no boolean or short value blanks out text


def test_the_diagnosis_hides_them(printed_secrets: RunRecord) -> None:
    findings = diagnose_run(printed_secrets)
    shown = json.dumps([f.to_dict() for f in findings])
    assert "login failed for token" in shown and _leaks(shown) == []


def test_runs_show_hides_them(printed_secrets: RunRecord, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli_main(["runs", "show", printed_secrets.run_id, "--json"]) == 0
    out = capsys.readouterr().out
    assert _leaks(out) == [] and "secret_digests" not in out
    assert json.loads(out)["meta"]["target"] == ["train.py", "--api-key", REDACTED, "--lr", "0.1"]
    assert cli_main(["runs", "show", printed_secrets.run_id]) == 0
    out = capsys.readouterr().out
    assert _leaks(out) == [] and "train.py --api-key <redacted> --lr 0.1" in out
