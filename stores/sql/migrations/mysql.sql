-- The lock table of github.com/reqlock/reqlock/stores/sql on MySQL (8.0 or
-- later) and MariaDB (10.3 or later), with InnoDB. Store.CreateTable runs
-- this statement; run it yourself, or copy it into your migrations, where
-- the application's database user may not create tables. With WithTable,
-- replace the name.
--
-- One row per key that was locked: its key, the token of its holder (empty
-- once released), when the lock expires, as a UTC time by the database's
-- clock, and the last fencing token drawn for the key. A release marks the
-- row free and keeps it, so that the next fence of the key is drawn above
-- the last one; Store.Purge deletes the rows of locks that expired or were
-- released long ago. While shares hold a name, its row holds the marker
-- token '(shares)' (see mysql_share.sql). Binary strings compare keys and
-- tokens byte for byte, whatever the collation of the database.
CREATE TABLE IF NOT EXISTS reqlock_locks (
    name       VARBINARY(1024) NOT NULL,
    token      VARBINARY(255)  NOT NULL,
    expires_at DATETIME(6)     NOT NULL,
    fence      BIGINT          NOT NULL,
    PRIMARY KEY (name)
) ENGINE = InnoDB;
