"""Scheduling: the beat scheduler class, the leader, the tick that turns due slots into runs, and the monitor."""
