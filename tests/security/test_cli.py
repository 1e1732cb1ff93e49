"""``chronolog acls`` and ``chronolog quotas`` against a real broker, plus the ACL commands
of docs/authorization.md (which need a broker with an authorizer, so the doc-example
test skips them and this one runs them)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from confluent_kafka.admin import (
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    ResourcePatternType,
    ResourceType,
)

ROOT = Path(__file__).resolve().parents[2]
CHRONOLOG = [str(Path(sys.executable).parent / "chronolog")]
AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"


def cli(bootstrap: str, *args: str) -> str:
    env = dict(os.environ, CHRONOLOG_BOOTSTRAP_SERVER=bootstrap)
    out = subprocess.run([*CHRONOLOG, *args], env=env, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    return out.stdout


def all_acls(bootstrap: str) -> set[str]:
    f = AclBindingFilter(ResourceType.ANY, None, ResourcePatternType.ANY, None, None,
                         AclOperation.ANY, AclPermissionType.ANY)
    admin = AdminClient({"bootstrap.servers": bootstrap})
    return {str(b) for b in admin.describe_acls(f).result()}


def doc_acl_commands() -> list[str]:
    text = (ROOT / "docs" / "authorization.md").read_text()
    blocks = re.findall(r"```sh\n(.*?)```", text, re.S)
    return [line for b in blocks for line in b.splitlines() if line.startswith("chronolog acls")]


def test_the_documented_acl_commands_run_and_do_what_they_say(broker_factory):
    b = broker_factory({"authorizer.class.name": AUTHORIZER, "super.users": "User:ANONYMOUS"})
    commands = doc_acl_commands()
    assert commands
    outputs = [cli(b.bootstrap, *c.split()[1:]) for c in commands]
    listed = outputs[commands.index("chronolog acls list")]
    assert "ALLOW User:alice READ from host * on TOPIC:LITERAL:orders" in listed
    assert "DENY User:* WRITE from host * on TOPIC:PREFIXED:tmp." in listed
    assert "Removed DENY User:* WRITE" in outputs[-1]
    # What confluent-kafka sees afterwards is exactly what is left.
    assert {s.split(",")[1] + "/" + s.split(",")[5] for s in all_acls(b.bootstrap)} == {
        "orders/AclOperation.READ", "orders/AclOperation.WRITE", "billing/AclOperation.READ"}


def test_quota_commands_alter_and_describe(broker_factory):
    b = broker_factory()
    cli(b.bootstrap, "quotas", "alter", "--client-id", "c1", "--add-config",
        "producer_byte_rate=1024,consumer_byte_rate=2048")
    cli(b.bootstrap, "quotas", "alter", "--user-default", "--add-config", "request_percentage=25")
    out = cli(b.bootstrap, "quotas", "describe")
    assert "client-id=c1: consumer_byte_rate=2048, producer_byte_rate=1024" in out
    assert "user=<default>: request_percentage=25" in out
    cli(b.bootstrap, "quotas", "alter", "--client-id", "c1", "--delete-config", "consumer_byte_rate")
    assert cli(b.bootstrap, "quotas", "describe", "--client-id", "c1").strip() == (
        "client-id=c1: producer_byte_rate=1024")
    env = dict(os.environ, CHRONOLOG_BOOTSTRAP_SERVER=b.bootstrap)
    bad = subprocess.run([*CHRONOLOG, "quotas", "alter", "--client-id", "c1", "--add-config",
                          "producer_byte_rate=1.5"], env=env, capture_output=True, text=True)
    assert bad.returncode == 1 and "INVALID_REQUEST" in bad.stderr
