"""The policy line has two homes, twins: cronsvc/policy.py writes and reads it in Python,
lua/includes/policy.lua reads it in the scripts. Both read every line alike."""

from __future__ import annotations

import json
import re

import pytest
import redis

from cronsvc.policy import Policy
from cronsvc.store.loader import INCLUDES, expand_includes, lua_dir

POLICIES = [
    Policy("0123456789ab", "all", 0, "allow", 1, False),
    Policy("0123456789ab", "latest", 60_000, "forbid", 3, True, "fedcba987654"),
    Policy("0123456789ab", "none", 5000, "queue", 2, False, "fedcba987654", ",dead,missed,",
           3, 2, "db:3,gpu:1", "gpu", "s=import,report;f=alert,page"),
    Policy("0123456789ab", "all", 0, "replace", 4, False, then="s=next"),
    Policy("0123456789ab", "all", 0, "allow", 1, False, limits="db:1", pool="slow"),
]
# Written by hand: the claim takes a line of fewer than six fields for no policy at all.
BY_HAND = ["", "x", "a|b|c|d|e", "d|all|soon|allow|many|1", "d|all|0|allow|3|0|"]

READ = """-- @include policy.lua
local out = {}
for i, line in ipairs(ARGV) do
  local p = parse_policy(line)
  if p then
    local caps = {}
    for j, l in ipairs(p.limits) do caps[j] = l.name .. ':' .. l.cap end
    out[i] = cjson.encode({policy_digest(line), p.catch_up, p.deadline, p.overlap,
      p.max_attempts, p.paused, p.definition, p.mask, p.pause_after, p.most,
      table.concat(caps, ','), p.bounded, p.on_failure or false})
  else
    out[i] = cjson.encode(false)
  end
end
return out
"""


def as_lua_reads(line: str) -> list[object] | bool:
    """What policy.lua should read of ``line``, from Policy.parse."""
    if not Policy.is_line(line):
        return False
    p = Policy.parse(line)
    failure = re.search(r"f=([^;]*)", p.then)
    return [p.digest, p.catch_up, p.deadline_ms, p.overlap, p.max_attempts, p.paused_in_file,
            p.definition, p.notify, p.pause_after, p.max_concurrent, p.limits,
            bool(p.max_concurrent or p.limits), failure.group(1) if failure else False]


@pytest.mark.parametrize("line", [p.format() for p in POLICIES] + BY_HAND)
def test_lua_and_python_read_a_policy_line_alike(r: redis.Redis, line: str) -> None:
    read = r.eval(expand_includes(READ, lua_dir() / INCLUDES, lua_dir()), 0, line)
    assert json.loads(read[0]) == as_lua_reads(line)
