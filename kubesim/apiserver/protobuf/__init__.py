"""Decoding of `application/vnd.kubernetes.protobuf` request bodies."""
