"""The chaos run (issue 11): Recoup's processes killed, its database connections cut and the
gateway taken down while failed payments are retried; then every invariant checked by
machine. See `__main__` for the command and `run` for how a run goes.

    faults       what to break and when (worker kills, connection terminations, the outage)
    processes    the API and worker processes: start, SIGKILL, restart, stop
    databases    a fresh database per run
    own_server   a PostgreSQL server of the run's own, to crash and restart
    load         the customers' side: renewals, failures reported, payments another way
    rescue       kill → rescue times
    snapshot     what the run left, read once
    invariants   the checks
    run          one run, end to end
    report       the figures as text
    clock_skew   workers minutes ahead and behind (injected clocks), both backends
    skew_processes  the same with worker processes under libfaketime (PostgreSQL)
"""
