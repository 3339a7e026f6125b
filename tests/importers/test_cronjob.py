"""Kubernetes CronJob manifests read into command jobs."""

from __future__ import annotations

import pytest

from cronsvc.importers.cronjob import cronjob_jobs
from tests.support.paths import DATA

MANIFESTS = DATA / "imports" / "cronjobs.yaml"


def _manifest(spec: str, container: str = 'command: ["/bin/true"]') -> str:
    return f"""apiVersion: batch/v1
kind: CronJob
metadata: {{name: job}}
spec:
{spec}
  jobTemplate:
    spec:
      template:
        spec:
          containers:
            - name: c
              image: img
              {container}
"""


def test_the_manifests_map_to_jobs_and_the_rest_is_named() -> None:
    result = cronjob_jobs(MANIFESTS.read_text(), "cronjobs.yaml")
    assert result.jobs == {
        "nightly-report": {
            "cron": "30 2 * * 1-5", "timezone": "Europe/Berlin",
            "command": ["python", "-m", "billing.report", "--since", "yesterday"],
            "env": {"REPORT_BUCKET": "s3://billing-reports"}, "cwd": "/srv/billing",
            "timeout": "1h", "retries": 2, "overlap": "forbid", "starting_deadline": "5m",
            "description": "CronJob billing/nightly-report"},
        "cache-warm": {"cron": "@hourly", "command": ["/app/bin/warm-cache", "--all"],
                       "retries": 6, "overlap": "replace", "paused": True,
                       "description": "CronJob cache-warm"},
    }
    notes = [str(n) for n in result.notes]
    # The secret is named by where it lives, and its variable is not written.
    assert ("cronjobs.yaml:29: nightly-report: spec.jobTemplate.spec.template.spec."
            "containers[0].env[1]: DATABASE_URL comes from secretKeyRef "
            "(name=billing-db key=url): not written; set it in the workers' environment") in notes
    assert any("image registry.example.com/billing/report:1.4.2 is not carried over" in n
               for n in notes)
    assert any(n.startswith("cronjobs.yaml:12: nightly-report: spec.successfulJobsHistoryLimit")
               for n in notes)
    assert any("a ConfigMap, not a CronJob: left out" in n for n in notes)
    assert [(n.place, n.message.split(":")[0]) for n in result.refused] == [
        ("cronjobs.yaml:71: sidecar-only: spec.jobTemplate.spec.template.spec.containers[0]",
         "no command")]


@pytest.mark.parametrize(("spec", "expected"), [
    ('  schedule: "@every 1h30m"', {"every": "90m"}),
    ('  schedule: "CRON_TZ=Asia/Tokyo 0 9 * * *"', {"cron": "0 9 * * *",
                                                    "timezone": "Asia/Tokyo"}),
    ('  schedule: "TZ=Asia/Tokyo 0 9 * * *"\n  timeZone: Asia/Tokyo',
     {"cron": "0 9 * * *", "timezone": "Asia/Tokyo"}),
])
def test_schedules_kubernetes_accepts(spec: str, expected: dict[str, str]) -> None:
    result = cronjob_jobs(_manifest(spec), "m.yaml")
    assert result.refused == []
    assert {k: result.jobs["job"][k] for k in expected} == expected


@pytest.mark.parametrize(("spec", "container", "place", "message"), [
    ('  schedule: "TZ=Asia/Tokyo 0 9 * * *"\n  timeZone: UTC', 'command: ["/bin/true"]',
     "m.yaml:5: job: spec.schedule", "'TZ=Asia/Tokyo 0 9 * * *' names Asia/Tokyo"),
    ('  schedule: "0 9 * * *"\n  timeZone: Mars/Olympus', 'command: ["/bin/true"]',
     "m.yaml:6: job: spec.timeZone", "unknown time zone 'Mars/Olympus'"),
    ('  schedule: "0 25 * * *"', 'command: ["/bin/true"]',
     "m.yaml:5: job: spec.schedule", "hour 25 out of range 0-23"),
    ('  schedule: "@every 2 weeks"', 'command: ["/bin/true"]',
     "m.yaml:5: job: spec.schedule", "not a duration"),
    ('  schedule: "0 9 * * *"', 'args: ["--all"]',
     "m.yaml:11: job: spec.jobTemplate.spec.template.spec.containers[0]",
     "no command: the pod runs the entrypoint of image img"),
])
def test_what_cannot_be_mapped_is_refused_at_its_line(spec: str, container: str, place: str,
                                                       message: str) -> None:
    result = cronjob_jobs(_manifest(spec, container), "m.yaml")
    assert result.jobs == {}
    assert [n.place for n in result.refused] == [place]
    assert message in result.refused[0].message


def test_a_job_of_several_pods_and_broken_yaml_are_refused() -> None:
    several = _manifest('  schedule: "0 9 * * *"').replace(
        "    spec:\n      template:", "    spec:\n      parallelism: 3\n      template:")
    result = cronjob_jobs(several, "m.yaml")
    assert str(result.refused[0]) == ("m.yaml:8: job: spec.jobTemplate.spec.parallelism: "
                                      "refused: 3: each run is 3 pods; a cronsvc fire runs "
                                      "once (write one job per pod)")
    broken = cronjob_jobs("kind: CronJob\nspec: [a,\n", "b.yaml")
    assert broken.refused[0].place.startswith("b.yaml:")
    assert broken.refused[0].message.startswith("YAML: ")
