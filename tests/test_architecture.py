"""The project has no import cycle, imports inside functions included (.importlinter holds the
layers; scripts/test.sh runs lint-imports)."""

import grimp

PACKAGES = ("jobs", "workflows", "notifications", "audit", "scheduler_site", "outbound", "jobsctl", "sso")


def import_cycles(graph, modules):
    """The strongly connected components of more than one module (Tarjan's algorithm)."""
    index, low, on_stack, stack, cycles = {}, {}, set(), [], []

    def visit(start):
        work = [(start, iter(graph.find_modules_directly_imported_by(start) & modules))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            module, imported = work[-1]
            for other in imported:
                if other not in index:
                    index[other] = low[other] = len(index)
                    stack.append(other)
                    on_stack.add(other)
                    work.append((other, iter(graph.find_modules_directly_imported_by(other) & modules)))
                    break
                if other in on_stack:
                    low[module] = min(low[module], index[other])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[module])
                if low[module] == index[module]:
                    component = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == module:
                            break
                    if len(component) > 1:
                        cycles.append(sorted(component))

    for module in sorted(modules):
        if module not in index:
            visit(module)
    return cycles


def test_the_project_has_no_import_cycle():
    graph = grimp.build_graph(*PACKAGES, include_external_packages=False, cache_dir=None)
    modules = {m for m in graph.modules if ".migrations" not in m}
    assert import_cycles(graph, modules) == []


def test_the_cycle_finder_finds_a_cycle():
    graph = grimp.ImportGraph()
    for module in ("a", "a.b", "a.c", "a.d"):
        graph.add_module(module)
    graph.add_import(importer="a.b", imported="a.c")
    graph.add_import(importer="a.c", imported="a.b")
    graph.add_import(importer="a.d", imported="a.b")
    assert import_cycles(graph, set(graph.modules)) == [["a.b", "a.c"]]
