"""Mutated real configs: kvcore answers with a spec or its own error, never another exception."""

import math

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kvcore import (
    CacheOptions,
    KvplanError,
    cache_size,
    model_catalog,
    spec_from_config,
    weights_for,
)

ENTRIES = model_catalog()
junk = st.one_of(
    st.none(), st.booleans(), st.integers(-10, 10), st.integers(10**9, 10**15),
    st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=5),
    st.lists(st.integers(-2, 70), max_size=5), st.dictionaries(st.text(max_size=3), st.integers(), max_size=2),
)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(range(len(ENTRIES))), st.data())
def test_mutated_configs_never_crash(index, data):
    config = ENTRIES[index].config()
    target = config["text_config"] if isinstance(config.get("text_config"), dict) else config
    keys = sorted(target)
    for _ in range(data.draw(st.integers(1, 3))):
        key = data.draw(st.sampled_from(keys))
        if data.draw(st.booleans()):
            target.pop(key, None)
        else:
            target[key] = data.draw(junk)
    try:
        spec = spec_from_config(config, name="fuzz", source="fuzz")
    except KvplanError as exc:
        assert str(exc)
        return
    size = cache_size(spec, 4096, 2, CacheOptions(kv_k="q8_0", kv_v="tbq4"))
    assert size.total_bytes >= 0
    weights = weights_for(spec, "q4_k_m")
    assert weights.bytes > 0 and math.isfinite(weights.bytes)
