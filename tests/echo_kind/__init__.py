"""A job kind the tests add the way a deployment would (one package, one line in JOBS_KINDS): it
prints its target, led by the ``prefix`` of its keyword arguments, and returns what it printed."""

from django.core.exceptions import ValidationError

from jobs.kinds.base import JobKindSpec, Outcome


def validate(job):
    if not job.target.strip() or "\n" in job.target:
        raise ValidationError({"target": "An echo job prints one line: give it as the target."})
    if not isinstance(job.kwargs, dict) or not isinstance(job.kwargs.get("prefix", ""), str):
        raise ValidationError({"kwargs": 'An echo job takes {"prefix": "text"} only.'})


def execute(context):
    line = f"{context.job.kwargs.get('prefix', '')}{context.job.target}"
    output = f"{line}\n"
    return Outcome(output=output, output_bytes=len(output.encode()), result={"echoed": line})


KIND = JobKindSpec(name="echo", label="Echo a line", execute=execute, validate=validate, fields=("kwargs",),
                   result_title="Echoed")
