package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"os/user"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/reqlock/reqlock/core"
)

// auditJSON is one line of the audit log: who forced which release, and
// what came of it.
type auditJSON struct {
	Time     time.Time   `json:"time"`
	Operator string      `json:"operator"` // user@host, from the operating system
	Store    string      `json:"store"`    // where, without a password
	Name     string      `json:"name"`
	Key      string      `json:"key"`
	Token    string      `json:"token"`
	Holder   *holderJSON `json:"holder"`
	Reason   string      `json:"reason"`
	Released bool        `json:"released"`
	Error    string      `json:"error,omitempty"`
}

// releaseJSON is the document of release --json.
type releaseJSON struct {
	Name     string     `json:"name"`
	Key      string     `json:"key"`
	Token    string     `json:"token"`
	Holder   holderJSON `json:"holder"`
	Released bool       `json:"released"`
	AuditLog string     `json:"audit_log"`
}

// osOperator returns "user@host" of the process, and the user sudo ran it
// for, if any.
func osOperator() string {
	name := os.Getenv("USER")
	if u, err := user.Current(); err == nil {
		name = u.Username
	}
	if name == "" {
		name = "unknown"
	}
	if s := os.Getenv("SUDO_USER"); s != "" && s != name {
		name += "(sudo by " + s + ")"
	}
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "unknown"
	}
	return name + "@" + host
}

// auditPath returns the audit log's default path: under $XDG_STATE_HOME if
// set, else under the user's configuration directory
// (os.UserConfigDir).
func (a *app) auditPath() (string, error) {
	if d := a.getenv("XDG_STATE_HOME"); d != "" {
		return filepath.Join(d, "reqlock", "audit.log"), nil
	}
	d, err := os.UserConfigDir()
	if err != nil {
		return "", fmt.Errorf("reqlock: no place for the audit log (%w): give one with --audit-log", err)
	}
	return filepath.Join(d, "reqlock", "audit.log"), nil
}

func (a *app) releaseCmd() *cobra.Command {
	var (
		force, yes      bool
		token, reason   string
		auditLog        string
		defaultAuditLog = "$XDG_STATE_HOME/reqlock/audit.log, else reqlock/audit.log in the user's configuration directory"
	)
	cmd := &cobra.Command{
		Use:   "release --force NAME",
		Short: "Release a stuck holder's lock (break-glass; asks first, and records who did it)",
		Long: `release --force releases the hold of ONE token on NAME: it shows the
holder first, asks for confirmation on the terminal ('y' to go on; --yes
does not ask), and releases only the token it showed, by the store's
compare-and-delete (core's Locker.ForceRelease): if that holder has gone and
another took the lock meanwhile, nothing is released. A lock with several
holders (shared, permits) needs --token to say which.

The holder is not told: its handler may still be running, and it learns at
its next extend or release that the lock is gone. Use it for a holder that
is stuck or dead, whose TTL is long.

Every forced release is recorded, whatever came of it: a JSON line with the
operator (user@host), the time, the name, the token, the holder and --reason
is appended to the audit log (--audit-log) and printed to stderr.

Exit status: 0 released, 1 not released (refused, or the token no longer
held the lock), 2 bad command line.`,
		Example: `  reqlock release --force order:42 --reason "worker 7 hung, INC-1234"
  reqlock release --force stock:sku-9 --token 'ABCD…' --yes`,
		Args: args(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, argv []string) error {
			name := argv[0]
			if !force {
				return usage("release %q: refused without --force. Releasing a lock that a request still holds lets a second request in beside it; "+
					"run 'reqlock show %s' first, then 'reqlock release --force %s' if its holder is stuck", name, name, name)
			}
			if auditLog == "" {
				p, err := a.auditPath()
				if err != nil {
					return err
				}
				auditLog = p
			}
			ctx := cmd.Context()
			c, err := a.connect(ctx)
			if err != nil {
				return err
			}
			defer c.Close()
			inspectCtx, cancel := c.bound(ctx)
			st, err := c.inspect(inspectCtx, name)
			cancel()
			if err != nil {
				return err
			}
			if !st.Held() {
				return fmt.Errorf("%w: %s is not held", errNotReleased, clean(name))
			}
			h, err := pickHolder(st, token)
			if err != nil {
				return err
			}
			fmt.Fprintf(a.stderr, "%s (key %s) is held by:\n", clean(name), clean(st.Key))
			printHolder(a, h)
			if !yes {
				fmt.Fprintf(a.stderr, "Release this holder's lock? Only token %s is released. [y/N] ", clean(h.Token))
				line, _ := bufio.NewReader(a.stdin).ReadString('\n')
				if !a.terminal(a.stdin) {
					fmt.Fprintln(a.stderr) // the answer was not echoed
				}
				if answer := strings.ToLower(strings.TrimSpace(line)); answer != "y" && answer != "yes" {
					return fmt.Errorf("%w: not confirmed (the answer was %q, not y)", errNotReleased, strings.TrimSpace(line))
				}
			}
			// The audit log is opened first: a release nobody can record
			// is not made.
			logf, err := openAudit(auditLog)
			if err != nil {
				return err
			}
			defer logf.Close()
			releaseCtx, cancel := c.bound(ctx)
			released, relErr := c.forceRelease(releaseCtx, name, h.Token)
			cancel()
			doc := holderDoc(h)
			rec := auditJSON{Time: a.now().UTC(), Operator: a.operator(), Store: c.where, Name: name, Key: st.Key,
				Token: h.Token, Holder: &doc, Reason: reason, Released: released && relErr == nil}
			if relErr != nil {
				rec.Error = relErr.Error()
			}
			line, err := json.Marshal(rec)
			if err != nil {
				return fmt.Errorf("reqlock: %w", err)
			}
			fmt.Fprintf(a.stderr, "%s\n", line)
			if _, err := fmt.Fprintf(logf, "%s\n", line); err != nil {
				return fmt.Errorf("reqlock: the audit log %s: %w", auditLog, err)
			}
			if err := logf.Sync(); err != nil {
				return fmt.Errorf("reqlock: the audit log %s: %w", auditLog, err)
			}
			if relErr != nil {
				return relErr
			}
			if a.g.json {
				if err := writeJSON(a.stdout, releaseJSON{Name: name, Key: st.Key, Token: h.Token, Holder: doc,
					Released: released, AuditLog: auditLog}); err != nil {
					return err
				}
			} else if released {
				fmt.Fprintf(a.stdout, "released %s (token %s); recorded in %s\n", clean(name), clean(h.Token), auditLog)
			}
			if !released {
				return fmt.Errorf("%w: token %s no longer holds %s (its holder released it or it expired); recorded in %s",
					errNotReleased, clean(h.Token), clean(name), auditLog)
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.BoolVar(&force, "force", false, "release another process's lock: required")
	f.BoolVarP(&yes, "yes", "y", false, "do not ask for confirmation")
	f.StringVar(&token, "token", "", "the token of the holder to release (needed when the lock has several holders)")
	f.StringVar(&reason, "reason", "", "why, for the audit log")
	f.StringVar(&auditLog, "audit-log", "", "the file the forced release is recorded in (default "+defaultAuditLog+")")
	return cmd
}

// pickHolder returns the holder to release: the one of token, or the only
// one.
func pickHolder(st core.LockState, token string) (core.HolderInfo, error) {
	if token != "" {
		for _, h := range st.Holders {
			if h.Token == token {
				return h, nil
			}
		}
		return core.HolderInfo{}, fmt.Errorf("%w: token %s does not hold %s (see reqlock show %s)",
			errNotReleased, clean(token), clean(st.Name), clean(st.Name))
	}
	if len(st.Holders) > 1 {
		var b strings.Builder
		for _, h := range st.Holders {
			fmt.Fprintf(&b, "\n  %s  %s", modeText(h.HolderState), clean(h.Token))
		}
		return core.HolderInfo{}, usage("%s has %d holders: say which to release with --token:%s", clean(st.Name), len(st.Holders), b.String())
	}
	return st.Holders[0], nil
}

// printHolder writes the holder about to be released to stderr.
func printHolder(a *app, h core.HolderInfo) {
	tw := newTable(a.stderr)
	mode := modeText(h.HolderState)
	if !h.Exclusive && h.Hold.N > 0 {
		mode += fmt.Sprintf(", slot %d", h.Slot)
	}
	fmt.Fprintf(tw, "  mode\t%s\n  ttl\t%s\n  fence\t%d\n", mode, ttlText(h.TTL), h.Fence)
	if h.Identified {
		w := h.Holder
		fmt.Fprintf(tw, "  host\t%s\n  pid\t%d\n  route\t%s\n  request\t%s\n  since\t%s\n", orDash(w.Host), w.PID,
			orDash(w.Route), orDash(w.RequestID), sinceText(w.Since, a.now()))
		if len(w.Fields) > 0 {
			fmt.Fprintf(tw, "  fields\t%s\n", fieldsText(w.Fields))
		}
	} else {
		fmt.Fprintf(tw, "  identity\t- (its token carries no holder record)\n")
	}
	fmt.Fprintf(tw, "  token\t%s\n", clean(h.Token))
	tw.Flush()
}

// openAudit opens the audit log for appending, creating it (and its
// directory) readable by its owner only.
func openAudit(path string) (*os.File, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("reqlock: the audit log: %w", err)
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("reqlock: the audit log: %w", err)
	}
	return f, nil
}
