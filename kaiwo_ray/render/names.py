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


_DNS1123_LABEL = re.compile(r"[a-z0-9](?:[-a-z0-9]*[a-z0-9])?")


def is_dns1123_label(value: str) -> bool:
    """What the API server asks of a volume or container name: lower-case alphanumerics and `-`, at
    most 63, starting and ending alphanumeric (no `.`: `s3.creds` is a Secret name, not a volume name)."""
    return len(value) <= _MAX_LENGTH and _DNS1123_LABEL.fullmatch(value) is not None


def is_dns1123_subdomain(value: str) -> bool:
    """What the API server asks of an object name (a Secret's, say): dot-separated labels, at most 253."""
    return 0 < len(value) <= 253 and all(_DNS1123_LABEL.fullmatch(part) for part in value.split("."))


def volume_name_for(prefix: str, name: str, taken: set[str]) -> str:
    """A valid volume name `<prefix>-<name>` for an object named `name` (dots become dashes, cut to
    63), made unique among `taken` with a counter."""
    base = sanitize_rfc1123(f"{prefix}-{name}".replace(".", "-"))
    candidate, n = base, 1
    while candidate in taken:
        n += 1
        suffix = f"-{n}"
        candidate = base[: _MAX_LENGTH - len(suffix)].rstrip("-") + suffix
    taken.add(candidate)
    return candidate
