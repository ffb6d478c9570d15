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
exponent ``e3``/``E-2``). Values are rounded away from zero to nano precision and capped at
2^63 - 1, as apimachinery does.
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

_NUMBER = re.compile(r"^([+-]?)([0-9]*)(?:\.([0-9]*))?(.*)$")
_EXPONENT = re.compile(r"^[eE]([+-]?[0-9]+)$")
_MAX = Fraction(2 ** 63 - 1)
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


def _remove_factors(value, base):
    """Split an integer into (m, n) with value == m * base**n and m not divisible by base."""
    times = 0
    if value == 0:
        return value, 0
    while value % base == 0:
        value //= base
        times += 1
    return value, times


class Quantity(object):
    """An exact quantity and the format kubelet would print it in."""

    __slots__ = ("value", "format")

    def __init__(self, value=0, fmt=DECIMAL_SI):
        self.value = Fraction(value)
        self.format = fmt

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
        match = _NUMBER.match(text)
        if not text or not match:
            raise QuantityError("%r is not a quantity" % (text,))
        sign, whole, frac, suffix = match.groups()
        frac = frac or ""
        if not whole and not frac:
            raise QuantityError("%r is not a quantity: no digits" % (text,))
        number = Fraction(int(whole or "0")) + (Fraction(int(frac), 10 ** len(frac)) if frac else 0)
        if suffix in BINARY_SUFFIXES:
            fmt = BINARY_SI
            number *= 2 ** BINARY_SUFFIXES[suffix]
        elif suffix in DECIMAL_SUFFIXES:
            fmt = DECIMAL_SI
            number *= Fraction(10) ** DECIMAL_SUFFIXES[suffix]
        else:
            exp = _EXPONENT.match(suffix)
            if not exp:
                raise QuantityError(
                    "%r is not a quantity: unknown suffix %r (use Ki, Mi, Gi, Ti, Pi, Ei, "
                    "n, u, m, k, M, G, T, P, E or an exponent such as e6)" % (text, suffix))
            fmt = DECIMAL_EXPONENT
            number *= Fraction(10) ** int(exp.group(1))
        if sign == "-":
            number = -number
        number = _round_away_to_nano(number)
        if number > _MAX:
            number = _MAX
        return cls(number, fmt)

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
