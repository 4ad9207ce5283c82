package main

import (
	"errors"
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/dlqdump/dlqdump/internal/claims"
	"github.com/dlqdump/dlqdump/internal/inspect"
	"github.com/dlqdump/dlqdump/sink"
)

// The claims of the command: what ls, stat, cat and quarantine ls show of a
// segment's record (its claim and restore progress, read with
// claims.Claimer.Inspect, never by comparing clocks), and the claims mv and
// restore take through the one claim protocol of package claims.

// defaultLease is the lease of the claims the command takes; --lease
// (hidden) changes it.
const defaultLease = 30 * time.Second

// wrapReader wraps every location's Reader; the tests replace it to count
// the sink operations and interrupt the command at each.
var wrapReader = func(r sink.Reader) sink.Reader { return r }

// cliOwner names this process in claims (a label for people: claims are told
// apart by their random token).
func cliOwner() string {
	host, _ := os.Hostname()
	return fmt.Sprintf("dlqdump-cli@%s-%d", host, os.Getpid())
}

// claimerOf returns this process's Claimer on l: one per location, so that
// what it observed of other holders' records carries from one call to the
// next.
func (a *app) claimerOf(l *location) (*claims.Claimer, error) {
	a.claimMu.Lock()
	defer a.claimMu.Unlock()
	if c := a.claimers[l]; c != nil {
		return c, nil
	}
	c, err := claims.NewClaimer(l.reader, cliOwner(), a.lease, &claims.Options{Logger: a.logger()})
	if err != nil {
		return nil, err
	}
	if a.claimers == nil {
		a.claimers = map[*location]*claims.Claimer{}
	}
	a.claimers[l] = c
	return c, nil
}

// claimView is what a segment's record says (see inspect.Claim).
type claimView = inspect.Claim

// inspector reads the claim records of l's segments with this process's
// Claimer.
func (a *app) inspector(l *location) (*inspect.Inspector, error) {
	c, err := a.claimerOf(l)
	if err != nil {
		return nil, err
	}
	return &inspect.Inspector{Reader: l.reader, Claimer: c, Path: l.segPath}, nil
}

// inspectAll reads the records of the segments that have one.
func (a *app) inspectAll(l *location, infos []sink.Info) (map[string]*claimView, error) {
	if len(infos) == 0 {
		return map[string]*claimView{}, nil
	}
	in, err := a.inspector(l)
	if err != nil {
		return map[string]*claimView{}, err
	}
	return in.InspectAll(a.ctx, l, infos)
}

// awaitClaims watches the records of segments claimed by others until each
// holder shows it is alive (its record changes: it renewed) or gone (the
// record stays unchanged for the holder's lease, by this process's clock;
// then the claim may be taken over) or released. It returns the segments
// whose claim may now be taken and, by name, the owners of the live ones.
// The first interrupt stops the waiting: what is undecided counts as live.
func (a *app) awaitClaims(l *location, names []string) (free []string, live map[string]string, err error) {
	live = map[string]string{}
	if len(names) == 0 {
		return nil, live, nil
	}
	c, err := a.claimerOf(l)
	if err != nil {
		return nil, live, err
	}
	type watch struct {
		token string
		rev   uint64
		owner string
	}
	watched := map[string]watch{}
	var longest time.Duration
	look := func(name string) (decided bool, err error) {
		rec, alive, err := c.Inspect(a.ctx, name)
		switch {
		case err != nil:
			return true, fmt.Errorf("read the claim record of %s: %w", l.segPath(sink.AreaReady, name), err)
		case rec == nil || !rec.Held() || !alive:
			free = append(free, name)
			return true, nil
		}
		w, seen := watched[name]
		if !seen {
			watched[name] = watch{rec.Token, rec.Rev, rec.Owner}
			longest = max(longest, rec.Lease(c.Lease()))
			return false, nil
		}
		if rec.Token != w.token || rec.Rev != w.rev {
			live[name] = rec.Owner // renewed, or taken by another: alive
			return true, nil
		}
		return false, nil
	}
	pending := slices.Clone(names)
	var errs []error
	decide := func() {
		next := pending[:0]
		for _, n := range pending {
			decided, err := look(n)
			if err != nil {
				errs = append(errs, err)
			}
			if !decided {
				next = append(next, n)
			}
		}
		pending = next
	}
	decide()
	if len(pending) > 0 {
		owners := map[string]bool{}
		for _, n := range pending {
			owners[watched[n].owner] = true
		}
		a.infof("%s claimed by %s: waiting up to %s to see whether the claims are alive (a claim not renewed within its lease is taken over)",
			plural(len(pending), "segment"), strings.Join(slices.Sorted(maps.Keys(owners)), ", "), longest.Round(time.Millisecond))
	}
	// A claim is renewed every third of its lease: look ten times a lease.
	tick := time.NewTicker(max(10*time.Millisecond, min(time.Second, longest/10)))
	defer tick.Stop()
	for len(pending) > 0 {
		select {
		case <-tick.C:
		case <-a.soft.Done():
			for _, n := range pending {
				live[n] = watched[n].owner
			}
			return free, live, errors.Join(errs...)
		}
		decide()
	}
	return free, live, errors.Join(errs...)
}
