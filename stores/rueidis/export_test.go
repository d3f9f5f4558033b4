package rueidisstore

// WithoutSetGet makes s acquire with acquire.lua, as it does on servers
// before Redis 7.0, which reject SET ... NX GET.
func WithoutSetGet(s *Store) { s.noSetGet.Store(true) }

// PendingShareUndos returns the number of share clean-ups s retries, and
// whether their goroutine runs.
func PendingShareUndos(s *Store) (int, bool) { return s.shareUndos.Pending() }
