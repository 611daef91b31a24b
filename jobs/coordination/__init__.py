"""How the service's processes, on any number of hosts, agree on who does what: the named leases
(``leases``: the scheduler's leadership, the retention pass), taken and renewed on the database's clock."""
