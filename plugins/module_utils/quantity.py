# -*- coding: utf-8 -*-
# Copyright: numa.kube contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Kubernetes resource quantities, with the arithmetic kubelet applies to them.

A quantity such as ``1Gi``, ``1.5G``, ``128974848``, ``129e6`` or ``100m`` is held as an exact
fraction together with the format it was written in. The format matters only for printing:
kubelet prints sums in the canonical form of the quantity that set the sum's format, and the
modules print kubelet's own error texts, so the printing rules are kept here too.

Parsing follows apimachinery's ``resource.ParseQuantity``: an optional sign, digits with at most
one decimal point, then one suffix (binary ``Ki``..``Ei``, decimal ``n u m k M G T P E``, or an
exponent ``e3``/``E-2``). Values are rounded away from zero to nano precision, and binary
(``Ki``..``Ei``) ones capped at 2^63 - 1 in magnitude, as apimachinery does; decimal values are not
capped. A number without digits (``.``, ``-``, ``Mi``) is zero to apimachinery, and so here. The
differential tests (tests/differential) hold these rules against apimachinery's own code.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import math
import re
from fractions import Fraction

BINARY_SI = "BinarySI"
DECIMAL_SI = "DecimalSI"
DECIMAL_EXPONENT = "DecimalExponent"

BINARY_SUFFIXES = {"Ki": 10, "Mi": 20, "Gi": 30, "Ti": 40, "Pi": 50, "Ei": 60}
DECIMAL_SUFFIXES = {"n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}
_DECIMAL_BY_EXPONENT = dict((v, k) for k, v in DECIMAL_SUFFIXES.items())
_BINARY_BY_EXPONENT = dict((v, k) for k, v in BINARY_SUFFIXES.items())

# \Z, not $: "1Gi\n" is not a quantity (apimachinery reads to the end of the string)
_NUMBER = re.compile(r"^([+-]?)([0-9]*)(?:\.([0-9]*))?(.*)\Z", re.S)
_EXPONENT = re.compile(r"^[eE]([+-]?[0-9]+)\Z")
# apimachinery takes 1e99999, 1e-99999 or a thousand digits exactly (and never finishes on
# 1e2147483647 or 1e-2147483648). Nothing real comes near such sizes: past these limits numa.kube
# refuses the text instead of spending seconds on big-number arithmetic, zero included (kubelet
# crashes on 0e2147483648 and never finishes on 0e-9999999).
_EXPONENT_LIMIT = 4000
_TEXT_LIMIT = 1000
_MAX = Fraction(2 ** 63 - 1)
_INT64 = (-2 ** 63, 2 ** 63 - 1)
_NANO = Fraction(1, 10 ** 9)


class QuantityError(ValueError):
    """Raised for a string that is not a Kubernetes quantity."""


def _round_away_to_nano(value):
    scaled = value / _NANO
    if scaled.denominator == 1:
        return value
    whole = scaled.numerator // scaled.denominator
    if value > 0:
        whole += 1
    return Fraction(whole) * _NANO


def _no_digits(text, digits, fast):
    """apimachinery reads a number without digits (``Mi``, ``+.``, ``e3``) as zero when the suffix
    lets it take its integer fast path, and fails on it otherwise (``Pi``, ``Ei``, ``e-12``)."""
    if not digits and not fast:
        raise QuantityError("%r is not a quantity: no digits before the suffix" % (text,))


def _remove_factors(value, base):
    """Split an integer into (m, n) with value == m * base**n and m not divisible by base."""
    times = 0
    if value == 0:
        return value, 0
    while value % base == 0:
        value //= base
        times += 1
    return value, times


def _stored_as_int64(text, whole, frac, fmt, exponent):
    """Whether apimachinery keeps the parsed text as a whole int64 (its integer fast path, scale not
    below zero), so that ``AsInt64`` succeeds. Anything else is held as a decimal whose
    ``AsInt64`` fails, even for a whole number: ``1.5Gi``, ``1073741824000m``, ``1.0``."""
    if text == "0":
        return True
    num = whole.lstrip("0") or "0"
    if fmt == BINARY_SI:
        if frac or 15 - len(num) - (exponent * 3) // 10 - 1 < 0:
            return False
        return int(num) << exponent <= _MAX
    if 18 - len(num) - len(frac) < 0:
        return False
    scale = exponent - len(frac)
    return scale == 0 or (scale > 0 and int(num + frac) * 10 ** scale <= _MAX)


class Quantity(object):
    """An exact quantity and the format kubelet would print it in."""

    __slots__ = ("value", "format", "int64")

    def __init__(self, value=0, fmt=DECIMAL_SI, int64=None):
        self.value = Fraction(value)
        self.format = fmt
        # parsed text only: whether kubelet's AsInt64 takes it (see _stored_as_int64)
        self.int64 = int64

    @classmethod
    def parse(cls, text):
        """Parse ``text`` (a str, or an int meaning bytes/units) into a Quantity."""
        if isinstance(text, bool):
            raise QuantityError("%r is a boolean, not a quantity" % (text,))
        if isinstance(text, int):
            return cls(text, DECIMAL_SI)
        if isinstance(text, float):
            if math.isnan(text) or math.isinf(text):
                raise QuantityError("%r is not a finite number" % (text,))
            text = repr(text)
        if not isinstance(text, str):
            raise QuantityError("%r is a %s, not a quantity" % (text, type(text).__name__))
        if len(text) > _TEXT_LIMIT:
            raise QuantityError("%r... is not a usable quantity: longer than %d characters"
                                % (text[:20], _TEXT_LIMIT))
        match = _NUMBER.match(text)
        if not text or not match:
            raise QuantityError("%r is not a quantity" % (text,))
        sign, whole, frac, suffix = match.groups()
        frac = frac or ""
        number = Fraction(int(whole or "0")) + (Fraction(int(frac), 10 ** len(frac)) if frac else 0)
        power = 0
        if suffix in BINARY_SUFFIXES:
            fmt = BINARY_SI
            power = BINARY_SUFFIXES[suffix]
            number *= 2 ** BINARY_SUFFIXES[suffix]
            _no_digits(text, whole + frac, fast=int(BINARY_SUFFIXES[suffix] * 3 / 10) <= 13)
        elif suffix in DECIMAL_SUFFIXES:
            fmt = DECIMAL_SI
            power = DECIMAL_SUFFIXES[suffix]
            number *= Fraction(10) ** DECIMAL_SUFFIXES[suffix]
            _no_digits(text, whole + frac, fast=DECIMAL_SUFFIXES[suffix] >= -9)
        else:
            exp = _EXPONENT.match(suffix)
            if not exp:
                raise QuantityError(
                    "%r is not a quantity: unknown suffix %r (use Ki, Mi, Gi, Ti, Pi, Ei, "
                    "n, u, m, k, M, G, T, P, E or an exponent such as e6)" % (text, suffix))
            fmt = DECIMAL_EXPONENT
            digits = exp.group(1).lstrip("+-").lstrip("0")
            if len(digits) > 19 or not _INT64[0] <= int(exp.group(1)) <= _INT64[1]:
                raise QuantityError("%r is not a quantity: kubelet cannot read the exponent %s (it must fit in 64 "
                                    "bits)" % (text, exp.group(1)))
            # apimachinery reads the exponent as an int64 and keeps its low 32 bits: 1e4294967296 is 1
            power = (int(exp.group(1)) + 2 ** 31) % 2 ** 32 - 2 ** 31
            _no_digits(text, whole + frac, fast=power >= -9)
            # zero too: kubelet crashes on 0e2147483648 (its exponent becomes -2147483648) and never
            # finishes on 0e-9999999
            if abs(power) > _EXPONENT_LIMIT:
                raise QuantityError("%r is not a usable quantity: numa.kube refuses powers of ten beyond +-%d "
                                    "(kubelet's arithmetic on them takes long, or never ends)"
                                    % (text, _EXPONENT_LIMIT))
            number *= Fraction(10) ** power
        # rounded up to a nano, a binary one capped at 2^63 - 1 in magnitude, then signed
        # (apimachinery's order)
        number = _round_away_to_nano(number)
        if fmt == BINARY_SI:
            number = min(number, _MAX)
        return cls(-number if sign == "-" else number, fmt, int64=_stored_as_int64(text, whole, frac, fmt, power))

    # arithmetic -----------------------------------------------------------------------------
    def add(self, other):
        """Add in place with apimachinery's rule: a zero receiver takes the addend's format."""
        if self.value == 0:
            self.format = other.format
        self.value += other.value
        return self

    def __eq__(self, other):
        if isinstance(other, Quantity):
            return self.value == other.value
        return NotImplemented

    def __ne__(self, other):
        result = self.__eq__(other)
        return result if result is NotImplemented else not result

    def __hash__(self):
        return hash(self.value)

    def __lt__(self, other):
        return self.value < other.value

    def __le__(self, other):
        return self.value <= other.value

    def __gt__(self, other):
        return self.value > other.value

    def __ge__(self, other):
        return self.value >= other.value

    def is_zero(self):
        return self.value == 0

    def is_integer(self):
        return self.value.denominator == 1

    def as_int(self):
        """The whole value, or None where kubelet's AsInt64 would fail (a fraction)."""
        if self.value.denominator != 1:
            return None
        return int(self.value)

    def kubelet_int64(self):
        """The value as kubelet's ``AsInt64`` returns it for this parsed text, or None where it fails."""
        if self.int64 is False or self.value.denominator != 1:
            return None
        return int(self.value)

    def ceil(self):
        """Round up to a whole number, as Quantity.Value() does."""
        return -((-self.value.numerator) // self.value.denominator)

    # printing -------------------------------------------------------------------------------
    def __str__(self):
        return self.canonical()

    def __repr__(self):
        return "Quantity(%r)" % self.canonical()

    def canonical(self):
        """The string Quantity.String() gives for this value and format."""
        if self.value == 0:
            return "0"
        fmt = self.format
        if fmt == BINARY_SI and (-1024 < self.value < 1024 or self.value.denominator != 1):
            fmt = DECIMAL_SI
        elif fmt not in (BINARY_SI, DECIMAL_SI):
            fmt = DECIMAL_EXPONENT
        sign = "-" if self.value < 0 else ""
        magnitude = abs(self.value)
        if fmt == BINARY_SI:
            number, times = _remove_factors(int(magnitude), 1024)
            while times * 10 > 60:
                number *= 1024
                times -= 1
            return "%s%d%s" % (sign, number, _BINARY_BY_EXPONENT.get(times * 10, ""))
        mantissa, exponent = _decimal_parts(magnitude)
        shift = exponent % 3
        mantissa *= 10 ** shift
        exponent -= shift
        if fmt == DECIMAL_SI and exponent in _DECIMAL_BY_EXPONENT:
            suffix = _DECIMAL_BY_EXPONENT[exponent]
        else:
            suffix = "e%d" % exponent if exponent else ""
        return "%s%d%s" % (sign, mantissa, suffix)


def _decimal_parts(magnitude):
    """Return (m, e) with magnitude == m * 10**e, m an integer without trailing zeros."""
    exponent = 0
    while magnitude.denominator != 1:
        magnitude *= 10
        exponent -= 1
    number, times = _remove_factors(int(magnitude), 10)
    return number, exponent + times


def parse_quantity(text, what=None):
    """Parse ``text``; on failure raise QuantityError naming ``what`` (e.g. 'kube_reserved.memory')."""
    try:
        return Quantity.parse(text)
    except QuantityError as exc:
        if what:
            raise QuantityError("%s: %s" % (what, exc))
        raise


def bytes_quantity(number):
    """A whole number of bytes printed the way kubelet prints memory (``1Gi``, ``1536Mi``)."""
    return Quantity(number, BINARY_SI)


def total(quantities):
    """Sum with apimachinery's format rule, starting from a zero DecimalSI quantity."""
    result = Quantity(0, DECIMAL_SI)
    for quantity in quantities:
        result.add(quantity)
    return result
