// Package redisscript holds the Lua scripts and key names of the Redis lock,
// shared by every Redis client reqlock supports (go-redis in core, rueidis in
// stores/rueidis), so that both kinds of client can take and release the
// same lock. Each script's file says what it does, its keys and arguments.
package redisscript

import (
	_ "embed"
	"time"
)

// The scripts. Acquire is the fallback of SET NX PX GET for servers before
// Redis 7.0; the others have no single-command equivalent.
var (
	//go:embed acquire.lua
	Acquire string
	//go:embed acquire_fenced.lua
	AcquireFenced string
	//go:embed release.lua
	Release string
	//go:embed extend.lua
	Extend string
	//go:embed extend_fenced.lua
	ExtendFenced string
	//go:embed fence_floor.lua
	FenceFloor string
)

// FenceGrace is how long a fence counter outlives the lock it was last drawn
// or raised for (see acquire_fenced.lua): it expires a few seconds after the
// name's last lock, and the fences drawn after that come from the server's
// clock.
const FenceGrace = 5 * time.Second

// FenceKey returns the fence counter of a lock key. Companion keys are
// appended to the lock key, so that they share its hash tag and its cluster
// slot.
func FenceKey(key string) string { return key + ":fence" }

// Channel returns the pub/sub channel on which releases of a lock key are
// announced.
func Channel(key string) string { return key + ":released" }
