-- A version held for a migration of another change: it does nothing. A
-- file of version 15 with a name replaces it (files are read in order,
-- this one first, and a version without a name may be defined again).
SELECT 1;
