"""The learning benchmark (issue 20): failed invoices retried under timing policies in
simulated worlds, pure and fast (no scheduler, no HTTP: the planner, the world and seeded
draws). See `__main__` for the command.

    population   the failed invoices of one seed (the demo's customers, over some months)
    policies     the policy interface (`plan` / `observe`), the static ones and the oracle
    simulate     one seed × world × policy, in time order, the learner fed what it observed
    report       the figures over seeds, and the table
"""
