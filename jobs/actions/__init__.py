"""What a person does to a job, one function per action with its audit entry (``jobs.py``); who may
see and do what (``permissions.py``); what the audit entry records of a job (``snapshot.py``)."""
