-- The lock table of github.com/reqlock/reqlock/stores/sql on PostgreSQL
-- (9.5 or later). Store.CreateTable runs these statements; run them
-- yourself, or copy them into your migrations, where the application's
-- database role may not create tables. With WithTable, replace the names.
--
-- The fencing sequence hands out the fencing tokens of every lock of the
-- table. CACHE 1 (the default) keeps its values in the order of the calls of
-- nextval across all sessions, which strictly increasing fences need.
CREATE SEQUENCE IF NOT EXISTS reqlock_locks_fence CACHE 1;

-- One row per held lock: its key (bytes: a key may hold any byte, which
-- text may not), the token of its holder and when it expires by the
-- database's clock. A release deletes the row; a lock whose holder never
-- released it stays until the next acquire of its key takes it over, or
-- Store.Purge deletes it. While shares hold a name, its row holds the
-- marker token '(shares)' (see postgresql_share.sql).
CREATE TABLE IF NOT EXISTS reqlock_locks (
    name       bytea       NOT NULL PRIMARY KEY,
    token      text        NOT NULL,
    expires_at timestamptz NOT NULL
);
