package main

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/spf13/cobra"

	"github.com/reqlock/reqlock/core"
)

// listing is what ls found.
type listing struct {
	names []string
	next  string // "" when the listing is complete
}

// list pages through the names held under prefix, from cursor, limit at a
// time, until the store has no more or max names were found. A name the
// store lists twice (Redis's SCAN may) is kept once; the names are sorted.
func list(ctx context.Context, c *conn, prefix, cursor string, limit, max int) (listing, error) {
	seen := map[string]bool{}
	var out listing
	for {
		callCtx, cancel := c.bound(ctx)
		names, next, err := c.locker.List(callCtx, prefix, cursor, limit)
		cancel()
		if err != nil {
			return out, storeErr(c, err)
		}
		for _, n := range names {
			if !seen[n] {
				seen[n] = true
				out.names = append(out.names, n)
			}
		}
		cursor = next
		if next == "" || len(out.names) >= max {
			break
		}
	}
	out.next = cursor
	slices.Sort(out.names)
	return out, nil
}

// inspectAll inspects each name and returns the held ones: a name released
// since it was listed is left out.
func inspectAll(ctx context.Context, c *conn, names []string) ([]core.LockState, error) {
	var locks []core.LockState
	for _, n := range names {
		callCtx, cancel := c.bound(ctx)
		st, err := c.inspect(callCtx, n)
		cancel()
		if err != nil {
			return locks, err
		}
		if st.Held() {
			locks = append(locks, st)
		}
	}
	return locks, nil
}

// listFlags are the paging flags of ls and watch.
type listFlags struct {
	limit, max int
	cursor     string
}

func (f *listFlags) add(cmd *cobra.Command) {
	cmd.Flags().IntVar(&f.limit, "limit", 100, fmt.Sprintf("names asked of the store per page (1 to %d)", core.MaxListLimit))
	cmd.Flags().IntVar(&f.max, "max", 1000, "stop after the page that brings the names found to this many")
}

func (f *listFlags) check() error {
	if f.limit < 1 || f.limit > core.MaxListLimit {
		return usage("--limit %d: want 1 to %d", f.limit, core.MaxListLimit)
	}
	if f.max < 1 {
		return usage("--max %d: want at least 1", f.max)
	}
	return nil
}

// lsJSON is the document of ls --json.
type lsJSON struct {
	Store  string   `json:"store"`
	Prefix string   `json:"prefix"`
	Names  []string `json:"names"`
	// Next is the cursor to go on from (--cursor), "" when the listing is
	// complete.
	Next     string     `json:"next"`
	Complete bool       `json:"complete"`
	Locks    []lockJSON `json:"locks,omitempty"` // with --long
}

func (a *app) lsCmd() *cobra.Command {
	var (
		lf   listFlags
		long bool
	)
	cmd := &cobra.Command{
		Use:   "ls [prefix]",
		Short: "List the names of the locks held now, under a name prefix",
		Long: `ls lists the names of the locks held now whose name begins with prefix
(all when it is empty), sorted. It pages through the store (--limit names a
call; Redis with SCAN, never KEYS) until it has all of them or --max; then it
says how to go on (--cursor). --long inspects each name and prints a table
of holders, waiters, TTL and fence.`,
		Example: `  reqlock ls order: --store redis://localhost:6379
  reqlock ls --long --json`,
		Args: args(cobra.MaximumNArgs(1)),
		RunE: func(cmd *cobra.Command, argv []string) error {
			if err := lf.check(); err != nil {
				return err
			}
			prefix := ""
			if len(argv) > 0 {
				prefix = argv[0]
			}
			c, err := a.connect(cmd.Context())
			if err != nil {
				return err
			}
			defer c.Close()
			found, err := list(cmd.Context(), c, prefix, lf.cursor, lf.limit, lf.max)
			if err != nil {
				return err
			}
			var locks []core.LockState
			if long {
				if locks, err = inspectAll(cmd.Context(), c, found.names); err != nil {
					return err
				}
			}
			if a.g.json {
				doc := lsJSON{Store: c.where, Prefix: prefix, Names: found.names, Next: found.next, Complete: found.next == ""}
				if doc.Names == nil {
					doc.Names = []string{}
				}
				if long {
					doc.Locks = []lockJSON{}
					for _, st := range locks {
						doc.Locks = append(doc.Locks, lockDoc(st))
					}
				}
				if err := writeJSON(a.stdout, doc); err != nil {
					return err
				}
			} else if long {
				printSummary(a.stdout, locks, a.now())
			} else {
				for _, n := range found.names {
					fmt.Fprintln(a.stdout, clean(n))
				}
			}
			if found.next != "" {
				fmt.Fprintf(a.stderr, "reqlock: stopped at --max %d names; more are held: go on with --cursor %s\n", lf.max, found.next)
			}
			return nil
		},
	}
	lf.add(cmd)
	cmd.Flags().StringVar(&lf.cursor, "cursor", "", "go on from this cursor, as a listing stopped by --max gave it")
	cmd.Flags().BoolVarP(&long, "long", "l", false, "inspect each name: holders, waiters, TTL, fence")
	return cmd
}

func (a *app) showCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "show NAME",
		Short: "Show who holds a lock and who waits for it",
		Long: `show prints one lock: its holders (one exclusive holder, or the shared
holders and permits in slot order) with who each is — host, process id,
route, request id, since when, mode, read from its token — the TTL left and
the fence; the exclusive holder waiting for the shares to drain; and the
waiters of the fair queue, head first. A free lock is no error.`,
		Example: `  reqlock show order:42
  reqlock show order:42 --json | jq '.holders[0].identity.host'`,
		Args: args(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, argv []string) error {
			c, err := a.connect(cmd.Context())
			if err != nil {
				return err
			}
			defer c.Close()
			ctx, cancel := c.bound(cmd.Context())
			defer cancel()
			st, err := c.inspect(ctx, argv[0])
			if err != nil {
				return err
			}
			if a.g.json {
				return writeJSON(a.stdout, lockDoc(st))
			}
			printLock(a.stdout, st, a.now())
			return nil
		},
	}
}

// frameJSON is one frame of watch --json: one line each.
type frameJSON struct {
	Time   time.Time  `json:"time"`
	Store  string     `json:"store"`
	Prefix string     `json:"prefix"`
	Locks  []lockJSON `json:"locks"`
	// Complete is false when --max stopped the listing.
	Complete bool `json:"complete"`
	// Error is the frame's error, "" if none: a watch goes on through
	// errors of the store.
	Error string `json:"error"`
}

func (a *app) watchCmd() *cobra.Command {
	var (
		lf       listFlags
		interval time.Duration
		count    int
	)
	cmd := &cobra.Command{
		Use:   "watch [prefix]",
		Short: "Watch the locks held under a name prefix, live",
		Long: `watch redraws, every --interval, the table of the locks held now under
prefix (as ls --long): on a terminal it clears the screen between frames;
otherwise, and with --json (one JSON line per frame), it appends. It runs
until interrupted, or for --count frames. An error of the store is shown in
its frame and the watch goes on.`,
		Example: `  reqlock watch order: --interval 2s
  reqlock watch --json --count 1`,
		Args: args(cobra.MaximumNArgs(1)),
		RunE: func(cmd *cobra.Command, argv []string) error {
			if err := lf.check(); err != nil {
				return err
			}
			if interval <= 0 {
				return usage("--interval %v: want a positive duration", interval)
			}
			if count < 0 {
				return usage("--count %d: want 0 (no end) or more", count)
			}
			prefix := ""
			if len(argv) > 0 {
				prefix = argv[0]
			}
			ctx := cmd.Context()
			c, err := a.connect(ctx)
			if err != nil {
				return err
			}
			defer c.Close()
			clear := !a.g.json && a.terminal(a.stdout)
			var last error
			for frame := 1; ; frame++ {
				found, err := list(ctx, c, prefix, "", lf.limit, lf.max)
				var locks []core.LockState
				if err == nil {
					locks, err = inspectAll(ctx, c, found.names)
				}
				if ctx.Err() != nil {
					return nil // interrupted
				}
				last = err
				now := a.now()
				if a.g.json {
					doc := frameJSON{Time: now.UTC(), Store: c.where, Prefix: prefix, Locks: []lockJSON{}, Complete: found.next == ""}
					for _, st := range locks {
						doc.Locks = append(doc.Locks, lockDoc(st))
					}
					if err != nil {
						doc.Error = err.Error()
					}
					if err := writeJSON(a.stdout, doc); err != nil {
						return err
					}
				} else {
					if clear {
						fmt.Fprint(a.stdout, "\x1b[H\x1b[2J")
					} else if frame > 1 {
						fmt.Fprintln(a.stdout)
					}
					fmt.Fprintf(a.stdout, "%s  %s  prefix %q  %d held\n", now.UTC().Format(time.RFC3339), c.where, prefix, len(locks))
					if err != nil {
						fmt.Fprintf(a.stdout, "error: %v\n", err)
					}
					if len(locks) > 0 {
						printSummary(a.stdout, locks, now)
					}
					if found.next != "" {
						fmt.Fprintf(a.stdout, "(stopped at --max %d names)\n", lf.max)
					}
				}
				if count > 0 && frame >= count {
					break
				}
				select {
				case <-ctx.Done():
					return nil
				case <-time.After(interval):
				}
			}
			return last
		},
	}
	lf.add(cmd)
	cmd.Flags().DurationVarP(&interval, "interval", "n", time.Second, "time between frames")
	cmd.Flags().IntVar(&count, "count", 0, "stop after this many frames (0: run until interrupted)")
	return cmd
}

// errNotReleased is the error of a release that released nothing.
var errNotReleased = errors.New("reqlock: nothing released")
