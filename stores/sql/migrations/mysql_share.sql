-- The share table of github.com/reqlock/reqlock/stores/sql on MySQL and
-- MariaDB, beside the lock table of migrations/mysql.sql: shared holds,
-- numbered permits and waiting exclusive holders (core.Shared,
-- core.Permits). Store.CreateTable runs this statement too; where you run
-- the migrations yourself, run this file once after mysql.sql (it is new in
-- reqlock v0.2: an exclusive waiter's retries use it as well). With
-- WithTable, replace the name.
--
-- One row per share of a name: slot 0..n-1 for a permit of Permits(n),
-- 0, 1, 2... for shared holds (n = 0); the token of its holder and when it
-- expires, as a UTC time by the database's clock. Slot -1 is the record of
-- an exclusive holder that waits for the shares to drain (n = -1): while it
-- is live no new share is taken. While a name has live shares, its row in
-- the lock table holds the marker token '(shares)' until the latest share
-- expires, so that exclusive holders see the name as held; fences are
-- drawn from that row's fence column. Rows of shares whose holder died are
-- reused or deleted by the next share call of their name, or by
-- Store.Purge.
CREATE TABLE IF NOT EXISTS reqlock_locks_share (
    name       VARBINARY(1024) NOT NULL,
    slot       INT             NOT NULL,
    token      VARBINARY(255)  NOT NULL,
    n          INT             NOT NULL,
    expires_at DATETIME(6)     NOT NULL,
    PRIMARY KEY (name, slot)
) ENGINE = InnoDB;
