"""The delivery a dispatched message carries, written and read back."""

from __future__ import annotations

from cronsvc.run.dispatch import Delivery, safe_id, unsafe_id


def test_a_delivery_reads_back_from_its_headers_and_from_one_field() -> None:
    d = Delivery("digest@1700000000123!cust-7", "digest", 1700000000123, 2,
                 "cron:deliveries:digest@1700000000123!cust-7", "cust-7", {"n": [1, 2]})
    assert Delivery.read(d.headers()) == d
    assert Delivery.read(d.as_dict()) == d
    assert Delivery.read({"other": "header"}) is None and Delivery.read(None) is None


def test_a_traced_delivery_carries_its_trace_context_under_the_w3c_names() -> None:
    trace = {"traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
             "tracestate": "vendor=x"}
    d = Delivery("digest@1700000000123", "digest", 1700000000123, 1,
                 "cron:deliveries:digest@1700000000123", trace=trace)
    headers = d.headers()
    assert headers["traceparent"] == trace["traceparent"]  # where Celery's instrumentation looks
    assert headers["tracestate"] == "vendor=x"
    assert Delivery.read(headers) == d
    assert d.as_dict()["trace"] == trace
    assert Delivery.read(d.as_dict()) == d


def test_a_safe_id_has_only_letters_digits_dash_and_underscore_and_reverses() -> None:
    for fid in ("digest@1700000000000", "a_b.c@1#t1", "j@1!sched/7:x", "j@1!@host_1"):
        safe = safe_id(fid)
        assert all(c.isalnum() or c in "-_" for c in safe)
        assert unsafe_id(safe) == fid
