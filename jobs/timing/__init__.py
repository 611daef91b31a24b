"""Time: the database's clock every host agrees on (``clock.py``) and the slots of a cron or interval
schedule (``schedules.py``). Imports nothing of the project."""
