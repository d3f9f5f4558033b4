-- The share table of github.com/reqlock/reqlock/stores/sql on PostgreSQL,
-- beside the lock table of migrations/postgresql.sql: shared holds,
-- numbered permits and waiting exclusive holders (core.Shared,
-- core.Permits). Store.CreateTable runs this statement too; where you run
-- the migrations yourself, run this file once after postgresql.sql (it is
-- new in reqlock v0.2: an exclusive waiter's retries use it as well). With
-- WithTable, replace the names.
--
-- One row per share of a name: slot 0..n-1 for a permit of Permits(n),
-- 0, 1, 2... for shared holds (n = 0); the token of its holder and when it
-- expires by the database's clock. Slot -1 is the record of an exclusive
-- holder that waits for the shares to drain (n = -1): while it is live no
-- new share is taken. While a name has live shares, its row in the lock
-- table holds the marker token '(shares)' until the latest share expires,
-- so that exclusive holders see the name as held. Rows of shares whose
-- holder died are reused or deleted by the next share call of their name,
-- or by Store.Purge.
CREATE TABLE IF NOT EXISTS reqlock_locks_share (
    name       bytea       NOT NULL,
    slot       integer     NOT NULL,
    token      text        NOT NULL,
    n          integer     NOT NULL,
    expires_at timestamptz NOT NULL,
    PRIMARY KEY (name, slot)
);
