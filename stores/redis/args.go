package redisstore

import (
	"context"
	"strconv"

	"github.com/redis/go-redis/v9"
)

// This file builds the commands of the lock's hot path (acquire, release,
// the fair queue's poll) in few allocations. go-redis takes a command's
// arguments as []any, and a string or an int64 put in an interface is
// allocated on its own: a release, with four keys, a token and a channel,
// would cost a dozen allocations for its arguments alone. Here the variable
// arguments are bytes in one buffer and the list that go-redis gets holds
// pointers to them, which an interface holds without allocating: one
// command, one allocation for its arguments (two when they do not fit in
// its buffer).

// bulk is one argument of a command: bytes of its cmdArgs's buffer. go-redis
// writes it by MarshalBinary (encoding.BinaryMarshaler), and a hook that
// prints the command (go-redis's own String, tracing) gets its text by
// String (fmt.Stringer), as it would of a string argument.
type bulk struct {
	a        *cmdArgs
	from, to int32
}

// MarshalBinary returns the argument's bytes.
func (b *bulk) MarshalBinary() ([]byte, error) { return b.bytes(), nil }

// String returns the argument's text.
func (b *bulk) String() string { return string(b.bytes()) }

func (b *bulk) bytes() []byte { return b.a.buf[b.from:b.to:b.to] }

// cmdArgs is the argument list of one command. Build it with newCmdArgs,
// then add and put; it must not be changed once passed to go-redis (a hook
// may keep the command). Its list, bulks and buffer are the arrays of the
// argsSmall or argsLarge it is part of, so that the whole takes one
// allocation.
type cmdArgs struct {
	list  []any // what go-redis gets
	bulks []bulk
	buf   []byte
}

// argsSmall is a cmdArgs for an attempt (SET ... NX GET, or acquire.lua):
// up to 7 arguments, 3 of them variable (key, token, TTL), in 120 bytes.
type argsSmall struct {
	cmdArgs
	list  [7]any
	bulks [3]bulk
	buf   [120]byte
}

// argsLarge is a cmdArgs for up to 13 arguments, 8 of them variable: the
// longest is the fair queue's poll (EVALSHA, the hash, the key count, 4
// keys and 6 arguments). Its 296 bytes hold the variable arguments of a
// release of a key of up to 50 bytes.
type argsLarge struct {
	cmdArgs
	list  [13]any
	bulks [8]bulk
	buf   [296]byte
}

// newCmdArgs returns an empty argument list for a command of up to args
// arguments, bulks of them variable, taking size bytes: in an argsSmall or
// an argsLarge, with a buffer of its own when size does not fit in it.
func newCmdArgs(args, bulks, size int) *cmdArgs {
	var a *cmdArgs
	var buf []byte
	if s := (argsSmall{}); args <= len(s.list) && bulks <= len(s.bulks) {
		s := new(argsSmall)
		a, buf = &s.cmdArgs, s.buf[:0]
		a.list, a.bulks = s.list[:0], s.bulks[:0]
	} else {
		l := new(argsLarge)
		a, buf = &l.cmdArgs, l.buf[:0]
		a.list, a.bulks = l.list[:0], l.bulks[:0]
	}
	if size > cap(buf) {
		buf = make([]byte, 0, size)
	}
	a.buf = buf
	return a
}

// add appends arguments that cost no allocation in an interface: constant
// strings and values boxed once (see the script vars).
func (a *cmdArgs) add(v ...any) {
	a.list = append(a.list, v...)
}

// put appends one argument made of the concatenation of parts.
func (a *cmdArgs) put(parts ...string) {
	start := len(a.buf)
	for _, p := range parts {
		a.buf = append(a.buf, p...)
	}
	a.bulk(start)
}

// putInt appends an integer argument.
func (a *cmdArgs) putInt(n int64) {
	start := len(a.buf)
	a.buf = strconv.AppendInt(a.buf, n, 10)
	a.bulk(start)
}

// decLen is the length of n in decimal, as putInt writes it.
func decLen(n int64) int {
	l := 1
	if n < 0 {
		l++ // the sign; n/10 keeps below 0 as long as digits are left
	}
	for n /= 10; n != 0; n /= 10 {
		l++
	}
	return l
}

// bulk appends a.buf[start:] as an argument.
func (a *cmdArgs) bulk(start int) {
	a.bulks = append(a.bulks, bulk{a: a, from: int32(start), to: int32(len(a.buf))})
	a.list = append(a.list, &a.bulks[len(a.bulks)-1])
}

// script is a Lua script of the hot path with its hash and text boxed once.
type script struct {
	*redis.Script
	sha, src any
}

func newScript(src string) *script {
	sc := redis.NewScript(src)
	return &script{Script: sc, sha: sc.Hash(), src: src}
}

// fenceGraceArg is the fence counter's grace in ms, boxed once.
var fenceGraceArg any = fenceGrace.Milliseconds()

// scriptArgs starts the arguments of sc: EVALSHA, its hash and numKeys, the
// key count as a constant string ("1"), which go-redis's cluster routing
// reads without formatting it; args (the keys and arguments that follow),
// bulks and size are as for newCmdArgs. call replaces the first two with
// EVAL and the text when the script is not cached on the server yet.
func scriptArgs(sc *script, numKeys any, args, bulks, size int) *cmdArgs {
	a := newCmdArgs(3+args, bulks, size)
	a.add("evalsha", sc.sha, numKeys)
	return a
}

// call runs a script built by scriptArgs in one round trip, as run does:
// EVAL the first time on this deployment, EVALSHA afterwards, falling back
// to EVAL when the server answers NOSCRIPT. newCmd makes the command that
// reads the reply (redis.NewCmd, redis.NewIntSliceCmd...).
func call[C redis.Cmder](ctx context.Context, s *Store, sc *script, a *cmdArgs, newCmd func(context.Context, ...any) C) C {
	seen := s.cached[sc.Script]
	if !seen.Load() {
		a.list[0], a.list[1] = "eval", sc.src
	}
	cmd := newCmd(ctx, a.list...)
	_ = s.client.Process(ctx, cmd)
	err := cmd.Err()
	switch {
	case err == nil || err == redis.Nil:
		seen.Store(true)
	case a.list[0] == "evalsha" && redis.HasErrorPrefix(err, "NOSCRIPT"):
		// A restarted or failed-over server, or another cluster master:
		// a new list, the first one belongs to cmd.
		args := append([]any{"eval", sc.src}, a.list[2:]...)
		cmd = newCmd(ctx, args...)
		_ = s.client.Process(ctx, cmd)
		if err := cmd.Err(); err == nil || err == redis.Nil {
			seen.Store(true)
		}
	}
	return cmd
}
