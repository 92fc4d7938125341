-- Placeholder for version 8, which the run history across jobs defines
-- (0008_runs_history in its own branch): that file replaces this one.
SELECT 1;
