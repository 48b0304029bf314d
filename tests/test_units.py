import pytest

from kvcore import InputError, format_bytes, parse_bytes, parse_count, parse_tokens


@pytest.mark.parametrize(("text", "tokens"), [
    ("8192", 8192), ("128k", 131072), ("128K", 131072), ("1M", 1048576), ("262,144", 262144),
    ("1.5k", 1536), (4096, 4096), ("2g", 2**31),
])
def test_parse_tokens(text, tokens):
    assert parse_tokens(text) == tokens


@pytest.mark.parametrize("bad", ["", "abc", "12x", "-5", "0", "1.3", "3G", True, 1.5, "1e9"])
def test_parse_tokens_rejects(bad):
    with pytest.raises(InputError) as err:
        parse_tokens(bad)
    assert "context" in str(err.value)


@pytest.mark.parametrize(("text", "size"), [
    ("24GiB", 24 * 2**30), ("24 GiB", 24 * 2**30), ("80GB", 80 * 10**9), ("8.11 GiB", int(8.11 * 2**30)),
    ("512M", 512 * 2**20), ("24G", 24 * 2**30), (1000, 1000),
])
def test_parse_bytes(text, size):
    assert parse_bytes(text) == size


@pytest.mark.parametrize("bad", ["", "24 parsecs", "-1GB", "0", "GB"])
def test_parse_bytes_rejects(bad):
    with pytest.raises(InputError):
        parse_bytes(bad)


def test_parse_count_bounds():
    assert parse_count("4", field="sequences") == 4
    with pytest.raises(InputError, match="sequences"):
        parse_count("0", field="sequences")
    with pytest.raises(InputError, match="sequences"):
        parse_count("2000000", field="sequences")
    with pytest.raises(InputError):
        parse_count("four", field="sequences")


def test_format_bytes():
    assert format_bytes(4224 * 2**20) == "4.125 GiB"
    assert format_bytes(1.0625 * 2**30 // 1) == "1.0625 GiB"
    assert format_bytes(272 * 2**20) == "272 MiB"
    assert format_bytes(10) == "10 B"


@pytest.mark.parametrize("parse", [parse_tokens, parse_bytes,
                                   lambda text: parse_count(text, field="sequences")])
@pytest.mark.parametrize("text", ["1,5", "24,5", "1,0000", "8192,", "1,5k", "24,5GiB"])
def test_a_comma_that_groups_no_thousands_is_refused(parse, text):
    # a decimal comma ('1,5k' for 1.5k) must not become a ten times larger number
    if parse is parse_tokens and text.endswith("GiB"):
        text = text.removesuffix("GiB")
    with pytest.raises(InputError, match="comma"):
        parse(text)


@pytest.mark.parametrize(("text", "value"), [("262,144", 262_144), ("1,048,576", 1_048_576),
                                             ("1,024.5", 1024.5)])
def test_a_comma_between_thousands_is_read(text, value):
    assert parse_bytes(text + "KiB") == int(value * 1024)
    if value == int(value):
        assert parse_tokens(text) == value
        assert parse_count(text, field="sequences", maximum=10**7) == value


@pytest.mark.parametrize(("n", "noun", "text"), [
    (1, "token", "1 token"), (0, "token", "0 tokens"), (2, "sequence", "2 sequences"),
    (1_000_000, "sequence", "1,000,000 sequences"), (1, "KV head", "1 KV head"),
])
def test_format_quantity(n, noun, text):
    from kvcore.units import format_quantity

    assert format_quantity(n, noun) == text


@pytest.mark.parametrize(("value", "text"), [
    (262_144, "262,144"), (10**15 - 1, "999,999,999,999,999"), (10**308, "1e+308"),
    (10**53 - 1, "9.99e+52"), (-(10**20), "-1e+20"), (1e308, "1e+308"), (0.5, "0.5"),
    (float("inf"), "inf"), ("12x", "'12x'"), ("x" * 500, "'" + "x" * 40 + "'… (500 characters)"),
    (True, "True"), (None, "None"), (list(range(100)), "[0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 1…"),
])
def test_offending_values_are_shown_short(value, text):
    from kvcore.errors import shown

    assert shown(value) == text


@pytest.mark.parametrize(("call", "expected"), [
    (lambda: parse_tokens("9" * 20), "context must be at most 2,147,483,648 tokens, got 9.99e+19"),
    (lambda: parse_tokens(10**400), "context must be at most 2,147,483,648 tokens, got 1e+400"),
    (lambda: parse_count("9" * 300, field="sequences"),
     "sequences must be between 1 and 1,000,000, got 9.99e+299"),
    (lambda: parse_tokens("k" * 10_000), "context must be a number like 8192, 128k or 1M, got "
                                          "'" + "k" * 40 + "'… (10,000 characters)"),
    (lambda: parse_bytes("1" * 400 + "GiB", field="gpu"), "gpu is implausibly large: '"
                                                          + "1" * 40 + "'… (403 characters)"),
])
def test_huge_inputs_are_shown_short_in_errors(call, expected):
    with pytest.raises(InputError) as err:
        call()
    assert str(err.value) == expected


@pytest.mark.parametrize(("call", "expected"), [
    (lambda: parse_tokens("-8k"), "context must be at least 1, got -8,192"),
    (lambda: parse_tokens("-0.5k", field="hot", minimum=0), "hot must be at least 0, got -512"),
    (lambda: parse_count("-2", field="sequences"), "sequences must be between 1 and 1,000,000, got -2"),
    (lambda: parse_bytes("-24GiB", field="offload"), "offload must be larger than zero, got '-24GiB'"),
    (lambda: parse_tokens("--8k"), "context must be a number like 8192, 128k or 1M, got '--8k'"),
])
def test_negative_values_are_out_of_range_not_malformed(call, expected):
    with pytest.raises(InputError) as err:
        call()
    assert str(err.value) == expected
