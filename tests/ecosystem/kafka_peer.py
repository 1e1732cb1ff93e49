"""The reference Apache Kafka (tools/kafka-ref/kafkaref.py) for tests: its node, tools and client.

Only a thin layer over the script, so a test uses exactly what a person running the
script by hand would: the same classpath, the same server.properties, the same JVM.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

from tests.helpers.scripts import load_script

REPO = Path(__file__).resolve().parents[2]
JAVA_SOURCES = REPO / "tools" / "kafka-ref" / "java"


kafkaref = load_script(REPO / "tools" / "kafka-ref" / "kafkaref.py", "kafkaref")
KafkaNode = kafkaref.KafkaNode
KafkaRefError = kafkaref.KafkaRefError
fetch = kafkaref.fetch
kafka_version = kafkaref.kafka_version

# Main classes of Kafka's tools in the pinned version (bin/*.sh name them; see
# docs/compatibility.md for the moves in later releases).
TOPICS = "org.apache.kafka.tools.TopicCommand"
CONSOLE_PRODUCER = "org.apache.kafka.tools.ConsoleProducer"
CONSOLE_CONSUMER = "org.apache.kafka.tools.consumer.ConsoleConsumer"
CONSUMER_GROUPS = "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand"
GET_OFFSETS = "org.apache.kafka.tools.GetOffsetShell"
CONFIGS = "kafka.admin.ConfigCommand"
DELETE_RECORDS = "org.apache.kafka.tools.DeleteRecordsCommand"
DUMP_LOG = "kafka.tools.DumpLogSegments"


def tool(main: str, *args: str, timeout: float = 120.0, check: bool = True,
         stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    """Run one of Kafka's tools as ``java -cp CP <main>``; a non-zero exit fails loudly."""
    cmd = kafkaref.java_cmd(main, *args)
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, input=stdin)
    if check and proc.returncode != 0:
        raise AssertionError(f"{main} {' '.join(args)} exited {proc.returncode}:\n"
                             f"stdout:\n{proc.stdout[-4000:]}\nstderr:\n{proc.stderr[-4000:]}")
    return proc


def java_program(name: str, *args: str, timeout: float = 240.0) -> list[dict[str, Any]]:
    """Run ``tools/kafka-ref/java/<name>.java`` (JEP 330, no build); its JSON lines, parsed."""
    proc = tool(str(JAVA_SOURCES / f"{name}.java"), *args, timeout=timeout)
    return [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
