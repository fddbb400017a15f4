"""A corpus of secret shapes (text holding one secret each) and benign look-alikes, for recall tests.

``SHAPES``: ``(name, text, secret)``; the secret must not survive ``redact_text``. Kept apart from
the unit tests so the recall figure of ``test_redact`` and the audit test read one list.
"""

from __future__ import annotations

import base64

AWS_SECRET = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"
JWT = ("eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIiwibmFtZSI6IkpvaG4ifQ."
       "SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c")
ENV_FILE = "DB_HOST=db.internal\nDB_PASSWORD=Tr0ub4dor-and-3\nSTRIPE_SECRET=whsec_notreal\n"
ENV_B64 = base64.b64encode(ENV_FILE.encode()).decode()

SHAPES: list[tuple[str, str, str]] = [
    # token formats recognised alone
    ("openai", "export OPENAI_API_KEY=sk-proj-Ab3dEfGh1jKlMnOpQrStUvWxYz0123456789",
     "sk-proj-Ab3dEfGh1jKlMnOpQrStUvWxYz0123456789"),
    ("anthropic", "ANTHROPIC sk-ant-api03-Zx9_yW8-vU7tS6rQ5pO4nM3lK2jI1hG0fE",
     "sk-ant-api03-Zx9_yW8-vU7tS6rQ5pO4nM3lK2jI1hG0fE"),
    ("github", "token ghp_0123456789abcdefghijABCDEFGHIJ012345 here",
     "ghp_0123456789abcdefghijABCDEFGHIJ012345"),
    ("github fine-grained", "github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyz",
     "github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyz"),
    ("gitlab", "git clone https://oauth2@gitlab.com/x.git # glpat-xY3kP9qR2mN7vB4cZ8wT",
     "glpat-xY3kP9qR2mN7vB4cZ8wT"),
    ("gitlab runner", "runner token glrt-t1_5ZwQ9nLk3Jx8VbR2mPq7", "glrt-t1_5ZwQ9nLk3Jx8VbR2mPq7"),
    ("hugging face", "huggingface-cli login --token hf_AbCdEfGhIjKlMnOpQrStUvWxYz01234567",
     "hf_AbCdEfGhIjKlMnOpQrStUvWxYz01234567"),
    ("npm", "publish with npm_1a2B3c4D5e6F7g8H9i0JkLmNoPqRsTuVwXyZ",
     "npm_1a2B3c4D5e6F7g8H9i0JkLmNoPqRsTuVwXyZ"),
    ("npmrc", "//registry.npmjs.org/:_authToken=npm_Zz9Yy8Xx7Ww6Vv5Uu4Tt3Ss2Rr1Qq0PpOoNn",
     "npm_Zz9Yy8Xx7Ww6Vv5Uu4Tt3Ss2Rr1Qq0PpOoNn"),
    ("slack", "slack xoxb-123456789012-1234567890123-AbCdEfGhIjKlMnOp",
     "xoxb-123456789012-1234567890123-AbCdEfGhIjKlMnOp"),
    ("slack webhook", "https://hooks.slack.com/services/T000/B000/XXXXXXXXXXXXXXXXXXXXXXXX",
     "XXXXXXXXXXXXXXXXXXXXXXXX"),
    ("google", "maps AIzaSyA1b2C3d4E5f6G7h8I9j0KlMnOpQrStUvW ok", "AIzaSyA1b2C3d4E5f6G7h8I9j0KlMnOpQrStUvW"),
    ("stripe", "stripe sk_live_4eC39HqLyjWDarjtT1zdp7dc", "sk_live_4eC39HqLyjWDarjtT1zdp7dc"),
    ("aws access key", "aws_access_key_id = AKIAIOSFODNN7EXAMPLE", "AKIAIOSFODNN7EXAMPLE"),
    ("aws secret key", f"aws_secret_access_key = {AWS_SECRET}", AWS_SECRET),
    ("jwt", f"cookie session={JWT};", JWT),
    ("private key", "-----BEGIN RSA PRIVATE KEY-----\nMIIEpAIBAAKCAQEA7bq (truncated)",
     "MIIEpAIBAAKCAQEA7bq"),
    # credentials in URLs
    ("url password", "psql postgresql://admin:hunter2@db.internal:5432/prod", "hunter2"),
    ("url password, empty user", "redis-cli -u redis://:s3cr3tRedisPw@cache:6379/0", "s3cr3tRedisPw"),
    ("url password with /", "mongodb://app:pa/ss+w0rd@mongo:27017/db", "pa/ss+w0rd"),
    ("url password with / and empty user", "amqp://:Zq/9x/K2m@rabbit/", "Zq/9x/K2m"),
    ("url token as user", "https://x-access-token:ghs_16C7e42F292c6912E7710c838347Ae178B4a@github.com/o/r.git",
     "ghs_16C7e42F292c6912E7710c838347Ae178B4a"),
    # HTTP headers
    ("bearer", "curl -H 'Authorization: Bearer abc123def456ghi789jkl0'", "abc123def456ghi789jkl0"),
    ("basic", "Authorization: Basic dXNlcjpodW50ZXIy", "dXNlcjpodW50ZXIy"),
    ("authorization token", "curl -H 'Authorization: token 9f8e7d6c5b4a39281706f5e4d3c2b1a0f9e8d7c6' x",
     "9f8e7d6c5b4a39281706f5e4d3c2b1a0f9e8d7c6"),
    ("x-api-key", "curl -H \"X-Api-Key: Qm9vbGVhbkZhbHNlMTIzNDU2\" https://api.example.com",
     "Qm9vbGVhbkZhbHNlMTIzNDU2"),
    ("x-api-key header line", "X-API-KEY: live_7d1f0a9c3b2e4f5a6b7c8d9e\r\nAccept: */*",
     "live_7d1f0a9c3b2e4f5a6b7c8d9e"),
    ("private-token header", "curl --header \"PRIVATE-TOKEN: Zk8rT3wQ1pL6mN2b\" gitlab/api",
     "Zk8rT3wQ1pL6mN2b"),
    # command lines
    ("mysql -p", "mysql -u root -pS3cretPass db < dump.sql", "S3cretPass"),
    ("mysql -p quoted", "mysqldump -h db -u app -p'Pa55 word!' shop > shop.sql", "Pa55 word!"),
    ("mysql -p first", "mysql -pHunter2Hunter2 -e 'show tables'", "Hunter2Hunter2"),
    # key = value in all its forms
    ("env", "DB_PASSWORD=correct-horse-battery ./migrate", "correct-horse-battery"),
    ("env quoted", "export GH_TOKEN='s3cr3tvalue'", "s3cr3tvalue"),
    ("json", '{"client_secret": "abc\\"def"}', 'abc\\"def'),
    ("json number", '{"user": "app", "password": 83749201}', "83749201"),
    ("yaml", "smtp:\n  password: letmein99\n", "letmein99"),
    ("yaml number", "db:\n  password: 83749201\n", "83749201"),
    ("python", 'db_password = "hunter2!"  # python', "hunter2!"),
    ("cli flag", "deploy --api-key=Zx81Qw72Er63 --region eu", "Zx81Qw72Er63"),
    # wrapped
    ("base64 .env", f"kubectl create secret generic app --from-literal=env={ENV_B64}", ENV_B64),
    ("base64 .env in yaml", f"data:\n  .env: {ENV_B64}\n", ENV_B64),
]

BENIGN: list[str] = [
    "commit 3f786850e387550fdab836ed7e6dc881de23001b on main",
    "postgresql://postgres@127.0.0.1:5432/test",
    "http://localhost:8080/path?x=1 and http://localhost:3000/users/@me",
    "https://registry.npmjs.org/@types/node and https://github.com:443/org/@scope/pkg",
    "git@github.com:org/repo.git",
    "the token budget is spent; a password is required",
    "MAX_TOKENS=4096 and token_count=17",
    '{"max_tokens": 4096, "input_tokens": 120, "password_hint": "dog", "token_count": 5}',
    "Content-Type: application/json\nX-Request-Id: 7f9c2ba4e88f827d6160\nX-RateLimit-Remaining: 59",
    "X-Api-Key: string\nAuthorization: <token>\nX-Api-Key: ${API_KEY}",
    "mysql -u root -p db  # prompts for the password; mysql -P 3306 -h db",
    'mysql -uroot -p"$MYSQL_ROOT_PASSWORD" app; mysqldump -p$PW db; docker run -p 3306:3306 mysql',
    "authorization: required\nAuthorization: Bearer $TOKEN\ncurl -H \"X-Api-Key: required\" url",
    "pip install huggingface_hub; from huggingface_hub import hf_hub_download",
    "npm_config_cache=/tmp/npm and npm_package_version",
    f"data {base64.b64encode(b'The quick brown fox jumps over the lazy dog again and again').decode()}",
    "echo aGVsbG8gd29ybGQ= | base64 -d",
    "## Heading\n```python\nprint('glpat is a prefix')\n```",
]
