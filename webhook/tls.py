"""One server SSLContext for the process lifetime, reloaded in place when the cert files change.

With a client CA (`--client-ca-file`) the context asks every client for a certificate and verifies one that
is presented against that CA (`CERT_OPTIONAL`: the kubelet's probes present none); the app then refuses
admission requests from connections without one (`webhook.app`). The CA is read once, at start.

`webhook.listener` hands it to every accepted connection; `load_cert_chain()` on the same context makes
new connections use the new certificate while open ones finish on the old one, so a renewed Secret is
picked up without a restart. A broken pair (e.g. cert and key caught mid-update) keeps the old one.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import ssl
from pathlib import Path

from certs.files import TLS_CRT, TLS_KEY
from webhook.metrics import Metrics

log = logging.getLogger(__name__)


def server_context(client_ca: Path | None = None) -> ssl.SSLContext:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    context.set_alpn_protocols(["http/1.1"])
    if client_ca is not None:
        context.verify_mode = ssl.CERT_OPTIONAL
        context.load_verify_locations(cafile=client_ca)
    return context


_SETTLE_ATTEMPTS = 3
"""Loads tried in one poll while the files keep changing under it; the next poll goes on."""


class ReloadingTLS:
    def __init__(self, cert_dir: Path, metrics: Metrics, client_ca: Path | None = None) -> None:
        self.cert_file = cert_dir / TLS_CRT
        self.key_file = cert_dir / TLS_KEY
        self.context = server_context(client_ca)
        self.loaded = False
        self._metrics = metrics
        self._digest: bytes | None = None
        self._failed_digest: bytes | None = None

    def _current_digest(self) -> bytes:
        digest = hashlib.sha256()
        for path in (self.cert_file, self.key_file):
            digest.update(path.read_bytes())
        return digest.digest()

    def reload_if_changed(self) -> bool:
        """Loads the files when their content changed; True when a new certificate is now served.

        A pair is first loaded into a scratch context, so a broken one (e.g. the key replaced before
        the certificate) never touches the live context; it is retried only once the files change again.
        The digest is read again after the load: when a file changed meanwhile (a rotation in progress),
        what was loaded is not what the digest says, so the load is done again from the settled files
        rather than counted under the older digest and repeated at the next poll.
        """
        for _ in range(_SETTLE_ATTEMPTS):
            try:
                digest = self._current_digest()
            except OSError as err:
                log.warning("cannot read certificate files: %s", err)
                return False
            if digest in (self._digest, self._failed_digest):
                return False
            if not self._load(digest):
                return False
            try:
                settled = self._current_digest() == digest
            except OSError:
                settled = False
            if settled:
                self._digest = digest
                self._metrics.cert_reloads.labels("ok").inc()
                log.info("serving certificate loaded from %s", self.cert_file)
                return True
        return False

    def _load(self, digest: bytes) -> bool:
        try:
            server_context().load_cert_chain(self.cert_file, self.key_file)
            self.context.load_cert_chain(self.cert_file, self.key_file)
        except (ssl.SSLError, OSError) as err:
            self._failed_digest = digest
            self._metrics.cert_reloads.labels("error").inc()
            log.warning(
                "certificate files %s did not load, keeping the previous ones: %s", self.cert_file, err
            )
            return False
        self._failed_digest = None
        self.loaded = True
        return True

    async def poll(self, interval: float) -> None:
        while True:
            await asyncio.sleep(interval)
            # On the event loop thread, never in a worker thread: handshakes run on this thread, and
            # `load_cert_chain` sets the certificate and then the key, so a handshake started in between
            # (from another thread) would be served the new certificate with the old key and fail.
            self.reload_if_changed()
