"""`python -m certs generate ...`: write dev/test certificates and print the caBundle."""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path

from certs.files import CertError, ca_bundle_b64, write_dev_certs
from certs.generate import DEFAULT_CA_DAYS, DEFAULT_SERVING_DAYS


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m certs", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    gen = sub.add_parser(
        "generate",
        help="create (or renew) a CA and a serving certificate for <service>.<namespace>.svc",
        description="Writes ca.crt, ca.key, tls.crt, tls.key (keys 0600). A still-valid CA is reused; the "
        "serving certificate is renewed when a third of its lifetime remains or its names changed.",
    )
    gen.add_argument("--out-dir", type=Path, required=True, help="directory for the files")
    gen.add_argument("--service", required=True, help="webhook Service name")
    gen.add_argument("--namespace", required=True, help="webhook Service namespace")
    gen.add_argument("--dns", action="append", default=[], help="extra DNS SAN (repeatable)")
    gen.add_argument("--ip", action="append", default=[], help="extra IP SAN (repeatable)")
    gen.add_argument("--force-ca", action="store_true", help="replace the CA even if it is still valid")
    gen.add_argument("--ca-days", type=int, default=DEFAULT_CA_DAYS, help="CA validity in days")
    gen.add_argument("--days", type=int, default=DEFAULT_SERVING_DAYS, help="serving cert validity in days")
    gen.add_argument(
        "--ca-bundle-file", type=Path, default=None, help="also write the base64 caBundle to this file"
    )
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s", stream=sys.stderr)
    try:
        paths = write_dev_certs(
            args.out_dir,
            args.service,
            args.namespace,
            args.dns,
            args.ip,
            force_ca=args.force_ca,
            ca_days=args.ca_days,
            serving_days=args.days,
        )
        bundle = ca_bundle_b64(paths.ca_crt)
    except (CertError, ValueError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    if args.ca_bundle_file is not None:
        args.ca_bundle_file.write_text(bundle + "\n")
    print(f"ca.crt:   {paths.ca_crt}{'  (new CA)' if paths.ca_created else ''}")
    print(f"tls.crt:  {paths.tls_crt}{'  (written)' if paths.serving_renewed else '  (kept)'}")
    print(f"tls.key:  {paths.tls_key}")
    print(f"caBundle: {bundle}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
