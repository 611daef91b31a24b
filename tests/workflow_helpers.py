"""Building workflows for the tests: jobs by name and a graph given as edges."""

from jobs.definitions.jobs import save_job
from jobs.models import Job
from workflows.definitions import parse_graph, save_workflow
from workflows.models import Workflow


def make_job(name, target="test.ledger", **fields):
    return save_job(Job(name=name, kind="callable", target=target, **fields), {"type": "manual"})


def make_workflow(name, nodes, edges, schedule=None, **fields):
    """``edges``: [("a", "b"), ("a", "c", "run")…] between job names."""
    jobs = {job.name: job for job in Job.objects.filter(name__in=nodes)}
    edge_dicts = [{"from": e[0], "to": e[1], **({"on_failure": e[2]} if len(e) > 2 else {})} for e in edges]
    return save_workflow(Workflow(name=name, **fields), schedule or {"type": "manual"},
                         parse_graph(list(nodes), edge_dicts, jobs))
