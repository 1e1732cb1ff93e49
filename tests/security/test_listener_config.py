"""Listener and TLS settings with Kafka's names, checked without a running broker."""

from __future__ import annotations

import ssl
import subprocess
from pathlib import Path

import pytest

from broker.config import BrokerConfig, ConfigError
from broker.security.listeners import listeners
from broker.security.tls import server_context
from tests.security.certs import make_pki


def test_listeners_protocol_map_and_advertised_addresses_per_listener() -> None:
    cfg = BrokerConfig.from_properties({
        "listeners": "INTERNAL://0.0.0.0:9092,EXTERNAL://:9093,PLAINTEXT://127.0.0.1:0",
        "listener.security.protocol.map": "INTERNAL:PLAINTEXT,EXTERNAL:SASL_PLAINTEXT,PLAINTEXT:PLAINTEXT",
        "advertised.listeners": "EXTERNAL://broker.example.com:19093",
        "sasl.enabled.mechanisms": "SCRAM-SHA-512",
    })
    assert [(x.name, x.protocol, x.host, x.port) for x in listeners(cfg)] == [
        ("INTERNAL", "PLAINTEXT", "0.0.0.0", 9092), ("EXTERNAL", "SASL_PLAINTEXT", "", 9093),
        ("PLAINTEXT", "PLAINTEXT", "127.0.0.1", 0)]
    assert cfg.advertised_host_port(None, "EXTERNAL") == ("broker.example.com", 19093)
    assert cfg.advertised_host_port(None, "INTERNAL") == ("127.0.0.1", 9092)
    assert cfg.advertised_host_port(41234, "PLAINTEXT") == ("127.0.0.1", 41234)


@pytest.mark.parametrize("props, fragment", [
    ({"listeners": "PLAINTEXT://:1,PLAINTEXT://:2"}, "distinct name"),
    ({"listeners": "PLAINTEXT://:1,SASL_PLAINTEXT://:1", "sasl.enabled.mechanisms": "PLAIN"}, "distinct port"),
    ({"advertised.listeners": "PLAINTEXT://0.0.0.0:9092"}, "0.0.0.0"),
    ({"advertised.listeners": "OTHER://h:1"}, "not one of the listeners"),
    ({"listeners": "SASL_PLAINTEXT://:1"}, "GSSAPI"),
    ({"listeners": "SASL_PLAINTEXT://:1", "sasl.enabled.mechanisms": "OAUTHBEARER"}, "OAUTHBEARER"),
    ({"listener.security.protocol.map": "X:TLS"}, "listener.security.protocol.map"),
    ({"ssl.principal.mapping.rules": "RULE:^CN=(.*)$/$1/"}, "only DEFAULT"),
    ({"listeners": "SASL_PLAINTEXT://:1", "sasl.enabled.mechanisms": "PLAIN",
      "sasl.jaas.config": "com.example.Other required;"}, "PlainLoginModule"),
])
def test_bad_listener_settings_are_refused_naming_the_setting(props: dict[str, str], fragment: str) -> None:
    with pytest.raises(ConfigError) as info:
        BrokerConfig.from_properties(props)
    assert fragment in str(info.value)


def test_host_and_port_flags_are_the_plaintext_shorthand_and_listeners_win() -> None:
    assert BrokerConfig.load(None, [], host="0.0.0.0", port=1234).listeners == "PLAINTEXT://0.0.0.0:1234"
    both = "PLAINTEXT://127.0.0.1:1,SASL_PLAINTEXT://127.0.0.1:2"
    cfg = BrokerConfig.load(None, [f"listeners={both}", "sasl.enabled.mechanisms=PLAIN"], port=9)
    assert cfg.listeners == both


def test_listener_prefixed_settings_override_and_secrets_are_masked() -> None:
    jaas = 'org.apache.kafka.common.security.plain.PlainLoginModule required user_a="s3cret";'
    cfg = BrokerConfig.from_properties({
        "listeners": "PLAINTEXT://:1,SASL_PLAINTEXT://:2",
        "sasl.enabled.mechanisms": "SCRAM-SHA-256",
        "listener.name.sasl_plaintext.sasl.enabled.mechanisms": "PLAIN",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": jaas,
        "ssl.key.password": "k3y",
    })
    assert cfg.for_listener("SASL_PLAINTEXT", "sasl.enabled.mechanisms") == "PLAIN"
    assert cfg.for_listener("OTHER", "sasl.enabled.mechanisms") == "SCRAM-SHA-256"
    described = cfg.describe()
    assert "s3cret" not in str(described) and "k3y" not in str(described)
    assert described["listener.name.sasl_plaintext.plain.sasl.jaas.config"] == "[hidden]"
    assert cfg.is_sensitive("listener.name.x.ssl.key.password")
    assert not cfg.is_sensitive("ssl.client.auth")


def test_tls_key_store_inline_encrypted_and_protocol_settings(tmp_path: Path) -> None:
    pki = make_pki(tmp_path)
    key, chain = Path(pki.path("broker.key")).read_text(), Path(pki.path("broker.pem")).read_text()
    inline = BrokerConfig.from_properties({
        "listeners": "SSL://:1", "ssl.keystore.type": "PEM",
        "ssl.keystore.key": key, "ssl.keystore.certificate.chain": chain,
        "ssl.enabled.protocols": "TLSv1.3",
    })
    ctx = server_context(inline, "SSL", "SSL")
    assert ctx.minimum_version == ctx.maximum_version == ssl.TLSVersion.TLSv1_3
    assert ctx.verify_mode == ssl.CERT_NONE
    subprocess.run(["openssl", "pkcs8", "-topk8", "-in", pki.path("broker.key"), "-out",
                    pki.path("enc.key"), "-v2", "aes-256-cbc", "-passout", "pass:pw"], check=True)
    (tmp_path / "enc-keystore.pem").write_text(Path(pki.path("enc.key")).read_text() + chain)
    base = {"listeners": "SSL://:1", "ssl.keystore.type": "PEM",
            "ssl.keystore.location": str(tmp_path / "enc-keystore.pem"),
            "ssl.truststore.type": "PEM", "ssl.truststore.location": pki.ca,
            "ssl.client.auth": "requested", "ssl.cipher.suites": "ECDHE-ECDSA-AES128-GCM-SHA256"}
    ctx = server_context(BrokerConfig.from_properties({**base, "ssl.key.password": "pw"}), "SSL", "SSL")
    assert ctx.verify_mode == ssl.CERT_OPTIONAL
    with pytest.raises(ConfigError) as info:
        BrokerConfig.from_properties({**base, "ssl.key.password": "wrong-pw"})
    assert "wrong-pw" not in str(info.value)
    with pytest.raises(ConfigError, match="ssl.enabled.protocols"):
        BrokerConfig.from_properties({**base, "ssl.key.password": "pw", "ssl.enabled.protocols": "SSLv3"})
    sasl_ssl = BrokerConfig.from_properties({**base, "ssl.key.password": "pw",
                                             "listeners": "SASL_SSL://:1", "sasl.enabled.mechanisms": "PLAIN"})
    # Kafka ignores the broker-wide ssl.client.auth on SASL_SSL listeners.
    assert server_context(sasl_ssl, "SASL_SSL", "SASL_SSL").verify_mode == ssl.CERT_NONE
