-- Version 15: the budget of attempts a redrive gives a job (`redrive_job`): as many as the job
-- was created with, written by its first redrive and read by every later one, so that
-- max_attempts grows by that budget each time (3 → 6 → 9) instead of doubling (3 → 6 → 12),
-- which taking the last max_attempts as the budget did. NULL: never redriven (the budget is
-- then max_attempts, which nothing but a redrive or a lost attempt raises).
ALTER TABLE jobs ADD COLUMN redrive_budget INTEGER
    CHECK (redrive_budget IS NULL OR redrive_budget BETWEEN 1 AND 100);
