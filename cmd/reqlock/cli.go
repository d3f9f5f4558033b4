package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/reqlock/reqlock/core"
	etcdstore "github.com/reqlock/reqlock/stores/etcd"
	sqlstore "github.com/reqlock/reqlock/stores/sql"
	zkstore "github.com/reqlock/reqlock/stores/zookeeper"
)

// Exit statuses.
const (
	exitOK    = 0 // done
	exitError = 1 // the command failed: the store, a refused confirmation, nothing to release
	exitUsage = 2 // the command line is wrong: a flag, an argument, the store's URL
)

// usageError marks an error of the command line (exit status 2).
type usageError struct{ err error }

func (e usageError) Error() string { return e.err.Error() }
func (e usageError) Unwrap() error { return e.err }

// usage returns a usage error with a message.
func usage(format string, args ...any) error {
	return usageError{fmt.Errorf("reqlock: "+format, args...)}
}

// env is what a command reads and writes outside its arguments: the
// streams, the environment, the clock and who runs it. Tests give their
// own.
type env struct {
	stdin          io.Reader
	stdout, stderr io.Writer
	getenv         func(string) string
	now            func() time.Time
	// terminal reports whether the stream f (stdin, stdout) is a
	// terminal: watch clears it between frames; a confirmation read from
	// elsewhere is not echoed, so the command ends its line itself.
	terminal func(f any) bool
	// operator returns who runs the command, "user@host", for the audit
	// log.
	operator func() string
}

// osEnv is the process's own env.
func osEnv() env {
	return env{
		stdin: os.Stdin, stdout: os.Stdout, stderr: os.Stderr,
		getenv: os.Getenv, now: time.Now, operator: osOperator,
		terminal: func(f any) bool {
			file, ok := f.(*os.File)
			return ok && term.IsTerminal(int(file.Fd()))
		},
	}
}

// globals are the flags every command takes.
type globals struct {
	store   string
	opts    storeOptions
	timeout time.Duration
	json    bool
}

// app is one run of the command.
type app struct {
	env
	g   globals
	ran bool // the command line was accepted and a command began
}

// run runs the command line args and returns the exit status.
func run(ctx context.Context, args []string, e env) int {
	quietRedis.Do(func() { redis.SetLogger(discardLog{}) })
	a := &app{env: e}
	root := a.rootCmd()
	root.SetArgs(args)
	root.SetIn(e.stdin)
	root.SetOut(e.stdout)
	root.SetErr(e.stderr)
	err := root.ExecuteContext(ctx)
	if err == nil {
		return exitOK
	}
	var ue usageError
	if !a.ran || errors.As(err, &ue) || errors.Is(err, errBadStore) {
		msg := err.Error()
		if !a.ran {
			msg = "reqlock: " + msg
		}
		fmt.Fprintln(e.stderr, msg)
		fmt.Fprintln(e.stderr, "Run 'reqlock --help' for usage.")
		return exitUsage
	}
	fmt.Fprintln(e.stderr, err)
	return exitError
}

// quietRedis silences go-redis's own log (its dial retries), once: the
// command reports the error it ends with.
var quietRedis sync.Once

// discardLog is a go-redis logger that writes nothing.
type discardLog struct{}

func (discardLog) Printf(context.Context, string, ...any) {}

// rootCmd builds the command tree.
func (a *app) rootCmd() *cobra.Command {
	root := &cobra.Command{
		Use:   "reqlock",
		Short: "See and steer reqlock's locks: who holds what, who waits, and a way out of a stuck lock",
		Long: `reqlock lists the locks that services keep with github.com/reqlock/reqlock,
shows who holds one (host, process, route, request, since when, TTL left,
fence) and who waits for it, watches them live, and releases a stuck
holder's lock on an operator's explicit request.

The store is given by --store URL, else $REQLOCK_STORE, else the variable
the orders example reads (REDIS_ADDR, ETCD_ENDPOINTS, ZOOKEEPER_SERVERS,
DATABASE_URL, MYSQL_DSN or MEMCACHED_SERVERS; exactly one of them set).
Store URLs:
` + schemeHelp() + `
The settings that name the locks must match the service's: --prefix
(core.WithPrefix, default "reqlock:"), --table (the SQL store's table),
--root (ZooKeeper) and --etcd-prefix (etcd); each may also be given as a
query parameter of the URL (prefix, table, root, etcd_prefix).

Exit status: 0 done, 1 failed, 2 bad command line or store URL.`,
		SilenceErrors: true,
		SilenceUsage:  true,
		PersistentPreRunE: func(cmd *cobra.Command, _ []string) error {
			a.ran = true
			a.g.opts.set = map[string]bool{}
			for _, f := range []string{"prefix", "table", "root", "etcd-prefix"} {
				a.g.opts.set[f] = cmd.Flags().Changed(f)
			}
			if a.g.timeout <= 0 {
				return usage("--timeout %v: want a positive duration", a.g.timeout)
			}
			return nil
		},
	}
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageError{err} })
	pf := root.PersistentFlags()
	pf.StringVarP(&a.g.store, "store", "s", "", "the store's URL (default $REQLOCK_STORE, else REDIS_ADDR, ETCD_ENDPOINTS, ...)")
	pf.StringVar(&a.g.opts.Prefix, "prefix", core.DefaultPrefix, "the Locker's key prefix (core.WithPrefix), as the service sets it")
	pf.StringVar(&a.g.opts.Table, "table", sqlstore.DefaultTable, "SQL stores: the lock table (sqlstore.WithTable)")
	pf.StringVar(&a.g.opts.Root, "root", zkstore.DefaultRoot, "ZooKeeper: the root node (zkstore.WithRoot)")
	pf.StringVar(&a.g.opts.EtcdPrefix, "etcd-prefix", etcdstore.DefaultPrefix, "etcd: the key prefix (etcdstore.WithPrefix)")
	pf.DurationVar(&a.g.timeout, "timeout", 5*time.Second, "bounds connecting to the store and each call to it")
	pf.BoolVar(&a.g.json, "json", false, "print JSON for scripts instead of text")
	root.AddCommand(a.lsCmd(), a.showCmd(), a.watchCmd(), a.releaseCmd())
	return root
}

// schemeHelp lists the store URLs, one a line.
func schemeHelp() string {
	var s string
	for _, sch := range schemes {
		s += "  " + sch.example + "\n"
	}
	return s
}

// args wraps a cobra argument check so that its error is a usage error.
func args(check cobra.PositionalArgs) cobra.PositionalArgs {
	return func(cmd *cobra.Command, a []string) error {
		if err := check(cmd, a); err != nil {
			return usageError{err}
		}
		return nil
	}
}

// connect opens the store the flags and the environment name.
func (a *app) connect(ctx context.Context) (*conn, error) {
	raw, _, err := resolveStore(a.g.store, a.getenv)
	if err != nil {
		return nil, err
	}
	spec, err := parseStore(raw, a.g.opts, a.g.timeout)
	if err != nil {
		return nil, err
	}
	c, err := open(ctx, spec, a.g.timeout)
	if err != nil {
		return nil, err
	}
	return c, nil
}

// storeErr names the store in core.ErrNoInspector's error.
func storeErr(c *conn, err error) error {
	if err != nil && errors.Is(err, core.ErrNoInspector) {
		return fmt.Errorf("%w: %s", err, c.where)
	}
	return err
}
