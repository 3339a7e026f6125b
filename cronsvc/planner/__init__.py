"""The planner role: publishing the job file and keeping fires queued ahead."""
