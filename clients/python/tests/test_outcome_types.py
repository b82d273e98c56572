"""The typed shapes (``courier_client.Outcome`` and the rest) name every
field courier sends: the protocol document's, the resilience fields, and
those of real outcomes."""

from __future__ import annotations

import json
from typing import Any, Dict, Set

from courier_client import Courier, DownloadResult, Image, Outcome, OutcomeError

from .conftest import REPO

SCHEMAS = json.loads((REPO / "protocol" / "openrpc.json").read_text())["components"]["schemas"]


def keys(shape: Any) -> Set[str]:
    return set(shape.__required_keys__) | set(shape.__optional_keys__)


def test_the_shapes_hold_the_documents_fields() -> None:
    for shape, schema in ((Outcome, "Outcome"), (OutcomeError, "OutcomeError"),
                          (Image, "Image"), (DownloadResult, "DownloadResult")):
        documented = set(SCHEMAS[schema]["properties"])
        assert documented <= keys(shape), f"{schema}: {sorted(documented - keys(shape))} missing"
        assert set(SCHEMAS[schema]["required"]) <= set(shape.__required_keys__), schema
    assert {"attempts", "resumedFrom"} <= keys(Outcome)
    assert {"retryAfter", "expected", "actual"} <= keys(OutcomeError)


def test_real_outcomes_have_no_field_the_shapes_lack(courier_kwargs: Dict[str, Any], origin) -> None:
    with Courier(**courier_kwargs) as c:
        image = c.fetch(origin.url("/image/png"))
        failed = c.fetch(origin.url("/status/404"))
        result = c.download(origin.url("/bytes/3"), wait=True, body="base64")
    assert set(image) <= keys(Outcome) and set(image["image"]) <= keys(Image)
    assert set(failed) <= keys(Outcome) and set(failed["error"]) <= keys(OutcomeError)
    assert set(result) <= keys(DownloadResult)
