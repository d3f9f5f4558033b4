package sqlstore

// SetTrace makes s call f with every statement it sends and its arguments.
// Set it before s is used.
func SetTrace(s *Store, f func(query string, args []any)) { s.trace = f }

// SetNoUndo turns off the clean-up of failed attempts, to show what it
// cleans up. Set it before s is used.
func SetNoUndo(s *Store) { s.noUndo = true }

// SetOnRetry makes s call f with the error of every statement or
// transaction that it runs again (a deadlock, a serialization failure).
// Set it before s is used.
func SetOnRetry(s *Store, f func(err error)) { s.onRetry = f }

// IsDeadlock reports a deadlock reported by PostgreSQL or InnoDB.
func IsDeadlock(err error) bool {
	state, number, ok := serverError(err)
	return ok && (state == pgDeadlock || number == mysqlDeadlock)
}

// SetBeforeCommit makes s call f just before each transaction commits;
// nil turns it off. Not safe while s is in use.
func SetBeforeCommit(s *Store, f func()) { s.beforeCommit = f }
