package zkstore

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/go-zookeeper/zk"
)

// DefaultRoot is the node under which a Store keeps its locks unless
// WithRoot says otherwise.
const DefaultRoot = "/reqlock"

// DefaultWatchLinger is how long a key's watch (Watch) stays set after its
// last watcher stopped, unless WithWatchLinger says otherwise.
const DefaultWatchLinger = 5 * time.Second

// Option configures a Store.
type Option func(*config)

type config struct {
	root    string
	acl     []zk.ACL
	linger  time.Duration
	session time.Duration
	errs    []error
}

func defaultConfig() config {
	return config{
		root:   DefaultRoot,
		acl:    zk.WorldACL(zk.PermAll),
		linger: DefaultWatchLinger,
	}
}

// WithRoot sets the node under which the store keeps its locks (default
// DefaultRoot, "/reqlock"): an absolute path such as "/services/orders/locks".
// Missing nodes on the path are created as container nodes. Every process
// that shares locks must use the same root, and nothing else should create
// nodes under it.
func WithRoot(path string) Option {
	return func(c *config) {
		if err := checkRoot(path); err != nil {
			c.errs = append(c.errs, err)
			return
		}
		c.root = strings.TrimSuffix(path, "/")
	}
}

// WithACL sets the ACL of the nodes the store creates (default
// zk.WorldACL(zk.PermAll)). The connection must have the credentials
// (zk.Conn.AddAuth) that the ACL asks for.
func WithACL(acl ...zk.ACL) Option {
	return func(c *config) {
		if len(acl) == 0 {
			c.errs = append(c.errs, errors.New("zkstore: WithACL: empty ACL"))
			return
		}
		c.acl = append([]zk.ACL(nil), acl...)
	}
}

// WithWatchLinger sets how long a key's watch stays set after its last
// watcher stopped (default DefaultWatchLinger), so that the waiters of a
// hot key do not set it up again at every wait; 0 ends it at once.
func WithWatchLinger(d time.Duration) Option {
	return func(c *config) {
		if d < 0 {
			c.errs = append(c.errs, fmt.Errorf("zkstore: WithWatchLinger: negative duration %v", d))
			return
		}
		c.linger = d
	}
}

// WithSessionTimeout tells the store the session timeout of its
// connection: the one given to zk.Connect, or less if the ensemble cut it
// to its bounds (minSessionTimeout and maxSessionTimeout, 2 and 20 ticks by
// default), which go-zookeeper does not report. The store then refuses a
// TTL longer than d, with an error wrapping core.ErrInvalidOption, in every
// call that sets one (TryAcquire, Extend, Enqueue, Poll, TryAcquireShare,
// ExtendShare, TryAcquireWaiting, TryAcquireAll).
//
// ZooKeeper expires the session of a client it has not heard from for the
// session timeout (a partition, a stalled process), deletes the session's
// nodes, and the lock passes on. A lease's validity runs for its TTL from
// the sending of its last successful write, which the server heard, so a
// TTL of at most d ends it before the session can expire: a lease that
// reports itself valid holds its name. With a longer TTL a holder that is
// cut off would keep a valid-looking lease after its lock has passed on.
// Without this option the store cannot check: keep every TTL at most the
// session timeout.
func WithSessionTimeout(d time.Duration) Option {
	return func(c *config) {
		if d <= 0 {
			c.errs = append(c.errs, fmt.Errorf("zkstore: WithSessionTimeout: %v is not positive", d))
			return
		}
		c.session = d
	}
}

// checkRoot reports what is wrong with a root path.
func checkRoot(path string) error {
	bad := func(why string) error { return fmt.Errorf("zkstore: WithRoot(%q): %s", path, why) }
	switch {
	case path == "" || path[0] != '/':
		return bad("not an absolute path")
	case path == "/":
		return nil
	}
	for _, part := range strings.Split(strings.TrimSuffix(path[1:], "/"), "/") {
		switch {
		case part == "":
			return bad("empty path element")
		case part == "." || part == "..":
			return bad("relative path element")
		}
		for _, r := range part {
			if r < 0x20 || (r >= 0x7f && r <= 0x9f) || (r >= 0xd800 && r <= 0xf8ff) || (r >= 0xfff0 && r <= 0xffff) {
				return bad("character not allowed in a ZooKeeper path")
			}
		}
	}
	if path == "/zookeeper" || strings.HasPrefix(path, "/zookeeper/") {
		return bad("reserved for ZooKeeper itself")
	}
	return nil
}
