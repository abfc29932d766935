"""The name a Kafka broker gives a client that authenticates with a TLS certificate.

With mutual TLS and no SASL, Kafka's principal is the client certificate's subject, as
Java's `X500Principal.getName()` spells it (RFC 2253: `CN=engine,OU=payments,O=Acme`),
unless the broker's `ssl.principal.mapping.rules` turn it into something shorter; then
`kafka.client_principal` names the result. The engine's principal names its operator topic
and the ACLs `txcoord provision` checks (coordinator/core/topics.py): taking it to be
`ANONYMOUS`, as for a client without a certificate, put both on a principal nobody has.

The core is the standard library only (tests/test_layers.py), and `ssl` decodes no
certificate it did not verify itself, so the subject is read from the DER here: the few
steps from the certificate to its subject's attributes, nothing else of X.509.
"""

from __future__ import annotations

import functools
import ssl
from pathlib import Path

from coordinator.core.errors import ConfigurationError

__all__ = ["subject_of"]

#: RFC 2253's short names (Java's too); any other attribute is spelled `<oid>=#<hex DER>`.
_NAMES = {
    "2.5.4.3": "CN",
    "2.5.4.6": "C",
    "2.5.4.7": "L",
    "2.5.4.8": "ST",
    "2.5.4.9": "STREET",
    "2.5.4.10": "O",
    "2.5.4.11": "OU",
    "0.9.2342.19200300.100.1.1": "UID",
    "0.9.2342.19200300.100.1.25": "DC",
}
#: DER string types an attribute value may have (UTF8, Printable, T61, IA5, BMP, Universal).
_STRINGS = {
    0x0C: "utf-8",
    0x13: "ascii",
    0x14: "latin-1",
    0x16: "ascii",
    0x1E: "utf-16-be",
    0x1C: "utf-32-be",
}
_SEQUENCE, _SET, _OID = 0x30, 0x31, 0x06


class _MalformedError(ValueError):
    """The DER does not hold what a certificate holds."""


def subject_of(certfile: str) -> str:
    """Return the subject of the first certificate in PEM file `certfile` (RFC 2253)."""
    path = Path(certfile)
    try:
        stat = path.stat()
    except OSError as exc:
        raise ConfigurationError(f"kafka.ssl_certfile {certfile}: {exc.strerror}") from None
    return _subject(str(path), stat.st_mtime_ns)


@functools.lru_cache(maxsize=8)
def _subject(certfile: str, mtime_ns: int) -> str:
    """Read the subject once per version of the file (`mtime_ns` is the cache's key)."""
    text = Path(certfile).read_text(errors="replace")
    begin, end = "-----BEGIN CERTIFICATE-----", "-----END CERTIFICATE-----"
    try:
        pem = text[text.index(begin) : text.index(end, text.index(begin)) + len(end)]
        return subject_in(ssl.PEM_cert_to_DER_cert(pem))
    except ValueError as exc:  # no PEM block, bad base64, or not a certificate's DER
        raise ConfigurationError(
            f"kafka.ssl_certfile {certfile} holds no readable PEM certificate: {exc}"
        ) from None


def subject_in(der: bytes) -> str:
    """Return the subject of a DER certificate, spelled as RFC 2253 (most specific first)."""
    certificate, _ = _element(der, 0, _SEQUENCE)
    tbs, _ = _element(der, certificate[0], _SEQUENCE)
    at = tbs[0]
    if der[at] == 0xA0:  # [0] version, present from v2 on
        at = _element(der, at)[1]
    for _field in ("serialNumber", "signature", "issuer", "validity"):
        at = _element(der, at)[1]
    (start, stop), _ = _element(der, at, _SEQUENCE)
    rdns = []
    while start < stop:
        (rdn, start) = _element(der, start, _SET)
        attributes, at = [], rdn[0]
        while at < rdn[1]:
            (pair, at) = _element(der, at, _SEQUENCE)
            (oid, value_at) = _element(der, pair[0], _OID)
            attributes.append(_attribute(der, oid, value_at))
        rdns.append("+".join(attributes))
    return ",".join(reversed(rdns))  # DER holds the least specific first


def _element(der: bytes, at: int, tag: int | None = None) -> tuple[tuple[int, int], int]:
    """Return the (start, end) of the content of the DER element at `at`, and its end."""
    if at + 2 > len(der) or (tag is not None and der[at] != tag):
        raise _MalformedError(f"expected DER tag {tag} at byte {at}")
    length, at = der[at + 1], at + 2
    if length & 0x80:
        count = length & 0x7F
        length, at = int.from_bytes(der[at : at + count], "big"), at + count
    if at + length > len(der):
        raise _MalformedError(f"a DER element at byte {at} runs past the end")
    return (at, at + length), at + length


def _attribute(der: bytes, oid: tuple[int, int], value_at: int) -> str:
    """Return one `type=value` of a subject, as RFC 2253 spells it."""
    dotted = _dotted(der[oid[0] : oid[1]])
    (start, stop), _ = _element(der, value_at)
    encoding = _STRINGS.get(der[value_at])
    if dotted not in _NAMES or encoding is None:
        return f"{dotted}=#{der[value_at:stop].hex()}"
    return f"{_NAMES[dotted]}={_escaped(der[start:stop].decode(encoding))}"


def _dotted(body: bytes) -> str:
    """Return an OBJECT IDENTIFIER's content as dotted decimal."""
    numbers, value = [], 0
    for byte in body:
        value = value << 7 | byte & 0x7F
        if not byte & 0x80:
            numbers.append(value)
            value = 0
    if not numbers:
        raise _MalformedError("an empty object identifier")
    first = min(numbers[0] // 40, 2)
    return ".".join(map(str, [first, numbers[0] - 40 * first, *numbers[1:]]))


def _escaped(value: str) -> str:
    """Escape a value's special characters as RFC 2253 does."""
    out = "".join(f"\\{c}" if c in ',+"\\<>;' else c for c in value)
    if out.startswith(("#", " ")):
        out = "\\" + out
    if out.endswith(" ") and not out.endswith("\\ "):
        out = out[:-1] + "\\ "
    return out
