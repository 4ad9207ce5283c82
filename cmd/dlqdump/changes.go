package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/user"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/dlqdump/dlqdump/changelog"
)

// Every command that changes a store appends an entry to its change log
// (package changelog) once the change is made: who (--actor, else the OS
// user and host), what, on what, why (--reason) and how it went (a part
// that failed is in the entry's Error). A command that changed nothing (a
// dry run, a refused release) appends nothing. An entry that cannot be
// appended is reported and makes the command exit 1, the change itself
// having been made.

// changeFlags are the flags of the change log, shared by every command.
type changeFlags struct {
	actor  string
	reason string
}

func (f *changeFlags) register(fl *pflag.FlagSet) {
	fl.StringVar(&f.actor, "actor", "", "who makes the changes, for the store's change log (default: the OS user and host, e.g. alice@ops-1; or $DLQDUMP_ACTOR)")
	fl.StringVar(&f.reason, "reason", "", "why, for the store's change log (dlqdump log)")
}

// actor names who runs this command: --actor, $DLQDUMP_ACTOR, else the OS
// user and host.
func (a *app) actor() string {
	if a.changes.actor != "" {
		return a.changes.actor
	}
	if s := os.Getenv("DLQDUMP_ACTOR"); s != "" {
		return s
	}
	name := "unknown"
	if u, err := user.Current(); err == nil && u.Username != "" {
		name = u.Username
	} else if s := os.Getenv("USER"); s != "" {
		name = s
	}
	host, _ := os.Hostname()
	if host == "" {
		return name
	}
	return name + "@" + host
}

// logChange appends an entry for a change made on l with its outcome err
// (nil: it went well). A failure to append is reported on stderr and makes
// the command exit 1 (run checks logFailed).
func (a *app) logChange(l *location, action, scope, result string, err error) {
	e := changelog.Entry{Actor: a.actor(), Via: "cli", Action: action, Scope: scope, Reason: a.changes.reason, Result: result}
	if err != nil {
		e.Error = err.Error()
	}
	lg, lerr := changelog.Open(l.reader)
	if errors.Is(lerr, changelog.ErrNoTables) {
		return // a store without tables keeps no log
	}
	if lerr == nil {
		// Not cut short by an interrupt: the change was made.
		ctx, cancel := context.WithTimeout(context.WithoutCancel(a.ctx), 30*time.Second)
		defer cancel()
		_, lerr = lg.Append(ctx, e)
	}
	if lerr != nil {
		a.logFailed.Store(true)
		a.warnf("the change was made, but not written to the change log of %s: %v (%s)", l, lerr, e.What())
	}
}

// scopeOf names segments for an entry's scope: their names, up to a few,
// else how many.
func scopeOf(what string, names []string) string {
	switch {
	case len(names) == 0:
		return what
	case len(names) <= 5:
		return what + " " + strings.Join(names, ", ")
	}
	return fmt.Sprintf("%s %s, …, %s (%d)", what, strings.Join(names[:3], ", "), names[len(names)-1], len(names))
}
