package rueidisstore

// WithoutSetGet makes s acquire with acquire.lua, as it does on servers
// before Redis 7.0, which reject SET ... NX GET.
func WithoutSetGet(s *Store) { s.noSetGet.Store(true) }
