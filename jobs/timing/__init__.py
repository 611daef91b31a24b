"""Time: the database's clock every host agrees on (``clock.py``) and the slots of a cron or interval
schedule (``schedules.py``), with what a job's DST policy does on the nights clocks change
(``dst.py``). Imports nothing of the project but its choices."""
