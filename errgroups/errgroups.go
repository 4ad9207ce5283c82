// Package errgroups groups dead letters by the signature of their error
// (package signature): the error header, or one a caller names. A Counter
// counts the records it is given by group, with the first and the last
// time a group was seen, a sample record, and counts over time; Counters
// of segments merge, so that a caller reads each segment once and keeps
// what it counted (segments never change under a name). dlqdump errors
// and the web console's error groups page use it.
package errgroups

import (
	"cmp"
	"slices"
	"time"

	"github.com/dlqdump/dlqdump/segment"
	"github.com/dlqdump/dlqdump/selection"
	"github.com/dlqdump/dlqdump/signature"
	"github.com/dlqdump/dlqdump/sink"
)

// DefaultHeader is the header grouped by default: dlqdump.HeaderError.
const DefaultHeader = "error"

// DefaultMaxGroups is the default of Options.MaxGroups.
const DefaultMaxGroups = 1000

// Other is the signature of the records of the groups past
// Options.MaxGroups.
const Other = "(other)"

// Step is the finest time a Counter counts over: a group's counts over
// time are per minute.
const Step = time.Minute

// Options tune a Counter.
type Options struct {
	// Header is the header whose signature groups records. Default
	// DefaultHeader, "error".
	Header string
	// MaxGroups bounds the groups a Counter keeps: the records of any
	// other are counted in one group, Other. Default DefaultMaxGroups.
	MaxGroups int
}

// Sample is a record of a group.
type Sample struct {
	ID      string    `json:"id"`
	Time    time.Time `json:"time"`
	Value   string    `json:"value"` // its header's value
	Segment string    `json:"segment"`
	Area    string    `json:"area"`
}

// Group is a group of records: those whose header has one signature.
type Group struct {
	Signature   string    `json:"signature"`
	Count       uint64    `json:"count"`
	First, Last time.Time `json:"-"`
	Sample      Sample    `json:"sample"`
	steps       map[int64]uint64
}

// Counter counts records by the signature of a header. It is not safe for
// concurrent use; Merge adds what others counted.
type Counter struct {
	header  string
	max     int
	groups  map[string]*Group
	other   *Group
	memo    map[string]string // header values seen, and their signatures
	records uint64
	without uint64
}

// memoSize bounds the header values a Counter remembers the signature of.
const memoSize = 4096

// New returns an empty Counter.
func New(o *Options) *Counter {
	c := &Counter{header: DefaultHeader, max: DefaultMaxGroups, groups: map[string]*Group{}, memo: map[string]string{}}
	if o != nil {
		if o.Header != "" {
			c.header = o.Header
		}
		if o.MaxGroups > 0 {
			c.max = o.MaxGroups
		}
	}
	return c
}

// Compact drops what the Counter keeps only to count faster (the
// signatures of the values it met): a Counter kept after counting (a
// segment's, in a cache) holds its groups only.
func (c *Counter) Compact() { c.memo = map[string]string{} }

// Header returns the header the Counter groups by.
func (c *Counter) Header() string { return c.header }

// Records returns the records counted; Without those without the header.
func (c *Counter) Records() uint64 { return c.records }

// Without returns the records counted that lack the header.
func (c *Counter) Without() uint64 { return c.without }

// Add counts rec, a record of the segment h heads, named name in area.
func (c *Counter) Add(h *segment.Header, area sink.Area, name string, rec *segment.Record) {
	c.records++
	v, ok := rec.Headers.Lookup(c.header)
	if !ok {
		c.without++
		return
	}
	sig, ok := c.memo[string(v)]
	if !ok {
		sig = signature.Of(string(v))
		if len(c.memo) < memoSize {
			c.memo[string(v)] = sig
		}
	}
	g := c.group(sig)
	if g.Count == 0 {
		g.Sample = Sample{ID: h.RecordID(rec).String(), Time: time.Unix(0, rec.Time).UTC(), Value: string(v), Segment: name, Area: area.String()}
	}
	g.add(rec.Time, 1)
}

// AddBlock counts the records of b, a block of the segment h heads, named
// name in area, for which keep (nil: every record) is true.
func (c *Counter) AddBlock(h *segment.Header, area sink.Area, name string, b *segment.Block, keep func(*segment.Record) bool) {
	for i := range b.Len() {
		rec := b.Record(i)
		if keep == nil || keep(&rec) {
			c.Add(h, area, name, &rec)
		}
	}
}

// group returns the group of sig, created when new: Other past MaxGroups.
func (c *Counter) group(sig string) *Group {
	if g := c.groups[sig]; g != nil {
		return g
	}
	if len(c.groups) >= c.max {
		if c.other == nil {
			c.other = &Group{Signature: Other, steps: map[int64]uint64{}}
		}
		return c.other
	}
	g := &Group{Signature: sig, steps: map[int64]uint64{}}
	c.groups[sig] = g
	return g
}

// add counts n records at t (Unix nanoseconds).
func (g *Group) add(t int64, n uint64) {
	tt := time.Unix(0, t).UTC()
	if g.Count == 0 || tt.Before(g.First) {
		g.First = tt
	}
	if g.Count == 0 || tt.After(g.Last) {
		g.Last = tt
	}
	g.Count += n
	g.steps[t/int64(Step)] += n
}

// merge adds o's counts to g, whose sample is kept (o's, when g had none
// or o's is older).
func (g *Group) merge(o *Group) {
	if g.Count == 0 || o.Count > 0 && o.First.Before(g.First) {
		g.Sample = o.Sample
	}
	if g.Count == 0 || o.First.Before(g.First) {
		g.First = o.First
	}
	if g.Count == 0 || o.Last.After(g.Last) {
		g.Last = o.Last
	}
	g.Count += o.Count
	for s, n := range o.steps {
		g.steps[s] += n
	}
}

// Merge adds what o counted (of the same header) to c.
func (c *Counter) Merge(o *Counter) {
	c.records += o.records
	c.without += o.without
	for sig, og := range o.groups {
		c.group(sig).merge(og)
	}
	if o.other != nil {
		if c.other == nil {
			c.other = &Group{Signature: Other, steps: map[int64]uint64{}}
		}
		c.other.merge(o.other)
	}
}

// Groups returns the groups, the largest first (Other, when there is one,
// among them by its count).
func (c *Counter) Groups() []*Group {
	out := make([]*Group, 0, len(c.groups)+1)
	for _, g := range c.groups {
		out = append(out, g)
	}
	if c.other != nil {
		out = append(out, c.other)
	}
	slices.SortFunc(out, func(a, b *Group) int {
		if x := cmp.Compare(b.Count, a.Count); x != 0 {
			return x
		}
		return cmp.Compare(a.Signature, b.Signature)
	})
	return out
}

// Select returns the selection of the group's records (docs/SELECT.md):
// "KEY like SIGNATURE"; "" for Other.
func (c *Counter) Select(g *Group) string {
	if g.Signature == Other {
		return ""
	}
	return selection.Like(c.header, g.Signature).String()
}
