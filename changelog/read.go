package changelog

import (
	"context"
	"iter"
	"slices"
	"strings"
	"time"
)

// pages returns the numbers of the log's pages, in order.
func (l *Log) pages(ctx context.Context) ([]uint64, error) {
	var ns []uint64
	for key, err := range l.t.RecordNames(ctx) {
		if err != nil {
			return nil, err
		}
		if n, ok := parsePageKey(key); ok {
			ns = append(ns, n)
		}
	}
	slices.Sort(ns)
	return ns, nil
}

// Entries returns the log's entries, oldest first, read a page at a time.
// An error ends the sequence.
func (l *Log) Entries(ctx context.Context) iter.Seq2[Entry, error] {
	return l.entries(ctx, false)
}

// Newest returns the log's entries, newest first, read a page at a time
// from the last: a caller that stops after the first few reads one page.
// An error ends the sequence.
func (l *Log) Newest(ctx context.Context) iter.Seq2[Entry, error] {
	return l.entries(ctx, true)
}

func (l *Log) entries(ctx context.Context, newest bool) iter.Seq2[Entry, error] {
	return func(yield func(Entry, error) bool) {
		ns, err := l.pages(ctx)
		if err != nil {
			yield(Entry{}, err)
			return
		}
		if newest {
			slices.Reverse(ns)
		}
		for _, n := range ns {
			p, _, _, ok, err := l.readPage(ctx, n)
			if err != nil {
				yield(Entry{}, err)
				return
			}
			if !ok {
				continue // removed since the listing
			}
			if newest {
				slices.Reverse(p.Entries)
			}
			for _, e := range p.Entries {
				if !yield(e, nil) {
					return
				}
			}
		}
	}
}

// Filter selects entries. A zero field selects every entry.
type Filter struct {
	// Since and Until select the entries made in [Since, Until).
	Since, Until time.Time
	// Actions selects the entries of these actions; "job" selects every
	// "job.…" action.
	Actions []string
	// Actor selects the entries whose actor contains it (case-insensitive).
	Actor string
	// Text selects the entries whose actor, action, scope, reason, result
	// or error contains it (case-insensitive).
	Text string
}

// Match reports whether f selects e.
func (f *Filter) Match(e *Entry) bool {
	if !f.Since.IsZero() && e.Time.Before(f.Since) || !f.Until.IsZero() && !e.Time.Before(f.Until) {
		return false
	}
	if len(f.Actions) > 0 && !slices.ContainsFunc(f.Actions, func(a string) bool {
		return e.Action == a || strings.HasPrefix(e.Action, a+".")
	}) {
		return false
	}
	if f.Actor != "" && !containsFold(e.Actor, f.Actor) {
		return false
	}
	if f.Text != "" && !slices.ContainsFunc([]string{e.Actor, e.Action, e.Scope, e.Reason, e.Result, e.Error}, func(s string) bool {
		return containsFold(s, f.Text)
	}) {
		return false
	}
	return true
}

func containsFold(s, sub string) bool {
	return strings.Contains(strings.ToLower(s), strings.ToLower(sub))
}
