-- Version 4: nothing to change on SQLite. On PostgreSQL this version makes the insert trigger
-- notify without reading the jobs table; SQLite wakes waiters through the `wakeups` counter,
-- bumped by the inserting transaction itself, which reads nothing. Kept so that both backends
-- share their migrations' numbers and names.
SELECT 1;
