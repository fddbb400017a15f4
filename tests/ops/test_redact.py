"""The secret patterns: every kind found and replaced, look-alikes left alone, any text safe to scan."""

from __future__ import annotations

import base64
import hashlib
import time
import uuid

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agentlog.ops import redact
from agentlog.ops.redact import KINDS, find_secrets, redact_text, redact_value, scan, secret_paths
from tests.ops.secret_shapes import BENIGN, SHAPES

AWS_SECRET = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"
JWT = ("eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIiwibmFtZSI6IkpvaG4ifQ."
       "SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c")
PEM = ("-----BEGIN OPENSSH PRIVATE KEY-----\n"
       "b3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQAAAAAAAAABAAAAMwAAAAtz\n"
       "c2gtZWQyNTUxOQAAACDx\n-----END OPENSSH PRIVATE KEY-----")

# (text, kind, the secret that must not survive)
POSITIVES = [
    ("export OPENAI_API_KEY=sk-proj-Ab3dEfGh1jKlMnOpQrStUvWxYz0123456789", "openai-key",
     "sk-proj-Ab3dEfGh1jKlMnOpQrStUvWxYz0123456789"),
    ("key: sk-Ab3dEfGh1jKlMnOpQrStUvWxYz0123456789abcd", "openai-key",
     "sk-Ab3dEfGh1jKlMnOpQrStUvWxYz0123456789abcd"),
    ("ANTHROPIC sk-ant-api03-Zx9_yW8-vU7tS6rQ5pO4nM3lK2jI1hG0fE", "anthropic-key",
     "sk-ant-api03-Zx9_yW8-vU7tS6rQ5pO4nM3lK2jI1hG0fE"),
    ("token ghp_0123456789abcdefghijABCDEFGHIJ012345 here", "github-token",
     "ghp_0123456789abcdefghijABCDEFGHIJ012345"),
    ("github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyz", "github-token",
     "github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyz"),
    ("slack xoxb-123456789012-1234567890123-AbCdEfGhIjKlMnOp", "slack-token",
     "xoxb-123456789012-1234567890123-AbCdEfGhIjKlMnOp"),
    ("maps AIzaSyA1b2C3d4E5f6G7h8I9j0KlMnOpQrStUvW ok", "google-api-key",
     "AIzaSyA1b2C3d4E5f6G7h8I9j0KlMnOpQrStUvW"),
    ("stripe sk_live_4eC39HqLyjWDarjtT1zdp7dc", "stripe-key", "sk_live_4eC39HqLyjWDarjtT1zdp7dc"),
    ("aws_access_key_id = AKIAIOSFODNN7EXAMPLE", "aws-access-key", "AKIAIOSFODNN7EXAMPLE"),
    (f"aws_secret_access_key = {AWS_SECRET}", "aws-secret-key", AWS_SECRET),
    (f'{{"AWS_SECRET_ACCESS_KEY": "{AWS_SECRET}"}}', "aws-secret-key", AWS_SECRET),
    (f"key file:\n{PEM}\nend", "private-key", "b3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQ"),
    ("-----BEGIN RSA PRIVATE KEY-----\nMIIEpAIBAAKCAQEA7bq (truncated)", "private-key",
     "MIIEpAIBAAKCAQEA7bq"),
    ("curl -H 'Authorization: Bearer abc123def456ghi789jkl0'", "bearer-token", "abc123def456ghi789jkl0"),
    ("Authorization: Basic dXNlcjpodW50ZXIy", "basic-auth", "dXNlcjpodW50ZXIy"),
    ("psql postgresql://admin:hunter2@db.internal:5432/prod", "url-password", "hunter2"),
    (f"cookie session={JWT};", "jwt", JWT),
    ("DB_PASSWORD=correct-horse-battery ./migrate", "env-secret", "correct-horse-battery"),
    ("export GH_TOKEN='s3cr3tvalue'", "env-secret", "s3cr3tvalue"),
    ('{"client_secret": "abc\\"def"}', "env-secret", 'abc\\"def'),
    ("smtp:\n  password: letmein99\n", "env-secret", "letmein99"),
    ('db_password = "hunter2!"  # python', "env-secret", "hunter2!"),
    ("https://hooks.slack.com/services/T000/B000/XXXXXXXXXXXXXXXXXXXXXXXX", "slack-webhook",
     "XXXXXXXXXXXXXXXXXXXXXXXX"),
    ("glpat-xY3kP9qR2mN7vB4cZ8wT", "gitlab-token", "glpat-xY3kP9qR2mN7vB4cZ8wT"),
    ("--token hf_AbCdEfGhIjKlMnOpQrStUvWxYz01234567", "huggingface-token",
     "hf_AbCdEfGhIjKlMnOpQrStUvWxYz01234567"),
    ("npm_1a2B3c4D5e6F7g8H9i0JkLmNoPqRsTuVwXyZ", "npm-token", "npm_1a2B3c4D5e6F7g8H9i0JkLmNoPqRsTuVwXyZ"),
    ("redis://:s3cr3tRedisPw@cache:6379/0", "url-password", "s3cr3tRedisPw"),
    ("Authorization: token 9f8e7d6c5b4a39281706", "auth-header", "9f8e7d6c5b4a39281706"),
    ("-H 'X-Api-Key: Qm9vbGVhbkZhbHNl'", "auth-header", "Qm9vbGVhbkZhbHNl"),
    ("mysql -u root -pS3cretPass db", "mysql-password", "S3cretPass"),
    ('{"password": 83749201}', "env-secret", "83749201"),
    (f"env {base64.b64encode(b'DB_PASSWORD=hunter2hunter2').decode()}", "base64-secret",
     base64.b64encode(b"DB_PASSWORD=hunter2hunter2").decode()),
]

NEGATIVES = [
    "commit 3f786850e387550fdab836ed7e6dc881de23001b on main",
    f"sha256 {hashlib.sha256(b'hello').hexdigest()}",
    f"request id {uuid.UUID(int=0x123456789ABCDEF0123456789ABCDEF)}",
    f"data {base64.b64encode(b'The quick brown fox jumps over the lazy dog again and again').decode()}",
    "password_hint=the name of my first dog",
    "MAX_TOKENS=4096 and token_count=17",
    "pip install scikit-learn; sk-learn-is-not-a-key-at-all-really",
    "postgresql://postgres@127.0.0.1:5432/test",
    "http://localhost:8080/path?x=1",
    "the token budget is spent; a password is required",
    "pk_live_4eC39HqLyjWDarjtT1zdp7dc is a publishable key",
    "AKIA is a prefix, AKIAshort too",
    "PASSWORD=[REDACTED:env-secret]",
    "bearer of bad news",
    'const csrfToken = document.querySelector("meta[name=csrf-token]")',  # code, found in a real transcript
    "interface Login { token: string; password: string }",
    "  token: string\n  password: null\n",
    "TOKEN=$GITHUB_TOKEN make release",
    "password: ${{ secrets.DB_PASSWORD }}",
    "api_key = os.environ['OPENAI_API_KEY']",
]


@pytest.mark.parametrize(("text", "kind", "secret"), POSITIVES)
def test_each_kind_is_found_and_replaced(text: str, kind: str, secret: str) -> None:
    found = find_secrets(text)
    assert found == scan(text, every=True)
    assert [finding.kind for finding in found] == [kind]
    redacted = redact_text(text)
    assert f"[REDACTED:{kind}]" in redacted
    assert secret not in redacted
    assert redact_text(redacted) == redacted


def test_every_kind_has_a_positive() -> None:
    assert {kind for _, kind, _ in POSITIVES} == set(KINDS)


@pytest.mark.parametrize("text", NEGATIVES)
def test_look_alikes_are_left_alone(text: str) -> None:
    assert find_secrets(text) == []
    assert redact_text(text) == text


def test_value_keeps_names_and_structure() -> None:
    value = {"arguments": '{"cmd": "curl -u x https://u:pw123@h/"}', "list": ("a", 1, None, True),
             "AKIAIOSFODNN7EXAMPLE": "AKIAIOSFODNN7EXAMPLE"}
    assert redact_value(value) == {
        "arguments": '{"cmd": "curl -u x https://u:[REDACTED:url-password]@h/"}',
        "list": ["a", 1, None, True],
        "[REDACTED:aws-access-key]": "[REDACTED:aws-access-key]",  # a key holding a secret too
    }


def test_a_secret_named_by_its_key_is_redacted_in_structured_values_too() -> None:
    # the text '"password": "hunter2hunter2"' is redacted; the same pair parsed (the anthropic
    # export's tool input, a request header's config) must be as well
    value = {"input": {"password": "hunter2hunter2", "env": {"DB_PASSWORD": "s3cr3t-value"}},
             "config": [{"client_secret": "abc123def456"}], "password_hint": "the usual", "token_count": 5,
             "api_key": "$API_KEY", "secret": ""}
    assert redact_value(value) == {
        "input": {"password": "[REDACTED:env-secret]", "env": {"DB_PASSWORD": "[REDACTED:env-secret]"}},
        "config": [{"client_secret": "[REDACTED:env-secret]"}], "password_hint": "the usual",
        "token_count": 5, "api_key": "$API_KEY", "secret": ""}  # references, empty values stay
    assert sorted(secret_paths(value)) == [("data.config[0].client_secret", "env-secret"),
                                           ("data.input.env.DB_PASSWORD", "env-secret"),
                                           ("data.input.password", "env-secret")]
    assert redact_value(redact_value(value)) == redact_value(value)


def test_deep_values_do_not_exhaust_the_stack() -> None:
    value: object = "AKIAIOSFODNN7EXAMPLE"
    for _ in range(20_000):
        value = [value]
    out = redact_value(value)
    for _ in range(20_000):
        assert isinstance(out, list)
        out = out[0]
    assert out == "[REDACTED:aws-access-key]"
    assert next(iter(secret_paths(value, "v")))[1] == "aws-access-key"


def test_secret_paths_name_where_never_what() -> None:
    leak = "AKIAIOSFODNN7EXAMPLE and sk_live_4eC39HqLyjWDarjtT1zdp7dc"
    value = {"message": {"content": [{"text": "x"}, {"text": leak}]}}
    assert list(secret_paths(value)) == [("data.message.content[1].text", "aws-access-key"),
                                         ("data.message.content[1].text", "stripe-key")]


@pytest.mark.parametrize("text", ["a." * 200_000, "x://" * 100_000, "password" * 50_000, '"' * 200_000,
                                  "-----BEGIN PRIVATE KEY-----" * 10_000, "aws secret = " * 30_000,
                                  "QUFB" * 250_000, "cGFzc3dvcmQ9" * 20_000 + "!", "mysql " * 40_000 + "-p",
                                  "X-Api-Key:" * 30_000, "a-" * 100_000 + "token: 12345678",
                                  "://:" * 50_000 + "@", "Authorization: " * 20_000 + "1",
                                  "Authorization:" * 30_000])
def test_hostile_text_is_scanned_in_linear_time(text: str) -> None:
    started = time.process_time()
    redact_text(text)
    assert time.process_time() - started < 10  # quadratic backtracking would take minutes


SELF_EVIDENT = ("openai-key", "anthropic-key", "github-token", "aws-access-key", "jwt", "stripe-key",
                "google-api-key", "slack-token")
"""Kinds recognised by the token alone, without a key name or a scheme around it."""

tokens = st.sampled_from([secret for _, kind, secret in POSITIVES if kind in SELF_EVIDENT])
filler = st.text(alphabet=st.characters(codec="utf-8", exclude_categories=["Cs"]), max_size=40)


@given(filler, tokens, filler)
def test_a_token_never_survives_in_any_surroundings(before: str, secret: str, after: str) -> None:
    assert secret not in redact_text(f"{before} {secret} {after}")


@given(st.text(max_size=200))
def test_redaction_is_idempotent_and_total(text: str) -> None:
    once = redact_text(text)
    assert redact_text(once) == once
    assert find_secrets(once) == []


FRAGMENTS = st.sampled_from(["DB_", "PASSWORD", "api_key", "token", "=", ": ", '"', "'", " ", "\n", "x9Q",
                             "sk-", "proj-", "AKIA", "IOSFODNN7EXAMPLE", "eyJhbGciOiJI", ".", "://u:", "@h",
                             "Bearer ", "abc123def456ghi789", "ghp_", "-----BEGIN ", "PRIVATE KEY-----",
                             "aws", "secret", "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", "hint", "$",
                             "AIza", "sk_live_", "xoxb-", "Authorization: Basic ", "dXNlcjpodW50ZXIy", "https://",
                             "hooks.slack.com/services/", "whsec_", "github_pat_", "ASIA", "api-key", "Token",
                             "0123456789abcdefghijABCDEFGHIJ012345", "-----END ", "\t- ", "glpat-", "hf_",
                             "npm_", "mysql", " -p", "'", "X-Api-Key", "Authorization: token ", "redis://:",
                             "/", '"password": ', "83749201", "REJfUEFTU1dPUkQ9aHVudGVy", "aHVudGVyMg==",
                             "UEFTU1dPUkQ9", "ZWNyZXQ9"])


@settings(max_examples=500)
@given(st.lists(FRAGMENTS, max_size=30).map("".join))
def test_the_quick_anchor_tests_never_hide_a_secret(text: str) -> None:
    assert find_secrets(text) == scan(text, every=True)


@pytest.mark.parametrize(("name", "text", "secret"), SHAPES, ids=[name for name, _, _ in SHAPES])
def test_every_shape_of_the_corpus_is_redacted(name: str, text: str, secret: str) -> None:
    redacted = redact_text(text)
    assert secret not in redacted, redacted
    assert find_secrets(text) == scan(text, every=True)
    assert redact_text(redacted) == redacted


@pytest.mark.parametrize("text", BENIGN)
def test_the_benign_corpus_is_left_alone(text: str) -> None:
    assert find_secrets(text) == [], find_secrets(text)


def test_numbers_under_secret_names_are_redacted_in_values() -> None:
    value = {"db": {"password": 83749201, "port": 5432, "pin_code": 1234, "token_count": 7, "secret": 1.5,
                    "api_key": True}}
    placed = "[REDACTED:env-secret]"
    assert redact_value(value) == {"db": {"password": placed, "port": 5432, "pin_code": 1234,
                                          "token_count": 7, "secret": placed, "api_key": True}}
    assert sorted(secret_paths(value)) == [("data.db.password", "env-secret"),
                                           ("data.db.secret", "env-secret")]


def test_a_secret_used_as_a_key_is_redacted_and_never_named_in_a_path() -> None:
    key = "ghp_0123456789abcdefghijABCDEFGHIJ012345"
    value = {"tokens": {key: "owner", "AKIAIOSFODNN7EXAMPLE": 1, "AKIAIOSFODNN7EXAMPLF": 2, "plain": 3}}
    out = redact_value(value)
    assert key not in str(out) and "AKIAIOSFODNN7EXAMP" not in str(out)
    assert out["tokens"]["plain"] == 3 and len(out["tokens"]) == 4  # two redacted keys do not collide
    assert out["tokens"]["[REDACTED:github-token]"] == "owner"
    paths = list(secret_paths(value))
    assert len(paths) == 3 and not any(key in path or "AKIA" in path for path, _ in paths)
    assert redact_value(out) == out


ANCHORS = redact._ANCHORS
ANCHOR_TEXT = st.lists(st.sampled_from([*ANCHORS, *(anchor[:-1] for anchor in ANCHORS), "x", " ", "-", "_"]),
                       max_size=12).map("".join)


@settings(max_examples=500)
@given(ANCHOR_TEXT)
def test_the_anchor_regex_finds_exactly_the_anchors(text: str) -> None:
    assert (redact._ANCHOR.search(text) is not None) == any(anchor in text for anchor in ANCHORS)
