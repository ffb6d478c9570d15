# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import time
from fractions import Fraction

import pytest
from hypothesis import given, strategies as st

from ansible_collections.numa.kube.plugins.module_utils.quantity import (
    BINARY_SI,
    BINARY_SUFFIXES,
    DECIMAL_EXPONENT,
    DECIMAL_SI,
    DECIMAL_SUFFIXES,
    Quantity,
    QuantityError,
    bytes_quantity,
    parse_quantity,
    total,
)


@pytest.mark.parametrize("text,value,fmt", [
    ("1Gi", 2 ** 30, BINARY_SI),
    ("1.5Gi", 3 * 2 ** 29, BINARY_SI),
    ("100Mi", 100 * 2 ** 20, BINARY_SI),
    ("1G", 10 ** 9, DECIMAL_SI),
    ("128974848", 128974848, DECIMAL_SI),
    ("129e6", 129 * 10 ** 6, DECIMAL_EXPONENT),
    ("129M", 129 * 10 ** 6, DECIMAL_SI),
    ("123Mi", 123 * 2 ** 20, BINARY_SI),
    ("1E3", 1000, DECIMAL_EXPONENT),
    ("1E", 10 ** 18, DECIMAL_SI),
    ("100m", Fraction(1, 10), DECIMAL_SI),
    ("+5k", 5000, DECIMAL_SI),
    ("-5Ki", -5120, BINARY_SI),
    (".5", Fraction(1, 2), DECIMAL_SI),
    ("5.", 5, DECIMAL_SI),
    ("1e-3", Fraction(1, 1000), DECIMAL_EXPONENT),
    ("1n", Fraction(1, 10 ** 9), DECIMAL_SI),
    ("1u", Fraction(1, 10 ** 6), DECIMAL_SI),
])
def test_parse_forms(text, value, fmt):
    quantity = Quantity.parse(text)
    assert quantity.value == value
    assert quantity.format == fmt


@pytest.mark.parametrize("text", ["", "Ei", "1 Gi", "1gi", "1K", "1.2.3", "1Gi1", "1e", "1e1.5", "abc", "--1", "1ki"])
def test_parse_refuses(text):
    with pytest.raises(QuantityError):
        Quantity.parse(text)


def test_parse_types():
    assert Quantity.parse(1024).value == 1024
    assert Quantity.parse(1.5).value == Fraction(3, 2)
    for bad in (True, None, [1], float("nan")):
        with pytest.raises(QuantityError):
            Quantity.parse(bad)


def test_parse_quantity_names_the_field():
    with pytest.raises(QuantityError, match="kube_reserved.memory"):
        parse_quantity("1GB", "kube_reserved.memory")


def test_rounds_up_to_nano_and_caps():
    assert Quantity.parse("0.0000000001").value == Fraction(1, 10 ** 9)
    assert Quantity.parse("-0.0000000001").value == -Fraction(1, 10 ** 9)  # away from zero
    assert Quantity.parse("100Ei").value == 2 ** 63 - 1


@pytest.mark.parametrize("text,canonical", [
    ("1024Mi", "1Gi"),
    ("1536Mi", "1536Mi"),
    ("1.5Gi", "1536Mi"),
    ("1000", "1k"),
    ("1500", "1500"),
    ("1024", "1024"),
    ("0.1Gi", "107374182400m"),
    ("1000Ki", "1000Ki"),
    ("512", "512"),
    ("1e3", "1e3"),
    ("1200e-3", "1200e-3"),
    ("0.5", "500m"),
    ("0", "0"),
    ("0Gi", "0"),
    ("-1Gi", "-1Gi"),
    ("1023Ki", "1023Ki"),
    ("100M", "100M"),
    ("1000M", "1G"),
])
def test_canonical_matches_apimachinery(text, canonical):
    assert Quantity.parse(text).canonical() == canonical


def test_small_binary_values_print_decimal():
    assert bytes_quantity(1000).canonical() == "1k"
    assert bytes_quantity(1023).canonical() == "1023"
    assert bytes_quantity(1025).canonical() == "1025"


def test_sum_takes_the_format_of_the_first_non_zero_addend():
    assert total([Quantity.parse("16Gi"), Quantity.parse("100Mi")]).canonical() == "16484Mi"
    assert total([Quantity.parse("1G"), Quantity.parse("100Mi")]).canonical() == "1104857600"
    assert total([Quantity.parse("0"), Quantity.parse("1Gi")]).canonical() == "1Gi"
    assert total([]).canonical() == "0"


def test_comparisons_and_helpers():
    assert Quantity.parse("1Gi") == Quantity.parse("1024Mi")
    assert Quantity.parse("1Gi") != Quantity.parse("1G")
    assert Quantity.parse("1G") < Quantity.parse("1Gi") <= Quantity.parse("1Gi")
    assert Quantity.parse("2Gi") > Quantity.parse("1Gi") >= Quantity.parse("1Gi")
    assert hash(Quantity.parse("1Gi")) == hash(Quantity.parse("1024Mi"))
    assert Quantity.parse("1.5").as_int() is None and Quantity.parse("2k").as_int() == 2000
    assert Quantity.parse("100m").ceil() == 1 and Quantity.parse("-100m").ceil() == 0
    assert repr(Quantity.parse("1Gi")) == "Quantity('1Gi')"
    assert str(Quantity.parse("1Gi")) == "1Gi"
    assert (Quantity.parse("1Gi") == "1Gi") is False


# property-based ------------------------------------------------------------------------------

suffixes = st.sampled_from(sorted(BINARY_SUFFIXES) + sorted(DECIMAL_SUFFIXES))


@given(st.integers(min_value=0, max_value=10 ** 6), suffixes)
def test_whole_numbers_with_any_suffix(number, suffix):
    quantity = Quantity.parse("%d%s" % (number, suffix))
    if suffix in BINARY_SUFFIXES:
        expected = Fraction(number * 2 ** BINARY_SUFFIXES[suffix])
    else:
        expected = Fraction(number) * Fraction(10) ** DECIMAL_SUFFIXES[suffix]
    # apimachinery caps binary quantities only
    assert quantity.value == (min(expected, 2 ** 63 - 1) if suffix in BINARY_SUFFIXES else expected)


@given(st.integers(min_value=0, max_value=10 ** 6), st.integers(min_value=0, max_value=999),
       st.sampled_from(sorted(BINARY_SUFFIXES)))
def test_decimal_fractions_with_binary_suffixes(whole, frac, suffix):
    quantity = Quantity.parse("%d.%03d%s" % (whole, frac, suffix))
    expected = (Fraction(whole) + Fraction(frac, 1000)) * 2 ** BINARY_SUFFIXES[suffix]
    assert quantity.value == min(expected, 2 ** 63 - 1)


@given(st.integers(min_value=-(2 ** 62), max_value=2 ** 62), st.sampled_from([BINARY_SI, DECIMAL_SI, DECIMAL_EXPONENT]))
def test_canonical_form_parses_back_to_the_same_value(number, fmt):
    quantity = Quantity(number, fmt)
    assert Quantity.parse(quantity.canonical()).value == number


@given(st.integers(min_value=1, max_value=10 ** 9), st.integers(min_value=-9, max_value=3))
def test_canonical_of_decimal_fractions_round_trips(mantissa, exponent):
    quantity = Quantity(Fraction(mantissa) * Fraction(10) ** exponent, DECIMAL_SI)
    assert Quantity.parse(quantity.canonical()) == quantity


@given(st.lists(st.integers(min_value=0, max_value=2 ** 40), max_size=6))
def test_total_is_the_exact_sum(numbers):
    assert total(Quantity(n, BINARY_SI) for n in numbers).value == sum(numbers)


@pytest.mark.parametrize("text", ["1Gi\n", "1Gi\n\n", "100m\n", " 1Gi", "1 Gi", "\u0661Gi", "1e3\n"])
def test_strings_with_anything_around_or_inside_are_not_quantities(text):
    with pytest.raises(QuantityError):
        Quantity.parse(text)


@pytest.mark.parametrize("text, value", [
    ("1e4000", 10 ** 4000), ("-1e4000", -(10 ** 4000)), ("0e4000", 0), ("1e-4000", Fraction(1, 10 ** 9)),
    ("-1e-4000", -Fraction(1, 10 ** 9)), ("-20Ei", -(2 ** 63 - 1)), ("1e19", 10 ** 19), ("20E", 2 * 10 ** 19),
    # kubelet reads an exponent as an int64 and keeps its low 32 bits; zero is zero whatever the exponent
    ("0e9223372036854775807", 0), ("-0e4294967296", 0), ("1e4294967296", 1), ("1e-4294967296", 1),
])
@pytest.mark.wall_clock  # times itself: run in the foreground (tools/run-tiers timed)
def test_huge_and_tiny_exponents_are_exact_capped_or_rounded_at_once(text, value):
    started = time.time()
    assert Quantity.parse(text).value == value
    assert time.time() - started < 0.05, "parsing must answer in bounded time"


@pytest.mark.parametrize("text", ["1e4001", "9e999999999", "1" * 1001, "1e-4001", "1e2147483648", "0e99999",
                                  "0e2147483648", "0e-9999999"])
@pytest.mark.wall_clock  # times itself: run in the foreground (tools/run-tiers timed)
def test_absurd_sizes_are_refused_at_once(text):
    started = time.time()
    with pytest.raises(QuantityError, match="not a usable quantity"):
        Quantity.parse(text)
    assert time.time() - started < 0.05


@pytest.mark.parametrize("text", ["0e9223372036854775808", "0e99999999999999999999", "1e-9223372036854775809"])
def test_an_exponent_beyond_64_bits_is_refused_even_on_zero(text):
    with pytest.raises(QuantityError, match="kubelet cannot read the exponent"):
        Quantity.parse(text)


@pytest.mark.parametrize("text, value", [(".", 0), ("-", 0), ("Mi", 0), ("+.Ti", 0), ("e-9", 0), ("k", 0)])
def test_no_digits_is_zero_where_apimachinery_takes_its_fast_path(text, value):
    assert Quantity.parse(text).value == value


@pytest.mark.parametrize("text", ["Pi", "-Ei", "e-12", ".e-10"])
def test_no_digits_is_refused_where_apimachinery_fails(text):
    with pytest.raises(QuantityError, match="no digits"):
        Quantity.parse(text)
