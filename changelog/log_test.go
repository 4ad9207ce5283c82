package changelog_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dlqdump/dlqdump/changelog"
	"github.com/dlqdump/dlqdump/fs"
	"github.com/dlqdump/dlqdump/internal/memsink"
	"github.com/dlqdump/dlqdump/sink"
)

func open(t testing.TB, rd sink.Reader) *changelog.Log {
	t.Helper()
	l, err := changelog.Open(rd)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func all(t testing.TB, l *changelog.Log) []changelog.Entry {
	t.Helper()
	var out []changelog.Entry
	for e, err := range l.Entries(context.Background()) {
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, e)
	}
	return out
}

func verify(t testing.TB, l *changelog.Log) changelog.Verification {
	t.Helper()
	v, err := l.Verify(context.Background(), changelog.VerifyOptions{})
	if err != nil {
		t.Fatalf("verify: %v", err)
	}
	return v
}

func TestAppendChainsEntriesAcrossPages(t *testing.T) {
	ctx := context.Background()
	l := open(t, memsink.New())
	const n = 200 // four pages of 64
	for i := range n {
		e, err := l.Append(ctx, changelog.Entry{Actor: "alice@ops-1", Via: "cli", Action: changelog.ActionRelease, Scope: fmt.Sprintf("segment-%d", i)})
		if err != nil {
			t.Fatal(err)
		}
		if e.Seq != uint64(i+1) || e.Hash != e.Sum() || e.Time.IsZero() || e.Nonce == "" {
			t.Fatalf("entry %d as appended: %+v", i, e)
		}
	}
	es := all(t, l)
	if len(es) != n {
		t.Fatalf("%d entries, want %d", len(es), n)
	}
	for i, e := range es {
		if e.Seq != uint64(i+1) || e.Scope != fmt.Sprintf("segment-%d", i) {
			t.Fatalf("entry %d: seq %d scope %q", i, e.Seq, e.Scope)
		}
		if i > 0 && e.Prev != es[i-1].Hash {
			t.Fatalf("entry %d does not chain to %d", e.Seq, es[i-1].Seq)
		}
	}
	v := verify(t, l)
	if v.Entries != n || v.Pages != 4 || v.Head.Seq != n || v.Head.Hash != es[n-1].Hash {
		t.Fatalf("verification %+v", v)
	}
	// Newest first, stopping early, reads from the last page.
	var newest []uint64
	for e, err := range l.Newest(ctx) {
		if err != nil {
			t.Fatal(err)
		}
		newest = append(newest, e.Seq)
		if len(newest) == 3 {
			break
		}
	}
	if fmt.Sprint(newest) != "[200 199 198]" {
		t.Fatalf("newest %v", newest)
	}
}

func TestSecondLogGoesOn(t *testing.T) {
	ctx := context.Background()
	st := memsink.New()
	a, b := open(t, st), open(t, st)
	for i := range 70 {
		l := a
		if i%3 == 2 {
			l = b
		}
		if _, err := l.Append(ctx, changelog.Entry{Action: changelog.ActionJobCreate, Scope: fmt.Sprint(i)}); err != nil {
			t.Fatal(err)
		}
	}
	// A third Log, opened later (another process, a restart), appends at
	// the end.
	e, err := open(t, st).Append(ctx, changelog.Entry{Action: changelog.ActionJobCancel})
	if err != nil || e.Seq != 71 {
		t.Fatalf("third log appended %+v, %v; want seq 71", e, err)
	}
	if v := verify(t, a); v.Entries != 71 {
		t.Fatalf("verified %d entries", v.Entries)
	}
}

func TestFieldsAreBounded(t *testing.T) {
	ctx := context.Background()
	l := open(t, memsink.New())
	// Control characters escape to six bytes each in JSON: the worst
	// case for a page's size.
	long := strings.Repeat("\x01", 100_000)
	for range 70 {
		e, err := l.Append(ctx, changelog.Entry{Actor: long, Role: long, Via: long, Action: "x" + long, Scope: long, Reason: long, Result: long, Error: long + "\xff"})
		if err != nil {
			t.Fatal(err)
		}
		if len(e.Scope) > changelog.MaxScope || len(e.Reason) > changelog.MaxReason || !strings.HasSuffix(e.Scope, "…") {
			t.Fatalf("scope %d bytes, reason %d", len(e.Scope), len(e.Reason))
		}
	}
	es := all(t, l)
	if len(es) != 70 || es[69].Hash != es[69].Sum() {
		t.Fatalf("%d entries read back", len(es))
	}
	verify(t, l)
}

func TestAppendNeedsAnAction(t *testing.T) {
	if _, err := open(t, memsink.New()).Append(context.Background(), changelog.Entry{Actor: "a"}); err == nil {
		t.Fatal("an entry without an action was appended")
	}
}

func TestOpenNeedsTables(t *testing.T) {
	var rd struct{ sink.Reader }
	if _, err := changelog.Open(rd); !errors.Is(err, changelog.ErrNoTables) {
		t.Fatalf("got %v, want ErrNoTables", err)
	}
}

// TestConcurrentAppenders appends from many Logs at once, each over a
// Reader of its own on one directory, as processes do: every entry is in
// the log once, in one chain.
func TestConcurrentAppenders(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	const appenders, each = 8, 40
	var wg sync.WaitGroup
	errs := make(chan error, appenders)
	for w := range appenders {
		wg.Go(func() {
			l := open(t, &fs.Reader{Directory: dir})
			for i := range each {
				if _, err := l.Append(ctx, changelog.Entry{Actor: fmt.Sprintf("w%d", w), Action: changelog.ActionReplay, Scope: fmt.Sprintf("%d/%d", w, i)}); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	l := open(t, &fs.Reader{Directory: dir})
	v := verify(t, l)
	if v.Entries != appenders*each {
		t.Fatalf("verified %d entries, want %d", v.Entries, appenders*each)
	}
	seen := map[string]int{}
	next := map[string]int{}
	for _, e := range all(t, l) {
		seen[e.Scope]++
		var w, i int
		fmt.Sscanf(e.Scope, "%d/%d", &w, &i)
		// Each appender's entries are in the order it appended them.
		if k := fmt.Sprint(w); next[k] != i {
			t.Fatalf("appender %d: entry %d after %d", w, i, next[k]-1)
		}
		next[fmt.Sprint(w)]++
	}
	for w := range appenders {
		for i := range each {
			if n := seen[fmt.Sprintf("%d/%d", w, i)]; n != 1 {
				t.Fatalf("entry %d/%d is in the log %d times", w, i, n)
			}
		}
	}
}

func TestFilter(t *testing.T) {
	t0 := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	e := changelog.Entry{Time: t0, Actor: "Alice@ops-1", Action: changelog.ActionJobPause, Scope: "job-7", Reason: "Destination down"}
	for _, c := range []struct {
		f    changelog.Filter
		want bool
	}{
		{changelog.Filter{}, true},
		{changelog.Filter{Actions: []string{"job"}}, true},
		{changelog.Filter{Actions: []string{"job.pause", "discard"}}, true},
		{changelog.Filter{Actions: []string{"jo"}}, false},
		{changelog.Filter{Actions: []string{"discard"}}, false},
		{changelog.Filter{Actor: "alice"}, true},
		{changelog.Filter{Actor: "bob"}, false},
		{changelog.Filter{Text: "destination"}, true},
		{changelog.Filter{Text: "JOB-7"}, true},
		{changelog.Filter{Text: "nothing"}, false},
		{changelog.Filter{Since: t0}, true},
		{changelog.Filter{Since: t0.Add(time.Second)}, false},
		{changelog.Filter{Until: t0}, false},
		{changelog.Filter{Until: t0.Add(time.Second)}, true},
	} {
		if got := c.f.Match(&e); got != c.want {
			t.Errorf("%+v: %v, want %v", c.f, got, c.want)
		}
	}
}

// rewrite changes the stored page of key with fn, as someone with write
// access to the store could.
func rewrite(t testing.TB, st *memsink.Store, key string, fn func(es []changelog.Entry) []changelog.Entry) {
	t.Helper()
	ctx := context.Background()
	tb, _ := st.Table(changelog.Table)
	data, version, err := tb.ReadRecord(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	var p struct {
		V       int               `json:"v"`
		Entries []changelog.Entry `json:"entries"`
	}
	if err := json.Unmarshal(data, &p); err != nil {
		t.Fatal(err)
	}
	p.Entries = fn(p.Entries)
	data, _ = json.Marshal(p)
	if _, err := tb.WriteRecord(ctx, key, data, version); err != nil {
		t.Fatal(err)
	}
}

func filled(t testing.TB, n int) (*memsink.Store, *changelog.Log) {
	st := memsink.New()
	l := open(t, st)
	for i := range n {
		if _, err := l.Append(context.Background(), changelog.Entry{Actor: "alice", Action: changelog.ActionDiscard, Scope: fmt.Sprint(i), Reason: "poison"}); err != nil {
			t.Fatal(err)
		}
	}
	return st, l
}

func TestVerifyNamesTheFirstBrokenEntry(t *testing.T) {
	ctx := context.Background()
	for _, c := range []struct {
		name   string
		tamper func(t testing.TB, st *memsink.Store)
		seq    uint64
		reason string
	}{
		{"a field changed", func(t testing.TB, st *memsink.Store) {
			rewrite(t, st, "p000000000002", func(es []changelog.Entry) []changelog.Entry { es[3].Actor = "mallory"; return es })
		}, 68, "its hash does not match"},
		{"a field changed and the entry rehashed", func(t testing.TB, st *memsink.Store) {
			rewrite(t, st, "p000000000001", func(es []changelog.Entry) []changelog.Entry {
				es[9].Reason = "nothing to see"
				es[9].Hash = es[9].Sum()
				return es
			})
		}, 11, "entry 10 was changed"},
		{"an entry removed", func(t testing.TB, st *memsink.Store) {
			rewrite(t, st, "p000000000001", func(es []changelog.Entry) []changelog.Entry { return append(es[:5], es[6:]...) })
		}, 6, "numbered 7"},
		{"the last entries of a page removed", func(t testing.TB, st *memsink.Store) {
			rewrite(t, st, "p000000000001", func(es []changelog.Entry) []changelog.Entry { return es[:60] })
		}, 61, "page 1 is not full"},
		{"a page removed", func(t testing.TB, st *memsink.Store) {
			tb, _ := st.Table(changelog.Table)
			if err := sink.DropRecord(context.Background(), tb, "p000000000002"); err != nil {
				t.Fatal(err)
			}
		}, 65, "page 2 is missing"},
		{"the first entries removed", func(t testing.TB, st *memsink.Store) {
			rewrite(t, st, "p000000000001", func(es []changelog.Entry) []changelog.Entry { return es[1:] })
		}, 1, "numbered 2"},
		{"a page made unreadable", func(t testing.TB, st *memsink.Store) {
			tb, _ := st.Table(changelog.Table)
			_, version, _ := tb.ReadRecord(context.Background(), "p000000000003")
			if _, err := tb.WriteRecord(context.Background(), "p000000000003", []byte("{garbage"), version); err != nil {
				t.Fatal(err)
			}
		}, 129, "cannot be read"},
	} {
		t.Run(c.name, func(t *testing.T) {
			st, l := filled(t, 150)
			c.tamper(t, st)
			v, err := l.Verify(ctx, changelog.VerifyOptions{})
			if !errors.Is(err, changelog.ErrBroken) || v.Broken == nil {
				t.Fatalf("verify after tampering: %v, %+v", err, v)
			}
			if v.Broken.Seq != c.seq || !strings.Contains(v.Broken.Reason, c.reason) {
				t.Fatalf("broken at %d: %s; want %d: ...%s...", v.Broken.Seq, v.Broken.Reason, c.seq, c.reason)
			}
			if !strings.Contains(err.Error(), fmt.Sprintf("entry %d ", c.seq)) {
				t.Fatalf("error %q does not name entry %d", err, c.seq)
			}
		})
	}
}

// TestVerifyAnchor: a chain rewritten whole from a changed entry on, or
// cut at its end, verifies by itself; an anchor kept elsewhere finds both.
func TestVerifyAnchor(t *testing.T) {
	ctx := context.Background()
	st, l := filled(t, 100)
	v := verify(t, l)
	anchor := v.Head.String()
	if _, err := l.Verify(ctx, changelog.VerifyOptions{Anchor: anchor}); err != nil {
		t.Fatalf("the untouched log with its own head as anchor: %v", err)
	}
	// Rewrite entry 50 and rehash every entry after it.
	for _, key := range []string{"p000000000001", "p000000000002"} {
		rewrite(t, st, key, func(es []changelog.Entry) []changelog.Entry {
			for i := range es {
				if es[i].Seq == 50 {
					es[i].Actor = "mallory"
				}
				if es[i].Seq >= 50 {
					if es[i].Seq > 50 {
						es[i].Prev = prevHash
					}
					es[i].Hash = es[i].Sum()
					prevHash = es[i].Hash
				}
			}
			return es
		})
	}
	if _, err := l.Verify(ctx, changelog.VerifyOptions{}); err != nil {
		t.Fatalf("a chain rehashed whole should verify by itself (that is what the anchor is for): %v", err)
	}
	vv, err := l.Verify(ctx, changelog.VerifyOptions{Anchor: anchor})
	if !errors.Is(err, changelog.ErrBroken) || vv.Broken.Seq != 100 || !strings.Contains(vv.Broken.Reason, "rewritten") {
		t.Fatalf("rewritten chain with the anchor: %v", err)
	}

	// Cut: the last 10 entries gone.
	st, l = filled(t, 100)
	anchor = verify(t, l).Head.String()
	rewrite(t, st, "p000000000002", func(es []changelog.Entry) []changelog.Entry { return es[:len(es)-10] })
	vv, err = l.Verify(ctx, changelog.VerifyOptions{Anchor: anchor})
	if !errors.Is(err, changelog.ErrBroken) || !strings.Contains(vv.Broken.Reason, "ends at entry 90") {
		t.Fatalf("cut log with the anchor: %v", err)
	}
	if _, err := l.Verify(ctx, changelog.VerifyOptions{Anchor: "12:zz"}); err == nil || errors.Is(err, changelog.ErrBroken) {
		t.Fatalf("a malformed anchor: %v", err)
	}
}

var prevHash string
