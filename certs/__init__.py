"""Certificates for the admission webhook: a private CA and a serving certificate signed by it.

Library API (used by tests and tools that need real TLS):

- `certs.generate.create_ca()` / `certs.generate.create_serving_cert()` return a `KeyPair` of PEM bytes.
- `certs.files.write_dev_certs()` writes `ca.crt`, `tls.crt`, `tls.key` (keys 0600) into a directory,
  reusing a still-valid CA and renewing the serving certificate when it is close to expiry.
- `certs.files.ca_bundle_b64()` is the base64 `caBundle` for webhook configurations.

CLI: `python -m certs generate --help`.
"""
