package main

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"sync/atomic"
	"time"

	"github.com/dlqdump/dlqdump"
	"github.com/dlqdump/dlqdump/destination"
	"github.com/dlqdump/dlqdump/internal/backoff"
)

// brokersBuild is what a --to URL of a scheme this build does not have
// says: the brokers module builds the command with nats:// and kafka://.
const brokersBuild = "nats:// and kafka:// are in the dlqdump built by the brokers module: cd brokers && go run ./cmd/build-dlqdump -o ~/bin/dlqdump"

// parseTo checks a --to URL (or another flag's, label naming it in errors):
// http:// or https://, or a scheme registered with package destination
// (this build's: see destForms).
func parseTo(label, to string) (*url.URL, error) {
	u, err := url.Parse(to)
	if err == nil && (u.Scheme == "http" || u.Scheme == "https") && u.Host != "" {
		return u, nil
	}
	if err == nil && u.Scheme != "http" && u.Scheme != "https" {
		if _, ok := destination.Lookup(u.Scheme); ok {
			return u, nil
		}
	}
	msg := fmt.Sprintf("%s: want %s", label, strings.Join(destForms(), " or "))
	if len(destination.Schemes()) == 0 {
		msg += " (" + brokersBuild + ")"
	}
	return nil, usageErrorf("%s", msg)
}

// destForms returns the forms of the --to URLs this build takes.
func destForms() []string {
	forms := []string{"an http:// or https:// URL"}
	for _, s := range destination.Schemes() {
		forms = append(forms, s.Form)
	}
	return forms
}

// isHTTP reports whether a --to URL is an HTTP endpoint's.
func isHTTP(u *url.URL) bool { return u.Scheme == "http" || u.Scheme == "https" }

// schemeDest is the destination of a registered scheme (a broker). Its
// Enqueue is one publish per attempt, retried as httpDest retries a POST: a
// refusal is returned at once (the Restorer quarantines the record); an
// error wrapping dlqdump.ErrUnavailable is retried with exponential backoff
// and full jitter up to --max-attempts, then returned, which stops the
// pass with the record left ready. Once stop is done (an interrupt), no new
// attempt is made and no backoff waited.
type schemeDest struct {
	d           destination.Destination
	url         string
	stop        context.Context
	maxAttempts int
	base, max   time.Duration
	bar         *progress

	retries atomic.Uint64
}

// openSchemeDest opens the destination of a --to URL whose scheme is
// registered.
func openSchemeDest(ctx, stop context.Context, u *url.URL, f *restoreFlags, a *app) (*schemeDest, error) {
	d, err := destination.Open(ctx, u.String(), &destination.Options{Timeout: f.timeout, Logger: a.logger()})
	if err != nil {
		// An opener checks the URL's form; it does not wait for the
		// broker (see destination.Opener).
		return nil, usageErrorf("%v", err)
	}
	return &schemeDest{d: d, url: u.Redacted(), stop: stop, maxAttempts: f.maxAttempts, base: f.retryBase, max: f.retryMax}, nil
}

// Enqueue delivers one record; it implements the Restorer's destination.
func (s *schemeDest) Enqueue(x any) error {
	for attempt := 1; ; attempt++ {
		err := s.d.Enqueue(x)
		switch {
		case err == nil:
			s.bar.add(1)
			return nil
		case !errors.Is(err, dlqdump.ErrUnavailable):
			return err
		case attempt >= s.maxAttempts:
			return fmt.Errorf("%w (%s)", err, plural(attempt, "attempt"))
		case s.stop.Err() != nil:
			return fmt.Errorf("%s: not tried again: interrupted (%w)", s.url, s.stop.Err())
		}
		s.retries.Add(1)
		if backoff.Sleep(s.stop, backoff.FullJitter(s.base, s.max, attempt)) != nil {
			return fmt.Errorf("%s: not tried again: interrupted (%w)", s.url, s.stop.Err())
		}
	}
}

// parseNamedDests parses job run's --dest values: NAME (delivered into
// --to, def) or NAME=URL.
func parseNamedDests(vals []string, def *url.URL) (map[string]*url.URL, error) {
	named := map[string]*url.URL{}
	for _, v := range vals {
		name, to, hasURL := strings.Cut(v, "=")
		if name == "" {
			return nil, usageErrorf("--dest %q: want NAME or NAME=URL", v)
		}
		if _, dup := named[name]; dup {
			return nil, usageErrorf("--dest %s given twice", name)
		}
		u := def
		if hasURL {
			var err error
			if u, err = parseTo(fmt.Sprintf("--dest %q", v), to); err != nil {
				return nil, err
			}
		}
		named[name] = u
	}
	return named, nil
}

// jobDests makes job run's destinations: an HTTP endpoint's for each
// restorer (a jobDest, whose outage trips the pass that met it only), a
// broker's once per URL, shared by the restorers (its clients are safe for
// concurrent use), and closed by close.
type jobDests struct {
	a       *app
	f       *restoreFlags
	brokers map[string]*schemeDest
}

func newJobDests(a *app, f *restoreFlags) *jobDests {
	return &jobDests{a: a, f: f, brokers: map[string]*schemeDest{}}
}

func (j *jobDests) dest(u *url.URL) (interface{ Enqueue(any) error }, error) {
	if isHTTP(u) {
		to := u.String()
		return &jobDest{mk: func() *httpDest { return newHTTPDest(j.a.ctx, j.a.soft, to, j.f) }}, nil
	}
	if d, ok := j.brokers[u.String()]; ok {
		return d, nil
	}
	d, err := openSchemeDest(j.a.ctx, j.a.soft, u, j.f, j.a)
	if err != nil {
		return nil, err
	}
	j.brokers[u.String()] = d
	return d, nil
}

func (j *jobDests) close() {
	for _, d := range j.brokers {
		_ = d.d.Close()
	}
}
