"""TLS from certificate files: the collector's (``ServerTls``) and its clients' (``ClientTls``).

Files are loaded once, up front, so a wrong path or a file that is not PEM is one
clear error naming the file and the flag, before anything listens or sends.
"""

from __future__ import annotations

import ssl
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["CLIENT_TLS_ENV", "ClientTls", "ServerTls", "tls_hint"]

#: The environment variables of ``ClientTls``'s fields (a launcher passes them on).
CLIENT_TLS_ENV = {
    "ca_file": "STEPWATCH_CA_FILE",
    "client_cert": "STEPWATCH_CLIENT_CERT",
    "client_key": "STEPWATCH_CLIENT_KEY",
}


#: OpenSSL's reasons, in words; its PEM_LIB comes without a reason attached.
_REASONS = {
    "PEM_LIB": "not PEM, or the key is not the certificate's",
    "KEY_VALUES_MISMATCH": "the key is not the certificate's",
    "NO_CERTIFICATE_OR_CRL_FOUND": "no PEM certificate in it",
}


#: What a failed handshake says, and what the person running the client can do about it.
_HANDSHAKE_HINTS = (
    (
        "CERTIFICATE_VERIFY_FAILED",
        "its certificate is not signed by a CA we trust: pass that CA "
        "with --ca-file or STEPWATCH_CA_FILE",
    ),
    (
        "WRONG_VERSION_NUMBER",
        "it does not speak TLS: use its http:// URL, or start it with --tls-cert and --tls-key",
    ),
    (
        "CERTIFICATE_REQUIRED",
        "it asks for a client certificate: pass --client-cert and "
        "--client-key (or STEPWATCH_CLIENT_CERT, STEPWATCH_CLIENT_KEY)",
    ),
    ("UNKNOWN_CA", "it does not trust our client certificate: pass one its --tls-client-ca signed"),
    (
        "BAD_CERTIFICATE",
        "it does not trust our client certificate: pass one its --tls-client-ca signed",
    ),
)


#: How a collector that refused the handshake looks from here: TLS 1.3 checks the client's
#: certificate after ours, so its refusal arrives as a closed connection, not as an alert.
#: How a peer that hung up (a mutual-TLS server refusing a client without a certificate, under
#: TLS 1.3 after the handshake or during it, depending on timing) shows in errors.
_CLOSED = (
    "CLOSED_CONNECTION_WITHOUT_RESPONSE",
    "DISCONNECTED_WITHOUT_SENDING_A_RESPONSE",
    "EOF_OCCURRED_IN_VIOLATION_OF_PROTOCOL",
    "UNEXPECTED_EOF",
)


def tls_hint(error: BaseException, url: str) -> str | None:
    """What to do about a request to ``url`` that failed with ``error`` in or for want of a
    TLS handshake; None when it does not look like one."""
    said = str(error).upper().replace(" ", "_")
    hint = next((hint for key, hint in _HANDSHAKE_HINTS if key in said), None)
    if hint is not None or not any(key in said for key in _CLOSED):
        return hint
    if url.lower().startswith("https://"):
        return (
            "it closed the connection: if it requires client certificates (mutual TLS), pass "
            "--client-cert and --client-key signed by its --tls-client-ca"
        )
    return "it closed the connection: if it serves HTTPS, use an https:// URL"


def _load(files: str, paths: tuple[Path, ...], load: Callable[[], object]) -> None:
    """Run ``load``; a missing or unusable file becomes one ValueError naming ``files``."""
    for path in paths:
        if not path.is_file():
            raise ValueError(f"{files}: no such file" + (f" {path}" if len(paths) > 1 else ""))
    try:
        load()
    except ssl.SSLError as exc:
        reason = str(exc.reason or "PEM_LIB")
        reason = _REASONS.get(reason, reason.lower().replace("_", " "))
        raise ValueError(f"{files}: unusable ({reason})") from None
    except OSError as exc:
        raise ValueError(f"{files}: {exc.strerror or exc}") from None


def _cert_chain(context: ssl.SSLContext, flag: str, cert: Path, key: Path | None) -> None:
    files = f"{flag} {cert}" + (f" with key {key}" if key is not None else "")
    paths = (cert,) if key is None else (cert, key)
    _load(files, paths, lambda: context.load_cert_chain(cert, key))


def _cas(context: ssl.SSLContext, flag: str, ca: Path) -> None:
    _load(f"{flag} {ca}", (ca,), lambda: context.load_verify_locations(cafile=ca))


@dataclass(frozen=True, slots=True)
class ClientTls:
    """How a client checks the collector's certificate and, for mutual TLS, proves itself.

    Args:
        ca_file: PEM file of the CA(s) that signed the collector's certificate
            (default: the system's CAs).
        client_cert: this client's certificate (PEM), when the collector asks for one.
        client_key: its private key (PEM), unless it is in ``client_cert``.
    """

    ca_file: Path | None = None
    client_cert: Path | None = None
    client_key: Path | None = None

    @classmethod
    def from_env(cls, environ: Mapping[str, str]) -> ClientTls:
        """The settings ``STEPWATCH_CA_FILE``, ``_CLIENT_CERT`` and ``_CLIENT_KEY`` give."""
        given = {field: environ.get(var) for field, var in CLIENT_TLS_ENV.items()}
        return cls(**{field: Path(value) for field, value in given.items() if value})

    def environ(self) -> dict[str, str]:
        """The environment variables that give these settings to a child process (absolute
        paths: the child may change directory)."""
        return {
            var: str(Path(value).absolute())
            for field, var in CLIENT_TLS_ENV.items()
            if (value := getattr(self, field)) is not None
        }

    def context(self) -> ssl.SSLContext:
        """A verifying context with the CA file and the client certificate loaded."""
        if self.client_key is not None and self.client_cert is None:
            raise ValueError("a client key needs its certificate: set --client-cert too")
        context = ssl.create_default_context()
        if self.ca_file is not None:
            _cas(context, "--ca-file", self.ca_file)
        if self.client_cert is not None:
            _cert_chain(context, "--client-cert", self.client_cert, self.client_key)
        return context

    def context_for(self, url: str) -> ssl.SSLContext | None:
        """The context for a collector at ``url``; None for plain ``http://``."""
        return self.context() if url.lower().startswith("https://") else None

    def verify(self, url: str) -> ssl.SSLContext | bool:
        """What ``httpx``'s ``verify=`` takes for a collector at ``url``."""
        return self.context_for(url) or True


@dataclass(frozen=True, slots=True)
class ServerTls:
    """The collector's certificate and key and, for mutual TLS, the CA its clients' are
    signed by (a client without such a certificate is refused in the handshake)."""

    cert_file: Path
    key_file: Path
    client_ca: Path | None = None

    @classmethod
    def of(
        cls, cert_file: Path | None, key_file: Path | None, client_ca: Path | None = None
    ) -> ServerTls | None:
        """The settings the ``--tls-*`` flags give (None: plain HTTP); ValueError when one
        is missing that another needs."""
        if cert_file is None and key_file is None:
            if client_ca is not None:
                raise ValueError("--tls-client-ca needs --tls-cert and --tls-key")
            return None
        if cert_file is None or key_file is None:
            raise ValueError("--tls-cert and --tls-key go together: give both")
        return cls(cert_file, key_file, client_ca)

    def check(self) -> None:
        """ValueError (naming the file) unless the files load as they will when serving."""
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        _cert_chain(context, "--tls-cert", self.cert_file, self.key_file)
        if self.client_ca is not None:
            _cas(context, "--tls-client-ca", self.client_ca)

    def uvicorn_options(self) -> dict[str, Any]:
        """The ``uvicorn.Config`` arguments that serve with these files."""
        options: dict[str, Any] = {
            "ssl_certfile": str(self.cert_file),
            "ssl_keyfile": str(self.key_file),
        }
        if self.client_ca is not None:
            options.update(ssl_ca_certs=str(self.client_ca), ssl_cert_reqs=ssl.CERT_REQUIRED)
        return options
