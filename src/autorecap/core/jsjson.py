"""JSON the way JavaScript's `JSON.parse` and `JSON.stringify` handle it.

SillyTavern writes each chat line with `JSON.stringify(message)`: no spaces, non-ASCII characters
as they are, keys in insertion order, numbers in JavaScript's shortest form (`1` for 1.0,
`10000000000000000` for 1e16, `1e+21`), and lone surrogates escaped as `\\udXXX`. Python's
`json.dumps` agrees on everything but the numbers and the surrogates, so `dumps_js` runs the fast C
encoder and then rewrites just those.

One deliberate difference: integers are written exactly, even past 2**53 where JavaScript would
round them. Rounding would lose data, and nothing in a chat file depends on it.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

# A JSON string (skipped as a whole) or a number token that Python wrote as a float.
_FLOAT_OR_STRING = re.compile(
    r'"[^"\\]*(?:\\.[^"\\]*)*"|-?\d+\.\d+(?:[eE][-+]?\d+)?|-?\d+[eE][-+]?\d+'
    r"|-?Infinity|NaN"
)
_SURROGATE = re.compile("[\ud800-\udfff]")
# A float token where compact JSON puts values (after `:`, `,` or `[`, before `,`, `}` or `]`).
# Text can look like that too; then the exact pass above sorts strings from numbers.
_FLOAT_HINT = re.compile(
    r"[:,\[](?:-?\d+(?:\.\d+(?:[eE][-+]?\d+)?|[eE][-+]?\d+)|-?Infinity|NaN)[,}\]]"
)


class JSONConstantError(ValueError):
    """`NaN`, `Infinity` or `-Infinity`: Python's json accepts them, JSON (and JS) does not."""


def _reject_constant(name: str) -> Any:
    raise JSONConstantError(f"{name} is not valid JSON")


def loads_strict(text: str) -> Any:
    """`json.loads`, but refusing what `JSON.parse` refuses (`NaN`, `Infinity`), and reading
    integers too long for Python's int conversion limit as JavaScript does: as floats."""
    try:
        return json.loads(text, parse_constant=_reject_constant)
    except ValueError as error:
        if "integer string conversion" not in str(error):
            raise
        return json.loads(text, parse_constant=_reject_constant, parse_int=_parse_int)


def _parse_int(text: str) -> int | float:
    return int(text) if len(text) < 4000 else float(text)


def dumps_canonical(value: Any) -> str:
    """Compact JSON in Python's own number form: a fast fingerprint of a value's exact shape.

    Unlike `==`, it tells `1` from `1.0` and `true`, and notices a change of key order. Numbers
    beyond a double's range (`1e400` reads as infinity, as in JavaScript) come out as `Infinity`,
    which `js_from_canonical` turns into `null`, as `JSON.stringify` does.
    """
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def dumps_js(value: Any) -> str:
    """Serialize `value` exactly as `JSON.stringify(value)` would (see the module docstring)."""
    return js_from_canonical(dumps_canonical(value))


def js_from_canonical(text: str) -> str:
    """Turn `dumps_canonical` output into `JSON.stringify` output."""
    if _FLOAT_HINT.search(text):
        text = _FLOAT_OR_STRING.sub(_rewrite_float, text)
    if _SURROGATE.search(text):
        text = _SURROGATE.sub(_escape_surrogate, text)
    return text


def js_bytes_from_canonical(text: str) -> bytes:
    """`js_from_canonical(text)` encoded as UTF-8: the bytes of a line SillyTavern would write."""
    if _FLOAT_HINT.search(text):
        text = _FLOAT_OR_STRING.sub(_rewrite_float, text)
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:  # lone surrogates: rare, so only looked for when encoding fails
        return _SURROGATE.sub(_escape_surrogate, text).encode("utf-8")


def _rewrite_float(match: re.Match[str]) -> str:
    token = match.group()
    if token.startswith('"'):
        return token
    return js_number(float(token))  # float("Infinity") and float("NaN") become null


def _escape_surrogate(match: re.Match[str]) -> str:
    return f"\\u{ord(match.group()):04x}"


def js_number(value: float) -> str:
    """`Number.prototype.toString()` for a finite float (ECMAScript's Number::toString)."""
    if not math.isfinite(value):
        return "null"  # JSON.stringify writes non-finite numbers as null
    if value == 0:
        return "0"  # -0 too
    sign = "-" if value < 0 else ""
    # repr gives the shortest digits that round-trip, the same digits JavaScript picks.
    mantissa, _, exponent_text = repr(abs(value)).partition("e")
    whole, _, fraction = mantissa.partition(".")
    digits = whole + fraction
    stripped = digits.lstrip("0")
    exponent10 = int(exponent_text) if exponent_text else 0
    point = len(whole) + exponent10 - (len(digits) - len(stripped))
    digits = stripped.rstrip("0") or "0"
    k, n = len(digits), point
    if k <= n <= 21:
        body = digits + "0" * (n - k)
    elif 0 < n <= 21:
        body = f"{digits[:n]}.{digits[n:]}"
    elif -6 < n <= 0:
        body = "0." + "0" * (-n) + digits
    else:
        exponent = n - 1
        exponent_part = f"e{'+' if exponent >= 0 else '-'}{abs(exponent)}"
        body = (digits if k == 1 else f"{digits[0]}.{digits[1:]}") + exponent_part
    return sign + body
