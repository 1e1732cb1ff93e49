"""The console's ``--client-config`` security settings (Kafka/librdkafka names), parsed from
properties text: every valid combination becomes the ClientSecurity an independent reading
of the same settings predicts; every value the client cannot honour is refused, naming it.

The CA and client key files are real ones made with the openssl CLI (tests/security/certs.py),
so "the TLS files load" is checked by Python's ssl module, not assumed.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from client.security import KNOWN
from console.settings import SettingsError, client_settings, parse_properties
from tests.security.certs import Pki, make_pki

TLS = ("SSL", "SASL_SSL")
SASL = ("SASL_PLAINTEXT", "SASL_SSL")
word = st.text("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.@!#", min_size=1,
               max_size=20).filter(lambda s: s[0] not in "#!")


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    return make_pki(tmp_path_factory.mktemp("settings-pki"))


def _text(props: dict[str, str]) -> str:
    return "# client.properties\n" + "".join(f"{k} = {v}\n" for k, v in props.items())


@settings(max_examples=60, deadline=None)
@given(data=st.data(), protocol=st.sampled_from(("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")),
       lower=st.booleans())
def test_valid_settings_become_the_security_they_name(pki: Pki, data: st.DataObject, protocol: str,
                                                       lower: bool) -> None:
    props = {"security.protocol": protocol.lower() if lower else protocol}
    mechanism, user, password = "PLAIN", "", ""
    if protocol in SASL:
        mechanism = data.draw(st.sampled_from(("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")))
        name = data.draw(st.sampled_from(("sasl.mechanism", "sasl.mechanisms")))
        user, password = data.draw(word), data.draw(word)
        props |= {name: mechanism, "sasl.username": user, "sasl.password": password}
    ca = cert = key = ""
    verify = True
    if protocol in TLS:
        if data.draw(st.booleans()):
            ca = pki.ca
            props["ssl.ca.location"] = ca
        if data.draw(st.booleans()):
            cert, key = pki.path("client.pem"), pki.path("client.key")
            props |= {"ssl.certificate.location": cert, "ssl.key.location": key}
        algorithm = data.draw(st.sampled_from((None, "https", "HTTPS", "none", "")))
        if algorithm is not None:
            props["ssl.endpoint.identification.algorithm"] = algorithm
            verify = algorithm.lower() == "https"
    props["group.id"] = "someone-elses"  # a non-security setting: reported unused
    s = client_settings(parse_properties(_text(props)))
    sec = s.security
    assert (sec.protocol, sec.mechanism, sec.username, sec.password) == (protocol, mechanism, user, password)
    assert (sec.ca_location, sec.certificate_location, sec.key_location) == (ca, cert, key)
    assert sec.verify_hostname == verify
    assert s.unused == ("group.id",)
    ctx = sec.ssl_context()
    assert (ctx is not None) == (protocol in TLS)
    if ctx is not None:
        assert ctx.check_hostname == verify


@given(suffix=word.filter(lambda s: s not in {k.split(".", 1)[1] for k in KNOWN}),
       prefix=st.sampled_from(("ssl.", "sasl.")))
def test_an_unknown_security_name_is_refused_by_name(prefix: str, suffix: str) -> None:
    name = prefix + suffix
    with pytest.raises(SettingsError, match="unknown client security setting") as e:
        client_settings({"security.protocol": "SASL_SSL", "sasl.username": "u", name: "x"})
    assert name in str(e.value)


SASL_USER = {"sasl.username": "u", "sasl.password": "p"}


@pytest.mark.parametrize(("props", "message"), [
    ({"security.protocol": "TLS"}, "security.protocol=TLS is not one of"),
    ({"security.protocol": "SASL_SSL"}, "needs sasl.username"),
    ({"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "GSSAPI", **SASL_USER},
     "GSSAPI is not supported"),
    ({"security.protocol": "SASL_SSL", "sasl.mechanism": "OAUTHBEARER", **SASL_USER},
     "OAUTHBEARER is not supported"),
    ({"security.protocol": "SSL", "ssl.truststore.location": "/x"}, "ssl.truststore.location"),
    ({"security.protocol": "SASL_SSL", "sasl.jaas.config": "x", **SASL_USER}, "sasl.jaas.config"),
    ({"security.protocol": "SSL", "ssl.endpoint.identification.algorithm": "http"},
     "is not https or none"),
    ({"sasl.username": "u"}, "sasl.username: not used with security.protocol=PLAINTEXT"),
    ({"security.protocol": "SASL_PLAINTEXT", "ssl.ca.location": "/x", **SASL_USER},
     "ssl.ca.location: not used with security.protocol=SASL_PLAINTEXT"),
    ({"security.protocol": "SSL", "sasl.mechanism": "PLAIN"}, "sasl.mechanism: not used"),
    ({"security.protocol": "SSL", "ssl.ca.location": "/no/such/ca.pem"}, "cannot load the TLS files"),
])
def test_settings_the_client_cannot_honour_are_refused_with_a_reason(props: dict[str, str],
                                                                     message: str) -> None:
    with pytest.raises(SettingsError, match=message):
        client_settings(props)


def test_tls_files_that_do_not_load_are_refused(pki: Pki, tmp_path: Path) -> None:
    not_pem = tmp_path / "not.pem"
    not_pem.write_text("hello\n")
    for props in ({"ssl.ca.location": str(not_pem)},
                  {"ssl.certificate.location": pki.path("client.pem"), "ssl.key.location": pki.path("ca.key")},
                  {"ssl.certificate.location": str(not_pem)}):
        with pytest.raises(SettingsError, match="cannot load the TLS files"):
            client_settings({"security.protocol": "SSL", **props})

