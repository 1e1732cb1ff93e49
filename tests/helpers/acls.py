"""ACLs set through a real Kafka admin client (confluent-kafka's AdminClient), for tests that
need a broker running Kafka's StandardAuthorizer."""

from __future__ import annotations

from typing import Any

#: Broker settings for the StandardAuthorizer, letting through what no ACL names.
STANDARD_AUTHORIZER = {
    "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
    "allow.everyone.if.no.acl.found": "true",
}


def allow_on_topic(bootstrap: str, topic: str, operation: str, principal: str) -> None:
    """ALLOW ``principal`` the ``operation`` (an AclOperation name: "READ", "DESCRIBE", …)
    on the literal topic ``topic`` from any host; waits for the broker's answer."""
    from confluent_kafka.admin import (
        AclBinding,
        AclOperation,
        AclPermissionType,
        AdminClient,
        ResourcePatternType,
        ResourceType,
    )

    admin: Any = AdminClient({"bootstrap.servers": bootstrap})
    binding = AclBinding(ResourceType.TOPIC, topic, ResourcePatternType.LITERAL, principal,
                         "*", AclOperation[operation], AclPermissionType.ALLOW)
    for f in admin.create_acls([binding], request_timeout=15).values():
        f.result()
