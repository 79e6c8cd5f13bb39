"""Secret formats as agents carry them, with realistic fake values, and near misses that must
be left alone.

Shapes follow what public secret scanners look for (cloud keys, provider tokens, key blocks,
connection strings, credentials in JSON, flags and URLs). Each value is made here from a
seeded generator in the alphabet and length its format uses, so no real credential is ever in
the repository and each secret is unique enough to be searched for in a whole store dump.

A `Probe` is a text as an agent would send it (a command, a tool's output, a config line)
and the secrets in it that must never be stored. Where it is sent (an attribute value, a
key, a span or event name, a log body ...) is the sender's business (`tests/test_secrets`).
"""

from __future__ import annotations

import base64
import json
import random
import string
from dataclasses import dataclass

_RNG = random.Random(0x5EC12E7)
UPPER_DIGITS = string.ascii_uppercase + string.digits
ALNUM = string.ascii_letters + string.digits
B64 = ALNUM + "+/"
URLSAFE = ALNUM + "-_"
HEX = "0123456789abcdef"


def fake(alphabet: str, n: int) -> str:
    return "".join(_RNG.choice(alphabet) for _ in range(n))


@dataclass(frozen=True)
class Probe:
    name: str
    text: str
    secrets: tuple[str, ...]


def _pem(kind: str, body_lines: int = 6) -> tuple[str, str]:
    body = "\n".join(fake(B64, 64) for _ in range(body_lines))
    return f"-----BEGIN {kind}-----\n{body}\n-----END {kind}-----\n", body


def _jwt() -> str:
    header = base64.urlsafe_b64encode(b'{"alg":"HS256","typ":"JWT"}').decode().rstrip("=")
    claims = base64.urlsafe_b64encode(
        json.dumps({"sub": fake(HEX, 12), "exp": 1999999999}).encode()
    ).decode()
    return f"{header}.{claims.rstrip('=')}.{fake(URLSAFE, 43)}"


def _probes() -> list[Probe]:
    probes: list[Probe] = []

    def add(name: str, text: str, *secrets: str) -> None:
        probes.append(Probe(name, text, secrets))

    # AWS: the CLI's JSON for temporary credentials, the environment, the config file.
    key_id, secret, session = "ASIA" + fake(UPPER_DIGITS, 16), fake(B64, 40), fake(B64, 356)
    add(
        "aws-cli-json",
        json.dumps(
            {
                "Credentials": {
                    "AccessKeyId": key_id,
                    "SecretAccessKey": secret,
                    "SessionToken": session,
                    "Expiration": "2026-12-01T05:00:00+00:00",
                },
                "AssumedRoleUser": {"Arn": "arn:aws:sts::123456789012:assumed-role/ops/agent"},
            },
            indent=4,
        ),
        key_id,
        secret,
        session,
    )
    env_secret = fake(B64, 40)
    add(
        "aws-env",
        f"export AWS_SECRET_ACCESS_KEY={env_secret}\nexport AWS_REGION=eu-west-1",
        env_secret,
    )
    conf_id, conf_secret = "AKIA" + fake(UPPER_DIGITS, 16), fake(B64, 40)
    add(
        "aws-config-file",
        f"[default]\naws_access_key_id = {conf_id}\naws_secret_access_key = {conf_secret}\n",
        conf_id,
        conf_secret,
    )
    # Key blocks.
    for kind in (
        "PGP PRIVATE KEY BLOCK",
        "OPENSSH PRIVATE KEY",
        "RSA PRIVATE KEY",
        "EC PRIVATE KEY",
        "PRIVATE KEY",
        "ENCRYPTED PRIVATE KEY",
    ):
        block, body = _pem(kind)
        add(f"key-block-{kind.lower().replace(' ', '-')}", f"cat ~/.ssh/key\n{block}", body)
    block, body = _pem("RSA PRIVATE KEY")
    add("key-block-in-json", json.dumps({"private_key_pem": block, "kid": "k1"}), body)
    # JSON inside a JSON string, once and twice; a password with spaces.
    inner_password = fake(ALNUM, 18)
    add(
        "json-in-json-string",
        json.dumps(
            {"tool": "psql", "args": json.dumps({"password": inner_password, "db": "shop"})}
        ),
        inner_password,
    )
    deep_password = fake(ALNUM, 18)
    add(
        "json-in-json-in-json",
        json.dumps({"a": json.dumps({"b": json.dumps({"dbPassword": deep_password})})}),
        deep_password,
    )
    phrase = " ".join(fake(string.ascii_lowercase, 9) for _ in range(3))
    add("json-password-with-spaces", json.dumps({"passphrase": phrase}), *phrase.split())
    # Payment, cloud and chat providers.
    stripe_live, stripe_restricted, stripe_hook = (
        "sk_live_" + fake(ALNUM, 24),
        "rk_live_" + fake(ALNUM, 24),
        "whsec_" + fake(ALNUM, 32),
    )
    add(
        "stripe",
        f"stripe.api_key = '{stripe_live}'  # restricted: {stripe_restricted}, hook {stripe_hook}",
        stripe_live,
        stripe_restricted,
        stripe_hook,
    )
    google_key, google_oauth = "AIza" + fake(URLSAFE, 35), "ya29." + fake(URLSAFE, 60)
    add(
        "google",
        f"GET https://maps.googleapis.com/maps/api/geocode/json?key={google_key}\n"
        f"Authorization header was {google_oauth}",
        google_key,
        google_oauth,
    )
    hook_path = f"T{fake(UPPER_DIGITS, 8)}/B{fake(UPPER_DIGITS, 10)}/{fake(ALNUM, 24)}"
    add(
        "slack-webhook",
        f'curl -X POST -d \'{{"text":"deploy done"}}\' https://hooks.slack.com/services/{hook_path}',
        hook_path.split("/")[-1],
    )
    bot = f"xoxb-{fake(string.digits, 12)}-{fake(string.digits, 13)}-{fake(ALNUM, 24)}"
    user = f"xoxp-{fake(string.digits, 12)}-{fake(string.digits, 12)}-{fake(HEX, 32)}"
    app = f"xapp-1-A{fake(UPPER_DIGITS, 10)}-{fake(string.digits, 13)}-{fake(HEX, 64)}"
    add("slack-tokens", f"SLACK_BOT_TOKEN={bot} slack user {user} app-level {app}", bot, user, app)
    account_key = fake(B64, 86) + "=="
    add(
        "azure-storage-connection-string",
        "DefaultEndpointsProtocol=https;AccountName=shopdata;"
        f"AccountKey={account_key};EndpointSuffix=core.windows.net",
        account_key,
    )
    bus_key = fake(B64, 43) + "="
    add(
        "azure-service-bus",
        "Endpoint=sb://shop.servicebus.windows.net/;SharedAccessKeyName=RootManageSharedAccessKey;"
        f"SharedAccessKey={bus_key}",
        bus_key,
    )
    sas = fake(B64, 43).replace("+", "%2B").replace("/", "%2F") + "%3D"
    add(
        "azure-sas-url",
        "https://shopdata.blob.core.windows.net/backups/db.tgz?sv=2022-11-02&ss=b&srt=o"
        f"&sp=r&se=2026-12-02T00:00:00Z&spr=https&sig={sas}",
        sas,
    )
    # Source forges and package registries.
    ghp, pat, gho, glpat = (
        "ghp_" + fake(ALNUM, 36),
        "github_pat_" + fake(ALNUM, 22) + "_" + fake(ALNUM, 59),
        "gho_" + fake(ALNUM, 36),
        "glpat-" + fake(URLSAFE, 20),
    )
    add(
        "git-forges",
        f"git clone https://x-access-token:{gho}@github.com/acme/shop.git; "
        f"GH_TOKEN={ghp} gh pr list; fine-grained {pat}; gitlab {glpat}",
        ghp,
        pat,
        gho,
        glpat,
    )
    npm, hf, sendgrid = (
        "npm_" + fake(ALNUM, 36),
        "hf_" + fake(ALNUM, 34),
        f"SG.{fake(URLSAFE, 22)}.{fake(URLSAFE, 43)}",
    )
    add(
        "registries-and-apis",
        f"//registry.npmjs.org/:_authToken={npm}\nHF hub {hf}, mail {sendgrid}",
        npm,
        hf,
        sendgrid,
    )
    openai, anthropic = "sk-proj-" + fake(URLSAFE, 48), "sk-ant-api03-" + fake(URLSAFE, 80)
    add(
        "llm-providers",
        f'OPENAI_API_KEY={openai}\nclient = Anthropic(api_key="{anthropic}")',
        openai,
        anthropic,
    )
    jwt = _jwt()
    add("jwt", f"the session cookie holds {jwt} until it expires", jwt)
    bearer = fake(URLSAFE, 40)
    add(
        "bearer-header", f"curl -H 'Authorization: Bearer {bearer}' https://api.shop/orders", bearer
    )
    url_password = fake(ALNUM, 16)
    add(
        "url-password",
        f"DATABASE_URL=postgres://shop:{url_password}@db.internal:5432/shop",
        url_password,
    )
    curl_password = fake(ALNUM, 14)
    add(
        "curl-user",
        f"curl -u admin:{curl_password} https://registry.internal/v2/_catalog",
        curl_password,
    )
    # camelCase and kebab keys in key=value and JSON text.
    camel = {k: fake(ALNUM, 20) for k in ("dbPassword", "githubToken", "clientSecret", "apiKey")}
    add("camel-case-json", json.dumps(camel), *camel.values())
    kebab = fake(ALNUM, 32)
    add("kebab-header", f"x-api-key: {kebab}\nx-request-id: 7", kebab)
    env_password = fake(ALNUM, 16)
    add(
        "env-file",
        f"PGHOST=db\nPGPASSWORD={env_password}\nDB_PASSWORD={env_password}",
        env_password,
    )
    flag_token = fake(ALNUM, 24)
    add("flag-equals", f"deploy --token={flag_token} --env prod", flag_token)
    json_argv = fake(ALNUM, 20)
    add(
        "argv-in-json-string", json.dumps(["mysql", "-h", "db", "--password", json_argv]), json_argv
    )
    return probes


PROBES: list[Probe] = _probes()

# Values whose key says they are secret, whatever they look like (sent as attribute keys).
KEYED: dict[str, str] = {
    key: fake(ALNUM, 22)
    for key in (
        "dbPassword",
        "githubToken",
        "x-api-key",
        "SecretAccessKey",
        "SessionToken",
        "clientSecret",
        "db.connection_string",
        "AccountKey",
    )
}

# Argument lists as OTLP arrays: a flag, then its secret, in the next item.
ARGV_SECRET = fake(ALNUM, 20)
ARGV: list[str] = ["mysql", "-h", "db", "--password", ARGV_SECRET, "-e", "select 1"]
ARGV_EQUALS_SECRET = fake(ALNUM, 20)
ARGV_EQUALS: list[str] = ["deploy", f"--api-key={ARGV_EQUALS_SECRET}", "--wait"]

# Texts that look a little like secrets and must be stored exactly as sent.
NEAR_MISSES: tuple[str, ...] = (
    "the token count was 1532 (input_tokens: 1200, output_tokens: 332, max_tokens=4096)",
    "Open the password reset page at https://shop.example/account/reset",
    "password_policy: at least 12 characters",
    "commit 3f9a1c2e4b5d6f7081928374655647382910abcd merged into main",
    "request 123e4567-e89b-12d3-a456-426614174000 took 81 ms",
    "kubectl get secrets -n shop",
    "The secret to fast builds is caching.",
    "a bearer of bad news",
    "sk-learn and scikit-learn are the same library",
    '{"tokens": 5, "key": "region", "value": "eu-west-1", "api_key_id": 42}',
    "AKIA is how AWS access key ids begin",
    "pip install python-dotenv==1.0.1 && ls -la ~/.aws",
    "sha256:9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
    "ssh -p 2222 deploy@bastion",
    "SELECT count(*) FROM users WHERE password_hash IS NULL",
)
