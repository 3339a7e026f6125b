"""A user's test of the report job, on a real worker, with cronsvc's pytest plugin."""

import redis

from cronsvc.testing import history, wait_for


def test_the_report_runs_on_a_real_worker(cronsvc_fleet, tmp_path):
    out = tmp_path / "report.txt"
    cronsvc_fleet.write({"report": {"cron": "0 3 * * *", "call": "myjobs:report",
                                    "kwargs": {"out": str(out)}}})
    r = redis.Redis.from_url(cronsvc_fleet.redis_url, decode_responses=True)
    with cronsvc_fleet.running("worker-1", planner=False):
        fire = cronsvc_fleet.trigger("report")
        runs = wait_for(lambda: history(r, "report"), message="the report's run")
    assert runs[-1]["status"] == "ok", cronsvc_fleet.logs()
    assert out.read_text() == f"report of report, fire {fire}\n"
