"""Features tested end to end on real planner and worker processes: backfill, chains,
each-host jobs, limits and overlap, pools, rolling definitions. The other folders mirror the
package and test its modules; these test what a user sees a fleet do."""
