package stores

import "testing"

func TestMySQLDSN(t *testing.T) {
	dsn, err := mysqlDSN("mysql://root@127.0.0.1:3306/reqlock")
	if err != nil || dsn != "root@tcp(127.0.0.1:3306)/reqlock?timeout=1s" {
		t.Errorf("mysqlDSN: %q, %v", dsn, err)
	}
	if _, err := mysqlDSN("mysql://127.0.0.1:3306/reqlock"); err == nil {
		t.Error("mysqlDSN without a user: no error")
	}
}
