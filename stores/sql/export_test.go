package sqlstore

// SetTrace makes s call f with every statement it sends and its arguments.
// Set it before s is used.
func SetTrace(s *Store, f func(query string, args []any)) { s.trace = f }

// SetNoUndo turns off the clean-up of failed attempts, to show what it
// cleans up. Set it before s is used.
func SetNoUndo(s *Store) { s.noUndo = true }
