"""Whole sites built in a temporary folder and run in subprocesses, each on its
own SQLite file (a fresh project following the README, a team-owned generated
site): the PostgreSQL pass of the test command leaves this folder out, as its
database is never theirs."""
