"""Child object names and label values: Kubernetes' RFC 1123 subdomain rules, the way upstream applies them."""

from __future__ import annotations

import re

_OUTSIDE_ALPHABET = re.compile(r"[^a-z0-9.-]+")
_SEPARATOR_RUNS = re.compile(r"[-.]{2,}")
_MAX_LENGTH = 63
# Text the routine below would return unchanged (the common case): one regex instead of five steps.
_ALREADY_CLEAN = re.compile(r"(?!.*[-.]{2})[a-z0-9](?:[a-z0-9.-]{0,61}[a-z0-9])?")


def sanitize_rfc1123(value: str) -> str:
    """Upstream's sanitiser, step by step (the order matters for edge cases like `a.-b`).

    Lower-case; runs of characters outside `[a-z0-9.-]` become `-`; trim `-`/`.` at both ends;
    collapse runs of two or more `-`/`.` into one `-`; cut to 63; trim a trailing `-` left by the cut.
    `Jane.Doe@example.com` -> `jane.doe-example.com`.
    """
    if _ALREADY_CLEAN.fullmatch(value):
        return value
    text = _OUTSIDE_ALPHABET.sub("-", value.lower()).strip("-.")
    text = _SEPARATOR_RUNS.sub("-", text)
    return text[:_MAX_LENGTH].rstrip("-")


def name_with_postfix(name: str, postfix: str) -> str:
    """`<name>-<postfix>` made a valid name: `train-data`, `train-hf`, `train-download`."""
    return sanitize_rfc1123(f"{name}-{postfix}")
