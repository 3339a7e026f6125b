"""The delivery a dispatched message carries, written and read back."""

from __future__ import annotations

from cronsvc.run.dispatch import Delivery, safe_id, unsafe_id


def test_a_delivery_reads_back_from_its_headers_and_from_one_field() -> None:
    d = Delivery("digest@1700000000123!cust-7", "digest", 1700000000123, 2,
                 "cron:deliveries:digest@1700000000123!cust-7", "cust-7", {"n": [1, 2]})
    assert Delivery.read(d.headers()) == d
    assert Delivery.read(d.as_dict()) == d
    assert Delivery.read({"other": "header"}) is None and Delivery.read(None) is None


def test_a_safe_id_has_only_letters_digits_dash_and_underscore_and_reverses() -> None:
    for fid in ("digest@1700000000000", "a_b.c@1#t1", "j@1!sched/7:x", "j@1!@host_1"):
        safe = safe_id(fid)
        assert all(c.isalnum() or c in "-_" for c in safe)
        assert unsafe_id(safe) == fid
