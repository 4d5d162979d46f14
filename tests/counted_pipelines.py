"""Which pipelines does the expected-counts file pin? (A module of its own: ``conftest``
is ambiguous as an import name once tests/bench/ has a conftest too.)"""

from vlmpath.engines.pipelines import NAMED_PIPELINES, Pipeline

# Pipelines the expected-counts file pins, by the key used in that file.
COUNTED_PIPELINES = {
    "default": NAMED_PIPELINES["default"],           # batched + masked_scatter + offsets + forwarded
    "legacy": NAMED_PIPELINES["legacy"],             # batched + where_index + mask_sum + rehash
    "per_request": Pipeline(encode="per_request"),   # the pre-#25910 encode path, other stages default
}
