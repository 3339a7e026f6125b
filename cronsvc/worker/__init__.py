"""The worker role: claim, run, keep leases, ack or fail, and what a run leaves behind."""
