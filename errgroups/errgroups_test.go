package errgroups_test

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/dlqdump/dlqdump"
	"github.com/dlqdump/dlqdump/errgroups"
	"github.com/dlqdump/dlqdump/fs"
	"github.com/dlqdump/dlqdump/segment"
	"github.com/dlqdump/dlqdump/selection"
	"github.com/dlqdump/dlqdump/sink"
)

// Family is an error message with variable parts, its signature, and how
// many records of it the corpus holds.
type family struct {
	msg   func(r *rand.Rand) string
	sig   string
	count int
}

// families are ten error families whose messages differ in what the
// signature masks; the first is the 10,050 timeouts.
var families = []family{
	{func(r *rand.Rand) string { return fmt.Sprintf("payment gateway timeout after %dms", 100+r.IntN(5000)) },
		"payment gateway timeout after <num>ms", 10050},
	{func(r *rand.Rand) string { return fmt.Sprintf("order ord-%07d not found", r.IntN(1e7)) }, "order ord-<num> not found", 700},
	{func(r *rand.Rand) string {
		return fmt.Sprintf("dial tcp 10.%d.%d.%d:5432: connect: connection refused", r.IntN(256), r.IntN(256), r.IntN(256))
	}, "dial tcp <ip>: connect: connection refused", 400},
	{func(r *rand.Rand) string {
		return fmt.Sprintf("request %08x-%04x-4%03x-a%03x-%012x failed: upstream 503", r.Uint32(), r.IntN(1<<16), r.IntN(1<<12), r.IntN(1<<12), r.Int64N(1<<48))
	}, "request <uuid> failed: upstream <num>", 300},
	{func(r *rand.Rand) string { return fmt.Sprintf("card declined for u%d.smith@shop.example.org", r.IntN(1e6)) },
		"card declined for <email>", 250},
	{func(r *rand.Rand) string {
		return fmt.Sprintf(`invalid field "%s": want a number`, []string{"amount", "qty", "price", "total"}[r.IntN(4)])
	}, "invalid field <str>: want a number", 200},
	{func(r *rand.Rand) string { return fmt.Sprintf("event evt_%016x rejected by schema v%d", r.Uint64()|1<<60, 1+r.IntN(9)) },
		"event evt_<hex> rejected by schema v<num>", 150},
	{func(r *rand.Rand) string {
		return fmt.Sprintf("GET https://api.example.com/v1/orders/%d returned %d", r.IntN(1e6), 500+r.IntN(4))
	}, "GET <url> returned <num>", 100},
	{func(*rand.Rand) string { return "deadline exceeded" }, "deadline exceeded", 75},
	{func(r *rand.Rand) string { return fmt.Sprintf("lookup host-%d.internal:%d: no such host", r.IntN(99), 8000+r.IntN(99)) },
		"lookup <addr>: no such host", 25},
}

// dumpCorpus writes the families' records, shuffled, over an hour, with
// 30 records without an error header, into dir.
func dumpCorpus(t testing.TB, dir string) (total int) {
	t.Helper()
	r := rand.New(rand.NewPCG(1, 2))
	var msgs []string
	for _, f := range families {
		for range f.count {
			msgs = append(msgs, f.msg(r))
		}
	}
	for range 30 {
		msgs = append(msgs, "")
	}
	r.Shuffle(len(msgs), func(i, j int) { msgs[i], msgs[j] = msgs[j], msgs[i] })
	q, err := dlqdump.NewQueue(&dlqdump.Config{Writer: &fs.Writer{Directory: dir}, Capacity: 256 * dlqdump.Kilobyte})
	if err != nil {
		t.Fatal(err)
	}
	for i, m := range msgs {
		h := dlqdump.Headers{dlqdump.HeaderReason: "failed"}
		if m != "" {
			h[dlqdump.HeaderError] = m
		}
		if err := q.Enqueue(dlqdump.Envelope{Item: fmt.Appendf(nil, `{"n":%d}`, i), Headers: h}); err != nil {
			t.Fatal(err)
		}
	}
	if err := q.Close(); err != nil {
		t.Fatal(err)
	}
	return len(msgs)
}

// countDir counts the records of dir's segments, one Counter per segment
// merged.
func countDir(t testing.TB, dir string, o *errgroups.Options) *errgroups.Counter {
	t.Helper()
	names, _ := filepath.Glob(filepath.Join(dir, "*"+segment.Ext))
	all := errgroups.New(o)
	for _, path := range names {
		f, err := os.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		st, _ := f.Stat()
		sr, err := segment.NewReader(f, st.Size(), nil)
		if err != nil {
			t.Fatal(err)
		}
		c := errgroups.New(o)
		h := sr.Header()
		for {
			rec, err := sr.Next()
			if err != nil {
				break
			}
			c.Add(&h, sink.AreaReady, filepath.Base(path), &rec)
		}
		f.Close()
		all.Merge(c)
	}
	return all
}

// TestTenFamilies: ten error families whose messages vary in numbers, ids,
// hex, UUIDs, quoted values and addresses are ten groups, each with its
// count, and each group's selection selects its records and only those.
func TestTenFamilies(t *testing.T) {
	dir := t.TempDir()
	total := dumpCorpus(t, dir)
	c := countDir(t, dir, nil)
	rep := c.Report(0, 24)
	if rep.Records != uint64(total) || rep.Without != 30 || rep.Groups != len(families) {
		t.Fatalf("%d records, %d without, %d groups; want %d, 30, %d", rep.Records, rep.Without, rep.Groups, total, len(families))
	}
	for i, f := range families {
		g := rep.Shown[i]
		if g.Signature != f.sig || g.Count != uint64(f.count) {
			t.Errorf("group %d: %q × %d, want %q × %d", i, g.Signature, g.Count, f.sig, f.count)
		}
		var sum uint64
		for _, n := range g.Counts {
			sum += n
		}
		if sum != g.Count || len(g.Counts) != rep.Bars || g.Sample.ID == "" || g.First.After(g.Last) {
			t.Errorf("group %q: counts %v (sum %d), sample %+v", g.Signature, g.Counts, sum, g.Sample)
		}
		_, err := selection.Parse(g.Select, nil)
		if err != nil {
			t.Fatalf("group %q: select %q: %v", g.Signature, g.Select, err)
		}
		if want := fmt.Sprintf("error like %q", f.sig); g.Select != want {
			t.Errorf("select %s, want %s", g.Select, want)
		}
	}
}

// Past MaxGroups, records are counted in Other; merging keeps counts.
func TestMaxGroups(t *testing.T) {
	dir := t.TempDir()
	total := dumpCorpus(t, dir)
	c := countDir(t, dir, &errgroups.Options{MaxGroups: 3})
	gs := c.Groups()
	var sum uint64
	other := false
	for _, g := range gs {
		sum += g.Count
		other = other || g.Signature == errgroups.Other
	}
	if len(gs) > 4 || !other || sum != uint64(total-30) {
		t.Fatalf("%d groups (other: %t), %d records; want at most 4 with (other), %d", len(gs), other, sum, total-30)
	}
}

func TestOtherHeader(t *testing.T) {
	dir := t.TempDir()
	total := dumpCorpus(t, dir)
	c := countDir(t, dir, &errgroups.Options{Header: "reason"})
	if gs := c.Groups(); len(gs) != 1 || gs[0].Signature != "failed" || gs[0].Count != uint64(total) {
		t.Fatalf("by reason: %+v", gs)
	}
}
